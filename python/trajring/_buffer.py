"""Buffers, writers and tables: the Python face of tensorbuf and observer."""

from __future__ import annotations

import ctypes
import json
from ctypes import byref, c_int64, c_uint64
from typing import Any, Iterable, Mapping, NamedTuple, Optional, Sequence, Union

import numpy as np

from . import _lib
from ._arrays import CODE_TO_NUMPY, NUMPY_TO_CODE, Array, Result
from .errors import (ClosedError, DeviceTensorError, DTypeError, InvalidArgumentError,
                     MissingFieldError, RateLimitedError, UnknownFieldError)

# Step types (TF-Agents): a step's type and the next step's.
FIRST, MID, LAST = 0, 1, 2


class Field(NamedTuple):
    """One per-step tensor of a buffer: name, role, dtype and per-step shape."""

    name: str
    role: str
    dtype: np.dtype
    shape: tuple[int, ...]


def _field_specs(spec: Union[Mapping[str, Any], Sequence[Any]]) -> list[dict]:
    """Normalise a buffer spec to the ABI's list of field dicts.

    ``spec`` maps names to ``{"shape": ..., "dtype": ..., "role": ...}`` (as
    cpprb's ``env_dict``; shape defaults to a scalar, dtype to float32, role to
    "action" for a field named ``action`` or ``actions`` and "observation"
    otherwise), or is a sequence of :class:`Field` or such dicts with a
    ``name``.
    """
    items: list[tuple[str, Any]]
    if isinstance(spec, Mapping):
        items = list(spec.items())
    else:
        items = []
        for f in spec:
            if isinstance(f, Field):
                items.append((f.name, f._asdict()))
            else:
                items.append((f["name"], f))
    out = []
    for name, f in items:
        f = dict(f or {})
        f.pop("name", None)
        shape = f.pop("shape", ())
        if isinstance(shape, int):
            shape = (shape,)
        dtype = np.dtype(f.pop("dtype", "float32"))
        role = f.pop("role", "action" if name in ("action", "actions") else "observation")
        if f:
            raise InvalidArgumentError(f"field {name!r}: unknown keys {sorted(f)} (want shape, dtype, role)")
        out.append({"name": str(name), "role": str(role), "dtype": dtype.name, "shape": [int(s) for s in shape]})
    return out


def _is_torch(x: Any) -> bool:
    return type(x).__module__.startswith("torch")


_TORCH_CODES: dict[Any, int] = {}


def _torch_code(dtype: Any) -> int:
    if not _TORCH_CODES:
        import torch

        _TORCH_CODES.update({torch.float32: 0, torch.float64: 1, torch.int32: 2, torch.int64: 3,
                             torch.uint8: 4, torch.bool: 5})
    code = _TORCH_CODES.get(dtype)
    if code is None:
        raise DTypeError(f"tensorbuf: wrong dtype: torch {dtype} has no trajring dtype")
    return code


def _byte_values(x: Any) -> Any:
    """Return ``bytes`` as a buffer of its byte values, which NumPy converts as it does a bytearray.

    ``numpy.asarray`` reads ``bytes`` as one string (and fails to convert it
    to a number with a plain ``ValueError``) but a ``bytearray`` as its
    values; both are taken as their values, like a list of ints.
    """
    return memoryview(x) if isinstance(x, bytes) else x


def _raw(x: Any, what: str, list_dtype: Optional[np.dtype] = None) -> tuple[Any, int, int, int, tuple[int, ...]]:
    """Return (keep-alive object, address, nbytes, dtype code, shape) of a C-contiguous host array.

    NumPy arrays, torch CPU tensors, trajring Arrays and anything
    ``numpy.asarray`` takes (lists, and ``bytes``, ``bytearray`` and other
    buffers, become ``list_dtype``: a buffer of the wrong length or rank then
    fails with ``ShapeError``) are accepted; no copy is made of arrays and
    tensors.
    """
    if type(x) is np.ndarray and x.flags.c_contiguous:
        # The common case first: the general checks below cost a
        # microsecond an array, a per-call overhead of adds.
        code = NUMPY_TO_CODE.get(x.dtype)
        if code is not None:
            return x, x.ctypes.data, x.nbytes, code, x.shape
    if isinstance(x, Array):
        x = x.numpy()
    if _is_torch(x):
        if x.device.type != "cpu":
            raise DeviceTensorError(f"tensorbuf: device tensor where host memory is needed: {what} is on {x.device}")
        if not x.is_contiguous():
            raise InvalidArgumentError(f"{what}: tensor is not C-contiguous")
        return x, x.data_ptr(), x.numel() * x.element_size(), _torch_code(x.dtype), tuple(x.shape)
    if not isinstance(x, np.ndarray):
        x = np.asarray(_byte_values(x), dtype=list_dtype)
    if not x.flags.c_contiguous:
        raise InvalidArgumentError(f"{what}: array is not C-contiguous (use numpy.ascontiguousarray)")
    code = NUMPY_TO_CODE.get(x.dtype)
    if code is None:
        raise DTypeError(f"tensorbuf: wrong dtype: {what} is {x.dtype}, which trajring does not store")
    return x, x.__array_interface__["data"][0], x.nbytes, code, x.shape


