"""Loading of libtrajring.so and the ctypes declarations of its C ABI.

This module is the package's only door to the engine: every other module
calls :func:`call` with a function of :data:`lib`. The library is found
next to this file (``make python`` puts it there) or at the path in the
``TRAJRING_LIBRARY`` environment variable.
"""

from __future__ import annotations

import ctypes
import os
import threading
import time
from ctypes import POINTER, c_char_p, c_double, c_int32, c_int64, c_uint64, c_void_p
from typing import Any, Callable, Optional

import numpy as np

from . import errors

_HERE = os.path.dirname(os.path.abspath(__file__))


class TensorDesc(ctypes.Structure):
    """Mirror of ``trj_tensor_desc`` (capi/trajring_abi.h)."""

    _fields_ = [
        ("data", c_uint64),
        ("device", c_int32),
        ("dtype", c_int32),
        ("ndim", c_int32),
        ("pad", c_int32),
        ("shape", c_int64 * 8),
    ]


class Step(ctypes.Structure):
    """Mirror of ``trj_step`` (capi/trajring_abi.h)."""

    _fields_ = [
        ("nrows", c_int64),
        ("rows", c_void_p),
        ("step_type", c_void_p),
        ("next_step_type", c_void_p),
        ("reward", c_void_p),
        ("discount", c_void_p),
        ("ncols", c_int64),
        ("nfields", c_int64),
        ("data", c_void_p),
        ("nbytes", c_void_p),
        ("dtype", c_void_p),
        ("ndim", c_void_p),
        ("shape", c_void_p),
    ]


class Arrays(ctypes.Structure):
    """Mirror of ``trj_arrays`` (capi/trajring_abi.h)."""

    _fields_ = [
        ("n", c_int64),
        ("data", c_void_p),
        ("nbytes", c_void_p),
        ("dtype", c_void_p),
        ("ndim", c_void_p),
        ("shape", c_void_p),
    ]


class EnvOut(ctypes.Structure):
    """Mirror of ``trj_env_out`` (capi/trajring_abi.h)."""

    _fields_ = [
        ("nobs", c_int64),
        ("obs", c_void_p),
        ("obs_nbytes", c_void_p),
        ("reward", c_void_p),
        ("terminated", c_void_p),
        ("truncated", c_void_p),
        ("step_type", c_void_p),
    ]


def _path() -> str:
    env = os.environ.get("TRAJRING_LIBRARY")
    if env:
        return env
    return os.path.join(_HERE, "libtrajring.so")


def _load() -> ctypes.CDLL:
    path = _path()
    if not os.path.exists(path):
        raise ImportError(
            f"trajring: {path} not found; build it with `make python` from the repository root "
            "(or set TRAJRING_LIBRARY to a libtrajring.so)"
        )
    return ctypes.CDLL(path)


lib = _load()

_U64P = POINTER(c_uint64)
_I64P = POINTER(c_int64)
_E = [c_char_p, c_int64]  # every function's (err, errcap)

