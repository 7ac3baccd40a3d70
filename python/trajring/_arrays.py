"""Zero-copy views of trajring's results: DLPack producers and NumPy views.

An :class:`Array` names one tensor of a :class:`Result` (a sampled batch,
transitions, an export). It implements the DLPack protocol
(``__dlpack__``/``__dlpack_device__``), so ``torch.from_dlpack(a)`` and
``numpy.from_dlpack(a)`` view trajring's memory without a copy, and
``numpy.asarray(a)`` gives a writable NumPy view. Every view keeps the
result's memory alive (it is pinned in Go) until the view is dropped.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Optional

import numpy as np

from . import _lib
from .errors import DeviceTensorError, HandleError, UnknownFieldError

if TYPE_CHECKING:
    from ._buffer import Buffer

# ABI dtype codes (TRJ_DT_*) and their NumPy types.
CODE_TO_NUMPY = {0: np.dtype("float32"), 1: np.dtype("float64"), 2: np.dtype("int32"),
                 3: np.dtype("int64"), 4: np.dtype("uint8"), 5: np.dtype("bool")}
NUMPY_TO_CODE = {v: k for k, v in CODE_TO_NUMPY.items()}

KDLCPU, KDLCUDA = 1, 2

# trj_tensor_desc (capi/trajring_abi.h) as bytes: data, device, dtype,
# ndim, pad, shape[8].
_DESC = struct.Struct("=Qiiii8q")
_DESC_SIZE = _DESC.size
_DESC_CAP = 32  # descriptions fetched by the first call; more take a second
_tls = threading.local()


def _describe_scratch() -> tuple[Any, Any]:
    """This thread's buffers for trj_result_describe: 4 int64 and _DESC_CAP descriptions."""
    s = getattr(_tls, "describe", None)
    if s is None:
        s = _tls.describe = ((ctypes.c_int64 * 4)(), ctypes.create_string_buffer(_DESC_SIZE * _DESC_CAP))
    return s


class _Held:
    """The owner of a writable NumPy view: an unconsumed DLPack capsule.

    NumPy keeps this object as the array's base; when the array dies the
    capsule's C destructor deletes the DLPack tensor, which lets trajring
    reuse the memory.
    """

    def __init__(self, capsule: object, interface: dict) -> None:
        self._capsule = capsule
        self.__array_interface__ = interface


