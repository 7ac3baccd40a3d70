"""Python's samples equal the Go API's byte for byte (same steps, same seeds)."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess

import numpy as np
import pytest

import trajring
from conftest import add_steps

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")


def go_samples() -> dict[str, bytes]:
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        pytest.skip("no Go toolchain to run the Go half (python/tests/gosample)")
    out = subprocess.run([go, "run", "./python/tests/gosample"], cwd=ROOT, check=True, capture_output=True,
                         timeout=600).stdout
    return {k: base64.b64decode(v) if v else b"" for k, v in json.loads(out).items()}


def test_python_samples_equal_go():
    want = go_samples()
    buf = trajring.Buffer({"obs": {"shape": (3,)}, "action": {"dtype": "int64"}}, num_envs=3, capacity=32, seed=11)
    table = buf.table("replay", "prioritized", alpha=0.6, beta=0.4, seed=9)
    w = buf.trajectory_writer({"replay": 2})
    add_steps(w, 20, 3, episode=5)
    w.flush()
    got = {}
    for i in range(3):
        with table.sample_transitions(16) as tt:
            for name in ("obs", "next_obs", "action", "reward", "discount", "is_done", "key", "weight"):
                got[f"table{i}/{name}"] = tt[name].tobytes()
            keys = np.asarray(tt["key"]).copy()
        table.update_priorities(keys, (keys.view(np.uint64) % 7).astype(np.float64) + 0.5)
    with buf.sample_transitions(16) as tr:
        for name in ("obs", "next_obs", "step"):
            got[f"direct/{name}"] = tr[name].tobytes()
    with buf.sample_sequences(8, 4) as seq:
        for name in ("obs", "step_type", "mask"):
            got[f"seq/{name}"] = seq[name].tobytes()
    with buf.sample_nstep(8, 3, 0.9) as ns:
        for name in ("reward", "discount", "next_obs"):
            got[f"nstep/{name}"] = ns[name].tobytes()
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k] == want[k], k
    buf.close()
