"""DQN on CartPole-v1 in PyTorch, on trajring: batched Go envs collect, a prioritized table
replays zero-copy, priorities go back after every gradient step.

CleanRL's DQN structure (one file, an MLP Q-network, Adam, a target network, a linear
epsilon schedule) with RL Baselines3 Zoo's tuned CartPole-v1 settings, the ones
``trajring train`` uses: 50k env steps, MLP 256x256, lr 2.3e-3 falling linearly to 0,
batch 64, buffer 100k, learning starts at 1000, gamma 0.99, target update every 10 env
steps, train every 256 env steps with 128 gradient steps, epsilon 1 -> 0.04 over the first
16%, double DQN, Huber loss, gradient norm clipped at 10, prioritized replay (alpha 0.6,
beta 0.4 annealed to 1). As RL Zoo's EvalCallback: a greedy evaluation over 100 episodes
every 2500 env steps keeps the best network, and the run stops once one reaches 500.

    make python
    PYTHONPATH=python /usr/bin/python3 python/examples/dqn_cartpole.py --seed 1

It ends, as ``trajring train`` does, with the line
``mean return over 100 greedy episodes: X (best, found at N env steps)``.
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import time

import numpy as np
import torch
from torch import nn

import trajring


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=50_000)
    p.add_argument("--learning-rate", type=float, default=2.3e-3)
    p.add_argument("--buffer-size", type=int, default=100_000)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--target-network-frequency", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--start-e", type=float, default=1.0)
    p.add_argument("--end-e", type=float, default=0.04)
    p.add_argument("--exploration-fraction", type=float, default=0.16)
    p.add_argument("--learning-starts", type=int, default=1000)
    p.add_argument("--train-frequency", type=int, default=256)
    p.add_argument("--gradient-steps", type=int, default=128)
    p.add_argument("--alpha", type=float, default=0.6)
    p.add_argument("--beta", type=float, default=0.4)
    p.add_argument("--max-grad-norm", type=float, default=10.0)
    p.add_argument("--eval-every", type=int, default=2500)
    p.add_argument("--eval-episodes", type=int, default=100)
    p.add_argument("--stop-return", type=float, default=500.0)
    p.add_argument("--metrics", type=str, default="", help="write one JSON line per training round here")
    return p.parse_args()


class QNetwork(nn.Module):
    def __init__(self, obs_dim: int, n_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(nn.Linear(obs_dim, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                                     nn.Linear(256, n_actions))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.network(x)


def linear_schedule(start_e: float, end_e: float, duration: float, t: int) -> float:
    return max(end_e, start_e + (end_e - start_e) * t / duration)


@torch.no_grad()
def evaluate(q: QNetwork, episodes: int, seed: int) -> float:
    """Mean return of q's greedy policy over `episodes` episodes, one per row of a batched env."""
    env = trajring.make("CartPole-v1", num_envs=episodes, seed=seed)
    obs, _ = env.reset()
    returns = np.zeros(episodes)
    done = np.zeros(episodes, bool)
    while not done.all():
        actions = q(torch.from_numpy(obs)).argmax(1).numpy()
        obs, rew, term, trunc, _ = env.step(actions)
        returns += np.where(done, 0, rew)
        done |= term | trunc
    env.close()
    return float(returns.mean())


