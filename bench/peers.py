#!/usr/bin/env python3
"""Peers of trajring's benchmark: NumPy fancy indexing and PyTorch
index_select over the same layout as the Go scenarios.

A long-lived worker: it first writes a header line {"versions": {...},
"skipped": [{"what", "reason"}], "env": {...}} on stdout, then reads one
JSON request per line on stdin and answers each with one line:
{"prepare": job, "warmup"} builds the job's arrays (cached across jobs of
the same layout) and operations, warms them up and answers {"id",
"ready", "peers": [names]}; {"turn": peer, "budget_s", "min_ops",
"max_ops"} runs one turn of that peer of the prepared job and answers
{"id", "peer", "ns": [...], "spent_ns"} (the Go runner gives these turns
in between its own contestants' turns); {"drop": true} frees the cached
arrays. Progress goes to stderr. Each job says
the layout (fields with dtype and shape, plus the built-in columns), the
number of rows and steps per row, the operation and its size. Arrays are
laid out [rows * capacity, ...] per field, as trajring's rings are, and
written once so that no page is the shared zero page.

Operations (each timed per call; with "draws", the job's file of int64 ring
steps, n_draws operations of b each, the peers replay trajring's own draws
and time no drawing; without, they draw as a Python buffer's sample()
does, drawing included):
  windows      gather B windows of L steps (L=1: rows) from every column;
               with episode_aware, cut each window after its episode's
               boundary step, zero the rest and build the mask
  transitions  obs[t], obs[t+1], other fields at t, reward, discount and
               done from next_step_type (SB3's ReplayBuffer._get_samples)
  scatter      write W rows at each row's cursor (add)
  export       every transition, time-major then env (allExperiences)
  stacked      transitions whose observations are stacked over the last k
               frames ("k"): frames t-k+1..t and t-k+2..t+1 of each draw's
               row gathered by fancy indexing (slots wrapping in the row's
               ring), frames before an episode's first step (a later frame
               of the window is First) zeroed, the other fields at t
"""
import json
import os
import sys
import time

DTYPES = {"float32": "float32", "float64": "float64", "int32": "int32",
          "int64": "int64", "uint8": "uint8", "bool": "bool"}


def log(msg):
    print("peers.py: " + msg, file=sys.stderr, flush=True)


def build(np, job):
    n = job["num_envs"] * job["capacity"]
    cols = {}
    for f in job["fields"]:
        a = np.empty((n,) + tuple(f["shape"]), dtype=DTYPES[f["dtype"]])
        a.fill(1)
        cols[f["name"]] = a
    t = np.arange(job["capacity"], dtype=np.int64)
    phase = (t[None, :] + 7 * np.arange(job["num_envs"], dtype=np.int64)[:, None]) % job["episode_len"]
    st = np.where(phase == 0, 0, np.where(phase == job["episode_len"] - 1, 2, 1)).astype(np.int32).ravel()
    nphase = (phase + 1) % job["episode_len"]
    nst = np.where(nphase == 0, 0, np.where(nphase == job["episode_len"] - 1, 2, 1)).astype(np.int32).ravel()
    cols["step_type"] = st
    cols["next_step_type"] = nst
    cols["reward"] = np.ones(n, dtype=np.float32)
    cols["discount"] = np.ones(n, dtype=np.float32)
    return cols


def draw(np, rng, job, b, l):
    rows = rng.integers(0, job["num_envs"], size=b)
    starts = rng.integers(0, job["capacity"] - l + 1, size=b)
    return rows * job["capacity"] + starts


def drawer(np, rng, job, b, l, path_key="draws"):
    """Returns a function giving the next operation's ring steps: the
    job's replayed draws when it has a draws file, fresh ones otherwise."""
    path = job.get(path_key)
    if not path:
        if path_key != "draws":
            return None
        return lambda: draw(np, rng, job, b, l)
    d = np.fromfile(path, dtype=np.int64).reshape(job["n_draws"], b)
    state = {"k": -1}

    def nxt():
        state["k"] = (state["k"] + 1) % len(d)
        return d[state["k"]]
    return nxt