class Array:
    """One tensor of a result, exported without copying.

    Attributes ``shape``, ``dtype`` and ``device`` describe the result's
    current contents. Use ``torch.from_dlpack(a)``, ``numpy.from_dlpack(a)``
    (read-only in NumPy 1.24), :meth:`numpy` (writable) or :meth:`torch`.
    Views stay valid for as long as they live, whatever happens to the
    result; a result refilled by ``sample_into`` shows the new sample through
    every view taken from it.
    """

    __slots__ = ("_result", "_index")

    def __init__(self, result: "Result", index: int) -> None:
        self._result = result
        self._index = index

    @property
    def name(self) -> str:
        """The tensor's name (a field, ``reward``, ``next_obs``, ``key``, ...)."""
        return self._result._names[self._index]

    @property
    def shape(self) -> tuple[int, ...]:
        """The tensor's shape."""
        return self._result._desc(self._index)[2]

    @property
    def dtype(self) -> np.dtype:
        """The tensor's NumPy dtype (bool tensors are exported as uint8)."""
        return CODE_TO_NUMPY[self._result._desc(self._index)[1]]

    @property
    def device(self) -> int:
        """The DLPack device type: 1 (CPU) or 2 (CUDA). In a cuda build a sample's tensors
        are device memory and its metadata from the host (``row``, ``step``, and ``key``,
        ``probability``, ``weight``, ``valid`` of host-selected samples) host memory."""
        return self._result._desc(self._index)[3]

    @property
    def data_ptr(self) -> int:
        """The address of the first element."""
        return self._result._desc(self._index)[0]

    def __repr__(self) -> str:
        return f"trajring.Array({self.name!r}, shape={self.shape}, dtype={self.dtype})"

    def __dlpack_device__(self) -> tuple[int, int]:
        r, i = self._result, self._index
        return ((r._descs[i] or r._desc(i))[3], 0)

    def __dlpack__(self, *, stream: Optional[int] = None, max_version: Optional[tuple[int, int]] = None,
                   dl_device: Optional[tuple[int, int]] = None, copy: Optional[bool] = None) -> object:
        """Return a DLPack capsule viewing the tensor (the DLPack Python protocol).

        A legacy ``"dltensor"`` capsule unless ``max_version`` allows DLPack
        1.x, then a versioned one (writable: no read-only flag). ``copy=True``
        and other devices are refused with ``BufferError``, as the protocol
        says for producers that cannot honour them. On the CPU ``stream`` must
        be None.
        """
        r, i = self._result, self._index
        if stream is None and dl_device is None and not copy and (r._descs[i] or r._desc(i))[3] == KDLCPU:
            # The hot case, a host tensor with nothing to check: straight to
            # _capsule (which makes it in C while the result has live tensors).
            return r._capsule(i, 1 if max_version is not None and max_version[0] >= 1 else 0)
        dev = self.device
        if copy:
            raise BufferError("trajring exports views of its memory; copy=True is not supported")
        if dl_device is not None and tuple(dl_device) != (dev, 0):
            raise BufferError(f"trajring tensor is on device {(dev, 0)}, not {tuple(dl_device)}")
        if dev == KDLCPU:
            if stream not in (None, -1):
                raise BufferError(f"stream {stream!r} given for a CPU tensor (must be None)")
            s = -1
        else:
            # DLPack: None means the legacy default stream (1); -1 asks for no synchronisation.
            s = 1 if stream is None else int(stream)
            if s == 0 or s < -1:
                raise BufferError(f"stream {stream!r} is not a CUDA stream (DLPack: 1, 2, a handle, or -1)")
        versioned = 1 if max_version is not None and max_version[0] >= 1 else 0
        return self._result._capsule(self._index, versioned, s)

    def numpy(self) -> np.ndarray:
        """Return a writable NumPy array viewing the tensor (no copy)."""
        if self.device != KDLCPU:
            raise DeviceTensorError(f"tensor {self.name!r} is in device memory; use torch.from_dlpack")
        addr, code, shape, _ = self._result._desc(self._index)
        capsule = self._result._capsule(self._index, 0)
        dt = CODE_TO_NUMPY[code]
        interface = {"shape": shape, "typestr": dt.str, "data": (addr, False), "version": 3}
        return np.asarray(_Held(capsule, interface))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def torch(self) -> Any:
        """Return a torch tensor viewing the tensor (``torch.from_dlpack``)."""
        import torch

        return torch.from_dlpack(self)

    def tobytes(self) -> bytes:
        """Return a copy of the tensor's bytes, read by the engine (host memory only)."""
        addr, code, shape, _ = self._result._desc(self._index)
        n = int(np.prod(shape, dtype=np.int64)) * CODE_TO_NUMPY[code].itemsize
        buf = ctypes.create_string_buffer(max(n, 1))
        _lib.call(_lib.lib.trj_result_copy, self._result._handle, self._index, buf, n)
        return buf.raw[:n]


