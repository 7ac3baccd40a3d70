"""The C ABI itself, as any foreign caller sees it: nothing passed may crash the process."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_int64, c_uint64, c_void_p

import numpy as np
import pytest

import trajring
from trajring import _lib, errors

L = _lib.lib


def status(fn, *args) -> tuple[int, str]:
    buf = ctypes.create_string_buffer(512)
    rc = fn(*args, buf, 512)
    return rc, buf.value.decode()


def test_bad_handles_every_kind(filled):
    out = c_uint64()
    n = c_int64()
    desc = _lib.TensorDesc()
    for h in (0, 1 << 62, 2**64 - 1):
        assert status(L.trj_buffer_close, h)[0] == errors.HandleError.code
        assert status(L.trj_table_size, h, byref(n))[0] == errors.HandleError.code
        assert status(L.trj_result_tensor, h, 0, byref(desc))[0] == errors.HandleError.code
        assert status(L.trj_writer_flush, h)[0] == errors.HandleError.code
        assert status(L.trj_table_sample, h, 1, 0, 0, byref(out))[0] == errors.HandleError.code
    # A handle of another kind.
    t = filled.table("t")
    rc, msg = status(L.trj_buffer_sample_transitions, t._handle, 4, 0, byref(out))
    assert rc == errors.HandleError.code and "is a table, not a buffer" in msg
    # A released handle is never reused.
    tr = filled.sample_transitions(2)
    h = tr._handle
    tr.release()
    assert status(L.trj_result_dlpack, h, 0, 0, -1, byref(c_void_p()))[0] == errors.HandleError.code
    assert status(L.trj_result_free, h)[0] == errors.HandleError.code


def test_nulls_and_bad_lengths(filled):
    out = c_uint64()
    h = filled._handle
    assert status(L.trj_buffer_new, None, byref(out))[0] == errors.InvalidArgumentError.code
    assert status(L.trj_buffer_new, b"{", byref(out))[0] == errors.ConfigError.code
    assert status(L.trj_buffer_new, b'{"num_envs": 1, "capacity": 4, "fields": []} x', byref(out))[0] == errors.ConfigError.code
    assert status(L.trj_buffer_new, b'{"num_envs": 1}', None)[0] == errors.InvalidArgumentError.code
    assert status(L.trj_buffer_load, None, 0, byref(out))[0] == errors.InvalidArgumentError.code
    assert status(L.trj_buffer_sample_transitions, h, 4, 0, None)[0] == errors.InvalidArgumentError.code
    for n in (0, -1, 1 << 40):
        assert status(L.trj_buffer_sample_transitions, h, n, 0, byref(out))[0] == errors.InvalidArgumentError.code
    assert status(L.trj_buffer_sample_sequences, h, 4, 0, 0, 0, byref(out))[0] == errors.InvalidArgumentError.code
    assert status(L.trj_buffer_all_experiences, h, 1, 1, 1.0, byref(out))[0] == errors.InvalidArgumentError.code
    t = filled.table("t")
    t.insert(0, 0, 1)
    # Keys and priorities: NULL with a length, negative lengths, a bad dtype.
    assert status(L.trj_table_update_priorities, t._handle, None, None, 1, 3)[0] == errors.InvalidArgumentError.code
    assert status(L.trj_table_update_priorities, t._handle, None, None, 1, -1)[0] == errors.InvalidArgumentError.code
    k = np.zeros(1, np.int64)
    assert status(L.trj_table_update_priorities, t._handle, k.ctypes.data, k.ctypes.data, 9, 1)[0] == errors.DTypeError.code
    assert status(L.trj_table_delete, t._handle, None, 5)[0] == errors.InvalidArgumentError.code
    assert status(L.trj_table_insert, t._handle, 0, 0, 1, 0, 1.0, 10**9, byref(out))[0] == errors.InvalidArgumentError.code
    # A result's tensor index out of range; a name buffer too small.
    with filled.sample_transitions(2) as tr:
        assert status(L.trj_result_tensor, tr._handle, 99, byref(_lib.TensorDesc()))[0] == errors.InvalidArgumentError.code
        assert status(L.trj_result_tensor, tr._handle, 0, None)[0] == errors.InvalidArgumentError.code
        assert status(L.trj_result_name, tr._handle, 0, ctypes.create_string_buffer(2), 2)[0] == errors.InvalidArgumentError.code
        assert status(L.trj_result_copy, tr._handle, 0, None, 100)[0] == errors.InvalidArgumentError.code
        assert status(L.trj_result_dlpack, tr._handle, -1, 0, -1, byref(c_void_p()))[0] == errors.InvalidArgumentError.code
        # A stream for host memory is refused.
        assert status(L.trj_result_dlpack, tr._handle, 0, 0, 1, byref(c_void_p()))[0] == errors.InvalidArgumentError.code
    # Error messages are truncated to the caller's buffer, and a NULL buffer is fine.
    small = ctypes.create_string_buffer(8)
    assert L.trj_buffer_close(0, small, 8) == errors.HandleError.code and len(small.value) == 7
    assert L.trj_buffer_close(0, None, 0) == errors.HandleError.code


def test_bad_steps(filled):
    w = filled.writer()
    s = _lib.Step()
    assert status(L.trj_writer_add, w._handle, None)[0] == errors.InvalidArgumentError.code
    s.nrows, s.ncols, s.nfields = 2, 2, 2
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.InvalidArgumentError.code  # NULL columns
    cols = np.ones(2, np.int32)
    f = np.ones(2, np.float32)
    s.step_type = s.next_step_type = cols.ctypes.data
    s.reward = s.discount = f.ctypes.data
    s.nfields = 1
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.MissingFieldError.code
    s.nfields = 2
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.InvalidArgumentError.code  # NULL fields
    data = (c_void_p * 2)(None, None)
    nbytes = (c_int64 * 2)(24, 16)
    dtypes = (ctypes.c_int32 * 2)(0, 3)
    ndims = (ctypes.c_int32 * 2)(9, 1)
    shape = (c_int64 * 16)(2, 3, 2)
    s.data, s.nbytes, s.dtype = ctypes.addressof(data), ctypes.addressof(nbytes), ctypes.addressof(dtypes)
    s.ndim, s.shape = ctypes.addressof(ndims), ctypes.addressof(shape)
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.ShapeError.code  # 9 dimensions
    ndims[0] = 2
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.InvalidArgumentError.code  # NULL data
    shape[0] = -2
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.ShapeError.code
    shape[0], dtypes[0] = 2, 42
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.DTypeError.code
    s.nrows = -1
    assert status(L.trj_writer_add, w._handle, byref(s))[0] == errors.InvalidArgumentError.code
    assert filled.size == 20
    w.close()
    assert status(L.trj_writer_add, w._handle or 1 << 40, byref(s))[0] == errors.HandleError.code