def _on_device(x: Any) -> bool:
    """Whether x is device memory: a trajring Array of a device result or a CUDA torch tensor."""
    if isinstance(x, Array):
        return x.device != 1
    return _is_torch(x) and bool(x.is_cuda)


def _column(x: Any, dtype: type, what: str) -> np.ndarray:
    if type(x) is np.ndarray and x.dtype.type is dtype and x.ndim == 1 and x.flags.c_contiguous:
        return x
    if _is_torch(x):
        if x.device.type != "cpu":
            raise DeviceTensorError(f"tensorbuf: device tensor where host memory is needed: {what} is on {x.device}")
        x = x.numpy()
    a = np.ascontiguousarray(_byte_values(x), dtype=dtype)
    if a.ndim != 1:
        a = a.reshape(-1)
    return a


def _ptr(a: np.ndarray) -> int:
    return a.ctypes.data


class Writer(_lib.Handle):
    """Adds batched steps to a buffer's rows (a ``tensorbuf.Writer``, or an
    observer that also creates items in tables).

    Rows belong to one writer at a time. :meth:`add` writes one step of all
    the writer's rows (or of ``rows``, a subset, for plain writers) in one
    call. Safe to share between threads (calls are serialised), though one
    writer per collecting thread is the natural layout.
    """

    def __init__(self, buffer: "Buffer", handle: int) -> None:
        self._buffer = buffer
        self._handle = handle
        nf = len(buffer.fields)
        self._nf = nf
        self._step = _lib.Step()
        self._data = (ctypes.c_void_p * max(nf, 1))()
        self._nbytes = (c_int64 * max(nf, 1))()
        self._dtype = (ctypes.c_int32 * max(nf, 1))()
        self._ndim = (ctypes.c_int32 * max(nf, 1))()
        self._shape = (c_int64 * max(8 * nf, 1))()
        s = self._step
        s.nfields = nf
        s.data, s.nbytes = ctypes.addressof(self._data), ctypes.addressof(self._nbytes)
        s.dtype, s.ndim = ctypes.addressof(self._dtype), ctypes.addressof(self._ndim)
        s.shape = ctypes.addressof(self._shape)
        self._names = [f.name for f in buffer.fields]
        self._list_dtypes = [f.dtype for f in buffer.fields]
        self._name_keys = set(self._names)
        # What the field arrays of the Step hold now: add rewrites them
        # only when an address, size, dtype or shape changed.
        self._held: Optional[list] = None
        # The field names as Python objects for the one-call add
        # (_lib.writer_add_py), which looks each up in the fields dict.
        self._pynames = (ctypes.py_object * max(nf, 1))(*self._names) if nf else (ctypes.py_object * 1)()
        self._pynames_addr = ctypes.addressof(self._pynames)
        n = c_int64()
        _lib.call(_lib.lib.trj_writer_rows, handle, None, 0, byref(n))
        rows = (c_int64 * max(n.value, 1))()
        _lib.call(_lib.lib.trj_writer_rows, handle, rows, n.value, byref(n))
        self.rows: tuple[int, ...] = tuple(rows[: n.value])

    def add(self, *, step_type: Any, next_step_type: Any, reward: Any, discount: Any,
            rows: Optional[Iterable[int]] = None, **fields: Any) -> None:
        """Add one batched step: a TF-Agents trajectory for each row.

        Parameters
        ----------
        step_type, next_step_type : array of int, shape (rows,)
            The step's type (0 first, 1 mid, 2 last) and the next step's.
        reward, discount : array of float, shape (rows,)
            The reward and discount of the transition to the next step.
        rows : iterable of int, optional
            The buffer rows written, in the order of the data (plain writers
            only); all the writer's rows by default.
        **fields
            Every field of the buffer, shaped ``(rows, *field.shape)``: NumPy
            arrays or torch CPU tensors of the field's dtype (read in place,
            not copied by Python), or lists. Other buffers (``bytes``,
            ``bytearray``, ``memoryview``) are converted to the field's dtype
            as lists are: ``bytes`` and ``bytearray`` as their byte values.

        Raises
        ------
        MissingFieldError, UnknownFieldError, ShapeError, DTypeError, RowsError, StepTypeError
            Bad input; nothing is written.
        """
        if rows is None and not _lib._forked:
            # One foreign call reading the arrays' buffers (capi/pyadd.c);
            # anything but plain C-contiguous arrays of the right dtypes
            # (lists, torch tensors, conversions, bad input) falls back to
            # the general path below, which converts or raises.
            buf = _lib._errbuf()
            rc = _lib.writer_add_py(self._handle, step_type, next_step_type, reward, discount, fields,
                                    self._pynames_addr, self._nf, buf, _lib._ERRCAP)
            if rc == 0:
                return
            if rc != _lib.FALLBACK:
                raise _lib.errors.error_for(rc, buf.value.decode("utf-8", "replace"))
        keep = []
        st = _column(step_type, np.int32, "step_type")
        nst = _column(next_step_type, np.int32, "next_step_type")
        rew = _column(reward, np.float32, "reward")
        disc = _column(discount, np.float32, "discount")
        ncols = len(st)
        if not (len(nst) == len(rew) == len(disc) == ncols):
            raise InvalidArgumentError(
                f"tensorbuf: invalid argument: step_type, next_step_type, reward and discount have "
                f"{len(st)}, {len(nst)}, {len(rew)} and {len(disc)} values")
        s = self._step
        if rows is not None:
            r = _column(list(rows), np.int64, "rows")
            keep.append(r)
            s.rows, s.nrows = _ptr(r), len(r)
        else:
            s.rows, s.nrows = None, ncols
        s.step_type, s.next_step_type, s.reward, s.discount = _ptr(st), _ptr(nst), _ptr(rew), _ptr(disc)
        s.ncols = ncols
        if fields.keys() != self._name_keys:
            extra = sorted(set(fields) - set(self._names))
            if extra:
                raise UnknownFieldError(f"tensorbuf: unknown field: {extra} (the buffer has {self._names})")
            missing = [n for n in self._names if n not in fields]
            raise MissingFieldError(f"tensorbuf: missing field: {missing} (the buffer has {self._names})")
        cur = []
        for i, name in enumerate(self._names):
            obj, addr, nbytes, code, shape = _raw(fields[name], f"field {name!r}", self._list_dtypes[i])
            keep.append(obj)
            cur.append((addr, nbytes, code, shape))
        if cur != self._held:
            self._held = None
            off = 0
            for i, (addr, nbytes, code, shape) in enumerate(cur):
                if len(shape) > 8:
                    raise InvalidArgumentError(f"field {self._names[i]!r} has {len(shape)} dimensions (at most 8)")
                self._data[i], self._nbytes[i], self._dtype[i] = addr, nbytes, code
                self._ndim[i] = len(shape)
                for d in shape:
                    self._shape[off] = d
                    off += 1
            self._held = cur
        _lib.call(_lib.lib.trj_writer_add, self._handle, byref(s))
        del keep

    def flush(self) -> None:
        """Make every added step visible to samplers (observers insert pending items)."""
        _lib.call(_lib.lib.trj_writer_flush, self._handle)

    def reset(self, write_cached: bool = False) -> None:
        """Reset an item-creating writer's rows, padding cached steps into items if asked (TF-Agents' observer reset)."""
        _lib.call(_lib.lib.trj_writer_reset, self._handle, int(write_cached))

    def close(self) -> None:
        """Close the writer and give its rows back. Idempotent."""
        self._release(_lib.lib.trj_writer_close)





