"""The cuda build of the package on the stand-in driver (make test-python-cuda): device
results, the DLPack capsule and stream protocol, and device priorities. Skipped with a
host library (make test-python)."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import trajring

SPEC = {"obs": {"shape": (4,)}, "action": {"dtype": "int64"}}


def device_build() -> bool:
    with trajring.Buffer(SPEC, num_envs=1, capacity=4) as b:
        return b.info()["backend"] == "gpu"


pytestmark = pytest.mark.skipif(not device_build(), reason="a host build of libtrajring: make test-python-cuda runs these")


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                ("lanes", ctypes.c_uint16), ("shape", ctypes.c_void_p), ("strides", ctypes.c_void_p),
                ("byte_offset", ctypes.c_uint64)]


def filled(device_selection: bool):
    buf = trajring.Buffer(SPEC, num_envs=2, capacity=64, seed=1)
    table = buf.table("per", "prioritized", alpha=1.0, seed=2, device_selection=device_selection)
    w = buf.trajectory_writer({"per": 2})
    for t in range(20):
        w.add(step_type=[0 if t == 0 else 1] * 2, next_step_type=[1, 1], reward=[7.0, 7.0], discount=[1.0, 1.0],
              obs=np.full((2, 4), t, np.float32), action=[t, t])
    w.flush()
    return buf, table


def test_device_results_and_capsules():
    buf, table = filled(False)
    with table.sample_transitions(8) as b:
        assert b["obs"].device == 2 and b["reward"].device == 2
        assert b["row"].device == 1 and b["key"].device == 1  # host-selected metadata
        assert (np.asarray(b["step"]) < 20).all()
        a = b["obs"]
        assert a.__dlpack_device__() == (2, 0)
        capsule = a.__dlpack__(stream=1)
        get = ctypes.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
        t = DLTensor.from_address(get(capsule, b"dltensor"))
        assert (t.device_type, t.ndim, t.data) == (2, 2, a.data_ptr)
        del t, capsule
        with pytest.raises(BufferError):
            a.__dlpack__(stream=0)
        with pytest.raises(trajring.DeviceTensorError):
            a.numpy()
        with pytest.raises(trajring.DeviceTensorError):
            a.tobytes()
    assert trajring.live_counts() == (0, 0)
    buf.close()


def test_device_priorities(tmp_path):
    buf, table = filled(True)
    assert table.max_priority == 1.0
    with table.sample_transitions(16) as b:
        assert b["key"].device == 2 and b["reward"].device == 2
        table.update_priorities(b["key"], b["reward"])  # device keys, device float32 priorities: 7.0 each
        with pytest.raises(trajring.DTypeError):
            table.update_priorities(b["key"], b["obs"])  # not 1-d
    buf.save(str(tmp_path / "ck"))  # the host learns the device's priorities before a checkpoint
    assert table.max_priority == 7.0
    buf.close()


def test_device_tensor_waits_for_an_in_place_sample():
    # A device tensor taken while a sample into its result is under way in
    # another thread waits for the sample to end, even one refilling in
    # place (a tensor lived when it began): its consumer's stream is ordered
    # after the sample's work, which is not queued before then
    # (capi/dlpack.go, trj_result_dlpack). trj_result_state shows the sample
    # under way, then the tensor's call waiting for it.
    import threading
    import time

    from trajring import _lib

    buf = trajring.Buffer(SPEC, num_envs=1, capacity=64, seed=1)
    table = buf.table("limited", "lifo", min_size=1, samples_per_insert=1.0, error_buffer=1.0)
    w = buf.writer()
    for t in range(10):
        w.add(step_type=[0 if t == 0 else 1], next_step_type=[1], reward=[1.0], discount=[1.0],
              obs=np.full((1, 4), t, np.float32), action=[t])
    table.insert(0, 0, 1)
    res = table.sample(1)
    assert res["obs"].device == 2
    held = res["obs"].__dlpack__(stream=1)  # a live tensor: the sample refills in place
    state = (ctypes.c_int64(), ctypes.c_int64())

    def current() -> tuple[int, int]:
        _lib.call(_lib.lib.trj_result_state, res._handle, ctypes.byref(state[0]), ctypes.byref(state[1]))
        return state[0].value, state[1].value

    def wait_until(want: tuple[int, int]) -> None:
        deadline = time.monotonic() + 30
        while current() != want:
            assert time.monotonic() < deadline, f"state {current()}, want {want}"
            time.sleep(0.001)

    rc: list[int] = []
    took: list[int] = []
    ptr = ctypes.c_void_p()

    def sample() -> None:
        out, err = ctypes.c_uint64(), _lib._errbuf()
        rc.append(_lib.lib.trj_table_sample(table._handle, 1, 60_000, res._handle, ctypes.byref(out), err, _lib._ERRCAP))

    def take() -> None:
        err = _lib._errbuf()
        took.append(_lib.lib.trj_result_dlpack(res._handle, 0, 0, 1, ctypes.byref(ptr), err, _lib._ERRCAP))

    sampler = threading.Thread(target=sample)
    sampler.start()
    wait_until((1, 0))
    taker = threading.Thread(target=take)
    taker.start()
    try:
        wait_until((1, 1))
        assert not took and not rc
    finally:
        table.insert(0, 5, 1)
        sampler.join()
        taker.join()
    assert rc == [0] and took == [0]
    capsule = _lib.capsule_new(ptr.value, _lib.CAPSULE_NAME[0], _lib.CAPSULE_DESTRUCTOR)
    del capsule, held
    res.release()
    assert trajring.live_counts() == (0, 0)
    buf.close()