class Result(Mapping[str, Array]):
    """A sample or an export: named tensors in trajring's memory.

    A mapping from tensor names to :class:`Array` views: the buffer's fields,
    then (for sequence batches) ``step_type``, ``next_step_type``, ``reward``,
    ``discount``, ``mask`` and, from tables, ``key``, ``probability`` and
    ``weight``; for transitions the fields at t, ``next_<observation>`` for
    each observation field, ``reward``, ``discount``, ``is_done``, ``row``,
    ``step`` and, from tables, ``key``, ``probability``, ``weight`` and
    ``valid``. Bool tensors (``mask``, ``valid``) are uint8.

    Memory is handed back to trajring (to be reused by the next sample) once
    the result is released (:meth:`release`, a ``with`` block, or garbage
    collection) and every view taken from it has been dropped. A result
    passed as ``into=`` to a sample call is refilled in place; while views of
    it live, a sample must keep its shape, its stacking and its source (a
    direct sample of the buffer, or the same table, which decide its set of
    tensors), else :class:`~trajring.BusyError` is raised before anything is
    drawn.
    Not safe for concurrent use from several threads.
    """

    _KINDS = {1: "sequences", 2: "transitions", 3: "table_transitions"}

    def __init__(self, buffer: "Buffer", handle: int) -> None:
        self._buffer = buffer
        self._handle = handle
        self._torch: dict[str, Any] = {}
        self._numpy: dict[str, np.ndarray] = {}
        self._refresh()

    def _refresh(self) -> None:
        # One foreign call describes the result and all its tensors
        # (trj_result_describe); a tensor's description is unpacked from
        # the copied bytes when first asked for (_desc).
        info, descs = _describe_scratch()
        _lib.call(_lib.lib.trj_result_describe, self._handle, info, descs, _DESC_CAP)
        kind, count, n, l = info
        if count > _DESC_CAP:
            descs = ctypes.create_string_buffer(_DESC_SIZE * count)
            _lib.call(_lib.lib.trj_result_describe, self._handle, info, descs, count)
        self._raw = descs.raw[: _DESC_SIZE * count]
        self.kind = self._KINDS[kind]
        self.n = n
        self.length = l if l else None
        self._names, self._index = self._buffer._result_names(self._handle, kind, count)
        self._descs: list[Optional[tuple[int, int, tuple[int, ...], int]]] = [None] * count

    def _filled(self) -> None:
        """Called after a refill: views cached by torch()/numpy() keep the
        shape (the engine refuses any other while they live)."""
        if not self._torch and not self._numpy:
            self._refresh()

    def _desc(self, i: int) -> tuple[int, int, tuple[int, ...], int]:
        """(address, dtype code, shape, DLPack device type) of tensor i, read once per fill."""
        d = self._descs[i]
        if d is None:
            data, device, dtype, ndim, _, *shape = _DESC.unpack_from(self._raw, _DESC_SIZE * i)
            d = (data, dtype, tuple(shape[:ndim]), device)
            self._descs[i] = d
        return d

    def _capsule(self, i: int, versioned: int, stream: int = -1) -> object:
        if stream == -1 and not _lib._forked:
            # Host tensors of a result with live tensors: made in C, no call
            # into Go (capi/pydlpack.c); None for everything else.
            cap = _lib.dlpack_py(self._handle, i, versioned)
            if cap is not None:
                return cap
        ptr = ctypes.c_void_p()
        _lib.call(_lib.lib.trj_result_dlpack, self._handle, i, versioned, stream, ctypes.byref(ptr))
        return _lib.capsule_new(ptr.value, _lib.CAPSULE_NAME[versioned], _lib.CAPSULE_DESTRUCTOR)

    def __getitem__(self, name: str) -> Array:
        # Arrays are not cached: one would refer back to the result, and the
        # cycle would keep the result's memory until the cyclic collector ran.
        if self._handle == 0:
            raise HandleError("result used after release")
        i = self._index.get(name)
        if i is None:
            raise UnknownFieldError(f"{name!r} (the result has {', '.join(self._names)})")
        return Array(self, i)

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        if self._handle == 0:
            return "trajring.Result(released)"
        return f"trajring.Result({self.kind}, n={self.n}, length={self.length}, tensors={list(self._names)})"

    def torch(self) -> dict[str, Any]:
        """Return every tensor as a torch tensor viewing the result (made once, then cached).

        The cached tensors show each new sample of a result refilled with
        ``sample_into``: the hot loop's batch costs one foreign call.
        """
        if not self._torch:
            import torch

            self._torch = {name: torch.from_dlpack(self[name]) for name in self._names}
        return self._torch

    def numpy(self) -> dict[str, np.ndarray]:
        """Return every tensor as a writable NumPy array viewing the result (cached)."""
        if not self._numpy:
            self._numpy = {name: self[name].numpy() for name in self._names}
        return self._numpy

    def release(self) -> None:
        """Hand the result back; its memory is reused once every view is dropped.

        Idempotent. The cached views of :meth:`torch` and :meth:`numpy` are
        dropped from the result (views the caller still holds stay valid).
        It returns at once even while a sample into the result waits for a
        rate limiter in another thread: that sample then raises
        :class:`~trajring.HandleError`, and the memory is handed back when it
        ends.
        """
        h, self._handle = self._handle, 0
        self._torch, self._numpy = {}, {}
        if h:
            _lib.call(_lib.lib.trj_result_free, h)

    def __enter__(self) -> "Result":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def __del__(self) -> None:
        try:
            self.release()
        except Exception:  # interpreter shutdown, or a forked child
            pass
