"""Shared fixtures: small buffers filled with known values."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import trajring  # noqa: E402

SPEC = {"obs": {"shape": (3,), "dtype": "float32"}, "action": {"dtype": "int64"}}


def step_values(t: int, rows: int) -> dict:
    """The fields of step t of every row: obs = [t, row, t*10+row], action = t*100+row."""
    r = np.arange(rows)
    obs = np.stack([np.full(rows, t), r, t * 10 + r], axis=1).astype(np.float32)
    return {"obs": obs, "action": (t * 100 + r).astype(np.int64)}


def add_steps(writer: trajring.Writer, steps: int, rows: int, episode: int = 0, start: int = 0) -> None:
    """Add steps start..steps-1 to every row: Mid steps (First at t=0), episodes of `episode` steps when > 0
    (Last at the episode's final step, with discount 0)."""
    for t in range(start, steps):
        st = np.full(rows, trajring.MID, np.int32)
        nst = np.full(rows, trajring.MID, np.int32)
        disc = np.ones(rows, np.float32)
        if episode:
            k = t % episode
            if k == 0:
                st[:] = trajring.FIRST
            if k == episode - 1:
                st[:] = trajring.LAST
            if k == episode - 2:
                nst[:] = trajring.LAST
                disc[:] = 0
            if k == episode - 1:
                nst[:] = trajring.FIRST
        elif t == 0:
            st[:] = trajring.FIRST
        writer.add(step_type=st, next_step_type=nst, reward=np.full(rows, t, np.float32), discount=disc,
                   **step_values(t, rows))


@pytest.fixture
def buf():
    b = trajring.Buffer(SPEC, num_envs=2, capacity=16, seed=7)
    yield b
    b.close()


@pytest.fixture
def filled(buf):
    w = buf.writer()
    add_steps(w, 10, 2)
    w.close()
    return buf
