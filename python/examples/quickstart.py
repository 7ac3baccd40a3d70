"""trajring from Python in one page: fill a buffer, sample a prioritized table
zero-copy into PyTorch, write priorities back.

Run from the repository root after `make python`:

    PYTHONPATH=python /usr/bin/python3 python/examples/quickstart.py
"""

from __future__ import annotations

import numpy as np
import torch

import trajring


def main() -> None:
    num_envs = 4
    buf = trajring.Buffer({"obs": {"shape": (4,), "dtype": "float32"}, "action": {"dtype": "int64"}},
                          num_envs=num_envs, capacity=1000, seed=1)
    table = buf.table("replay", "prioritized", alpha=0.6, beta=0.4, seed=2)
    writer = buf.trajectory_writer({"replay": 2})  # one-step transitions, as TF-Agents' DQN collects

    rng = np.random.default_rng(0)
    for t in range(100):
        first = t % 20 == 0
        writer.add(
            step_type=np.full(num_envs, trajring.FIRST if first else trajring.MID, np.int32),
            next_step_type=np.full(num_envs, trajring.MID, np.int32),
            reward=np.ones(num_envs, np.float32),
            discount=np.ones(num_envs, np.float32),
            obs=rng.standard_normal((num_envs, 4), dtype=np.float32),
            action=rng.integers(0, 2, num_envs),
        )
    writer.flush()

    batch = table.sample_transitions(32)
    obs = torch.from_dlpack(batch["obs"])  # trajring's memory, no copy
    assert obs.data_ptr() == batch["obs"].data_ptr
    td = torch.rand(32)  # a learner's |TD errors|
    table.update_priorities(batch["key"], td)
    print(f"table holds {len(table)} items; sampled obs {tuple(obs.shape)}, "
          f"weights in [{float(np.min(batch['weight'])):.3f}, 1]")
    batch.release()
    buf.close()


if __name__ == "__main__":
    main()
