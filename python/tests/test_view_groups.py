"""The DLPack tensors of one result share a view group (capi/dlpack.c):
their deleters call into Go once, for the last of them. A result's memory
must stay pinned while any tensor of any group lives, a group whose last
tensor died must never be joined again, and live_counts still counts
tensors."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
import torch

import trajring


def live() -> tuple[int, int]:
    gc.collect()
    return trajring.live_counts()


def test_group_lifetimes(filled):
    assert live() == (0, 0)
    tab = filled.table("g", "uniform", seed=5)
    for row in range(2):
        for s in range(9):
            tab.insert(row, s, 1)
    r = tab.sample(8)
    views = {k: torch.from_dlpack(r[k]) for k in r}
    assert live() == (1, len(r))
    want = {k: v.clone() for k, v in views.items()}
    r.release()
    names = list(views)
    for k in names[::2]:  # drop half: the group lives on
        del views[k]
    assert live() == (0, len(names) - len(names[::2]))
    for _ in range(5):  # new samples must not reuse the memory still viewed
        tab.sample(8).release()
    for k in views:
        assert torch.equal(views[k], want[k]), k
    views.clear()
    assert live() == (0, 0)


def test_new_group_after_the_last_view_died(filled):
    tab = filled.table("g", "uniform", seed=5)
    for s in range(9):
        tab.insert(0, s, 1)
    r = tab.sample(4)
    a = torch.from_dlpack(r["obs"])
    del a
    assert live()[1] == 0
    tab.sample(6, into=r)  # no live view: a new shape is fine
    b = torch.from_dlpack(r["obs"])  # a new group
    assert live()[1] == 1 and b.shape[0] == 6
    with pytest.raises(trajring.BusyError):
        tab.sample(3, into=r)
    c = np.from_dlpack(r["reward"])
    assert live()[1] == 2
    del b
    with pytest.raises(trajring.BusyError):  # c still holds the group
        tab.sample(3, into=r)
    del c
    tab.sample(3, into=r)
    r.release()
    assert live() == (0, 0)


def test_views_made_and_dropped_from_threads(filled):
    tab = filled.table("g", "uniform", seed=5)
    for row in range(2):
        for s in range(9):
            tab.insert(row, s, 1)
    r = tab.sample(16)
    want = r["obs"].tobytes()
    errors = []

    def work():
        try:
            for _ in range(2000):
                t = torch.from_dlpack(r["obs"])
                if t.numpy().tobytes() != want:
                    errors.append("changed")
                del t
        except Exception as e:  # pragma: no cover - reported below
            errors.append(repr(e))

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert live()[1] == 0
    r.release()
    assert live() == (0, 0)
