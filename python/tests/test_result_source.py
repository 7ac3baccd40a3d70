"""A sample into a result (``into=``) whose views are alive must keep the
result's set of tensors, which its source decides: a table's sample adds
``key``, ``probability`` and ``weight`` (host slices, or backend tensors for a
device-selecting table), a direct sample of the buffer has none. A sample from
another source is refused with BusyError before anything is drawn, as a sample
of another shape is (capi/result.go, fillHandle): the views keep their data and
the library keeps working. It used to panic in Go ("a result's memory moved
under N live tensors"), which poisoned the library for the process."""

from __future__ import annotations

import gc

import numpy as np
import pytest

import trajring


def live() -> tuple[int, int]:
    gc.collect()
    return trajring.live_counts()


def table_of_pairs(buf: trajring.Buffer, name: str = "t") -> trajring.Table:
    """A uniform table of items of two steps (row 0), so that its batches have
    the L of a direct sample of two-step sequences."""
    tab = buf.table(name, "uniform", seed=3)
    for s in range(0, 8, 2):
        tab.insert(0, s, 2)
    return tab


def still_works(buf: trajring.Buffer, tab: trajring.Table) -> None:
    """The library was not poisoned: new samples of both sources work."""
    with tab.sample(4) as r:
        assert r.n == 4 and "key" in list(r)
    with buf.sample_sequences(4, 2) as r:
        assert r.n == 4 and r.length == 2


def test_direct_sample_into_a_table_batch_with_live_views_is_busy(filled):
    tab = table_of_pairs(filled)
    res = tab.sample(4)
    assert res.length == 2 and "key" in list(res)
    view = res["obs"].numpy()
    want = view.copy()
    keys = np.asarray(res["key"]).copy()
    with pytest.raises(trajring.BusyError, match="table"):
        filled.sample_sequences(4, 2, into=res)  # same n and L, but no keys
    np.testing.assert_array_equal(view, want)
    np.testing.assert_array_equal(np.asarray(res["key"]), keys)
    tab.sample(4, into=res)  # the same source refills in place
    assert res["obs"].data_ptr == view.__array_interface__["data"][0]
    still_works(filled, tab)
    del view
    filled.sample_sequences(4, 2, into=res)  # no live view: any source
    res._filled()
    assert "key" not in list(res) or res["key"].shape == (0,)
    res.release()
    assert live() == (0, 0)


def test_table_sample_into_a_direct_batch_with_live_views_is_busy(filled):
    tab = table_of_pairs(filled)
    res = filled.sample_sequences(4, 2)
    assert "key" not in list(res)
    view = res["obs"].numpy()
    want = view.copy()
    with pytest.raises(trajring.BusyError, match="directly"):
        tab.sample(4, into=res)  # same n, L 2 by the result's: keys added
    np.testing.assert_array_equal(view, want)
    filled.sample_sequences(4, 2, into=res)  # the same source refills in place
    still_works(filled, tab)
    del view
    tab.sample(4, into=res)  # no live view: any source
    res._filled()
    assert "key" in list(res)
    res.release()
    assert live() == (0, 0)


def test_sample_of_another_table_into_a_batch_with_live_views_is_busy(filled):
    a, b = table_of_pairs(filled, "a"), table_of_pairs(filled, "b")
    res = a.sample(4)
    view = res["obs"].numpy()
    want = view.copy()
    with pytest.raises(trajring.BusyError, match='"a"'):
        b.sample(4, into=res)
    np.testing.assert_array_equal(view, want)
    a.sample(4, into=res)
    del view
    b.sample(4, into=res)
    res.release()
    assert live() == (0, 0)