def numpy_op(np, rng, job, cols):
    kind, b, l = job["kind"], job["b"], job["l"]
    obs_names = [f["name"] for f in job["fields"] if f.get("role") == "observation"]
    if kind == "windows":
        ar = np.arange(l, dtype=np.int64)
        nxt = drawer(np, rng, job, b, l)

        def op():
            idx = nxt()
            if l > 1:
                idx = (idx[:, None] + ar[None, :]).ravel()
            out = {k: v[idx] for k, v in cols.items()}
            if job.get("episode_aware"):
                ends = (out["step_type"].reshape(b, l) == 2)
                after = (np.cumsum(ends, axis=1) - ends) > 0
                mask = ~after
                pad = after.ravel()
                for k, v in out.items():
                    v[pad] = 0
                out["mask"] = mask
            else:
                out["mask"] = np.ones((b, l), dtype=bool)
            return out
        return op
    if kind == "transitions":
        nxt = drawer(np, rng, job, b, 2)
        nxt2 = drawer(np, rng, job, b, 2, "next")
        def op():
            idx = nxt()
            nidx = nxt2() if nxt2 else idx + 1
            out = {k: v[idx] for k, v in cols.items() if k not in ("step_type",)}
            for k in obs_names:
                out["next_" + k] = cols[k][nidx]
            out["done"] = (out.pop("next_step_type") == 2)
            return out
        return op
    if kind == "stacked":
        k, cap = job["k"], job["capacity"]
        nxt = drawer(np, rng, job, b, 2)
        nxt2 = drawer(np, rng, job, b, 2, "next")
        back = np.arange(-(k - 1), 1, dtype=np.int64)
        st = cols["step_type"]

        def windows(base):
            row, slot = base // cap, base % cap
            w = row[:, None] * cap + (slot[:, None] + back[None, :]) % cap
            first = st[w[:, 1:]] == 0
            zero = np.zeros((b, k), dtype=bool)
            zero[:, :-1] = np.flip(np.cumsum(np.flip(first, 1), 1), 1) > 0
            return w.ravel(), zero

        def op():
            idx = nxt()
            nidx = nxt2() if nxt2 else idx + 1
            out = {k2: v[idx] for k2, v in cols.items() if k2 != "step_type" and k2 not in obs_names}
            for prefix, base in (("", idx), ("next_", nidx)):
                w, zero = windows(base)
                for name in obs_names:
                    fr = cols[name][w].reshape((b, k) + cols[name].shape[1:])
                    fr[zero] = 0
                    out[prefix + name] = fr
            out["done"] = (out.pop("next_step_type") == 2)
            return out
        return op
    if kind == "scatter":
        w = b
        src = {k: v[:w].copy() for k, v in cols.items()}
        state = {"t": 0}

        def op():
            t = state["t"] % job["capacity"]
            state["t"] += 1
            idx = np.arange(w, dtype=np.int64) * job["capacity"] + t
            for k, v in cols.items():
                v[idx] = src[k]
        return op
    if kind == "export":
        cap, ne = job["capacity"], job["num_envs"]

        def op():
            idx = (np.arange(cap - 1, dtype=np.int64)[:, None] + np.arange(ne, dtype=np.int64)[None, :] * cap).ravel()
            idx = idx[cols["step_type"][idx] != 2]
            out = {k: v[idx] for k, v in cols.items() if k != "step_type"}
            for k in obs_names:
                out["next_" + k] = cols[k][idx + 1]
            return out
        return op
    return None