def _wait(fn: Any, *args: Any, timeout: Optional[float]) -> None:
    _lib.call_waiting(fn, *args, timeout=timeout)


def _as_keys(keys: Any) -> tuple[Any, int, int]:
    """Return (keep-alive object, address, count) of ``keys`` as int64.

    Integer arrays, tensors and lists of any width are converted (int64 ones
    are read in place); any other dtype (floats, which would truncate to
    other keys, bools) raises :class:`DTypeError`.
    """
    if isinstance(keys, Array):
        keys = keys.numpy()
    if not isinstance(keys, np.ndarray) and not _is_torch(keys):
        keys = np.asarray(_byte_values(keys))
        if keys.size == 0:
            keys = keys.astype(np.int64)
    if isinstance(keys, np.ndarray) and keys.dtype != np.int64:
        if keys.dtype.kind not in "iu":
            raise DTypeError(f"tensorbuf: wrong dtype: keys are {keys.dtype}, not integers (a sample's \"key\" array)")
        keys = keys.astype(np.int64)
    obj, addr, nbytes, code, shape = _raw(keys, "keys", np.dtype("int64"))
    if code != 3:
        arr = np.asarray(obj)
        if arr.dtype.kind not in "iu":
            raise DTypeError(f"tensorbuf: wrong dtype: keys are {arr.dtype}, not integers (a sample's \"key\" array)")
        obj = np.ascontiguousarray(arr.astype(np.int64).reshape(-1))
        return obj, _ptr(obj), obj.size
    return obj, addr, nbytes // 8


