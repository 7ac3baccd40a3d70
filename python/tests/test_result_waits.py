"""A sample into a result that waits for a rate limiter holds up no DLPack
deleter and no release of that result (capi/result.go, fill): both return
while the sample still waits, and the sample then ends as it should.

The samplers here call trj_table_sample with one long wait slice, the way a
C caller does (the package waits in 100 ms slices). The tests know, without
sleeping, that a sample has begun (and then waits for the rate limiter until
the test inserts) or that a call waits for it: trj_result_state reports both.
A deleter is called through ctypes, without the GIL, as a consumer's thread
would, or by dropping a NumPy view, with the GIL held: a deleter that waited
for the sample then shows as a drop that does not end before the insert that
lets the sample through.
"""

from __future__ import annotations

import ctypes
import gc
import threading
import time
from typing import Any, Callable

import numpy as np

import trajring
from trajring import _lib
from trajring.errors import _WOULD_BLOCK, HandleError

# The sampler's one wait slice, and the longest the test waits for a drop
# that must not wait for the sample at all: a bound for a failing run, well
# inside the slice, never a measure of speed.
SLICE_MS = 60_000
BOUND_S = 30.0


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("dtype", ctypes.c_uint32), ("shape", ctypes.c_void_p),
                ("strides", ctypes.c_void_p), ("byte_offset", ctypes.c_uint64)]


class _Managed(ctypes.Structure):
    """DLPack's legacy DLManagedTensor (capi/trajring_abi.h, trj_dl_managed)."""

    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


def raw_tensor(res: trajring.Result, i: int) -> tuple[int, Callable[[], None]]:
    """Take tensor i of res as a C consumer does; return its address and its deleter's call."""
    ptr = ctypes.c_void_p()
    _lib.call(_lib.lib.trj_result_dlpack, res._handle, i, 0, -1, ctypes.byref(ptr))
    m = _Managed.from_address(ptr.value)
    deleter = _DELETER(m.deleter)
    return m.dl_tensor.data, lambda: deleter(ptr.value)  # ctypes releases the GIL for the call


def limited_table(buf: trajring.Buffer) -> tuple[Any, trajring.Result]:
    """A lifo table whose rate limiter (one sample per insert) lets one sample through, and that sample."""
    tab = buf.table("limited", "lifo", min_size=1, samples_per_insert=1.0, error_buffer=1.0)
    tab.insert(0, 0, 1)
    return tab, tab.sample(1)


def state(res: trajring.Result) -> tuple[int, int]:
    """(1 while a sample into res is under way, else 0; the calls waiting for it): trj_result_state."""
    filling, waiters = ctypes.c_int64(), ctypes.c_int64()
    _lib.call(_lib.lib.trj_result_state, res._handle, ctypes.byref(filling), ctypes.byref(waiters))
    return filling.value, waiters.value


def wait_until(cond: Callable[[], bool], what: str) -> None:
    """Poll cond until it holds; fail after BOUND_S (a bound for a failing run)."""
    deadline = time.monotonic() + BOUND_S
    while not cond():
        assert time.monotonic() < deadline, f"{what} did not happen within {BOUND_S} s"
        time.sleep(0.001)


def start_sample_into(tab: Any, res: trajring.Result, waiters: int = 0) -> tuple[threading.Thread, list[int]]:
    """Start a thread sampling one item into res in one wait slice, and return once its
    sample is under way (waiters 0: it waits for the rate limiter, which only an insert
    ends) or, when another sample is, once it waits for that one (waiters 1); its status
    code lands in the list."""
    rc: list[int] = []
    handle = res._handle

    def run() -> None:
        out, err = ctypes.c_uint64(), _lib._errbuf()
        rc.append(_lib.lib.trj_table_sample(tab._handle, 1, SLICE_MS, handle, ctypes.byref(out), err, _lib._ERRCAP))

    th = threading.Thread(target=run)
    th.start()
    wait_until(lambda: state(res) == (1, waiters), "the sample's start")
    return th, rc


def in_thread(fn: Callable[[], None]) -> tuple[threading.Thread, threading.Event]:
    """Run fn in a thread; the event is set once it returned."""
    done = threading.Event()

    def run() -> None:
        fn()
        done.set()

    th = threading.Thread(target=run)
    th.start()
    return th, done


def live() -> tuple[int, int]:
    gc.collect()
    return trajring.live_counts()


def test_view_drop_returns_while_a_sample_into_the_result_waits(filled):
    tab, res = limited_table(filled)
    addr, delete = raw_tensor(res, 0)  # a live tensor: the sample refills res in place
    sampler, rc = start_sample_into(tab, res)
    dropper, dropped = in_thread(delete)
    try:
        assert dropped.wait(BOUND_S), "the tensor's deleter waited for the sample into its result"
        assert not rc and sampler.is_alive(), "the sample ended before the insert it waits for"
    finally:
        tab.insert(1, 5, 1)  # the sample's item (lifo: the newest)
        sampler.join()
        dropper.join()
    assert rc == [0]
    res._filled()
    obs = np.asarray(res["obs"])
    assert res["obs"].data_ptr == addr  # refilled in place, as a result with live tensors is
    np.testing.assert_array_equal(obs[0, 0], [5, 1, 51])
    del obs
    res.release()
    assert live() == (0, 0)