def main() -> None:
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    start = time.time()

    env = trajring.make("CartPole-v1", num_envs=1, seed=args.seed)
    env.single_action_space.seed(args.seed)  # the epsilon-greedy draws
    n_actions = env.single_action_space.n
    obs_dim = env.single_observation_space.shape[0]
    buf = trajring.Buffer(env.buffer_spec(), num_envs=1, capacity=args.buffer_size, seed=args.seed)
    table = buf.table("replay", "prioritized", alpha=args.alpha, beta=args.beta, seed=args.seed)
    writer = buf.trajectory_writer({"replay": 2})  # one-step transitions (TF-Agents' DQN recipe)

    q = QNetwork(obs_dim, n_actions)
    optimizer = torch.optim.Adam(q.parameters(), lr=args.learning_rate)
    target = copy.deepcopy(q)
    best, best_return, best_step = copy.deepcopy(q), -np.inf, 0
    metrics = open(args.metrics, "w") if args.metrics else None

    batch = None  # one result refilled in place; its torch views are made once
    obs, _ = env.reset()
    step, last_target, next_eval, grad_steps, train_secs, collect_secs = 0, 0, args.eval_every, 0, 0.0, 0.0
    stopped = False
    while step < args.total_timesteps and not stopped:
        # Collect one round of train_frequency env steps.
        t0 = time.time()
        for _ in range(min(args.train_frequency, args.total_timesteps - step)):
            eps = linear_schedule(args.start_e, args.end_e, args.exploration_fraction * args.total_timesteps, step)
            if random.random() < eps:
                action = np.array([env.single_action_space.sample()])
            else:
                with torch.no_grad():
                    action = q(torch.from_numpy(obs)).argmax(1).numpy()
            obs, _, _, _, _ = env.step(action, writer=writer)
            step += 1
            if step // args.target_network_frequency != last_target // args.target_network_frequency:
                target.load_state_dict(q.state_dict())
            last_target = step
        writer.flush()
        collect_secs += time.time() - t0

        # Learn: gradient_steps steps on prioritized transitions.
        frac = min(step / args.total_timesteps, 1.0)
        for g in optimizer.param_groups:
            g["lr"] = args.learning_rate * (1 - frac)
        loss_sum = 0.0
        if step > args.learning_starts:
            table.set_beta(min(args.beta + (1 - args.beta) * frac, 1.0))
            t0 = time.time()
            for _ in range(args.gradient_steps):
                batch = table.sample_transitions(args.batch_size, into=batch)
                v = batch.torch()
                with torch.no_grad():
                    next_a = q(v["next_observation"]).argmax(1, keepdim=True)          # double DQN
                    next_q = target(v["next_observation"]).gather(1, next_a).squeeze(1)
                    y = v["reward"] + v["discount"] * args.gamma * next_q
                pred = q(v["observation"]).gather(1, v["action"].unsqueeze(1)).squeeze(1)
                td = y - pred
                w = v["weight"].float() * v["valid"].float()
                loss = (w * nn.functional.smooth_l1_loss(pred, y, reduction="none")).mean()
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(q.parameters(), args.max_grad_norm)
                optimizer.step()
                table.update_priorities(v["key"], td.detach().abs() + 1e-6)
                loss_sum += loss.item()
            grad_steps += args.gradient_steps
            train_secs += time.time() - t0

        record = {"env_steps": step, "loss": loss_sum / args.gradient_steps, "epsilon": eps}
        if step >= next_eval or step >= args.total_timesteps:
            next_eval += args.eval_every
            ret = evaluate(q, args.eval_episodes, args.seed + 1_000_003 + step)
            record["eval_return"] = ret
            if ret > best_return:
                best, best_return, best_step = copy.deepcopy(q), ret, step
            print(f"env steps {step:6d}  eval return {ret:6.1f}  best {best_return:6.1f}  "
                  f"({time.time() - start:.0f} s)", flush=True)
            stopped = args.stop_return > 0 and ret >= args.stop_return
        if metrics:
            metrics.write(json.dumps(record) + "\n")

    if batch is not None:
        batch.release()
    elapsed = time.time() - start
    seed = args.seed + 7_777_777
    last = evaluate(q, args.eval_episodes, seed)
    final_best = evaluate(best, args.eval_episodes, seed)
    if last > final_best:
        final_best, best_step = last, step
    print(f"mean return over {args.eval_episodes} greedy episodes of the last network: {last:.1f}")
    print(f"env steps/s {step / elapsed:.0f} over the run, {step / max(collect_secs, 1e-9):.0f} collecting; "
          f"gradient steps/s {grad_steps / max(train_secs, 1e-9):.0f}; wall {elapsed:.0f} s")
    print(f"mean return over {args.eval_episodes} greedy episodes: {final_best:.1f} (best, found at {best_step} env steps)")
    if metrics:
        metrics.close()
    buf.close()
    env.close()


if __name__ == "__main__":
    main()