def _stack_spec(stack: Optional[Mapping[str, int]]) -> Optional[bytes]:
    """The ABI's frame-stacking spec (a JSON object of field -> K), or None for no stacking."""
    if stack is None:
        return None
    if not isinstance(stack, Mapping):
        raise InvalidArgumentError(f"tensorbuf: invalid argument: stack must map field names to K, not {type(stack).__name__}")
    spec = {}
    for name, k in stack.items():
        if isinstance(k, (bool, np.bool_)) or not isinstance(k, (int, np.integer)):
            from .errors import ConfigError

            raise ConfigError(f"tensorbuf: invalid configuration: stack K of {name!r} is {k!r}, not an integer")
        spec[str(name)] = int(k)
    return json.dumps(spec).encode()


_scratch_out = c_uint64()
"""Where refills write the handle they return, which is the one passed in:
never read, so threads may share it."""
_scratch_ref = byref(_scratch_out)


def _refilled(rc: int, into: Result) -> bool:
    """Finish a refill's first call (status rc, made without a message
    buffer): True when ``into`` was filled; False for any other status, and
    the caller goes on through the general path, which calls again with a
    message buffer and waits or raises (a failed sample changes nothing)."""
    if rc == 0:
        into._filled()
        return True
    return False


class Table(_lib.Handle):
    """A table of items over a buffer's steps (Reverb's model; ``tensorbuf.Table``).

    Safe for concurrent use from several threads: samplers, inserters and
    priority updates may run at once (calls release the GIL).
    """

    def __init__(self, buffer: "Buffer", handle: int, name: str) -> None:
        self._buffer = buffer
        self._handle = handle
        self.name = name

    def __len__(self) -> int:
        n = c_int64()
        _lib.call(_lib.lib.trj_table_size, self._handle, byref(n))
        return n.value

    @property
    def size(self) -> int:
        """The number of items the table holds."""
        return len(self)

    def __repr__(self) -> str:
        return f"trajring.Table({self.name!r}, size={len(self)})"

    def insert(self, row: int, start: int, length: int, pad: int = 0, priority: Optional[float] = None,
               timeout: Optional[float] = None) -> int:
        """Insert an item (``length`` steps of ``row`` from absolute step ``start``, then ``pad`` pad steps) and return its key.

        ``priority`` None takes the table's default (its running maximum
        priority, 1 at first). Waits for the rate limiter up to ``timeout``.
        """
        key = c_uint64()
        p = -1.0 if priority is None else float(priority)
        if priority is not None and p < 0:
            raise InvalidArgumentError(f"tensorbuf: invalid argument: priority {p}")
        _wait(_lib.lib.trj_table_insert, self._handle, row, start, length, pad, p, _lib.WAIT, byref(key), timeout=timeout)
        return key.value

    def delete(self, keys: Any) -> None:
        """Remove the items of ``keys`` (unknown keys are ignored)."""
        obj, addr, n = _as_keys(keys)
        _lib.call(_lib.lib.trj_table_delete, self._handle, addr, n)

    def sample(self, n: int, *, stack: Optional[Mapping[str, int]] = None, into: Optional[Result] = None,
               timeout: Optional[float] = None) -> Result:
        """Sample ``n`` items as a sequence batch (tensors shaped ``(n, L, ...)``).

        ``stack`` maps observation fields to a frame count K (``{"pixels": 4}``):
        each such field comes back ``(n, L, K, ...)``, every step with its last K
        frames (see :meth:`Buffer.sample_nstep` for the edges).

        With ``into``, the result is refilled in place (``sample_into``).
        Waits for the rate limiter up to ``timeout`` seconds (None: forever),
        checking for Ctrl-C every 100 ms.
        """
        if stack is None and timeout is None and into is not None and into._handle and not _lib._forked:
            # The hot loop's refill, spelled out: one foreign call with the
            # first 100 ms wait slice, as _sample makes it (0.3-1 us less).
            rc = _lib.lib.trj_table_sample(self._handle, n, 100, into._handle, _scratch_ref, None, 0)
            if _refilled(rc, into):
                return into
        spec = _stack_spec(stack)
        if spec is not None:
            return self._sample(_lib.lib.trj_table_sample_stacked, (n, spec), into, timeout)
        return self._sample(_lib.lib.trj_table_sample, (n,), into, timeout)

    def sample_into(self, batch: Result, n: int, *, stack: Optional[Mapping[str, int]] = None,
                    timeout: Optional[float] = None) -> Result:
        """Refill ``batch`` with a new sample of ``n`` items, in place.

        The previous contents are overwritten, through every view taken
        from the batch: take views once (``batch.torch()``) and read them after
        each call. While views live, the sample keeps the batch's shape: a
        table whose items grow longer than the batch's L raises
        :class:`InvalidArgumentError` before drawing.
        """
        return self.sample(n, stack=stack, into=batch, timeout=timeout)

    def sample_transitions(self, n: int, horizon: int = 1, gamma: float = 1.0, *,
                           stack: Optional[Mapping[str, int]] = None, into: Optional[Result] = None,
                           timeout: Optional[float] = None) -> Result:
        """Sample ``n`` items as n-step transitions (TF-Agents' to_transition).

        Items that are no transition keep their place with ``valid`` 0. ``stack``
        stacks observation fields over their last K frames, as
        :meth:`Buffer.sample_nstep` does; an item whose frames reach a step the
        ring overwrote comes with ``valid`` 0.
        """
        if stack is None and timeout is None and into is not None and into._handle and not _lib._forked:
            # The hot loop's refill, as in sample.
            rc = _lib.lib.trj_table_sample_transitions(self._handle, n, horizon, float(gamma), 100, into._handle,
                                                       _scratch_ref, None, 0)
            if _refilled(rc, into):
                return into
        spec = _stack_spec(stack)
        if spec is not None:
            return self._sample(_lib.lib.trj_table_sample_transitions_stacked, (n, horizon, float(gamma), spec), into,
                                timeout)
        return self._sample(_lib.lib.trj_table_sample_transitions, (n, horizon, float(gamma)), into, timeout)

    def sample_transitions_into(self, batch: Result, n: int, horizon: int = 1, gamma: float = 1.0, *,
                                stack: Optional[Mapping[str, int]] = None, timeout: Optional[float] = None) -> Result:
        """Refill ``batch`` with new transitions in place (see :meth:`sample_into`)."""
        return self.sample_transitions(n, horizon, gamma, stack=stack, into=batch, timeout=timeout)

    def _sample(self, fn: Any, args: tuple, into: Optional[Result], timeout: Optional[float]) -> Result:
        out = c_uint64()
        h = into._handle if into is not None else 0
        if into is not None and h == 0:
            from .errors import HandleError

            raise HandleError("sample into a released result")
        # The hot loop's path: one foreign call with the first 100 ms slice
        # (most samples never wait); call_waiting's loop only after a slice
        # ran out.
        rc = _lib.errors._WOULD_BLOCK
        if timeout is None and not _lib._forked:
            buf = _lib._errbuf()
            rc = fn(self._handle, *args, 100, h, byref(out), buf, _lib._ERRCAP)
            if rc and rc != _lib.errors._WOULD_BLOCK:
                raise _lib.errors.error_for(rc, buf.value.decode("utf-8", "replace"))
        if rc:
            _wait(fn, self._handle, *args, _lib.WAIT, h, byref(out), timeout=timeout)
        if into is not None:
            into._filled()
            return into
        return Result(self._buffer, out.value)

    def update_priorities(self, keys: Any, priorities: Any) -> None:
        """Set the priorities of the items of ``keys`` (e.g. |TD error| per sampled item).

        ``keys`` and ``priorities`` are 1-d arrays or torch CPU tensors of one
        length (priorities float32 or float64, read in place). Nothing changes
        unless every key is held and every priority valid.

        In a cuda build, device keys and priorities (a sample's ``key`` array and
        a CUDA torch tensor of float32 priorities) go to the table without a trip
        through the host, ordered after the work of torch's current stream
        (``Table.UpdatePrioritiesDevice``: a prioritized table with
        ``device_selection``; there keys the table no longer holds are skipped).
        """
        if _on_device(keys) or _on_device(priorities):
            self._update_priorities_device(keys, priorities)
            return
        kobj, kaddr, n = _as_keys(keys)
        pobj, paddr, pbytes, code, pshape = _raw(priorities, "priorities", np.dtype("float64"))
        if code not in (0, 1):
            pobj = np.ascontiguousarray(np.asarray(pobj, dtype=np.float64).reshape(-1))
            paddr, pbytes, code = _ptr(pobj), pobj.nbytes, 1
        m = pbytes // CODE_TO_NUMPY[code].itemsize
        if m != n:
            raise InvalidArgumentError(f"tensorbuf: invalid argument: {n} keys and {m} priorities")
        _lib.call(_lib.lib.trj_table_update_priorities, self._handle, kaddr, paddr, code, n)

    def _update_priorities_device(self, keys: Any, priorities: Any) -> None:
        stream = -1
        addrs, n = [], []
        for x, what, want in ((keys, "keys", "int64"), (priorities, "priorities", "float32")):
            if isinstance(x, Array):
                if x.device != 2 or x.dtype != np.dtype(want) or len(x.shape) != 1:
                    raise DTypeError(f"tensorbuf: wrong dtype: device {what} must be a 1-d {want} device array")
                addrs.append(x.data_ptr)
                n.append(x.shape[0])
            elif _is_torch(x) and x.is_cuda:
                import torch

                if x.dtype != getattr(torch, want) or x.dim() != 1 or not x.is_contiguous():
                    raise DTypeError(f"tensorbuf: wrong dtype: device {what} must be a contiguous 1-d torch.{want}")
                addrs.append(x.data_ptr())
                n.append(x.numel())
                s = torch.cuda.current_stream(x.device).cuda_stream
                stream = s if s else 1  # torch's default stream is the legacy one
            else:
                raise DeviceTensorError(f"tensorbuf: device tensor where host memory is needed: {what} on the host "
                                        "while the other is device memory")
        if n[0] != n[1]:
            raise InvalidArgumentError(f"tensorbuf: invalid argument: {n[0]} keys and {n[1]} priorities")
        _lib.call(_lib.lib.trj_table_update_priorities_device, self._handle, addrs[0], addrs[1], 0, n[0], stream)

    @property
    def max_priority(self) -> float:
        """The table's running maximum priority: the priority new items get by default."""
        out = ctypes.c_double()
        _lib.call(_lib.lib.trj_table_max_priority, self._handle, byref(out))
        return out.value

    def set_beta(self, beta: float) -> None:
        """Set the importance-weight exponent of a prioritized table."""
        _lib.call(_lib.lib.trj_table_set_beta, self._handle, float(beta))

    def close(self) -> None:
        """Release this handle of the table (the table stays in its buffer)."""
        self._release(_lib.lib.trj_table_free)


