"""Batched Go environments stepped from Python, in the shape of Gymnasium's
vector API and EnvPool (``trajring.make``)."""

from __future__ import annotations

import ctypes
import json
from sys import getrefcount
from weakref import getweakrefcount
from ctypes import byref, c_int64, c_uint64
from typing import Any, Mapping, Optional, Union

import numpy as np

from . import _lib
from ._arrays import NUMPY_TO_CODE
from ._buffer import Writer, _raw
from .errors import InvalidArgumentError

AUTORESET_NEXT_STEP = "NextStep"


class Box:
    """A box of real (or integer) values, duck-typed after ``gymnasium.spaces.Box``."""

    def __init__(self, low: np.ndarray, high: np.ndarray, shape: tuple[int, ...], dtype: np.dtype,
                 seed: Optional[int] = None) -> None:
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.low = np.broadcast_to(np.asarray(low, dtype=np.float64), self.shape).astype(self.dtype)
        self.high = np.broadcast_to(np.asarray(high, dtype=np.float64), self.shape).astype(self.dtype)
        self._rng = np.random.default_rng(seed)

    def sample(self) -> np.ndarray:
        """A uniform sample (bounded dimensions) or a normal one (unbounded)."""
        lo, hi = self.low.astype(np.float64), self.high.astype(np.float64)
        finite = np.isfinite(lo) & np.isfinite(hi) & (np.abs(lo) < 1e300) & (np.abs(hi) < 1e300)
        x = np.where(finite, self._rng.uniform(np.where(finite, lo, 0), np.where(finite, hi, 1)),
                     self._rng.standard_normal(self.shape))
        return x.astype(self.dtype)

    def contains(self, x: Any) -> bool:
        x = np.asarray(x)
        return x.shape == self.shape and bool(np.all(x >= self.low) and np.all(x <= self.high))

    def seed(self, seed: Optional[int] = None) -> None:
        self._rng = np.random.default_rng(seed)

    def __repr__(self) -> str:
        return f"Box({self.low.min()}, {self.high.max()}, {self.shape}, {self.dtype})"


class Discrete:
    """``n`` actions ``start .. start+n-1``, duck-typed after ``gymnasium.spaces.Discrete``."""

    def __init__(self, n: int, start: int = 0, seed: Optional[int] = None) -> None:
        self.n, self.start = int(n), int(start)
        self.shape, self.dtype = (), np.dtype("int64")
        self._rng = np.random.default_rng(seed)

    def sample(self) -> np.int64:
        return np.int64(self.start + self._rng.integers(self.n))

    def contains(self, x: Any) -> bool:
        return np.ndim(x) == 0 and self.start <= int(x) < self.start + self.n

    def seed(self, seed: Optional[int] = None) -> None:
        self._rng = np.random.default_rng(seed)

    def __repr__(self) -> str:
        return f"Discrete({self.n})" if self.start == 0 else f"Discrete({self.n}, start={self.start})"


class MultiDiscrete(Box):
    """A batch of ``Discrete`` spaces (a vector env's ``action_space``)."""

    def __init__(self, nvec: Any, start: int = 0, seed: Optional[int] = None) -> None:
        nvec = np.asarray(nvec, dtype=np.int64)
        super().__init__(np.full(nvec.shape, start), start + nvec - 1, nvec.shape, np.int64, seed)
        self.nvec = nvec

    def sample(self) -> np.ndarray:
        return self.low + self._rng.integers(self.nvec)


def _space(f: dict, batch: Optional[int] = None) -> Union[Box, Discrete]:
    dtype = np.dtype(f["dtype"])
    shape = tuple(f["shape"])
    lo = np.asarray(f["min"], np.float64) if f["min"] else np.full(shape, -np.inf)
    hi = np.asarray(f["max"], np.float64) if f["max"] else np.full(shape, np.inf)
    lo = np.where(np.abs(lo) >= np.finfo(np.float64).max, -np.inf, lo)
    hi = np.where(np.abs(hi) >= np.finfo(np.float64).max, np.inf, hi)
    if dtype.kind == "i" and shape == () and np.isfinite(lo).all() and np.isfinite(hi).all():
        n = int(np.max(hi)) - int(np.min(lo)) + 1
        if batch is None:
            return Discrete(n, int(np.min(lo)))
        return MultiDiscrete(np.full(batch, n), int(np.min(lo)))
    if batch is not None:
        shape = (batch, *shape)
    return Box(lo, hi, shape, dtype)


