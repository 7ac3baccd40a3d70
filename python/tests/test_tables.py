"""Tables from Python: every selector, priorities, rate limiters, observers."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import trajring
from conftest import add_steps


def starts(result) -> list[int]:
    return np.asarray(result["obs"])[:, 0, 0].astype(int).tolist()


def test_fifo_lifo_heaps(filled):
    for sel, prios, want in [("fifo", [1, 1, 1], [1, 1]), ("lifo", [1, 1, 1], [3, 3]),
                             ("min_heap", [3, 1, 2], [2, 2]), ("max_heap", [3, 1, 2], [1, 1])]:
        t = filled.table(sel, sel)
        for start, p in zip([1, 2, 3], prios):
            t.insert(0, start, 2, priority=p)
        with t.sample(2) as s:
            assert starts(s) == want, sel


def test_without_replacement_covers_every_item(filled):
    t = filled.table("wr", "without_replacement", seed=3)
    for start in range(6):
        t.insert(1, start, 1)
    seen = []
    for _ in range(3):
        with t.sample(2) as s:
            seen += starts(s)
    assert sorted(seen) == list(range(6))


def test_prioritized_priorities_and_weights(filled):
    t = filled.table("per", "prioritized", alpha=1.0, beta=1.0, seed=1)
    keys = [t.insert(0, s, 1, priority=1.0) for s in range(4)]
    t.update_priorities(np.array(keys[:1]), np.array([0.0]))  # never drawn again
    t.update_priorities(keys[1:2], np.array([2.0], np.float32))
    with t.sample(256) as s:
        got = starts(s)
        assert 0 not in got
        probs, weights = np.asarray(s["probability"]), np.asarray(s["weight"])
        for st, p, w in zip(got, probs, weights):
            want_p = 2 / 4 if st == 1 else 1 / 4
            assert p == pytest.approx(want_p)
            # (N*P)^-b / max: the smallest probability (1/4) has weight 1.
            assert w == pytest.approx((1 / 4) / want_p)
        assert got.count(1) > 90  # P = 1/2 over 256 draws
    with pytest.raises(trajring.UnknownKeyError):
        t.update_priorities([keys[0], 12345], [1.0, 1.0])
    with pytest.raises(trajring.InvalidArgumentError):
        t.update_priorities([keys[0]], [float("nan")])
    with pytest.raises(trajring.InvalidArgumentError):
        t.update_priorities(keys, [1.0])
    # Keys that are not integers would name other items once truncated.
    for bad in (np.array([keys[0] + 0.5]), [float(keys[0])], np.array([True]), torch_or_numpy_floats(keys[:1])):
        with pytest.raises(trajring.DTypeError):
            t.update_priorities(bad, [1.0])
        with pytest.raises(trajring.DTypeError):
            t.delete(bad)
    assert len(t) == 4
    # The failed updates changed nothing: item 0 is still never drawn.
    with t.sample(64) as s:
        assert 0 not in starts(s)
    # Integer keys of any width are taken.
    t.update_priorities(np.array(keys[1:2], np.uint64), [1.0])
    t.delete(np.array(keys[3:], np.uint64))
    t.delete(np.array([], np.int32))
    assert len(t) == 3


def torch_or_numpy_floats(keys: list[int]):
    """keys as a float tensor (torch when installed, else NumPy)."""
    try:
        import torch
    except ImportError:
        return np.array(keys, np.float32)
    return torch.tensor(keys, dtype=torch.float64)


def test_table_errors(filled):
    with pytest.raises(trajring.ConfigError):
        filled.table("x", "best")
    with pytest.raises(trajring.ConfigError):
        filled.table("x", "uniform", min_size=1, samples_per_insert=2.0, error_buffer=0.5)
    t = filled.table("u")
    with pytest.raises(trajring.TableExistsError):
        filled.table("u", "fifo")
    assert filled.table("u").name == "u"
    with pytest.raises(trajring.EmptyError):
        t.sample(1)
    with pytest.raises(trajring.ItemError):
        t.insert(0, 100, 2)
    with pytest.raises(trajring.InvalidArgumentError):
        t.sample(0)
    assert len(t) == 0


def test_timeout_zero_is_a_non_blocking_try(filled):
    """timeout=0 serves what needs no wait (Reverb's timeout 0) and raises
    RateLimitedError at once for what would wait, changing nothing."""
    t = filled.table("try", min_size=2, timeout=None)
    keys = {t.insert(0, 0, 1, timeout=0)}
    start = time.monotonic()
    with pytest.raises(trajring.RateLimitedError):
        t.sample(1, timeout=0)
    assert time.monotonic() - start < 1
    assert len(t) == 1
    keys.add(t.insert(0, 1, 1, timeout=0))
    with t.sample(3, timeout=0) as s:
        assert s.n == 3
        assert set(s["key"].numpy().tolist()) <= keys
    batch = t.sample(2)
    assert t.sample(2, into=batch, timeout=0) is batch
    u = filled.table("try-unlimited", "uniform")
    k = u.insert(0, 2, 1, timeout=0)
    with u.sample(1, timeout=0) as s:
        assert s["key"].numpy().tolist() == [k]


def test_rate_limiter_timeout_and_interrupt(filled):
    t = filled.table("limited", min_size=2, timeout=None)
    t.insert(0, 0, 1)
    start = time.monotonic()
    with pytest.raises(trajring.RateLimitedError):
        t.sample(1, timeout=0.25)
    assert 0.2 < time.monotonic() - start < 2
    # Ctrl-C during an unbounded wait raises KeyboardInterrupt promptly.
    timer = threading.Timer(0.3, lambda: os.kill(os.getpid(), signal.SIGINT))
    timer.start()
    start = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        t.sample(1)
    assert time.monotonic() - start < 2
    # A waiting sampler is served as soon as an insert makes the table ready.
    threading.Timer(0.2, lambda: t.insert(0, 1, 1)).start()
    with t.sample(1, timeout=5) as s:
        assert s.n == 1


def test_refill_waits_past_its_first_slice(filled):
    """The hot loop's refill (``into=``, no timeout) makes one call with a
    100 ms wait slice; one that runs out goes on waiting (and stays
    interruptible) until an insert serves it, then refills in place."""
    t = filled.table("limited_into", min_size=2, timeout=None)
    t.insert(0, 0, 1)
    t.insert(0, 1, 1)
    batch = t.sample(1)
    tr = t.sample_transitions(1)
    t.delete(np.asarray(batch["key"]))
    for refill, res in ((lambda: t.sample(1, into=batch), batch),
                        (lambda: t.sample_transitions(1, into=tr), tr)):
        assert len(t) == 1
        timer = threading.Timer(0.35, lambda: t.insert(0, 2, 1))
        timer.start()
        start = time.monotonic()
        assert refill() is res
        assert 0.3 < time.monotonic() - start < 5
        timer.join()
        t.delete(np.asarray(res["key"]))


def test_trajectory_writer_makes_transitions(buf):
    t = buf.table("replay", "uniform", seed=5)
    w = buf.trajectory_writer({"replay": 2})
    add_steps(w, 12, 2, episode=4)  # episodes F M M L (L the boundary step)
    w.flush()
    # Per row and episode: windows [F M] [M M] [M L] -> 3 items, the boundary step starts none.
    assert len(t) == 3 * 3 * 2
    with t.sample_transitions(32) as tr:
        steps, done = np.asarray(tr["step"]), np.asarray(tr["is_done"])
        assert np.asarray(tr["valid"]).all()
        for s, d in zip(steps, done):
            assert s % 4 != 3
            assert d == (1 if s % 4 == 2 else 0)  # the episode's last transition terminates
    with t.sample(4) as s:
        assert s.length == 2 and np.asarray(s["mask"]).all()
    w.close()


def test_sequence_and_episode_writers(buf):
    buf.table("seq")
    buf.table("ep")
    ws = buf.sequence_writer(["seq"], 3, stride=2, rows=[0])
    we = buf.episode_writer(["ep"], 8, rows=[1])
    for t in range(8):
        st = 0 if t % 4 == 0 else (2 if t % 4 == 3 else 1)
        nst = 0 if t % 4 == 3 else (2 if t % 4 == 2 else 1)
        for w, r in ((ws, 0), (we, 1)):
            w.add(step_type=[st], next_step_type=[nst], reward=[1.0], discount=[1.0],
                  obs=np.full((1, 3), t, np.float32), action=[t])
    ws.flush()
    we.flush()
    # Windows of 3 every 2 steps over 8 steps: starts 0, 2, 4.
    assert len(buf.table("seq")) == 3
    assert len(buf.table("ep")) == 2
    with buf.table("ep").sample(2) as s:
        assert s.length == 4
    with pytest.raises(trajring.RowsError):
        ws.add(step_type=[1], next_step_type=[1], reward=[1.0], discount=[1.0], rows=[0],
               obs=np.zeros((1, 3), np.float32), action=[0])
    with pytest.raises(trajring.ConfigError):
        buf.sequence_writer(["seq"], 3, tile_end_of_episodes=True, rows=[0])