_SELECTORS = {"uniform": "uniform", "prioritized": "prioritized", "fifo": "fifo", "lifo": "lifo",
              "min_heap": "min-heap", "min-heap": "min-heap", "max_heap": "max-heap", "max-heap": "max-heap",
              "without_replacement": "without-replacement", "without-replacement": "without-replacement"}

_EXPORT_MODES = {"batch": 2, "sequence": 3}


class Buffer(_lib.Handle):
    """A ring buffer of trajectory steps (``tensorbuf.Buffer``).

    Parameters
    ----------
    spec : mapping or sequence
        The fields: ``{"obs": {"shape": (4,), "dtype": "float32"}, "action":
        {"dtype": "int64"}}`` (cpprb's ``env_dict`` style; see ``Field``).
        The TF-Agents columns step_type, next_step_type, reward and discount
        are always stored.
    num_envs : int
        Env rows; each row is its own time axis.
    capacity : int
        Steps each row keeps (the oldest is overwritten).
    seed : int
        Seed of the direct samplers' draws.

    A buffer is safe for concurrent use: several writers (disjoint rows),
    tables and samplers may run from several threads at once.
    """

    def __init__(self, spec: Union[Mapping[str, Any], Sequence[Any]], num_envs: int, capacity: int,
                 seed: int = 0, *, _handle: Optional[int] = None) -> None:
        if _handle is None:
            cfg = {"num_envs": int(num_envs), "capacity": int(capacity), "seed": int(seed), "fields": _field_specs(spec)}
            out = c_uint64()
            _lib.call(_lib.lib.trj_buffer_new, json.dumps(cfg).encode(), byref(out))
            _handle = out.value
        self._handle = _handle
        self._names_cache: dict[tuple[int, int], tuple[list[str], dict[str, int]]] = {}
        info = self.info()
        self.fields: tuple[Field, ...] = tuple(
            Field(f["name"], f["role"], np.dtype(f["dtype"]), tuple(f["shape"])) for f in info["fields"])
        self.num_envs: int = info["num_envs"]
        self.capacity: int = info["capacity"]
        self._device: int = info["device"]

    @classmethod
    def load(cls, path: str, capacity: Optional[int] = None) -> "Buffer":
        """Load a checkpoint written by :meth:`save` (or ``trajring`` in Go), with its tables."""
        out = c_uint64()
        _lib.call(_lib.lib.trj_buffer_load, str(path).encode(), int(capacity or 0), byref(out))
        return cls((), 0, 0, _handle=out.value)

    def info(self) -> dict:
        """Return the buffer's description: fields, sizes, cursors, tables, backend."""
        need = c_int64()
        cap = 4096
        while True:
            buf = ctypes.create_string_buffer(cap)
            try:
                _lib.call(_lib.lib.trj_buffer_info, self._handle, buf, cap, byref(need))
                return json.loads(buf.value)
            except InvalidArgumentError:
                if need.value <= cap:
                    raise
                cap = need.value

    @property
    def size(self) -> int:
        """The number of steps stored, summed over rows."""
        return int(self.info()["size"])

    def __repr__(self) -> str:
        return f"trajring.Buffer(num_envs={self.num_envs}, capacity={self.capacity}, fields={[f.name for f in self.fields]})"

    def _result_names(self, handle: int, kind: int, count: int) -> tuple[list[str], dict[str, int]]:
        """The names of a result's tensors and their indices by name, read once per kind and count."""
        got = self._names_cache.get((kind, count))
        if got is None:
            names = []
            buf = ctypes.create_string_buffer(256)
            for i in range(count):
                _lib.call(_lib.lib.trj_result_name, handle, i, buf, 256)
                names.append(buf.value.decode())
            got = self._names_cache[(kind, count)] = (names, {name: i for i, name in enumerate(names)})
        return got

    # Writers.

    def writer(self, rows: Optional[Iterable[int]] = None) -> Writer:
        """Return a plain writer owning ``rows`` (all rows by default)."""
        r = np.ascontiguousarray(list(rows) if rows is not None else [], dtype=np.int64)
        out = c_uint64()
        _lib.call(_lib.lib.trj_writer_new, self._handle, _ptr(r) if len(r) else None, len(r), byref(out))
        return Writer(self, out.value)

    def _observer(self, cfg: dict) -> Writer:
        out = c_uint64()
        _lib.call(_lib.lib.trj_writer_new_observer, self._handle, json.dumps(cfg).encode(), byref(out))
        return Writer(self, out.value)

    def trajectory_writer(self, tables: Mapping[str, Union[int, tuple[int, int]]], *, pad_end_of_episodes: bool = False,
                          tile_end_of_episodes: bool = False, priority: float = 0.0,
                          rows: Optional[Sequence[int]] = None) -> Writer:
        """Return a writer that creates items of consecutive steps within episodes
        (TF-Agents' ReverbAddTrajectoryObserver): ``tables`` maps each table
        name to its sequence length, or to (length, stride). A DQN's replay is
        ``{"replay": 2}``; n-step targets take n+1. ``priority`` 0 is the
        table's default."""
        ts = []
        for name, v in tables.items():
            length, stride = (v, 1) if isinstance(v, int) else v
            ts.append({"table": name, "sequence_length": int(length), "stride": int(stride)})
        return self._observer({"kind": "add_trajectory", "tables": ts, "pad_end_of_episodes": pad_end_of_episodes,
                               "tile_end_of_episodes": tile_end_of_episodes, "priority": float(priority),
                               "rows": None if rows is None else list(rows)})

    def sequence_writer(self, tables: Sequence[str], sequence_length: int, stride: int = 1, *,
                        pad_end_of_episodes: bool = False, tile_end_of_episodes: bool = False,
                        priority: float = 0.0, rows: Optional[Sequence[int]] = None) -> Writer:
        """Return a writer that creates fixed-length windows across episodes
        (TF-Agents' ReverbTrajectorySequenceObserver)."""
        return self._observer({"kind": "sequence", "tables": [{"table": t} for t in tables],
                               "sequence_length": int(sequence_length), "stride": int(stride),
                               "pad_end_of_episodes": pad_end_of_episodes, "tile_end_of_episodes": tile_end_of_episodes,
                               "priority": float(priority), "rows": None if rows is None else list(rows)})

    def episode_writer(self, tables: Sequence[str], max_sequence_length: int, *, bypass_partial_episodes: bool = False,
                       priority: float = 0.0, rows: Optional[Sequence[int]] = None) -> Writer:
        """Return a writer that creates one item per whole episode (TF-Agents' ReverbAddEpisodeObserver)."""
        return self._observer({"kind": "episode", "tables": [{"table": t} for t in tables],
                               "max_sequence_length": int(max_sequence_length),
                               "bypass_partial_episodes": bypass_partial_episodes, "priority": float(priority),
                               "rows": None if rows is None else list(rows)})

    # Tables.

    def table(self, name: str, selector: Optional[str] = None, *, alpha: Optional[float] = None, beta: float = 0.0,
              max_size: int = 0, max_times_sampled: int = 0, seed: int = 0, device_selection: bool = False,
              min_size: Optional[int] = None, samples_per_insert: Optional[float] = None,
              error_buffer: Optional[float] = None, timeout: Optional[float] = None) -> Table:
        """Create a table, or return the existing table ``name`` when called with the name alone.

        Parameters
        ----------
        selector : str
            uniform (default), prioritized, fifo, lifo, min_heap, max_heap or
            without_replacement.
        alpha, beta : float
            The prioritized selector's priority exponent (default 1; 0 samples
            uniformly) and importance-weight exponent (0: weights 1).
        max_size, max_times_sampled : int
            Bounds (0: none).
        min_size, samples_per_insert, error_buffer, timeout
            A rate limiter (Reverb's SampleToInsertRatio) when any is given.
        """
        out = c_uint64()
        limiter_args = (min_size, samples_per_insert, error_buffer, timeout)
        configured = selector is not None or alpha is not None or beta or max_size or max_times_sampled or seed \
            or device_selection or any(a is not None for a in limiter_args)
        if not configured and name in self.info()["tables"]:
            _lib.call(_lib.lib.trj_table_get, self._handle, name.encode(), byref(out))
            return Table(self, out.value, name)
        sel = _SELECTORS.get(selector or "uniform")
        if sel is None:
            from .errors import ConfigError

            raise ConfigError(f"tensorbuf: invalid configuration: selector {selector!r} (want {sorted(set(_SELECTORS))})")
        cfg: dict[str, Any] = {"name": name, "selector": sel, "beta": float(beta), "max_size": int(max_size),
                               "max_times_sampled": int(max_times_sampled), "seed": int(seed),
                               "device_selection": bool(device_selection)}
        if alpha is not None:
            cfg["alpha"] = float(alpha)
        if any(a is not None for a in limiter_args):
            cfg["rate_limiter"] = {"min_size": int(min_size or 0), "samples_per_insert": float(samples_per_insert or 0),
                                   "error_buffer": float(error_buffer or 0), "timeout_seconds": float(timeout or 0)}
        _lib.call(_lib.lib.trj_table_new, self._handle, json.dumps(cfg).encode(), byref(out))
        return Table(self, out.value, name)

    # Direct sampling and export.

    def sample_sequences(self, n: int, length: int, *, episode_aware: bool = False,
                         stack: Optional[Mapping[str, int]] = None, into: Optional[Result] = None) -> Result:
        """Sample ``n`` windows of ``length`` steps uniformly (never across a row's cursor).

        ``stack`` (``{"pixels": 4}``) returns each named observation field as
        ``(n, length, K, ...)``: every step of a window with its last K frames, with
        the edges of :meth:`sample_nstep`; a window whose first step's frames reach
        a step the ring overwrote is never drawn.
        """
        spec = _stack_spec(stack)
        if spec is not None:
            return self._direct(_lib.lib.trj_buffer_sample_sequences_stacked, (n, length, int(episode_aware), spec),
                                into)
        return self._direct(_lib.lib.trj_buffer_sample_sequences, (n, length, int(episode_aware)), into)

    def sample_transitions(self, n: int, *, into: Optional[Result] = None) -> Result:
        """Sample ``n`` transitions uniformly (MATLAB's experiences: obs, action, reward, next_obs, is_done)."""
        return self._direct(_lib.lib.trj_buffer_sample_transitions, (n,), into)

    def sample_nstep(self, n: int, horizon: int, gamma: float, *, stack: Optional[Mapping[str, int]] = None,
                     into: Optional[Result] = None) -> Result:
        """Sample ``n`` n-step transitions uniformly (discounted rewards over up to ``horizon`` steps).

        ``stack`` maps observation fields to a frame count K (``{"pixels": 4}``),
        as pixel agents (DQN on Atari) see their inputs while the ring stores each
        frame once: the field and its ``next_`` field come back ``(n, K, ...)``,
        the frames of steps t-K+1..t and of the K steps ending at the step the
        transition bootstraps from, oldest first. Frames before the episode's first
        step are zeros (SB3's ``VecFrameStack``, Dopamine); a truncated episode's
        next frames are its own final frames; a transition whose frames reach a step
        the ring overwrote is never drawn. ``horizon=1, gamma=1.0`` gives DQN's
        one-step transitions. A bad ``stack`` raises :class:`ConfigError` (an
        unknown or non-observation field, K below 1 or above the capacity) before
        anything is drawn.
        """
        spec = _stack_spec(stack)
        if spec is not None:
            return self._direct(_lib.lib.trj_buffer_sample_nstep_stacked, (n, horizon, float(gamma), spec), into)
        return self._direct(_lib.lib.trj_buffer_sample_nstep, (n, horizon, float(gamma)), into)

    def _direct(self, fn: Any, args: tuple, into: Optional[Result]) -> Result:
        out = c_uint64()
        h = into._handle if into is not None else 0
        if into is not None and h == 0:
            from .errors import HandleError

            raise HandleError("sample into a released result")
        _lib.call(fn, self._handle, *args, h, byref(out))
        if into is not None:
            into._filled()
            return into
        return Result(self, out.value)

    def all_experiences(self, mode: str = "batch", horizon: int = 1, gamma: float = 1.0) -> Result:
        """Every stored transition, oldest first (MATLAB's allExperiences):
        ``mode`` "batch" shapes tensors ``(N, 1, ...)``, "sequence" ``(1, N, ...)``."""
        m = _EXPORT_MODES.get(mode)
        if m is None:
            raise InvalidArgumentError(f"tensorbuf: invalid argument: export mode {mode!r} (want batch or sequence)")
        out = c_uint64()
        _lib.call(_lib.lib.trj_buffer_all_experiences, self._handle, m, horizon, float(gamma), byref(out))
        return Result(self, out.value)

    def export_npz(self, path: str, mode: str = "batch") -> int:
        """Write every stored transition to ``path`` as a NumPy ``.npz`` (atomically); return their number."""
        m = _EXPORT_MODES.get(mode)
        if m is None:
            raise InvalidArgumentError(f"tensorbuf: invalid argument: export mode {mode!r} (want batch or sequence)")
        n = c_int64()
        _lib.call(_lib.lib.trj_buffer_export_npz, self._handle, str(path).encode(), m, byref(n))
        return n.value

    def save(self, path: str, compress: bool = False) -> None:
        """Write a checkpoint of the buffer and its tables to ``path`` (atomically)."""
        _lib.call(_lib.lib.trj_buffer_save, self._handle, str(path).encode(), int(compress))

    def close(self) -> None:
        """Close the buffer. Results already sampled stay readable; writers
        and tables of it raise :class:`ClosedError`. Idempotent."""
        self._release(_lib.lib.trj_buffer_close)
