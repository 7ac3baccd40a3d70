"""The device check's Python step (bench/gpu-check.sh): trajring batches on a GPU, taken by
PyTorch, JAX and CuPy through DLPack on a non-default stream.

Run with a trajring_cuda build of the package (``make python-cuda`` puts this script
next to it in build/python-cuda/). On a machine without a CUDA PyTorch (the
stand-in rehearsal) it checks what the stand-in allows, the device, the pointer
and that the stream hand-off is accepted, and says what it skipped. It prints one
JSON line per check and exits 1 if any check failed.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
import tempfile
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import trajring  # noqa: E402

RESULTS: list[dict] = []


def report(name: str, status: str, detail: str = "") -> None:
    RESULTS.append({"check": name, "status": status, "detail": detail})
    print(json.dumps(RESULTS[-1]), flush=True)


def check(name: str):
    def wrap(fn):
        try:
            detail = fn()
            if isinstance(detail, tuple) and detail and detail[0] == "skip":
                report(name, "skip", detail[1])
            else:
                report(name, "pass", detail or "")
        except Exception:  # noqa: BLE001 - every failure is reported, the rest still runs
            report(name, "fail", traceback.format_exc(limit=4))
        return fn
    return wrap


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


def capsule_tensor(capsule: object) -> DLTensor:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    return DLTensor.from_address(get(capsule, b"dltensor"))


def expected_obs(step: np.ndarray, row: np.ndarray) -> np.ndarray:
    """The observation written at step t of row r: [0..7] + 100 t + 10 r, float32."""
    return (np.arange(8)[None, :] + step[:, None] * 100 + row[:, None] * 10).astype(np.float32)


def filled(num_envs: int = 4, steps: int = 64):
    buf = trajring.Buffer({"obs": {"shape": (8,)}, "action": {"dtype": "int64"}}, num_envs=num_envs,
                          capacity=256, seed=1)
    table = buf.table("replay", "prioritized", alpha=0.6, beta=0.4, seed=2)
    buf.table("device", "prioritized", alpha=0.6, beta=0.4, seed=3, device_selection=True)
    w = buf.trajectory_writer({"replay": 2, "device": 2})
    for t in range(steps):
        obs = expected_obs(np.full(num_envs, t), np.arange(num_envs))
        w.add(step_type=[0 if t == 0 else 1] * num_envs, next_step_type=[1] * num_envs,
              reward=np.full(num_envs, t, np.float32), discount=np.ones(num_envs, np.float32), obs=obs,
              action=np.full(num_envs, t % 2))
    w.flush()
    return buf, table


def main() -> int:
    buf, table = filled()
    device = buf.info()["device"]
    print(json.dumps({"backend": buf.info()["backend"], "device": device}), flush=True)
    try:
        import torch
        have_cuda = torch.cuda.is_available()
    except ImportError:
        torch, have_cuda = None, False

    @check("device and pointer")
    def _():
        batch = table.sample_transitions(64)
        a = batch["obs"]
        if a.__dlpack_device__() != (2, 0):
            raise AssertionError(f"device {a.__dlpack_device__()}, want (2, 0): not a trajring_cuda build")
        capsule = a.__dlpack__(stream=1)  # held: its destructor frees the tensor
        t = capsule_tensor(capsule)
        assert (t.device_type, t.ndim, t.byte_offset) == (2, 2, 0), (t.device_type, t.ndim, t.byte_offset)
        assert t.data == a.data_ptr, (hex(t.data or 0), hex(a.data_ptr))
        del t, capsule
        return f"kDLCUDA, data {a.data_ptr:#x}"

    @check("torch on a non-default stream")
    def _():
        if not have_cuda:
            return ("skip", "no CUDA PyTorch here")
        s = torch.cuda.Stream()
        batch = table.sample_transitions(256)
        with torch.cuda.stream(s):
            obs = torch.from_dlpack(batch["obs"])          # torch passes s: s waits for the sample
            doubled = obs * 2                                # enqueued right after, on s
        s.synchronize()
        assert obs.is_cuda and obs.data_ptr() == batch["obs"].data_ptr
        assert batch["step"].device == 1  # host-selected: the rows and steps are host metadata
        host = obs.cpu().numpy()
        np.testing.assert_array_equal(host, expected_obs(np.asarray(batch["step"]), np.asarray(batch["row"])))
        np.testing.assert_array_equal(doubled.cpu().numpy(), host * 2)
        return f"data_ptr equal, {host.shape} values equal a host copy"

    @check("one DQN gradient step with priorities written back")
    def _():
        if not have_cuda:
            return ("skip", "no CUDA PyTorch here")
        dev = torch.device("cuda")
        q = torch.nn.Sequential(torch.nn.Linear(8, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2)).to(dev)
        opt = torch.optim.Adam(q.parameters(), lr=1e-3)
        s = torch.cuda.Stream()
        dtable = buf.table("device")  # selects on the device: keys and weights are device memory too
        batch = dtable.sample_transitions(128)
        with torch.cuda.stream(s):
            v = {k: torch.from_dlpack(batch[k]) for k in ("obs", "next_obs", "action", "reward", "discount", "weight")}
            assert all(v[k].is_cuda and v[k].data_ptr() == batch[k].data_ptr for k in v)
            with torch.no_grad():
                target = v["reward"] + 0.99 * v["discount"] * q(v["next_obs"]).max(1).values
            pred = q(v["obs"]).gather(1, v["action"].long().unsqueeze(1)).squeeze(1)
            td = target - pred
            loss = (v["weight"].float() * td.pow(2)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            before = dtable.max_priority
            dtable.update_priorities(batch["key"], (td.abs().detach() + 1e-6).float())  # on s, device to device
        s.synchronize()
        with tempfile.TemporaryDirectory() as tmp:
            buf.save(os.path.join(tmp, "ck"))  # the host learns the device's priorities before a checkpoint
        after = dtable.max_priority  # the running maximum priority
        want = max(before, float((td.abs() + 1e-6).max()))
        assert abs(after - want) <= 1e-5 * max(1.0, want), (before, after, want)
        return f"loss {loss.item():.4f}; {len(td)} priorities written on the device (max {after:.4f})"

    @check("jax.dlpack.from_dlpack")
    def _():
        try:
            import jax
            import jax.dlpack
        except ImportError:
            return ("skip", "no JAX here")
        if not any(d.platform == "gpu" for d in jax.devices()):
            return ("skip", "JAX sees no GPU")
        batch = table.sample_transitions(32)
        x = jax.dlpack.from_dlpack(batch["obs"])
        assert x.shape == (32, 8)
        return f"jax array {x.shape} {x.dtype}"

    @check("cupy.from_dlpack")
    def _():
        try:
            import cupy
        except ImportError:
            return ("skip", "no CuPy here")
        batch = table.sample_transitions(32)
        x = cupy.from_dlpack(batch["obs"])
        assert int(x.data.ptr) == batch["obs"].data_ptr
        return f"cupy array {x.shape}, same pointer"

    buf.close()
    failed = [r for r in RESULTS if r["status"] == "fail"]
    print(json.dumps({"summary": {r["check"]: r["status"] for r in RESULTS}}), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
