"""A result's host tensors after the first are made in C without a call
into Go (capi/pydlpack.c) while the result's view group lives. These tests
check that the fast path is taken exactly then, that its tensors are the
same views as the general path's (pointer, shape, dtype, values, writes),
that a freed handle or a dead group sends every tensor back to the general
path, and that threads taking and dropping tensors leave nothing alive."""

from __future__ import annotations

import ctypes
import gc
import threading

import numpy as np
import pytest
import torch

import trajring
from trajring import _lib

from conftest import add_steps


def live() -> tuple[int, int]:
    gc.collect()
    return trajring.live_counts()


@pytest.fixture
def tab(filled):
    t = filled.table("f", "uniform", seed=3)
    for row in range(2):
        for s in range(9):
            t.insert(row, s, 1)
    return t


def test_later_tensors_take_the_fast_path(tab):
    r = tab.sample(8)
    names = list(r)
    before = _lib.fast_tensors()
    first = torch.from_dlpack(r[names[0]])  # makes the group: the general path
    assert _lib.fast_tensors() == before
    rest = {k: torch.from_dlpack(r[k]) for k in names[1:]}
    assert _lib.fast_tensors() == before + len(names) - 1
    views = {names[0]: first, **rest}
    for k, v in views.items():
        a = r[k]
        assert v.data_ptr() == a.data_ptr, k
        assert tuple(v.shape) == a.shape, k
        assert np.array_equal(v.numpy(), np.frombuffer(a.tobytes(), dtype=a.dtype).reshape(a.shape)), k
    views["obs"][0, 0, 0] = 1234.5  # a write through a fast view reaches the result's memory
    assert np.frombuffer(r["obs"].tobytes(), np.float32)[0] == 1234.5
    del first, rest, views, v
    r.release()
    assert live() == (0, 0)


def test_dead_group_and_freed_handle_take_the_general_path(tab):
    r = tab.sample(8)
    before = _lib.fast_tensors()
    t = torch.from_dlpack(r["reward"])
    del t
    gc.collect()  # the group died: the next tensor makes a new one in Go
    t = torch.from_dlpack(r["reward"])
    assert _lib.fast_tensors() == before
    u = torch.from_dlpack(r["obs"])
    assert _lib.fast_tensors() == before + 1
    h = r._handle
    r.release()  # the handle's entry goes; its tensors live on
    assert _lib.dlpack_py(h, 0, 0) is None
    assert _lib.dlpack_py(0, 0, 0) is None
    assert _lib.dlpack_py(2**64 - 1, 0, 0) is None
    with pytest.raises(trajring.HandleError):
        r["obs"]
    assert live() == (0, 2)
    assert float(t.sum()) == float(t.sum())  # still readable
    del t, u
    assert live() == (0, 0)


def test_fast_path_bad_indexes_and_versioned_capsules(tab):
    r = tab.sample(4)
    hold = torch.from_dlpack(r["obs"])
    n = len(r)
    for i in (-1, n, 2**40):
        assert _lib.dlpack_py(r._handle, i, 0) is None
    before = _lib.fast_tensors()
    cap = r["reward"].__dlpack__(max_version=(1, 0))
    assert _lib.fast_tensors() == before + 1
    is_valid = ctypes.pythonapi.PyCapsule_IsValid
    is_valid.argtypes, is_valid.restype = [ctypes.py_object, ctypes.c_char_p], ctypes.c_int
    assert is_valid(cap, b"dltensor_versioned") == 1
    legacy = r["reward"].__dlpack__()
    assert is_valid(legacy, b"dltensor") == 1
    assert live() == (1, 3)
    del cap, legacy  # never consumed: the destructors delete them
    assert live() == (1, 1)
    del hold
    r.release()
    assert live() == (0, 0)


def test_threads_take_and_drop_fast_tensors(buf):
    w = buf.writer()
    add_steps(w, 12, 2)
    w.close()
    t = buf.table("f", "uniform", seed=9)
    for row in range(2):
        for s in range(11):
            t.insert(row, s, 1)
    r = t.sample(16)
    want = {k: r[k].tobytes() for k in r}
    anchor = torch.from_dlpack(r["obs"])  # keeps the group, so threads mostly take the fast path
    errors = []

    def work() -> None:
        try:
            for _ in range(500):
                views = [torch.from_dlpack(r[k]) for k in r]
                for k, v in zip(r, views):
                    if v.data_ptr() != r[k].data_ptr:
                        raise AssertionError(k)
                del views
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    before = _lib.fast_tensors()
    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert _lib.fast_tensors() - before == 4 * 500 * len(r)
    assert {k: r[k].tobytes() for k in r} == want
    del anchor
    r.release()
    assert live() == (0, 0)
