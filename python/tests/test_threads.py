"""Python threads adding, sampling and updating at once; fork after load."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

import trajring
from conftest import step_values


def test_concurrent_writers_samplers_and_updates():
    buf = trajring.Buffer({"obs": {"shape": (3,)}, "action": {"dtype": "int64"}}, num_envs=4, capacity=512, seed=1)
    table = buf.table("per", "prioritized", alpha=0.6, beta=0.4, seed=2)
    errors: list[BaseException] = []
    stop = threading.Event()

    def collect(rows: list[int]) -> None:
        try:
            w = buf.trajectory_writer({"per": 2}, rows=rows)
            for t in range(400):
                v = step_values(t, 4)
                w.add(step_type=[0 if t == 0 else 1] * 2, next_step_type=[1, 1], reward=[1.0, 1.0],
                      discount=[1.0, 1.0], obs=np.ascontiguousarray(v["obs"][rows]), action=v["action"][rows])
            w.close()
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def learn() -> None:
        try:
            batch = None
            while not stop.is_set():
                if len(table) < 32:
                    continue
                batch = table.sample_transitions(32, into=batch)
                obs, nxt = np.asarray(batch["obs"]), np.asarray(batch["next_obs"])
                assert (nxt[:, 0] == obs[:, 0] + 1).all() and (obs[:, 1] == nxt[:, 1]).all()
                table.update_priorities(batch["key"], np.abs(obs[:, 0]) % 5 + 0.1)
            if batch is not None:
                batch.release()
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    writers = [threading.Thread(target=collect, args=(rows,)) for rows in ([0, 1], [2, 3])]
    learners = [threading.Thread(target=learn) for _ in range(2)]
    for th in writers + learners:
        th.start()
    for th in writers:
        th.join()
    stop.set()
    for th in learners:
        th.join()
    assert not errors, errors
    assert buf.size == 4 * 400
    buf.close()


def test_shared_writer_and_result_from_threads(filled):
    # A writer and a result shared by threads: calls are serialised, nothing crashes.
    w = filled.writer()
    res = filled.sample_transitions(8)
    def hammer() -> None:
        for t in range(50):
            try:
                v = step_values(10 + t, 2)
                w.add(step_type=[1, 1], next_step_type=[1, 1], reward=[0, 0], discount=[1, 1], **v)
            except trajring.Error:
                pass
            filled.sample_transitions(8, into=res)
            np.asarray(res["obs"]).sum()
    ths = [threading.Thread(target=hammer) for _ in range(4)]
    for th in ths:
        th.start()
    for th in ths:
        th.join()
    res.release()
    w.close()


@pytest.mark.skipif(sys.platform != "linux", reason="fork semantics checked on Linux")
def test_fork_after_load_raises_in_child(filled):
    r, wfd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: must not hang, must raise ForkError
        os.close(r)
        code = 3
        try:
            filled.sample_transitions(1)
        except trajring.ForkError:
            code = 0
        except BaseException:
            code = 2
        os.write(wfd, bytes([code]))
        os._exit(code)
    os.close(wfd)
    _, status = os.waitpid(pid, 0)
    assert os.read(r, 1) == b"\x00" and os.WEXITSTATUS(status) == 0
    # The parent is unaffected.
    with filled.sample_transitions(2) as tr:
        assert tr.n == 2
