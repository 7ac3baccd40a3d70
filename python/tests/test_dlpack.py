"""Zero-copy results: DLPack capsules, pointers, write-through, lifetimes."""

from __future__ import annotations

import ctypes
import gc

import numpy as np
import pytest
import torch

import trajring
from trajring import _lib


def live() -> tuple[int, int]:
    gc.collect()
    return trajring.live_counts()


def test_pointers_are_trajrings(filled):
    with filled.sample_transitions(8) as tr:
        a = tr["obs"]
        t = torch.from_dlpack(a)
        n1 = np.from_dlpack(a)
        n2 = a.numpy()
        assert t.data_ptr() == a.data_ptr
        assert n1.__array_interface__["data"][0] == a.data_ptr
        assert n2.__array_interface__["data"][0] == a.data_ptr
        assert t.shape == (8, 3) and t.dtype == torch.float32
        assert not n1.flags.writeable and n2.flags.writeable
        # A write through one view shows in the others and in what the engine reads.
        t[0, 0] = 1234.5
        assert n1[0, 0] == 1234.5 and n2[0, 0] == 1234.5
        assert np.frombuffer(a.tobytes(), np.float32)[0] == 1234.5
        n2[1, 1] = -7
        assert t[1, 1].item() == -7
        # Every dtype crosses: int64 actions, uint8 is_done, int64 keys of table samples.
        assert torch.from_dlpack(tr["action"]).dtype == torch.int64
        assert torch.from_dlpack(tr["is_done"]).dtype == torch.uint8
        assert a.__dlpack_device__() == (1, 0)


def test_versioned_and_legacy_capsules(filled):
    pyapi = ctypes.pythonapi
    pyapi.PyCapsule_IsValid.restype = ctypes.c_int
    pyapi.PyCapsule_IsValid.argtypes = [ctypes.py_object, ctypes.c_char_p]
    with filled.sample_transitions(4) as tr:
        a = tr["obs"]
        legacy = a.__dlpack__()
        versioned = a.__dlpack__(max_version=(1, 0))
        assert pyapi.PyCapsule_IsValid(legacy, b"dltensor")
        assert pyapi.PyCapsule_IsValid(versioned, b"dltensor_versioned")
        assert live()[1] >= 2
        del legacy, versioned  # never consumed: the capsules' destructors delete the tensors
        assert live()[1] == 0
        with pytest.raises(BufferError):
            a.__dlpack__(copy=True)
        with pytest.raises(BufferError):
            a.__dlpack__(dl_device=(2, 0))
        with pytest.raises(BufferError):
            a.__dlpack__(stream=1)
        # torch also takes the capsule itself.
        t = torch.utils.dlpack.from_dlpack(a.__dlpack__())
        assert t.data_ptr() == a.data_ptr


def test_views_outlive_result_and_buffer(filled):
    assert live() == (0, 0)
    tr = filled.sample_transitions(16)
    t = torch.from_dlpack(tr["obs"])
    want = t.clone()
    tr.release()
    assert live() == (0, 1)
    # Samples after the release must not reuse the viewed memory.
    for _ in range(5):
        with filled.sample_transitions(16) as other:
            assert torch.from_dlpack(other["obs"]).data_ptr() != t.data_ptr()
    filled.close()
    assert torch.equal(t, want)
    del t
    assert live() == (0, 0)
    with pytest.raises(trajring.HandleError):
        tr["obs"]


def test_drop_orders(filled):
    for order in range(3):
        tr = filled.sample_sequences(4, 2)
        a, b = torch.from_dlpack(tr["obs"]), np.asarray(tr["reward"])
        if order == 0:
            tr.release(); del a; del b
        elif order == 1:
            del a; tr.release(); del b
        else:
            del b; del a; tr.release()
        assert live() == (0, 0), order


def test_pool_reuses_memory(filled):
    ptrs = set()
    for _ in range(20):
        with filled.sample_transitions(32) as tr:
            ptrs.add(tr["obs"].data_ptr)
    assert len(ptrs) <= 2


def test_sample_into_refills_cached_views(filled):
    t = filled.table("u", "uniform", seed=2)
    for s in range(8):
        t.insert(s % 2, s, 2)
    batch = t.sample(4)
    views = batch.torch()
    ptr = views["obs"].data_ptr()
    seen = set()
    for _ in range(20):
        t.sample_into(batch, 4)
        assert views["obs"].data_ptr() == ptr
        seen.add(tuple(views["obs"][:, 0, 0].tolist()))
        # The view shows the sample the engine wrote.
        assert np.frombuffer(batch["obs"].tobytes(), np.float32).tolist() == views["obs"].flatten().tolist()
    assert len(seen) > 1
    # While views live a sample of another shape is refused, changing nothing.
    with pytest.raises(trajring.BusyError):
        t.sample_into(batch, 8)
    t.insert(0, 0, 3)  # longer than the batch's L
    with pytest.raises(trajring.InvalidArgumentError):
        t.sample_into(batch, 4)
    assert views["obs"].shape == (4, 2, 3)
    batch.release()
    del views
    assert live() == (0, 0)


def test_buffer_sample_into_with_views(filled):
    tr = filled.sample_transitions(8)
    obs = tr.torch()["obs"]
    for _ in range(5):
        filled.sample_transitions(8, into=tr)
        steps = torch.from_dlpack(tr["step"])
        assert obs[:, 0].tolist() == steps.tolist()
    with pytest.raises(trajring.BusyError):
        filled.sample_transitions(16, into=tr)
    with pytest.raises(trajring.InvalidArgumentError):
        filled.sample_sequences(8, 2, into=tr)  # a result of another kind
    tr.release()


def test_flat_memory_over_many_cycles(filled):
    def rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * 4096

    def cycle(k: int) -> None:
        for _ in range(k):
            with filled.sample_transitions(64) as tr:
                x = torch.from_dlpack(tr["obs"])
                y = tr["next_obs"].numpy()
                del x, y

    cycle(2000)
    before = rss()
    cycle(100_000)
    grown = rss() - before
    assert grown < 16 << 20, f"RSS grew by {grown >> 20} MiB over 100,000 sample/drop cycles"
    assert live() == (0, 0)