_SIGNATURES: dict[str, list[Any]] = {
    "trj_buffer_new": [c_char_p, _U64P],
    "trj_buffer_load": [c_char_p, c_int64, _U64P],
    "trj_buffer_close": [c_uint64],
    "trj_buffer_info": [c_uint64, c_char_p, c_int64, _I64P],
    "trj_buffer_save": [c_uint64, c_char_p, c_int32],
    "trj_buffer_export_npz": [c_uint64, c_char_p, c_int32, _I64P],
    "trj_buffer_sample_sequences": [c_uint64, c_int64, c_int64, c_int32, c_uint64, _U64P],
    "trj_buffer_sample_transitions": [c_uint64, c_int64, c_uint64, _U64P],
    "trj_buffer_sample_nstep": [c_uint64, c_int64, c_int64, c_double, c_uint64, _U64P],
    "trj_buffer_sample_sequences_stacked": [c_uint64, c_int64, c_int64, c_int32, c_char_p, c_uint64, _U64P],
    "trj_buffer_sample_nstep_stacked": [c_uint64, c_int64, c_int64, c_double, c_char_p, c_uint64, _U64P],
    "trj_buffer_all_experiences": [c_uint64, c_int32, c_int64, c_double, _U64P],
    "trj_writer_new": [c_uint64, c_void_p, c_int64, _U64P],
    "trj_writer_new_observer": [c_uint64, c_char_p, _U64P],
    "trj_writer_add": [c_uint64, POINTER(Step)],
    "trj_writer_flush": [c_uint64],
    "trj_writer_reset": [c_uint64, c_int32],
    "trj_writer_close": [c_uint64],
    "trj_writer_rows": [c_uint64, c_void_p, c_int64, _I64P],
    "trj_table_new": [c_uint64, c_char_p, _U64P],
    "trj_table_get": [c_uint64, c_char_p, _U64P],
    "trj_table_free": [c_uint64],
    "trj_table_size": [c_uint64, _I64P],
    "trj_table_insert": [c_uint64, c_int64, c_int64, c_int64, c_int64, c_double, c_int64, _U64P],
    "trj_table_delete": [c_uint64, c_void_p, c_int64],
    "trj_table_update_priorities": [c_uint64, c_void_p, c_void_p, c_int32, c_int64],
    "trj_table_set_beta": [c_uint64, c_double],
    "trj_table_update_priorities_device": [c_uint64, c_uint64, c_uint64, c_int32, c_int64, c_int64],
    "trj_table_max_priority": [c_uint64, POINTER(c_double)],
    "trj_table_sample": [c_uint64, c_int64, c_int64, c_uint64, _U64P],
    "trj_table_sample_transitions": [c_uint64, c_int64, c_int64, c_double, c_int64, c_uint64, _U64P],
    "trj_table_sample_stacked": [c_uint64, c_int64, c_char_p, c_int64, c_uint64, _U64P],
    "trj_table_sample_transitions_stacked": [c_uint64, c_int64, c_int64, c_double, c_char_p, c_int64, c_uint64, _U64P],
    "trj_result_free": [c_uint64],
    "trj_result_info": [c_uint64, _I64P, _I64P, _I64P, _I64P],
    "trj_result_state": [c_uint64, _I64P, _I64P],
    "trj_result_name": [c_uint64, c_int64, c_char_p, c_int64],
    "trj_result_tensor": [c_uint64, c_int64, POINTER(TensorDesc)],
    "trj_result_describe": [c_uint64, _I64P, c_void_p, c_int64],
    "trj_result_dlpack": [c_uint64, c_int64, c_int32, c_int64, POINTER(c_void_p)],
    "trj_result_copy": [c_uint64, c_int64, c_void_p, c_int64],
    "trj_live_counts": [_I64P, _I64P],
    "trj_dl_fast_tensors": [_I64P],
    "trj_env_make": [c_char_p, c_int64, c_uint64, _U64P],
    "trj_env_spec": [c_uint64, c_char_p, c_int64, _I64P],
    "trj_env_reset": [c_uint64, c_int32, c_uint64, POINTER(EnvOut)],
    "trj_env_step": [c_uint64, POINTER(Arrays), c_uint64, POINTER(EnvOut)],
    "trj_env_close": [c_uint64],
    # The Go loop of the Python benchmark (bench/peer_trajring.py): env, actions, writer, steps, out_ns.
    "trj_env_run_go": [c_uint64, POINTER(Arrays), c_uint64, c_int64, _I64P],
}

for _name, _args in _SIGNATURES.items():
    _fn = getattr(lib, _name)
    _fn.argtypes = _args + _E
    _fn.restype = c_int32

lib.trj_capsule_name.argtypes = [c_int32]
lib.trj_capsule_name.restype = c_void_p
lib.trj_set_capsule_api.argtypes = [c_void_p, c_void_p]
lib.trj_set_capsule_api.restype = None

# The capsule destructor lives in C (capi/dlpack.c): a destructor written
# in Python would run during interpreter shutdown, after ctypes is gone.
_pyapi = ctypes.pythonapi
_pyapi.PyCapsule_New.restype = ctypes.py_object
_pyapi.PyCapsule_New.argtypes = [c_void_p, c_void_p, c_void_p]
lib.trj_set_capsule_api(
    ctypes.cast(_pyapi.PyCapsule_IsValid, c_void_p).value,
    ctypes.cast(_pyapi.PyCapsule_GetPointer, c_void_p).value,
)
CAPSULE_NAME = (lib.trj_capsule_name(0), lib.trj_capsule_name(1))

# The one-call add (capi/pyadd.c) reads Python buffers itself: it is
# called through PyDLL, which keeps the GIL for the call (the C side
# releases it around the engine's add), with the Python C API functions it
# needs handed in once here.
lib.trj_set_python_api.argtypes = [c_void_p, c_int64]
lib.trj_set_python_api.restype = None
_PYAPI = [_pyapi.PyObject_CheckBuffer, _pyapi.PyObject_GetBuffer, _pyapi.PyBuffer_Release,
          _pyapi.PyBuffer_IsContiguous, _pyapi.PyDict_GetItem, _pyapi.PyDict_Size,
          _pyapi.PyEval_SaveThread, _pyapi.PyEval_RestoreThread, _pyapi.PyErr_Clear,
          _pyapi.PyObject_Type, _pyapi.Py_DecRef]
# The last entry is the type the C side takes (numpy.ndarray: other
# buffers, bytes among them, are converted by the general path).
_pyapi_ptrs = (c_void_p * (len(_PYAPI) + 1))(*[ctypes.cast(f, c_void_p).value for f in _PYAPI], id(np.ndarray))
lib.trj_set_python_api(_pyapi_ptrs, len(_PYAPI) + 1)
_pylib = ctypes.PyDLL(_path(), handle=lib._handle)
writer_add_py = _pylib.trj_writer_add_py
writer_add_py.argtypes = [c_uint64, ctypes.py_object, ctypes.py_object, ctypes.py_object, ctypes.py_object,
                          ctypes.py_object, c_void_p, c_int64, c_char_p, c_int64]