def torch_op(np, torch, rng, job, cols):
    kind, b, l = job["kind"], job["b"], job["l"]
    tcols = {k: torch.from_numpy(v) for k, v in cols.items()}
    obs_names = [f["name"] for f in job["fields"] if f.get("role") == "observation"]
    if kind == "windows":
        ar = torch.arange(l, dtype=torch.int64)
        nxt = drawer(np, rng, job, b, l)

        def op():
            idx = torch.from_numpy(nxt())
            if l > 1:
                idx = (idx[:, None] + ar[None, :]).reshape(-1)
            out = {k: v.index_select(0, idx) for k, v in tcols.items()}
            if job.get("episode_aware"):
                ends = (out["step_type"].view(b, l) == 2).to(torch.int32)
                after = (torch.cumsum(ends, dim=1) - ends) > 0
                pad = torch.nonzero(after.reshape(-1)).squeeze(1)
                for k, v in out.items():
                    v.index_fill_(0, pad, 0)
                out["mask"] = ~after
            else:
                out["mask"] = torch.ones((b, l), dtype=torch.bool)
            return out
        return op
    if kind == "transitions":
        nxt = drawer(np, rng, job, b, 2)
        nxt2 = drawer(np, rng, job, b, 2, "next")

        def op():
            idx = torch.from_numpy(nxt())
            out = {k: v.index_select(0, idx) for k, v in tcols.items() if k != "step_type"}
            nidx = torch.from_numpy(nxt2()) if nxt2 else idx + 1
            for k in obs_names:
                out["next_" + k] = tcols[k].index_select(0, nidx)
            out["done"] = out.pop("next_step_type") == 2
            return out
        return op
    if kind == "stacked":
        k, cap = job["k"], job["capacity"]
        nxt = drawer(np, rng, job, b, 2)
        nxt2 = drawer(np, rng, job, b, 2, "next")
        back = torch.arange(-(k - 1), 1, dtype=torch.int64)
        st = tcols["step_type"]

        def windows(base):
            row, slot = base // cap, base % cap
            w = (row[:, None] * cap + (slot[:, None] + back[None, :]) % cap).reshape(-1)
            first = (st.index_select(0, w).view(b, k)[:, 1:] == 0).to(torch.int32)
            zero = torch.zeros((b, k), dtype=torch.bool)
            zero[:, :-1] = torch.flip(torch.cumsum(torch.flip(first, [1]), 1), [1]) > 0
            return w, zero

        def op():
            idx = torch.from_numpy(nxt())
            nidx = torch.from_numpy(nxt2()) if nxt2 else idx + 1
            out = {k2: v.index_select(0, idx) for k2, v in tcols.items() if k2 != "step_type" and k2 not in obs_names}
            for prefix, base in (("", idx), ("next_", nidx)):
                w, zero = windows(base)
                pad = torch.nonzero(zero.reshape(-1)).squeeze(1)
                for name in obs_names:
                    fr = tcols[name].index_select(0, w)
                    fr.index_fill_(0, pad, 0)
                    out[prefix + name] = fr.view((b, k) + tuple(tcols[name].shape[1:]))
            out["done"] = out.pop("next_step_type") == 2
            return out
        return op
    if kind == "scatter":
        w = b
        src = {k: v[:w].clone() for k, v in tcols.items()}
        state = {"t": 0}

        def op():
            t = state["t"] % job["capacity"]
            state["t"] += 1
            idx = torch.arange(w, dtype=torch.int64) * job["capacity"] + t
            for k, v in tcols.items():
                v.index_copy_(0, idx, src[k])
        return op
    if kind == "export":
        cap, ne = job["capacity"], job["num_envs"]
        st = tcols["step_type"]

        def op():
            idx = (torch.arange(cap - 1, dtype=torch.int64)[:, None] + torch.arange(ne, dtype=torch.int64)[None, :] * cap).reshape(-1)
            idx = idx.index_select(0, torch.nonzero(st.index_select(0, idx) != 2).squeeze(1))
            out = {k: v.index_select(0, idx) for k, v in tcols.items() if k != "step_type"}
            for k in obs_names:
                out["next_" + k] = tcols[k].index_select(0, idx + 1)
            return out
        return op
    return None


