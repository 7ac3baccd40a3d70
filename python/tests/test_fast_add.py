"""The one-call add (capi/pyadd.c): Writer.add reads NumPy arrays through
the buffer protocol in C and falls back to the general Python path for
anything else; both must store the same bytes and raise the same errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trajring
from trajring import _buffer, _lib

SPEC = {"obs": {"shape": (3,), "dtype": "float32"}, "action": {"dtype": "int64"},
        "pix": {"shape": (2, 2), "dtype": "uint8"}, "flag": {"dtype": "bool", "role": "policy_info"},
        "q": {"shape": (2,), "dtype": "float64", "role": "policy_info"}, "i": {"dtype": "int32", "role": "policy_info"}}


def _step(t: int, rows: int = 2) -> dict:
    r = np.arange(rows)
    return {"obs": np.stack([np.full(rows, t), r, t * 10 + r], axis=1).astype(np.float32),
            "action": (t * 100 + r).astype(np.int64),
            "pix": ((t + r[:, None, None] + np.zeros((rows, 2, 2))) % 256).astype(np.uint8),
            "flag": (r + t) % 2 == 0,
            "q": np.stack([r * 0.5 + t, -r - t * 0.25], axis=1).astype(np.float64),
            "i": (r - t).astype(np.int32)}


def _cols(t: int, rows: int = 2) -> dict:
    return {"step_type": np.full(rows, trajring.FIRST if t == 0 else trajring.MID, np.int32),
            "next_step_type": np.full(rows, trajring.MID, np.int32),
            "reward": np.full(rows, t * 1.5, np.float32), "discount": np.ones(rows, np.float32)}


def _fill(fast: bool) -> trajring.Buffer:
    buf = trajring.Buffer(SPEC, num_envs=2, capacity=16, seed=3)
    w = buf.writer()
    for t in range(12):
        cols, fields = _cols(t), _step(t)
        if not fast:  # lists and torch tensors: the general path
            cols = {k: v.tolist() for k, v in cols.items()}
            fields = {k: torch.from_numpy(v.copy()) if k in ("obs", "q") else v.tolist() for k, v in fields.items()}
        w.add(**cols, **fields)
    w.close()
    return buf


def _contents(buf: trajring.Buffer) -> dict:
    r = buf.all_experiences("batch")
    out = {k: r[k].tobytes() for k in r}
    r.release()
    s = buf.sample_sequences(8, 2)
    out.update({"seq_" + k: s[k].tobytes() for k in s})
    s.release()
    return out


def test_fast_and_general_paths_store_the_same_bytes():
    fast, general = _fill(True), _fill(False)
    try:
        assert fast.info() == general.info()
        a, b = _contents(fast), _contents(general)
        assert a.keys() == b.keys()
        for k in a:
            assert a[k] == b[k], k
    finally:
        fast.close()
        general.close()


def test_numpy_adds_take_the_fast_path(monkeypatch):
    buf = trajring.Buffer(SPEC, num_envs=2, capacity=16)
    w = buf.writer()

    def refuse(*a, **k):
        raise AssertionError("general path taken")

    monkeypatch.setattr(_buffer, "_raw", refuse)
    monkeypatch.setattr(_buffer, "_column", refuse)
    for t in range(3):
        w.add(**_cols(t), **_step(t))
    assert buf.info()["cursors"] == [3, 3]
    with pytest.raises(AssertionError):  # a list column goes the general way
        w.add(**dict(_cols(3), reward=[0.0, 0.0]), **_step(3))
    buf.close()


def test_arrays_reused_and_changed_in_place():
    buf = trajring.Buffer({"obs": {"shape": (3,), "dtype": "float32"}}, num_envs=2, capacity=8)
    w = buf.writer()
    obs = np.zeros(6, np.float32)
    obs.shape = (2, 3)
    cols = _cols(0)
    for t in range(3):
        obs[:] = t  # the same array, new contents: each add stores them
        w.add(**cols, obs=obs)
        cols = _cols(t + 1)
    r = buf.all_experiences("batch")
    got = np.frombuffer(r["obs"].tobytes(), np.float32).reshape(-1, 3)
    assert sorted(set(got[:, 0].tolist())) == [0.0, 1.0]  # transitions of steps 0 and 1
    r.release()
    before = buf.info()
    obs.shape = (3, 2)  # same memory, another shape: refused, not read as before
    with pytest.raises(trajring.ShapeError):
        w.add(**cols, obs=obs)
    assert buf.info() == before
    buf.close()


def test_fast_path_bad_input_raises_and_changes_nothing():
    buf = trajring.Buffer(SPEC, num_envs=2, capacity=16)
    w = buf.writer()
    for t in range(2):
        w.add(**_cols(t), **_step(t))
    before = buf.info()
    cols, v = _cols(2), _step(2)
    with pytest.raises(trajring.DTypeError):
        w.add(**cols, **dict(v, obs=v["obs"].astype(np.float64)))
    with pytest.raises(trajring.DTypeError):
        w.add(**cols, **dict(v, obs=v["obs"].astype(np.float16)))
    with pytest.raises(trajring.ShapeError):
        w.add(**cols, **dict(v, obs=v["obs"][:, :2].copy()))
    with pytest.raises(trajring.ShapeError):
        w.add(**cols, **dict(v, action=v["action"][:1].copy()))
    with pytest.raises(trajring.MissingFieldError):
        w.add(**cols, **{k: x for k, x in v.items() if k != "action"})
    with pytest.raises(trajring.UnknownFieldError):
        w.add(**cols, **v, extra=v["action"])
    with pytest.raises(trajring.InvalidArgumentError):
        w.add(**cols, **dict(v, obs=np.ones((2, 6), np.float32)[:, ::2]))
    with pytest.raises(trajring.InvalidArgumentError):
        w.add(**dict(cols, reward=np.zeros(3, np.float32)), **v)
    with pytest.raises(trajring.InvalidArgumentError, match="step types 5"):
        w.add(**dict(cols, step_type=np.full(2, 5, np.int32)), **v)
    assert buf.info() == before
    # A column of another dtype is converted by the general path, as before.
    w.add(**dict(cols, step_type=cols["step_type"].astype(np.int64)), **v)
    assert buf.info()["cursors"] == [3, 3]
    w.close()
    with pytest.raises(trajring.HandleError):
        w.add(**_cols(3), **_step(3))
    buf.close()


# bytes and bytearray field values of the wrong length or rank: the
# general path reads them as lists of their byte values (ShapeError); the
# fast path must not read them as uint8 arrays (DTypeError for a float
# field) but leave them to it.
_BYTES = [("pix", bytes(8)), ("pix", bytearray(8)), ("obs", bytes(24)), ("obs", bytearray(12)),
          ("action", bytes(16)), ("q", bytearray(b"ab")), ("flag", bytes(3)), ("i", bytearray(1))]


@pytest.mark.parametrize("path", ["fast", "general"])
def test_bytes_field_values_raise_shape_error_on_both_paths(path):
    buf = trajring.Buffer(SPEC, num_envs=2, capacity=16)
    w = buf.writer()
    for t in range(2):
        w.add(**_cols(t), **_step(t))
    before = buf.info()
    cols, v = _cols(2), _step(2)
    if path == "general":  # list columns: the one-call add declines at once
        cols = {k: x.tolist() for k, x in cols.items()}
    for name, value in _BYTES:
        with pytest.raises(trajring.ShapeError):
            w.add(**cols, **dict(v, **{name: value}))
    assert buf.info() == before
    w.close()
    buf.close()


def test_fast_path_leaves_bytes_to_the_general_path():
    buf = trajring.Buffer(SPEC, num_envs=2, capacity=16)
    w = buf.writer()
    cols, v = _cols(0), _step(0)
    err = _lib._errbuf()
    for name, value in _BYTES + [("pix", bytes(8)), ("action", memoryview(v["action"]))]:
        fields = dict(v, **{name: value})
        rc = _lib.writer_add_py(w._handle, cols["step_type"], cols["next_step_type"], cols["reward"],
                                cols["discount"], fields, w._pynames_addr, w._nf, err, _lib._ERRCAP)
        assert rc == _lib.FALLBACK, (name, type(value))
    assert buf.info()["cursors"] == [0, 0]
    w.close()
    buf.close()


def test_bytes_of_the_right_length_are_converted_as_lists():
    # A byte per row for scalar fields: both paths store the byte values
    # converted to the field's dtype, as they do the same list.
    got = []
    for value in (bytes([7, 9]), bytearray([7, 9]), [7, 9]):
        buf = trajring.Buffer(SPEC, num_envs=2, capacity=16)
        w = buf.writer()
        for t in range(3):
            w.add(**_cols(t), **dict(_step(t), action=value, i=value))
        w.close()
        got.append(_contents(buf))
        buf.close()
    assert got[0] == got[1] == got[2]
