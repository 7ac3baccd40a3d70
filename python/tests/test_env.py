"""Batched Go environments from Python: the vector API, next-step autoreset, collection
into a buffer equal to the Go driver's, bad input."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import weakref

import numpy as np
import pytest
import torch

import trajring

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def policy(it: int, rows: int) -> np.ndarray:
    return np.array([1 if (7 * it + 3 * r) % 5 < 2 else 0 for r in range(rows)], np.int64)


def test_vector_api():
    env = trajring.make("CartPole-v1", num_envs=3, seed=1)
    assert env.num_envs == 3 and env.metadata["autoreset_mode"] == "NextStep"
    assert isinstance(env.single_action_space, trajring.Discrete) and env.single_action_space.n == 2
    assert env.single_observation_space.shape == (4,) and env.observation_space.shape == (3, 4)
    assert env.action_space.shape == (3,)
    obs, info = env.reset()
    assert obs.shape == (3, 4) and obs.dtype == np.float32 and info == {}
    assert np.all(np.abs(obs) <= 0.05)
    obs2, rew, term, trunc, info = env.step(env.action_space.sample())
    assert obs2.shape == (3, 4) and rew.dtype == np.float32 and term.dtype == np.bool_ and trunc.dtype == np.bool_
    assert (rew == 1).all() and not term.any() and not trunc.any()
    # Fresh arrays every step: what was returned is never overwritten.
    before = obs2.copy()
    env.step(torch.zeros(3, dtype=torch.int64))
    assert np.array_equal(obs2, before)
    # The same seed gives the same episode.
    again = trajring.make("CartPole-v1", num_envs=3, seed=1)
    assert np.array_equal(again.reset()[0], obs)
    assert np.array_equal(env.reset(seed=1)[0], obs)
    env.close()
    env.close()


def test_outputs_reused_only_when_unreferenced():
    """A step's arrays are fresh to the caller: memory is reused only once
    nothing refers to a block's arrays, and held arrays keep their values."""
    env = trajring.make("CartPole-v1", num_envs=4, seed=2)
    env.reset()
    acts = np.array([0, 1, 0, 1], np.int64)

    def addresses(out):
        return {a.ctypes.data for a in out[:4]}

    # Dropped outputs: their memory comes back within the pool's few blocks.
    seen = [addresses(env.step(acts)) for _ in range(8)]
    assert len(set().union(*seen)) <= 3 * 4, "dropped outputs were not reused"
    # Held outputs, in every way one can hold them, are never written again.
    obs, rew, term, trunc, _ = env.step(acts)
    held = {
        "obs": obs,
        "rew_torch": torch.from_numpy(rew),  # holds rew
        "term_slice": term[1:],  # a view: holds term's memory
        "trunc_list": [trunc],
        "obs_row": obs[2],
    }
    copies = {k: (v[0] if isinstance(v, list) else v).clone() if isinstance(v, torch.Tensor)
              else np.array(v[0] if isinstance(v, list) else v) for k, v in held.items()}
    mine = addresses((obs, rew, term, trunc))
    del obs, rew, term, trunc
    for i in range(20):
        out = env.step(acts)
        assert not (addresses(out) & mine), f"step {i} wrote into held arrays"
        del out
    for k, v in held.items():
        v = v[0] if isinstance(v, list) else v
        same = torch.equal(v, copies[k]) if isinstance(v, torch.Tensor) else np.array_equal(v, copies[k])
        assert same, f"{k} changed after later steps"
    # A weak reference counts too: what it reaches is never overwritten.
    out = env.step(acts)
    wr, copy = weakref.ref(out[0]), out[0].copy()
    del out
    for _ in range(10):
        env.step(acts)
    assert wr() is None or np.array_equal(wr(), copy), "an array reached through a weak reference changed"
    # Once released, the held block is reused again.
    del held, copies, v
    later = set().union(*(addresses(env.step(acts)) for _ in range(8)))
    assert mine & later, "a released block was never reused"
    env.close()