def measure_turn(op, budget_s, min_ops, max_ops):
    """Times op until max_ops calls, or min_ops calls and budget_s seconds;
    returns each call's nanoseconds and the turn's. An op with a timed
    attribute times itself (peer_trajring's Go loop)."""
    timed = getattr(op, "timed", None)
    if timed is not None:
        return timed(budget_s, min_ops, max_ops)
    start = time.perf_counter_ns()
    t_end = start + int(budget_s * 1e9)
    ns = []
    while len(ns) < max_ops and (len(ns) < max(1, min_ops) or time.perf_counter_ns() < t_end):
        t0 = time.perf_counter_ns()
        op()
        ns.append(time.perf_counter_ns() - t0)
    return ns, time.perf_counter_ns() - start


def main():
    header = {"versions": {"python": sys.version.split()[0]}, "skipped": [],
              "env": {"OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE", "")}}
    try:
        import numpy as np
        header["versions"]["numpy"] = np.__version__
    except Exception as e:  # noqa: BLE001 - any import failure means no peer
        header["skipped"].append({"what": "numpy and torch peers", "reason": "import numpy: %s" % e})
        print(json.dumps(header), flush=True)
        return
    torch = None
    default_threads = 1
    try:
        import torch
        header["versions"]["torch"] = torch.__version__
        default_threads = torch.get_num_threads()
        header["versions"]["torch_default_threads"] = str(default_threads)
    except Exception as e:  # noqa: BLE001
        header["skipped"].append({"what": "torch peers", "reason": "import torch: %s" % e})
    print(json.dumps(header), flush=True)
    rng = np.random.default_rng(7)
    cache_key, cols = None, None
    job, peers = None, []
    for line in sys.stdin:
        if not line.strip():
            continue
        req = json.loads(line)
        if req.get("drop"):
            cache_key, cols, job, peers = None, None, None, []
            if "peer_trajring" in sys.modules:
                sys.modules["peer_trajring"].drop()
            print(json.dumps({"dropped": True}), flush=True)
            continue
        if req.get("prepare"):
            job = req["prepare"]
            key = (json.dumps(job["fields"]), job["num_envs"], job["capacity"])
            if key != cache_key and job["kind"] != "env":
                cols = None
                log("building %s arrays: %d x %d steps" % (job.get("layout", "?"), job["num_envs"], job["capacity"]))
                cols = build(np, job)
                cache_key = key
            peers = []
            op = None if job.get("trajring") else numpy_op(np, rng, job, cols)
            if job.get("trajring"):
                # A "python ..." row: trajring from Python is ours, timed
                # here with its peers (peer_trajring.py, beside this file).
                import peer_trajring
                peers = peer_trajring.contestants(np, torch, job, cols, numpy_op, torch_op, default_threads, log)
            if op is not None:
                peers.append(("numpy", op, None))
                if torch is not None:
                    top = torch_op(np, torch, rng, job, cols)
                    peers.append(("torch-1thread", top, 1))
                    peers.append(("torch", top, default_threads))
            for _, op, threads in peers:
                if threads is not None:
                    torch.set_num_threads(threads)
                for _ in range(req.get("warmup", 2)):
                    op()
            if torch is not None:
                torch.set_num_threads(default_threads)
            print(json.dumps({"id": job["id"], "ready": True, "peers": [p[0] for p in peers]}), flush=True)
            continue
        if req.get("turn"):
            name = req["turn"]
            found = [p for p in peers if p[0] == name]
            if not found:
                print(json.dumps({"id": job["id"] if job else "", "error": "no peer %r in the prepared job" % name}), flush=True)
                continue
            _, op, threads = found[0]
            if threads is not None:
                torch.set_num_threads(threads)
            ns, spent = measure_turn(op, req.get("budget_s", 0), req.get("min_ops", 1), req.get("max_ops", 1 << 30))
            print(json.dumps({"id": job["id"], "peer": name, "ns": ns, "spent_ns": spent}), flush=True)


if __name__ == "__main__":
    main()
