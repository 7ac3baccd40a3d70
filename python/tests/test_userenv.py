"""A user's own Go environment, registered in a shared library built from a main package
(python/examples/goenv), driven from Python; NaN observations are refused."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")

SCRIPT = textwrap.dedent("""
    import numpy as np, trajring
    env = trajring.make("PointMass-v0", num_envs=4, seed=1)
    assert env.single_action_space.shape == (1,) and env.single_observation_space.shape == (2,)
    buf = trajring.Buffer(env.buffer_spec(), num_envs=4, capacity=64)
    w = buf.writer()
    obs, _ = env.reset()
    assert obs.shape == (4, 2) and (np.abs(obs[:, 0]) <= 1).all() and (obs[:, 1] == 0).all()
    obs2, rew, term, trunc, _ = env.step(np.full((4, 1), 0.5, np.float32), writer=w)
    assert np.allclose(obs2[:, 1], 0.05) and np.allclose(rew, -obs2[:, 0] ** 2)
    assert buf.size == 4
    bad = np.full((4, 1), 0.5, np.float32)
    bad[2, 0] = np.nan
    try:
        env.step(bad, writer=w)
        raise SystemExit("a NaN observation was not refused")
    except trajring.EnvError as e:
        assert "not finite" in str(e), e
    assert buf.size == 4, "nothing may be written"
    try:
        env.step(np.zeros((4, 1), np.float32), writer=w)
        raise SystemExit("stepping after the failure did not ask for a reset")
    except trajring.EnvError as e:
        assert "reset" in str(e), e
    env.reset()
    env.step(np.zeros((4, 1), np.float32), writer=w)
    assert buf.size == 8
    assert trajring.make("CartPole-v1").num_envs == 1  # the built-in envs are there too
    print("ok")
""")


def test_user_env_library(tmp_path):
    go = shutil.which("go") or "/usr/local/go/bin/go"
    if not os.path.exists(go):
        pytest.skip("no Go toolchain to build the example library")
    lib = tmp_path / "libpointmass.so"
    subprocess.run([go, "build", "-buildmode=c-shared", "-o", str(lib), "./python/examples/goenv"], cwd=ROOT,
                   check=True, timeout=900)
    env = dict(os.environ, TRAJRING_LIBRARY=str(lib), PYTHONPATH=os.path.join(ROOT, "python"))
    out = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr + out.stdout
