"""Frame stacking from Python (tensorbuf.FrameStack): exact frames at every edge."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import trajring

K = 3
EPISODE = 6  # First at t % 6 == 0, Last at t % 6 == 5
ROWS, STEPS, CAPACITY = 2, 20, 32
SPEC = {"pixels": {"shape": (2, 2), "dtype": "uint8"}, "action": {"dtype": "int64"}}


def frame(t: int, r: int) -> np.ndarray:
    """The stored frame of step t of row r: every pixel 1 + t + 100 * r."""
    return np.full((2, 2), 1 + t + 100 * r, np.uint8)


def decode(f: np.ndarray) -> tuple[int, int]:
    """The (t, row) of a stored (non-zero) frame."""
    v = int(f[0, 0]) - 1
    return v % 100, v // 100


def stack_at(end: int, r: int) -> np.ndarray:
    """The expected K frames ending at step `end` of row r: zeros before the
    episode's first step (SB3's VecFrameStack, Dopamine)."""
    first = end - end % EPISODE
    return np.stack([frame(j, r) if j >= first else np.zeros((2, 2), np.uint8) for j in range(end - K + 1, end + 1)])


def fill(buf: trajring.Buffer, writer) -> None:
    for t in range(STEPS):
        k = t % EPISODE
        st = np.full(ROWS, trajring.FIRST if k == 0 else trajring.LAST if k == EPISODE - 1 else trajring.MID, np.int32)
        nst = np.full(ROWS, trajring.LAST if k == EPISODE - 2 else trajring.FIRST if k == EPISODE - 1 else trajring.MID,
                      np.int32)
        disc = np.full(ROWS, 0.0 if k == EPISODE - 2 else 1.0, np.float32)
        writer.add(step_type=st, next_step_type=nst, reward=np.ones(ROWS, np.float32), discount=disc,
                   pixels=np.stack([frame(t, r) for r in range(ROWS)]), action=np.arange(ROWS, dtype=np.int64))


@pytest.fixture
def stacked():
    buf = trajring.Buffer(SPEC, num_envs=ROWS, capacity=CAPACITY, seed=11)
    buf.table("items", "uniform", seed=5)
    w = buf.trajectory_writer({"items": 2})
    fill(buf, w)
    w.close()
    yield buf
    buf.close()


def test_direct_transitions_stacked(stacked):
    with stacked.sample_nstep(64, 1, 1.0, stack={"pixels": K}) as tr:
        obs, nxt = np.asarray(tr["pixels"]), np.asarray(tr["next_pixels"])
        steps, rows = np.asarray(tr["step"]), np.asarray(tr["row"])
        assert obs.shape == (64, K, 2, 2) and nxt.shape == (64, K, 2, 2)
        assert torch.from_dlpack(tr["pixels"]).shape == (64, K, 2, 2)
        edges = 0
        for i in range(64):
            t, r = int(steps[i]), int(rows[i])
            assert np.array_equal(obs[i], stack_at(t, r)), (t, r)
            assert np.array_equal(nxt[i], stack_at(t + 1, r)), (t, r)
            edges += int(not obs[i, 0].any())
        assert edges > 0, "no sample at an episode's start: the zero frames went untested"


def test_direct_sequences_stacked(stacked):
    with stacked.sample_sequences(16, 4, stack={"pixels": K}) as s:
        px = np.asarray(s["pixels"])
        assert px.shape == (16, 4, K, 2, 2)
        for w in px:
            t0, r = decode(w[0, K - 1])
            for j in range(4):
                assert np.array_equal(w[j], stack_at(t0 + j, r)), (t0, j, r)


def test_table_samples_stacked(stacked):
    tab = stacked.table("items")
    with tab.sample_transitions(32, stack={"pixels": K}) as tr:
        obs, nxt, valid = np.asarray(tr["pixels"]), np.asarray(tr["next_pixels"]), np.asarray(tr["valid"])
        assert obs.shape == (32, K, 2, 2)
        for i in range(32):
            if not valid[i]:
                continue
            t, r = decode(obs[i, K - 1])
            assert np.array_equal(obs[i], stack_at(t, r)) and np.array_equal(nxt[i], stack_at(t + 1, r))
    with tab.sample(8, stack={"pixels": K}) as s:
        px = np.asarray(s["pixels"])
        assert px.shape == (8, 2, K, 2, 2)
        assert np.asarray(s["valid"]).tolist() == [1] * 8  # nothing overwritten yet
        for w in px:
            t0, r = decode(w[0, K - 1])
            assert np.array_equal(w[0], stack_at(t0, r))


def test_stacked_into_refills_in_place(stacked):
    batch = stacked.sample_nstep(8, 1, 1.0, stack={"pixels": K})
    view = torch.from_dlpack(batch["pixels"])
    ptr = view.data_ptr()
    stacked.sample_nstep(8, 1, 1.0, stack={"pixels": K}, into=batch)
    assert torch.from_dlpack(batch["pixels"]).data_ptr() == ptr
    steps, rows = np.asarray(batch["step"]), np.asarray(batch["row"])
    for i in range(8):
        assert np.array_equal(view[i].numpy(), stack_at(int(steps[i]), int(rows[i])))
    del view
    batch.release()


def test_restacking_under_live_views_is_busy(stacked):
    """A refill that would stack differently moves the stacked fields' memory:
    while views live it is refused (BusyError), changing nothing, and the
    library stays usable."""
    tab = stacked.table("items")
    calls = [
        (lambda **kw: stacked.sample_nstep(8, 1, 1.0, **kw), "pixels"),
        (lambda **kw: stacked.sample_sequences(4, 2, **kw), "pixels"),
        (lambda **kw: tab.sample(4, **kw), "pixels"),
        (lambda **kw: tab.sample_transitions(4, **kw), "pixels"),
    ]
    for sample, field in calls:
        for first, then in [(None, {"pixels": K}), ({"pixels": K}, None), ({"pixels": K}, {"pixels": 2})]:
            r = sample(stack=first)
            view = torch.from_dlpack(r[field])
            before = view.clone()
            with pytest.raises(trajring.BusyError):
                sample(stack=then, into=r)
            assert torch.equal(view, before)
            sample(stack=first, into=r)  # the same stacking refills in place
            del view
            sample(stack=then, into=r)  # no live views: any stacking
            if then is not None:
                assert np.asarray(r[field]).shape[-3] == then["pixels"]  # [..., K, 2, 2]
            r.release()


@pytest.mark.parametrize("stack, exc", [
    ({"nope": 2}, trajring.UnknownFieldError),
    ({"action": 2}, trajring.ConfigError),  # not an observation
    ({"pixels": 0}, trajring.ConfigError),
    ({"pixels": CAPACITY + 1}, trajring.ConfigError),
    ({"pixels": 2.5}, trajring.ConfigError),
    (["pixels"], trajring.InvalidArgumentError),
])
def test_bad_stack_raises_and_draws_nothing(stack, exc):
    bufs = []
    for _ in range(2):
        b = trajring.Buffer(SPEC, num_envs=ROWS, capacity=CAPACITY, seed=11)
        w = b.writer()
        fill(b, w)
        w.close()
        bufs.append(b)
    with pytest.raises(exc):
        bufs[0].sample_nstep(8, 1, 1.0, stack=stack)
    with pytest.raises(exc):
        bufs[0].sample_sequences(4, 2, stack=stack)
    # The failed calls drew nothing: the next samples are the twin's.
    with bufs[0].sample_nstep(8, 1, 1.0) as a, bufs[1].sample_nstep(8, 1, 1.0) as b:
        assert np.array_equal(np.asarray(a["step"]), np.asarray(b["step"]))
        assert np.array_equal(np.asarray(a["row"]), np.asarray(b["row"]))
    for b in bufs:
        b.close()
