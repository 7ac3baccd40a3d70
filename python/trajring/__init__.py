"""trajring: a Go experience-replay engine for reinforcement learning, from Python.

A thin ctypes layer over trajring's C ABI (``libtrajring.so``, built by
``make python``). Buffers store batched TF-Agents trajectories in a ring;
tables (Reverb's model: uniform, prioritized, FIFO, LIFO, heaps, without
replacement, rate limiters) sample them; samples come back as zero-copy
DLPack views that ``torch.from_dlpack`` and ``numpy.from_dlpack`` take.

>>> import numpy as np, trajring
>>> buf = trajring.Buffer({"obs": {"shape": (4,)}, "action": {"dtype": "int64"}}, num_envs=2, capacity=100)

See docs/python.md for the guide.
"""

from ._arrays import Array, Result
from ._buffer import FIRST, LAST, MID, Buffer, Field, Table, Writer
from ._env import Box, Discrete, MultiDiscrete, VectorEnv, make
from ._lib import live_counts
from .errors import *  # noqa: F401,F403  (the exception classes)
from .errors import __all__ as _error_names

__all__ = ["Array", "Box", "Buffer", "Discrete", "Field", "FIRST", "LAST", "MID", "MultiDiscrete", "Result", "Table",
           "VectorEnv", "Writer", "live_counts", "load", "make", *_error_names]

load = Buffer.load
