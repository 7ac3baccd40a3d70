"""trajring from Python, as a contestant of the benchmark's Python worker.

peers.py imports this module for the jobs that carry a "trajring" entry
(the rows named "python ..."): there the contestant "trajring", timed as
ours, is the Python package (python/trajring, over libtrajring.so) doing
the row's work from Python, every Python-side cost included, and its
peers run in the same process, taking turns with it: NumPy fancy indexing
and PyTorch index_select over arrays of the same layout and contents
(peers.py's own operations, replaying draws the Go runner wrote), or, on
the environment rows, the same loop run in Go inside the library
(trj_env_run_go: "go-loop") and a NumPy vectorised CartPole written in
Python ("numpy").

The job's "trajring" entry holds "path" (the directory holding the
trajring package) and "op":
  sample       table.sample(b), then torch.from_dlpack of every tensor of
               the result; the result and its views are dropped inside
               the timed call (their deleters run there)
  sample_into  table.sample(b, into=batch), views made once (hot loop)
  seq_into     buf.sample_sequences(b, 1, into=batch): the direct uniform
               sample (no table), views made once
  trans_into   table.sample_transitions(b, into=batch), views made once
  sample_new   table.sample(b): a new result, no views
  add          writer.add of one step of the job's rows (a plain writer)
  env_step     env.step(actions) of trajring.make(env, num_envs=b)
  env_write    env.step(actions, writer=w), w = buf.trajectory_writer(
               {"replay": 2})
The tables sampled hold an item per stored step (L=1, table "l1") and an
item per pair of consecutive steps within an episode (L=2, "l2"), made by
a trajectory writer while the buffer was filled with the contents
peers.py's build() gives its arrays.
"""
import ctypes
import json
import sys
import time

_buffers = {}


def drop():
    """Closes the cached buffers (peers.py's drop request)."""
    for held in _buffers.values():
        held["buf"].close()
    _buffers.clear()


def _import(path):
    if path not in sys.path:
        sys.path.insert(0, path)
    import trajring
    return trajring


def _step_types(np, ne, t, el):
    phase = (t + 7 * np.arange(ne, dtype=np.int64)) % el
    st = np.where(phase == 0, 0, np.where(phase == el - 1, 2, 1)).astype(np.int32)
    nphase = (phase + 1) % el
    nst = np.where(nphase == 0, 0, np.where(nphase == el - 1, 2, 1)).astype(np.int32)
    return st, nst


def _filled(np, trajring, job, log):
    """A buffer of the job's layout holding what peers.py's build() holds
    (every field 1, step types of episodes of episode_len steps, row r
    offset by 7r), with tables l1 and l2 (see the module docstring)."""
    key = (json.dumps(job["fields"]), job["num_envs"], job["capacity"])
    held = _buffers.get(key)
    if held is not None:
        return held
    ne, cap, el = job["num_envs"], job["capacity"], job["episode_len"]
    log("filling a trajring %s buffer from Python: %d x %d steps" % (job.get("layout", "?"), ne, cap))
    spec = {f["name"]: {"shape": tuple(f["shape"]), "dtype": f["dtype"], "role": f["role"]} for f in job["fields"]}
    buf = trajring.Buffer(spec, num_envs=ne, capacity=cap, seed=1)
    tables = {"l1": buf.table("l1", "uniform", seed=11), "l2": buf.table("l2", "uniform", seed=12)}
    w = buf.trajectory_writer({"l1": 1, "l2": 2})
    data = {f["name"]: np.ones((ne,) + tuple(f["shape"]), dtype=f["dtype"]) for f in job["fields"]}
    ones = np.ones(ne, dtype=np.float32)
    for t in range(cap):
        st, nst = _step_types(np, ne, t, el)
        w.add(step_type=st, next_step_type=nst, reward=ones, discount=ones, **data)
    w.flush()
    w.close()
    held = {"buf": buf, "tables": tables}
    _buffers[key] = held
    return held


