"""Buffers, writers and direct sampling from Python: exact values from the semantics."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trajring
from conftest import SPEC, add_steps, step_values


def test_spec_and_info(buf):
    assert [f.name for f in buf.fields] == ["obs", "action"]
    assert buf.fields[0] == trajring.Field("obs", "observation", np.dtype("float32"), (3,))
    assert buf.fields[1].role == "action" and buf.fields[1].dtype == np.dtype("int64")
    assert buf.num_envs == 2 and buf.capacity == 16 and buf.size == 0
    info = buf.info()
    assert info["backend"] == "cpu" and info["cursors"] == [0, 0]


def test_add_and_all_experiences(filled):
    assert filled.size == 20
    with filled.all_experiences("batch") as exp:
        obs = np.asarray(exp["obs"])
        nxt = np.asarray(exp["next_obs"])
        # 9 transitions per row (the last step has no successor), time-major, env-minor.
        assert obs.shape == (18, 1, 3)
        for i in range(18):
            t, r = divmod(i, 2)
            assert obs[i, 0].tolist() == [t, r, t * 10 + r]
            assert nxt[i, 0].tolist() == [t + 1, r, (t + 1) * 10 + r]
        assert np.asarray(exp["action"])[:, 0].tolist() == [t * 100 + r for t in range(9) for r in range(2)]
        assert np.asarray(exp["reward"])[:, 0].tolist() == [float(t) for t in range(9) for _ in range(2)]
        assert np.asarray(exp["is_done"]).max() == 0
        assert np.asarray(exp["row"]).tolist() == [r for _ in range(9) for r in range(2)]
        assert np.asarray(exp["step"]).tolist() == [t for t in range(9) for _ in range(2)]


def test_export_is_never_refilled(filled):
    with filled.all_experiences("batch") as exp:
        before = np.asarray(exp["obs"]).copy()
        with pytest.raises(trajring.InvalidArgumentError, match="export"):
            filled.sample_transitions(18, into=exp)
        assert np.array_equal(np.asarray(exp["obs"]), before)


def test_sample_transitions_are_consistent(filled):
    with filled.sample_transitions(64) as tr:
        obs, nxt = np.asarray(tr["obs"]), np.asarray(tr["next_obs"])
        act, rows, steps = np.asarray(tr["action"]), np.asarray(tr["row"]), np.asarray(tr["step"])
        assert obs.shape == (64, 3) and act.shape == (64,)
        for i in range(64):
            t, r = steps[i], rows[i]
            assert obs[i].tolist() == [t, r, t * 10 + r]
            assert nxt[i].tolist() == [t + 1, r, (t + 1) * 10 + r]
            assert act[i] == t * 100 + r


def test_sample_sequences_and_nstep(filled):
    with filled.sample_sequences(8, 4) as s:
        obs = np.asarray(s["obs"])
        assert obs.shape == (8, 4, 3) and s.length == 4
        for w in obs:  # consecutive steps of one row
            assert w[:, 0].tolist() == list(range(int(w[0, 0]), int(w[0, 0]) + 4))
            assert len(set(w[:, 1].tolist())) == 1
        assert np.asarray(s["mask"]).all()
    with filled.sample_nstep(16, 3, 0.5) as n:
        steps, rew = np.asarray(n["step"]), np.asarray(n["reward"])
        disc = np.asarray(n["discount"])
        nxt = np.asarray(n["next_obs"])
        for i in range(16):
            t = int(steps[i])
            k = min(3, 9 - t)  # truncated at the newest stored step (9)
            assert rew[i] == pytest.approx(sum(0.5**j * (t + j) for j in range(k)))
            assert disc[i] == pytest.approx(0.5**k)
            assert nxt[i, 0] == t + k


def test_torch_inputs_and_partial_rows(buf):
    w = buf.writer()
    v = step_values(0, 2)
    w.add(step_type=torch.zeros(1, dtype=torch.int32), next_step_type=[1], reward=[0.0], discount=[1.0], rows=[1],
          obs=torch.from_numpy(v["obs"][1:]), action=torch.tensor([101]))
    assert buf.info()["cursors"] == [0, 1]


def test_bad_adds_raise_and_change_nothing(filled):
    w = filled.writer()  # every row is free again: the fixture's writer closed
    before = filled.info()
    cols = dict(step_type=[1, 1], next_step_type=[1, 1], reward=[0, 0], discount=[1, 1])
    v = step_values(10, 2)
    with pytest.raises(trajring.DTypeError):
        w.add(**cols, obs=v["obs"].astype(np.float64), action=v["action"])
    with pytest.raises(trajring.ShapeError):
        w.add(**cols, obs=v["obs"][:, :2].copy(), action=v["action"])
    with pytest.raises(trajring.MissingFieldError):
        w.add(**cols, obs=v["obs"])
    with pytest.raises(trajring.UnknownFieldError):
        w.add(**cols, obs=v["obs"], action=v["action"], extra=v["action"])
    with pytest.raises(trajring.InvalidArgumentError):
        w.add(**cols, obs=np.ones((2, 6), np.float32)[:, ::2], action=v["action"])
    with pytest.raises(trajring.RowsError):
        w.add(**{k: v_[:1] for k, v_ in cols.items()}, rows=[5], obs=v["obs"][:1], action=v["action"][:1])
    with pytest.raises(trajring.InvalidArgumentError, match="step types 5"):
        w.add(step_type=[5, 5], next_step_type=[1, 1], reward=[0, 0], discount=[1, 1], **v)
    assert filled.info() == before
    with pytest.raises(trajring.RowOwnedError):
        filled.writer([0])
    w.close()
    w.close()  # idempotent


def test_config_errors():
    with pytest.raises(trajring.ConfigError):
        trajring.Buffer(SPEC, num_envs=0, capacity=16)
    with pytest.raises(trajring.ConfigError):
        trajring.Buffer({"obs": {"dtype": "float16"}}, num_envs=1, capacity=4)
    with pytest.raises(trajring.ConfigError):
        trajring.Buffer({"obs": {"role": "reward"}}, num_envs=1, capacity=4)
    with pytest.raises(trajring.InvalidArgumentError):
        trajring.Buffer({"obs": {"shap": (3,)}}, num_envs=1, capacity=4)


def test_closed_buffer(filled):
    w = filled.writer()
    t = filled.table("t")
    sample = filled.sample_transitions(4)
    filled.close()
    filled.close()  # idempotent
    with pytest.raises(trajring.HandleError):
        filled.sample_transitions(4)
    with pytest.raises(trajring.ClosedError):
        add_steps(w, 11, 2, start=10)
    with pytest.raises(trajring.ClosedError):
        t.insert(0, 0, 1)
    # The sample taken before Close stays readable.
    assert np.asarray(sample["obs"]).shape == (4, 3)
    sample.release()


def test_save_load_and_export(filled, tmp_path):
    t = filled.table("replay", "fifo")
    t.insert(0, 2, 3)
    path = tmp_path / "ck.trj"
    filled.save(str(path))
    b2 = trajring.load(str(path))
    assert b2.size == filled.size and [f.name for f in b2.fields] == ["obs", "action"]
    t2 = b2.table("replay")
    assert len(t2) == 1
    with t2.sample(1) as s:
        assert np.asarray(s["obs"])[0, :, 0].tolist() == [2, 3, 4]
    n = b2.export_npz(str(tmp_path / "x.npz"))
    with np.load(tmp_path / "x.npz") as z:
        assert n == 18 and z["observation/obs"].shape == (18, 1, 3)
    with pytest.raises(trajring.FileError):
        trajring.load(str(tmp_path / "missing.trj"))
    (tmp_path / "bad.trj").write_bytes(path.read_bytes()[:100])
    with pytest.raises(trajring.CorruptError):
        trajring.load(str(tmp_path / "bad.trj"))
    b2.close()
