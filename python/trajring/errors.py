"""Exceptions raised by trajring.

Every failure of the engine surfaces as a subclass of :class:`Error`, one
class per Go sentinel error (``tensorbuf.ErrConfig`` is :class:`ConfigError`,
and so on); the message is the Go error's text, sentinel included. Classes
also derive from the built-in exception a Python user would expect
(``ValueError`` for bad arguments, ``TimeoutError`` for rate limits), so
``except ValueError`` keeps working.
"""

from __future__ import annotations


class Error(Exception):
    """Base class of every exception trajring raises."""

    code = -1


class InvalidArgumentError(Error, ValueError):
    """An argument is invalid (``tensorbuf.ErrInvalidArg``)."""

    code = 1


class HandleError(Error, ValueError):
    """An object used after it was closed or released (``capi.ErrHandle``)."""

    code = 2


class ConfigError(Error, ValueError):
    """An invalid buffer, table or observer configuration (``ErrConfig``)."""

    code = 3


class UnknownFieldError(Error, LookupError):
    """A field name the buffer does not have (``ErrUnknownField``)."""

    code = 4


class MissingFieldError(Error, ValueError):
    """A field the buffer needs is missing (``ErrMissingField``)."""

    code = 5


class DTypeError(Error, TypeError):
    """An array of the wrong element type (``ErrDType``)."""

    code = 6


class ShapeError(Error, ValueError):
    """An array of the wrong shape (``ErrShape``)."""

    code = 7


class RowsError(Error, ValueError):
    """Rows outside the buffer or the writer (``ErrRows``)."""

    code = 8


class RowOwnedError(Error, ValueError):
    """A row already owned by another writer (``ErrRowOwned``)."""

    code = 9


class UnknownTableError(Error, LookupError):
    """A table name the buffer does not have (``ErrUnknownTable``)."""

    code = 10


class TableExistsError(Error, ValueError):
    """A table name already taken (``ErrTableExists``)."""

    code = 11


class StepTypeError(Error, ValueError):
    """A step type that contradicts the previous step (``ErrStepType``)."""

    code = 12


class SequenceLengthError(Error, ValueError):
    """A sequence longer than the buffer's capacity (``ErrSequenceLen``)."""

    code = 13


class ItemError(Error, ValueError):
    """An item outside the stored steps (``ErrItem``)."""

    code = 14


class UnknownKeyError(Error, LookupError):
    """An item key the table does not hold (``ErrUnknownKey``)."""

    code = 15


class EmptyError(Error):
    """Not enough data to sample (``ErrEmpty``)."""

    code = 16


class ClosedError(Error):
    """An object used after its buffer or writer was closed (``ErrClosed``)."""

    code = 17


class BackendError(Error, RuntimeError):
    """The backend (host or device memory) failed (``ErrBackend``)."""

    code = 18


class RateLimitedError(Error, TimeoutError):
    """A rate limiter's wait timed out (``ErrRateLimited``)."""

    code = 19


class CorruptError(Error, ValueError):
    """A checkpoint that is not whole and unaltered (``ErrCorrupt``)."""

    code = 20


class DeviceTensorError(Error, TypeError):
    """Device memory where host memory is needed (``ErrDeviceTensor``)."""

    code = 21


class FileError(Error, OSError):
    """The file system refused a read or write."""

    code = 22


class EnvError(Error, RuntimeError):
    """An environment failed or was used before ``reset`` (``driver.ErrEnv``)."""

    code = 24


class InternalError(Error, RuntimeError):
    """A bug in trajring: the library refuses every later call."""

    code = 25


class BusyError(Error):
    """A result refilled with another shape while its tensors are alive."""

    code = 26


class EpisodeTooLongError(Error, ValueError):
    """An episode longer than an episode writer's maximum."""

    code = 27


class ForkError(Error, RuntimeError):
    """trajring used in a process forked after the library was loaded.

    Go's runtime does not survive ``fork``: start worker processes with the
    ``spawn`` or ``forkserver`` method (``multiprocessing.get_context("spawn")``).
    """

    code = -2


_WOULD_BLOCK = 23

_BY_CODE = {
    cls.code: cls
    for cls in (
        InvalidArgumentError, HandleError, ConfigError, UnknownFieldError, MissingFieldError,
        DTypeError, ShapeError, RowsError, RowOwnedError, UnknownTableError, TableExistsError,
        StepTypeError, SequenceLengthError, ItemError, UnknownKeyError, EmptyError, ClosedError,
        BackendError, RateLimitedError, CorruptError, DeviceTensorError, FileError, EnvError,
        InternalError, BusyError, EpisodeTooLongError,
    )
}


def error_for(code: int, message: str) -> Error:
    """Return the exception for an ABI status code and its message."""
    return _BY_CODE.get(code, Error)(message)


__all__ = [name for name, obj in list(globals().items()) if isinstance(obj, type) and issubclass(obj, Error)]