def test_next_step_autoreset():
    env = trajring.make("CartPole-v1", num_envs=2, seed=4)
    twin = trajring.make("CartPole-v1", num_envs=2, seed=4)
    env.reset()
    twin.reset()
    ones = np.ones(2, np.int64)
    for _ in range(200):
        obs, rew, term, trunc, _ = env.step(ones)
        twin.step(ones)
        if term[0]:
            break
    assert term[0] and rew[0] == 1 and not trunc[0]
    # The step after a terminal step resets the row, ignores its action, reward 0, flags False.
    o1, r1, t1, u1, _ = env.step(np.array([0, 1]))
    o2, r2, t2, u2, _ = twin.step(np.array([1, 1]))
    assert r1[0] == 0 and not t1[0] and not u1[0]
    assert np.array_equal(o1[0], o2[0]) and np.all(np.abs(o1[0]) <= 0.05)
    # Truncation: CartPole's 500-step limit.
    env = trajring.make("CartPole-v1", num_envs=1, seed=0)
    env.reset()
    steps = 0
    while True:
        obs, rew, term, trunc, _ = env.step(np.array([steps % 2]))  # alternate: balances for long
        steps += 1
        if term[0] or trunc[0]:
            break
    assert trunc[0] == (steps == 500) and term[0] == (steps < 500)


def go_collection() -> dict:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        pytest.skip("no Go toolchain to run the Go half (python/tests/godriver)")
    out = subprocess.run([go, "run", "./python/tests/godriver"], cwd=ROOT, check=True, capture_output=True,
                         timeout=600).stdout
    return json.loads(out)


def test_collection_equals_go_driver():
    want = go_collection()
    env = trajring.make("CartPole-v1", num_envs=8, seed=3)
    buf = trajring.Buffer(env.buffer_spec(), num_envs=8, capacity=256)
    table = buf.table("replay")
    w = buf.trajectory_writer({"replay": 2})
    env.reset()
    for it in range(200):
        env.step(policy(it, 8), writer=w)
    w.flush()
    assert len(table) == want["table_size"] and buf.info()["steps"] == want["steps"]
    with buf.all_experiences("batch") as exp:
        got = {"observation": exp["observation"], "next_observation": exp["next_observation"], "action": exp["action"],
               "reward": exp["reward"], "discount": exp["discount"], "is_done": exp["is_done"], "row": exp["row"],
               "step": exp["step"]}
        for k, a in got.items():
            assert a.tobytes() == base64.b64decode(want[k]), k
        assert np.asarray(exp["is_done"]).max() >= 1  # episodes ended inside the run
    buf.close()


def test_bad_input_writes_nothing():
    env = trajring.make("CartPole-v1", num_envs=2, seed=0)
    buf = trajring.Buffer(env.buffer_spec(), num_envs=2, capacity=64)
    w = buf.writer()
    with pytest.raises(trajring.EnvError):  # not reset yet
        env.step(np.zeros(2, np.int64), writer=w)
    env.reset()
    with pytest.raises(trajring.ShapeError):
        env.step(np.zeros(3, np.int64), writer=w)
    with pytest.raises(trajring.DTypeError):
        env.step(np.zeros(2, np.float32), writer=w)
    with pytest.raises(trajring.InvalidArgumentError, match="not 0 or 1"):
        env.step(np.array([0, 7]), writer=w)  # out of range
    env.reset()
    other = trajring.Buffer({"x": {"shape": (4,)}, "action": {"dtype": "int64"}}, num_envs=2, capacity=8)
    with pytest.raises(trajring.MissingFieldError):
        env.step(np.zeros(2, np.int64), writer=other.writer())
    narrow = trajring.Buffer(env.buffer_spec(), num_envs=3, capacity=8)
    with pytest.raises(trajring.RowsError):
        env.step(np.zeros(2, np.int64), writer=narrow.writer([0]))
    assert buf.size == 0 and other.size == 0 and narrow.size == 0
    # Still usable.
    env.step(np.zeros(2, np.int64), writer=w)
    assert buf.size == 2
    with pytest.raises(trajring.ConfigError, match="CartPole-v1"):
        trajring.make("NoSuchEnv-v0")
    with pytest.raises(trajring.ConfigError):
        trajring.make("CartPole-v1", num_envs=0)
    env.close()
    with pytest.raises(trajring.HandleError):
        env.step(np.zeros(2, np.int64))