writer_add_py.restype = c_int32
FALLBACK = -1
"""writer_add_py's status for input the general path must handle (nothing was done)."""
CAPSULE_DESTRUCTOR = ctypes.cast(lib.trj_capsule_destructor, c_void_p).value
capsule_new: Callable[[int, int, int], object] = _pyapi.PyCapsule_New

# A result's second and later host tensors are made in C without a call
# into Go (capi/pydlpack.c): None means "take trj_result_dlpack".
lib.trj_set_dlpack_python_api.argtypes = [c_void_p, c_void_p, c_void_p, c_void_p]
lib.trj_set_dlpack_python_api.restype = None
lib.trj_set_dlpack_python_api(ctypes.cast(_pyapi.PyCapsule_New, c_void_p).value,
                              ctypes.cast(_pyapi.Py_IncRef, c_void_p).value,
                              ctypes.cast(_pyapi.PyErr_Clear, c_void_p).value, id(None))
dlpack_py = _pylib.trj_result_dlpack_py
dlpack_py.argtypes = [c_uint64, c_int64, c_int32]
dlpack_py.restype = ctypes.py_object

_ERRCAP = 2048
_tls = threading.local()
_load_pid = os.getpid()
_forked = False


def _after_fork_in_child() -> None:
    global _forked
    _forked = True


os.register_at_fork(after_in_child=_after_fork_in_child)


def _errbuf() -> ctypes.Array:
    buf = getattr(_tls, "err", None)
    if buf is None:
        buf = _tls.err = ctypes.create_string_buffer(_ERRCAP)
    return buf


def call(fn: Callable[..., int], *args: Any) -> None:
    """Call an ABI function, raising the :mod:`trajring.errors` class of its status.

    ctypes releases the GIL for the call (``CDLL``), so other Python threads
    run while the engine works.
    """
    if _forked:
        raise errors.ForkError(
            f"trajring was loaded in process {_load_pid} and this process was forked from it: "
            "Go's runtime does not survive fork; use multiprocessing's 'spawn' start method"
        )
    buf = _errbuf()
    rc = fn(*args, buf, _ERRCAP)
    if rc:
        raise errors.error_for(rc, buf.value.decode("utf-8", "replace"))


WAIT = object()
"""The place of the wait slice in :func:`call_waiting`'s arguments."""


def call_waiting(fn: Callable[..., int], *args: Any, timeout: Optional[float] = None) -> None:
    """Call an ABI function that may wait (a rate limiter), in slices of 100 ms.

    The function gets the slice where ``args`` holds :data:`WAIT` and is called
    again while it reports that the slice ran out, so Ctrl-C
    (``KeyboardInterrupt``) is raised between slices rather than after a wait
    of unbounded length. After ``timeout`` seconds (None: no limit) it raises
    :class:`~trajring.RateLimitedError`.
    """
    if timeout is not None and not (0 <= timeout < float("inf")):
        raise errors.InvalidArgumentError(f"timeout {timeout!r} (want a finite number of seconds >= 0, or None)")
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        if _forked:
            call(fn)  # raises ForkError
        slice_ms = 100
        if deadline is not None:
            slice_ms = max(0, min(100, int((deadline - time.monotonic()) * 1000)))
        real = [slice_ms if a is WAIT else a for a in args]
        buf = _errbuf()
        rc = fn(*real, buf, _ERRCAP)
        if rc == 0:
            return
        if rc != errors._WOULD_BLOCK:
            raise errors.error_for(rc, buf.value.decode("utf-8", "replace"))
        if deadline is not None and time.monotonic() >= deadline:
            raise errors.RateLimitedError(f"tensorbuf: rate limiter timed out: waited {timeout} s")


class Handle:
    """An object of the C ABI, held by its handle: ``close`` (each class's own),
    a ``with`` block or garbage collection releases it, once."""

    _handle = 0

    def _release(self, fn: Callable[..., int]) -> None:
        h, self._handle = self._handle, 0
        if h:
            call(fn, h)

    def close(self) -> None:  # pragma: no cover - every subclass defines its own
        raise NotImplementedError

    def __enter__(self) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # interpreter shutdown, or a forked child
            pass


def live_counts() -> tuple[int, int]:
    """Return the live result handles and live DLPack tensors of the process."""
    results, tensors = c_int64(), c_int64()
    call(lib.trj_live_counts, ctypes.byref(results), ctypes.byref(tensors))
    return results.value, tensors.value


def fast_tensors() -> int:
    """Return how many DLPack tensors were made without a call into Go (for tests)."""
    n = c_int64()
    call(lib.trj_dl_fast_tensors, ctypes.byref(n))
    return n.value
