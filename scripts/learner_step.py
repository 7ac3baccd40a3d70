#!/usr/bin/python3
"""learner_step.py times PyTorch doing the gradient step of agents/dqn.

The step is the one agents/dqn's BenchmarkTrainStep times with
DefaultConfig: an MLP 4->256->256->2 (ReLU), batch 64, double DQN targets
(online argmax, target value) from n-step rewards and discounts, the Huber
loss (delta 1) weighted by importance weights and averaged, the TD errors
copied out for priorities, the global gradient norm clipped to 10 and one
Adam step (lr 2.3e-3). The batch is fixed and random, as in the Go
benchmark. It prints one line per round: "torch <threads> <ms per step>
<CPU ms per step>", the CPU time of all the process's threads.

Usage: learner_step.py THREADS ROUNDS STEPS. Run it with
OPENBLAS_NUM_THREADS=THREADS (and OMP_NUM_THREADS) set too, since OpenBLAS
reads its thread count when it is loaded.
"""
import sys
import time

import torch
import torch.nn as nn


def main():
    threads, rounds, steps = (int(a) for a in sys.argv[1:4])
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    obs_dim, actions, batch, hidden = 4, 2, 64, 256

    def mlp():
        return nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, actions))

    online, target = mlp(), mlp()
    target.load_state_dict(online.state_dict())
    opt = torch.optim.Adam(online.parameters(), lr=2.3e-3)
    g = torch.Generator().manual_seed(1)
    obs = torch.randn(batch, obs_dim, generator=g)
    next_obs = torch.randn(batch, obs_dim, generator=g)
    act = torch.randint(0, actions, (batch, 1), generator=g)
    reward = 4 * torch.randn(batch, generator=g)
    discount = torch.rand(batch, generator=g)
    weights = 0.2 + torch.rand(batch, generator=g)
    weights[0] = 0

    def step():
        with torch.no_grad():
            best = online(next_obs).argmax(dim=1, keepdim=True)
            y = reward + discount * target(next_obs).gather(1, best).squeeze(1)
        q = online(obs).gather(1, act).squeeze(1)
        td = q - y
        loss = (weights * nn.functional.huber_loss(q, y, reduction="none", delta=1.0)).mean()
        opt.zero_grad(set_to_none=False)
        loss.backward()
        nn.utils.clip_grad_norm_(online.parameters(), 10.0)
        opt.step()
        return td.detach().numpy().copy(), loss.item()

    for _ in range(20):  # warm-up: allocator, OpenBLAS buffers
        step()
    for _ in range(rounds):
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(steps):
            step()
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        print(f"torch {threads} {dt / steps * 1e3:.4f} {dc / steps * 1e3:.4f}", flush=True)


if __name__ == "__main__":
    main()