class NumpyCartPole:
    """Gymnasium 1.x's CartPoleVectorEnv (classic_control/cartpole.py):
    the same dynamics, float64 state (4, n), Euler integration, the
    500-step truncation and next-step autoreset, in NumPy; the action check
    is what its action_space.contains does (MultiDiscrete)."""

    def __init__(self, np, n, seed):
        self.np, self.n = np, n
        self.gravity, self.masscart, self.masspole = 9.8, 1.0, 0.1
        self.total_mass = self.masspole + self.masscart
        self.length = 0.5
        self.polemass_length = self.masspole * self.length
        self.force_mag, self.tau = 10.0, 0.02
        self.theta_threshold_radians = 12 * 2 * np.pi / 360
        self.x_threshold = 2.4
        self.max_episode_steps = 500
        self.low, self.high = -0.05, 0.05
        self.rng = np.random.default_rng(seed)
        self.state = self.rng.uniform(low=self.low, high=self.high, size=(4, n))
        self.steps = np.zeros(n, dtype=np.int32)
        self.prev_done = np.zeros(n, dtype=np.bool_)

    def step(self, action):
        np = self.np
        if not (action.shape == (self.n,) and action.dtype.kind == "i" and (action >= 0).all() and (action < 2).all()):
            raise ValueError("invalid action")
        x, x_dot, theta, theta_dot = self.state
        force = np.sign(action - 0.5) * self.force_mag
        costheta = np.cos(theta)
        sintheta = np.sin(theta)
        temp = (force + self.polemass_length * np.square(theta_dot) * sintheta) / self.total_mass
        thetaacc = (9.8 * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * np.square(costheta) / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        x = x + self.tau * x_dot
        x_dot = x_dot + self.tau * xacc
        theta = theta + self.tau * theta_dot
        theta_dot = theta_dot + self.tau * thetaacc
        self.state = np.stack((x, x_dot, theta, theta_dot))
        terminated = ((x < -self.x_threshold) | (x > self.x_threshold)
                      | (theta < -self.theta_threshold_radians) | (theta > self.theta_threshold_radians))
        self.steps += 1
        truncated = self.steps >= self.max_episode_steps
        reward = np.ones_like(terminated, dtype=np.float32)
        self.state[:, self.prev_done] = self.rng.uniform(low=self.low, high=self.high, size=(4, self.prev_done.sum()))
        self.steps[self.prev_done] = 0
        reward[self.prev_done] = 0.0
        terminated[self.prev_done] = False
        truncated[self.prev_done] = False
        self.prev_done = np.logical_or(terminated, truncated)
        return self.state.T.astype(np.float32), reward, terminated, truncated, {}


class NumpyRing:
    """Stable-Baselines3's ReplayBuffer.add over n envs (optimize_memory_usage
    off): obs, next_obs, action, reward and done written at the cursor."""

    def __init__(self, np, n, capacity):
        self.np, self.pos, self.capacity = np, 0, capacity
        self.obs = np.zeros((capacity, n, 4), dtype=np.float32)
        self.next_obs = np.zeros((capacity, n, 4), dtype=np.float32)
        self.actions = np.zeros((capacity, n, 1), dtype=np.int64)
        self.rewards = np.zeros((capacity, n), dtype=np.float32)
        self.dones = np.zeros((capacity, n), dtype=np.float32)
        self.timeouts = np.zeros((capacity, n), dtype=np.float32)
        for a in (self.obs, self.next_obs, self.actions, self.rewards, self.dones, self.timeouts):
            a.fill(0)

    def add(self, obs, next_obs, action, reward, done, truncated):
        np = self.np
        self.obs[self.pos] = np.array(obs)
        self.next_obs[self.pos] = np.array(next_obs)
        self.actions[self.pos] = np.array(action).reshape(-1, 1)
        self.rewards[self.pos] = np.array(reward)
        self.dones[self.pos] = np.array(done)
        self.timeouts[self.pos] = np.array(truncated)
        self.pos = (self.pos + 1) % self.capacity


def _self_timed(one, many):
    """An op whose calls time themselves: op() runs one step (warm-up),
    op.timed(budget_s, min_ops, max_ops) a turn, returning each step's
    nanoseconds (measured inside the call) and the turn's."""
    def op():
        one()

    def timed(budget_s, min_ops, max_ops):
        start = time.perf_counter_ns()
        t_end = start + int(budget_s * 1e9)
        ns = []
        while len(ns) < max_ops and (len(ns) < max(1, min_ops) or time.perf_counter_ns() < t_end):
            ns.extend(many(min(16, max_ops - len(ns))))
        return ns, time.perf_counter_ns() - start
    op.timed = timed
    return op


def _env_contestants(np, trajring, job, spec):
    from trajring import _lib
    n, write = job["b"], spec["op"] == "env_write"
    actions = (np.arange(n) % 2).astype(np.int64)  # fixed: the same every step, in every loop

    def env_and_writer():
        env = trajring.make(spec["env"], num_envs=n, seed=1)
        env.reset()
        if not write:
            return env, None, None
        buf = trajring.Buffer(env.buffer_spec(), num_envs=n, capacity=job["capacity"], seed=3)
        buf.table("replay", "uniform", max_size=1 << 20, seed=4)
        return env, buf, buf.trajectory_writer({"replay": 2})

    env, buf, w = env_and_writer()
    keep = [buf]
    if w is not None:
        def ours():
            env.step(actions, writer=w)
    else:
        def ours():
            env.step(actions)
    ours.keep = keep

    genv, gbuf, gw = env_and_writer()
    arr = _lib.Arrays()
    data, nbytes = (ctypes.c_void_p * 1)(actions.ctypes.data), (ctypes.c_int64 * 1)(actions.nbytes)
    dtype, ndim, shape = (ctypes.c_int32 * 1)(3), (ctypes.c_int32 * 1)(1), (ctypes.c_int64 * 8)(n)
    arr.n, arr.data, arr.nbytes = 1, ctypes.addressof(data), ctypes.addressof(nbytes)
    arr.dtype, arr.ndim, arr.shape = ctypes.addressof(dtype), ctypes.addressof(ndim), ctypes.addressof(shape)
    out = (ctypes.c_int64 * 16)()
    wh = gw._handle if gw is not None else 0
    held = (genv, gbuf, gw, arr, data, nbytes, dtype, ndim, shape, out)

    def many(k):
        _lib.call(_lib.lib.trj_env_run_go, genv._handle, ctypes.byref(arr), wh, k, out)
        return list(out[:k])
    go = _self_timed(lambda: many(1), many)
    go.keep = held

    cp = NumpyCartPole(np, n, 1)
    if write:
        ring = NumpyRing(np, n, job["capacity"])
        state = {"obs": cp.state.T.astype(np.float32)}

        def numpy_op():
            next_obs, reward, term, trunc, _ = cp.step(actions)
            ring.add(state["obs"], next_obs, actions, reward, term, trunc)
            state["obs"] = next_obs
    else:
        def numpy_op():
            cp.step(actions)
    return [("trajring", ours, None), ("go-loop", go, None), ("numpy", numpy_op, None)]


def contestants(np, torch, job, cols, numpy_op, torch_op, default_threads, log):
    """Returns the job's contestants as peers.py's (name, op, threads),
    ours ("trajring") first."""
    spec = job["trajring"]
    trajring = _import(spec["path"])
    kind = spec["op"]
    if kind in ("env_step", "env_write"):
        return _env_contestants(np, trajring, job, spec)
    b = job["b"]
    if kind == "add":
        fspec = {f["name"]: {"shape": tuple(f["shape"]), "dtype": f["dtype"], "role": f["role"]} for f in job["fields"]}
        buf = trajring.Buffer(fspec, num_envs=job["num_envs"], capacity=job["capacity"], seed=1)
        w = buf.writer()
        ne, el = job["num_envs"], job["episode_len"]
        data = {f["name"]: np.ones((ne,) + tuple(f["shape"]), dtype=f["dtype"]) for f in job["fields"]}
        ones = np.ones(ne, dtype=np.float32)
        types = [_step_types(np, ne, t, el) for t in range(el)]
        state = {"t": 0}

        def ours():
            st, nst = types[state["t"] % el]
            state["t"] += 1
            w.add(step_type=st, next_step_type=nst, reward=ones, discount=ones, **data)
        ours.keep = (buf, w)
    else:
        held = _filled(np, trajring, job, log)
        # Without torch, the views are NumPy's (np.from_dlpack).
        tfd = torch.from_dlpack if torch is not None else np.from_dlpack
        if kind == "sample":
            tab = held["tables"]["l1"]

            def ours():
                r = tab.sample(b)
                views = [tfd(r[k]) for k in r]
                del views, r
        elif kind == "sample_new":
            tab = held["tables"]["l1"]

            def ours():
                tab.sample(b)
        elif kind == "sample_into":
            tab = held["tables"]["l1"]
            batch = tab.sample(b)
            views = batch.torch() if torch is not None else batch.numpy()

            def ours():
                tab.sample(b, into=batch)
            ours.keep = (batch, views)
        elif kind == "seq_into":
            buf = held["buf"]
            batch = buf.sample_sequences(b, 1)
            views = batch.torch() if torch is not None else batch.numpy()

            def ours():
                buf.sample_sequences(b, 1, into=batch)
            ours.keep = (batch, views)
        elif kind == "trans_into":
            tab = held["tables"]["l2"]
            batch = tab.sample_transitions(b)
            views = batch.torch() if torch is not None else batch.numpy()

            def ours():
                tab.sample_transitions(b, into=batch)
            ours.keep = (batch, views)
        else:
            raise ValueError("unknown trajring op %r" % kind)
    out = [("trajring", ours, None)]
    op = numpy_op(np, np.random.default_rng(7), job, cols)
    if op is not None:
        out.append(("numpy", op, None))
        if torch is not None:
            top = torch_op(np, torch, np.random.default_rng(7), job, cols)
            out.append(("torch-1thread", top, 1))
            out.append(("torch", top, default_threads))
    return out