_POOL = 3
"""Output blocks a VectorEnv keeps for reuse (a step loop holds one or two)."""


def _refs(entry: list) -> int:
    """The summed reference and weak-reference counts of an output block and its
    arrays; it equals the sum taken when the block was made (no count falls
    below the pool's own references) exactly when nothing outside the pool holds
    any of them. A raw address (``.ctypes.data``) is no reference."""
    blk, views, rew, term, trunc = entry[0], entry[1], entry[2], entry[3], entry[4]
    return (getrefcount(blk) + getrefcount(rew) + getrefcount(term) + getrefcount(trunc)
            + sum(map(getrefcount, views))
            + getweakrefcount(blk) + getweakrefcount(rew) + getweakrefcount(term) + getweakrefcount(trunc)
            + sum(map(getweakrefcount, views)))


def _address(a: np.ndarray) -> int:
    """The data address of a C-contiguous array: through ctypes' buffer export
    for a writable one (a third of the time of ``a.ctypes.data``), else NumPy's."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    except (TypeError, ValueError, BufferError):  # read-only or empty
        return a.ctypes.data


class VectorEnv(_lib.Handle):
    """A batched Go environment: ``num_envs`` rows stepped together in Go, with the GIL released.

    The interface is Gymnasium 1.x's ``VectorEnv`` (``reset``, ``step``, ``num_envs``,
    ``single_observation_space``, ``single_action_space``, ``observation_space``,
    ``action_space``, ``metadata``), duck-typed so that Gymnasium is not needed.

    Autoreset follows Gymnasium's **next-step** mode (``metadata["autoreset_mode"]``
    is ``"NextStep"``, as EnvPool): the step after a row's ``terminated`` or
    ``truncated`` resets that row, ignores its action, and returns the new episode's
    first observation with reward 0 and both flags False. This is the Go envs' own
    convention (the TF-Agents boundary step), so ``step(actions, writer=w)`` stores
    exactly the trajectories the Go driver stores.

    ``step`` and ``reset`` return fresh NumPy arrays that Go writes in place (no
    Python-side copy); they are never overwritten by later steps, as EnvPool's (the
    memory of arrays no longer referenced anywhere, weak references included, is
    reused; a raw address such as ``.ctypes.data`` is no reference). Not safe for
    concurrent use.
    """

    def __init__(self, env_id: str, num_envs: int = 1, seed: int = 0) -> None:
        out = c_uint64()
        _lib.call(_lib.lib.trj_env_make, env_id.encode(), int(num_envs), int(seed) & (2**64 - 1), byref(out))
        self._handle = out.value
        spec = self._spec()
        self.env_id = env_id
        self.num_envs: int = spec["num_envs"]
        self._obs_fields = spec["observation"]
        self._act_fields = spec["action"]
        self.metadata = {"autoreset_mode": AUTORESET_NEXT_STEP, "render_modes": []}
        self.spec = None
        self.render_mode = None
        self.single_observation_space = self._spaces(self._obs_fields, None)
        self.single_action_space = self._spaces(self._act_fields, None)
        self.observation_space = self._spaces(self._obs_fields, self.num_envs)
        self.action_space = self._spaces(self._act_fields, self.num_envs)
        n = len(self._obs_fields)
        self._pool: list = []
        self._cur_block: Optional[list] = None
        self._out = _lib.EnvOut()
        self._obs_ptrs = (ctypes.c_void_p * max(n, 1))()
        self._obs_nbytes = (c_int64 * max(n, 1))()
        self._out.nobs = n
        self._out.obs, self._out.obs_nbytes = ctypes.addressof(self._obs_ptrs), ctypes.addressof(self._obs_nbytes)
        na = len(self._act_fields)
        self._acts = _lib.Arrays()
        self._act_data = (ctypes.c_void_p * max(na, 1))()
        self._act_nbytes = (c_int64 * max(na, 1))()
        self._act_dtype = (ctypes.c_int32 * max(na, 1))()
        self._act_ndim = (ctypes.c_int32 * max(na, 1))()
        self._act_shape = (c_int64 * max(8 * na, 1))()
        self._acts_ref, self._out_ref = byref(self._acts), byref(self._out)
        a = self._acts
        a.n = na
        a.data, a.nbytes = ctypes.addressof(self._act_data), ctypes.addressof(self._act_nbytes)
        a.dtype, a.ndim, a.shape = (ctypes.addressof(self._act_dtype), ctypes.addressof(self._act_ndim),
                                    ctypes.addressof(self._act_shape))
        self._obs_dtypes = [(f["name"], np.dtype(f["dtype"]), (self.num_envs, *f["shape"])) for f in self._obs_fields]
        self._act_dtypes = [np.dtype(f["dtype"]) for f in self._act_fields]
        # A step's outputs live in one fresh block (one allocation and one
        # address a step, not four), each at a 64-byte aligned offset.
        off, self._out_plan = 0, []
        for name, dt, shape in self._obs_dtypes:
            nb = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
            self._out_plan.append((name, dt, shape, off, nb))
            off += -(-nb // 64) * 64
        n = self.num_envs
        self._rew_off, self._term_off, self._trunc_off = off, off + -(-4 * n // 64) * 64, off + -(-4 * n // 64) * 64 + -(-n // 64) * 64
        self._out_bytes = self._trunc_off + -(-n // 64) * 64
        # A single action field: its dtype and ABI code (step's fast path).
        self._one_act = None
        if len(self._act_dtypes) == 1 and self._act_dtypes[0] in NUMPY_TO_CODE:
            self._one_act = (self._act_dtypes[0], NUMPY_TO_CODE[self._act_dtypes[0]])

    def _spec(self) -> dict:
        need = c_int64()
        buf = ctypes.create_string_buffer(1 << 16)
        _lib.call(_lib.lib.trj_env_spec, self._handle, buf, 1 << 16, byref(need))
        return json.loads(buf.value)

    @staticmethod
    def _spaces(fields: list, batch: Optional[int]) -> Any:
        if len(fields) == 1:
            return _space(fields[0], batch)
        return {f["name"]: _space(f, batch) for f in fields}

    @property
    def fields(self) -> list[dict]:
        """The env's observation and action fields, as a buffer spec takes them."""
        return [{"name": f["name"], "role": f["role"], "dtype": f["dtype"], "shape": tuple(f["shape"])}
                for f in self._obs_fields + self._act_fields]

    def buffer_spec(self) -> dict:
        """The spec of a buffer that stores this env's trajectories (``trajring.Buffer(env.buffer_spec(), ...)``)."""
        return {f["name"]: {"shape": f["shape"], "dtype": f["dtype"], "role": f["role"]} for f in self.fields}

    def _new_block(self) -> list:
        """A fresh output block: ``[blk, obs views, rew, term, trunc, addresses]``."""
        blk = np.empty(max(self._out_bytes, 1), np.uint8)
        base = blk.ctypes.data
        nd = np.ndarray
        n = self.num_envs
        views = tuple(nd(shape, dt, blk, off) for (_, dt, shape, off, _) in self._out_plan)
        rew = nd((n,), np.float32, blk, self._rew_off)
        term = nd((n,), np.bool_, blk, self._term_off)
        trunc = nd((n,), np.bool_, blk, self._trunc_off)
        return [blk, views, rew, term, trunc, base]

    def _outputs(self, with_step: bool) -> tuple:
        """The arrays a step or reset writes, pointed at by ``self._out``.

        They are fresh to the caller: a block of them is handed out again only
        when no reference to the block or to any of its arrays is left outside
        the pool (a view or a torch tensor of one holds a reference), so a held
        array is never overwritten. Reusing a free block saves allocating it and
        making its views every step (about 2 us a step).
        """
        for e in self._pool:
            if _refs(e) == e[6]:
                blk = e
                break
        else:
            blk = self._new_block()
            blk.append(_refs(blk))
            # When every pooled block is held, the oldest leaves the pool (its
            # holders keep it) and the new one takes its place.
            self._pool = self._pool[-(_POOL - 1):] + [blk]
        if blk is not self._cur_block:
            self._cur_block = blk
            base = blk[5]
            for i, (_, _, _, off, nb) in enumerate(self._out_plan):
                self._obs_ptrs[i] = base + off
                self._obs_nbytes[i] = nb
            o = self._out
            o.reward, o.terminated, o.truncated = base + self._rew_off, base + self._term_off, base + self._trunc_off
            o.step_type = None
        views = blk[1]
        obs = views[0] if len(views) == 1 else {f[0]: v for f, v in zip(self._out_plan, views)}
        return obs, blk[2], blk[3], blk[4]

    def reset(self, *, seed: Optional[int] = None, options: Optional[Mapping[str, Any]] = None) -> tuple[Any, dict]:
        """Reset every row; ``seed`` rebuilds the env from that seed first. Returns ``(obs, info)``."""
        if options:
            raise InvalidArgumentError(f"reset options {sorted(options)} are not supported (every row resets)")
        # All four outputs stay referenced until the call returns: Go
        # writes rewards and flags into them too (dropping them freed
        # memory Go then wrote into, corrupting the heap).
        obs, rew, term, trunc = self._outputs(False)
        reseed = 0 if seed is None else 1
        _lib.call(_lib.lib.trj_env_reset, self._handle, reseed, 0 if seed is None else int(seed) & (2**64 - 1),
                  self._out_ref)
        del rew, term, trunc
        return obs, {}

    def step(self, actions: Any, writer: Optional[Writer] = None) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict]:
        """Step every row; returns ``(obs, reward, terminated, truncated, info)``.

        ``actions`` is an array (or torch CPU tensor) shaped ``(num_envs, ...)`` of the
        action field's dtype, or a dict of them for several action fields. With
        ``writer`` (of a buffer whose fields are ``env.buffer_spec()``), the step's
        trajectory is also written into the buffer in the same call, through the
        writer's observers, as the Go driver writes it.
        """
        keep: list = []
        one = self._one_act
        if one is not None and type(actions) is np.ndarray and actions.dtype == one[0] and actions.flags.c_contiguous \
                and actions.ndim <= 8:
            # One action field as a C-contiguous array of its dtype: what
            # _raw takes, without the cost of its general checks.
            keep.append(actions)
            self._act_data[0], self._act_nbytes[0], self._act_dtype[0] = _address(actions), actions.nbytes, one[1]
            self._act_ndim[0] = actions.ndim
            for j, d in enumerate(actions.shape):
                self._act_shape[j] = d
            actions = {}
        elif len(self._act_fields) == 1 and not isinstance(actions, Mapping):
            actions = {self._act_fields[0]["name"]: actions}
        if not keep and (not isinstance(actions, Mapping) or set(actions) != {f["name"] for f in self._act_fields}):
            from .errors import MissingFieldError

            raise MissingFieldError(f"tensorbuf: missing field: actions must be given for {[f['name'] for f in self._act_fields]}")
        off = 0
        for i, f in enumerate(self._act_fields if not keep else ()):
            x = actions[f["name"]]
            if not isinstance(x, np.ndarray) and not type(x).__module__.startswith("torch"):
                x = np.asarray(x, dtype=self._act_dtypes[i])
            obj, addr, nbytes, code, shape = _raw(x, f"action {f['name']!r}", self._act_dtypes[i])
            keep.append(obj)
            self._act_data[i], self._act_nbytes[i], self._act_dtype[i] = addr, nbytes, code
            if len(shape) > 8:
                raise InvalidArgumentError(f"action {f['name']!r} has {len(shape)} dimensions")
            self._act_ndim[i] = len(shape)
            for d in shape:
                self._act_shape[off] = d
                off += 1
        obs, rew, term, trunc = self._outputs(True)
        w = 0 if writer is None else writer._handle
        if writer is not None and w == 0:
            from .errors import HandleError

            raise HandleError("step with a closed writer")
        _lib.call(_lib.lib.trj_env_step, self._handle, self._acts_ref, w, self._out_ref)
        del keep
        return obs, rew, term, trunc, {}

    def close(self) -> None:
        """Close the env. Idempotent."""
        self._release(_lib.lib.trj_env_close)




    def __repr__(self) -> str:
        return f"trajring.VectorEnv({self.env_id!r}, num_envs={self.num_envs})"


def make(env_id: str, num_envs: int = 1, seed: int = 0) -> VectorEnv:
    """Make ``num_envs`` copies of the registered Go environment ``env_id`` (EnvPool's ``make``).

    Built in: ``"CartPole-v1"`` (Gymnasium's dynamics, the 500-step limit as
    truncation) and ``"Noop"``; a library built with your own Go envs registers more
    (docs/python.md). An unknown id raises :class:`~trajring.ConfigError` listing
    the registered ones.
    """
    return VectorEnv(env_id, num_envs=num_envs, seed=seed)