def test_release_returns_while_a_sample_into_the_result_waits(filled):
    tab, res = limited_table(filled)
    view = res["obs"].numpy()  # a live view: the result's memory outlives its handle
    sampler, rc = start_sample_into(tab, res)
    releaser, released = in_thread(res.release)
    try:
        assert released.wait(BOUND_S), "trj_result_free waited for the sample into the result"
        assert not rc and sampler.is_alive(), "the sample ended before the insert it waits for"
    finally:
        tab.insert(1, 5, 1)
        sampler.join()
        releaser.join()
    # The sample found its result freed: it fails with the handle's error.
    # It was drawn, in place (a view was alive), and the view, which keeps
    # the memory, shows it.
    assert rc == [HandleError.code]
    np.testing.assert_array_equal(view[0, 0], [5, 1, 51])
    assert live() == (0, 1)
    del view
    assert live() == (0, 0)
    tab.insert(1, 6, 1)
    with tab.sample(1) as again:  # the result went back to the buffer in working order
        np.testing.assert_array_equal(np.asarray(again["obs"])[0, 0], [6, 1, 61])


def test_release_of_a_waiting_result_without_views_hands_it_back(filled):
    tab, res = limited_table(filled)
    sampler, rc = start_sample_into(tab, res)
    releaser, released = in_thread(res.release)
    try:
        assert released.wait(BOUND_S), "trj_result_free waited for the sample into the result"
        assert not rc and sampler.is_alive()
    finally:
        tab.insert(1, 5, 1)
        sampler.join()
        releaser.join()
    assert rc == [HandleError.code]
    assert live() == (0, 0)


def test_samples_into_one_result_from_two_threads_are_serialised(filled):
    # The second waits for the first (seen waiting while the first waits for
    # the rate limiter), begins its sample only once the first ended, and
    # finds the result as the first left it; a live view (both refill in
    # place) shows the first's item, then the second's.
    tab, res = limited_table(filled)
    view = res["obs"].numpy()
    first, rc1 = start_sample_into(tab, res)
    second, rc2 = start_sample_into(tab, res, waiters=1)
    try:
        assert not rc1 and not rc2
        tab.insert(1, 5, 1)
        first.join(BOUND_S)
        assert rc1 == [0]
        wait_until(lambda: state(res) == (1, 0), "the second sample's start")
        assert not rc2 and second.is_alive(), "the second sample ended before the insert it waits for"
        np.testing.assert_array_equal(view[0, 0], [5, 1, 51])
        tab.insert(1, 6, 1)
        second.join(BOUND_S)
    finally:
        for th in (first, second):  # a failing run: let what still waits end
            if th.is_alive():
                tab.insert(1, 9, 1)
        first.join()
        second.join()
    assert rc2 == [0]
    np.testing.assert_array_equal(view[0, 0], [6, 1, 61])
    del view
    res.release()
    assert live() == (0, 0)


def test_view_drop_with_the_gil_held_returns_while_a_sample_into_the_result_waits(filled):
    # The common case: Python frees a NumPy view, and the tensor's deleter
    # runs in this thread with the GIL held. Had it waited for the sample,
    # it would return only once the sample's slice ran out, the sample
    # ended: the result would not be filling any more.
    tab, res = limited_table(filled)
    view = res["obs"].numpy()
    addr = view.__array_interface__["data"][0]
    sampler, rc = start_sample_into(tab, res)
    try:
        del view  # the deleter, with the GIL held
        assert live()[1] == 0
        assert state(res) == (1, 0), "the tensor's deleter waited for the sample into its result"
        assert not rc and sampler.is_alive()
    finally:
        tab.insert(1, 5, 1)
        sampler.join()
    assert rc == [0]
    res._filled()
    assert res["obs"].data_ptr == addr  # refilled in place: a view lived when it began
    np.testing.assert_array_equal(np.asarray(res["obs"])[0, 0], [5, 1, 51])
    res.release()
    assert live() == (0, 0)


def test_tensor_description_waits_for_a_sample_that_may_move_the_memory(filled):
    # No view lives: the sample may move the memory, so a raw description
    # (trj_result_tensor, a data pointer) waits for it and describes what it
    # left, without holding up the result's other calls.
    tab, res = limited_table(filled)
    sampler, rc = start_sample_into(tab, res)
    desc = _lib.TensorDesc()
    described: list[int] = []

    def describe() -> None:
        err = _lib._errbuf()
        described.append(_lib.lib.trj_result_tensor(res._handle, 0, ctypes.byref(desc), err, _lib._ERRCAP))

    describer, _ = in_thread(describe)
    try:
        wait_until(lambda: state(res) == (1, 1), "the description's wait")
        assert not described and not rc
    finally:
        tab.insert(1, 5, 1)
        sampler.join()
        describer.join()
    assert rc == [0] and described == [0]
    res._filled()
    assert desc.data == res["obs"].data_ptr
    np.testing.assert_array_equal(np.asarray(res["obs"])[0, 0], [5, 1, 51])
    res.release()
    assert live() == (0, 0)


def test_the_limited_tables_next_sample_waits(filled):
    # The tests above rely on it: their samples wait until the test inserts.
    tab, res = limited_table(filled)
    out, err = ctypes.c_uint64(), _lib._errbuf()
    rc = _lib.lib.trj_table_sample(tab._handle, 1, 0, res._handle, ctypes.byref(out), err, _lib._ERRCAP)
    assert rc == _WOULD_BLOCK
    res.release()
