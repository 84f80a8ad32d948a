"""The device-resident memory pool (:mod:`service.devicepool`) against the host pool
(:mod:`service.pool`): the same operations leave the same slots, padding included, and
admissions write only the new slots. Runs on the CPU provider, whose "device" is host
memory (the code path CUDA takes), and on CUDA where a GPU and onnxruntime-gpu are
there (skipped otherwise, as on CI)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest

from service.devicegraphs import FLOAT_TYPES, build, graph_path
from service.devicepool import DeviceGraphs, DevicePool, DeviceSlice, DeviceState
from service.pool import MemoryPool, join_rows

PROVIDERS = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider"}
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            "CUDAExecutionProvider" not in ort.get_available_providers(),
            reason="needs a GPU and onnxruntime-gpu",
        ),
    ),
]


def graphs_on(device: str = "cpu") -> DeviceGraphs:
    options = ort.SessionOptions()
    if device == "cuda":  # every node on the GPU: a CPU fallback would copy through the host
        options.add_session_config_entry("session.disable_cpu_ep_fallback", "1")
    provider = PROVIDERS[device]
    return DeviceGraphs(
        device, lambda path: ort.InferenceSession(path, options, providers=[provider])
    )


def sentences(n: int, src_len: int, start: float = 0.0):
    """``n`` sentences of ``src_len`` positions (the last one a position shorter):
    memory ``(n, src_len, 3)``, keys ``(n, src_len, 2)``, mask ``(n, src_len)``."""
    memory = start + np.arange(n * src_len * 3, dtype=np.float32).reshape(n, src_len, 3) + 1
    keys = -memory[..., :2].copy()
    mask = np.ones((n, src_len), dtype=bool)
    mask[-1, src_len - 1 :] = False
    memory[~mask], keys[~mask] = 0, 0
    return memory, keys, mask


def host(pool) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(v) for v in (pool.memory, pool.keys, pool.mask))


def assert_same(device: DevicePool, reference: MemoryPool) -> None:
    assert (device.slots, device.width) == (reference.slots, reference.width)
    for got, want in zip(host(device), host(reference), strict=True):
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def on_device(arrays: tuple[np.ndarray, ...], device: str = "cpu") -> tuple[DeviceState, ...]:
    return tuple(DeviceState(ort.OrtValue.ortvalue_from_numpy(a, device, 0)) for a in arrays)


@pytest.mark.parametrize("where", DEVICES)
@pytest.mark.parametrize("inputs", ["device", "host"])
def test_same_slots_as_the_host_pool_through_every_operation(where, inputs):
    device, reference = DevicePool(graphs_on(where)), MemoryPool()
    rng = np.random.default_rng(0)
    start = 0.0
    for step in range(40):
        op = rng.choice(["append", "append", "compact"]) if reference.slots else "append"
        if op == "append":
            batch = sentences(int(rng.integers(1, 6)), int(rng.integers(1, 9)), start)
            start += 1000.0
            args = on_device(batch, where) if inputs == "device" else batch
            assert device.append(*args) == reference.append(*batch)
        else:
            keep = sorted(rng.choice(reference.slots, size=reference.slots // 2, replace=False))
            keep = [int(k) for k in rng.permutation(keep)]
            width = int(host(reference)[2][keep].sum(axis=1).max()) if keep else 1
            device.compact(keep, width)
            reference.compact(keep, width)
        assert_same(device, reference)
        if step == 25:
            device.clear()
            reference.clear()
            assert device.memory is None and device.slots == 0 == device.width


def test_admissions_within_capacity_write_only_the_new_slots():
    pool = DevicePool(graphs_on())
    pool.append(*on_device(sentences(3, 5)))
    buffers = tuple(b.data_ptr() for b in pool._buffers)
    before = host(pool)
    pool.append(*on_device(sentences(2, 4, start=50.0)))  # narrower: padded into place
    assert tuple(b.data_ptr() for b in pool._buffers) == buffers, "no reallocation"
    after = host(pool)
    for old, new in zip(before, after, strict=True):
        np.testing.assert_array_equal(new[:3], old)
    assert after[2][3:].sum(axis=1).tolist() == [4, 3]
    assert not after[0][3:, 4:].any() and not after[1][3:, 4:].any()
    # a wider sentence than the pool: the pool grows, live slots keep their contents
    pool.append(*on_device(sentences(1, 7, start=90.0)))
    assert pool.width == 7
    np.testing.assert_array_equal(host(pool)[0][:5, :5], after[0])
    assert not host(pool)[0][:5, 5:].any()


def test_views_bind_the_first_slots_by_address():
    pool = DevicePool(graphs_on())
    pool.append(*sentences(2, 3))
    memory = pool.memory
    assert isinstance(memory, DeviceSlice) and memory.shape == (2, 3, 3)
    assert memory.address == pool._buffers[0].data_ptr()
    later = DeviceSlice(pool._buffers[0], 1, first=1)
    assert later.address == pool._buffers[0].data_ptr() + 3 * 3 * 4
    np.testing.assert_array_equal(np.asarray(later), np.asarray(memory)[1:])
    with pytest.raises(ValueError, match="only be read by copying"):
        np.array(memory, copy=False)


@pytest.mark.parametrize("where", DEVICES)
@pytest.mark.parametrize("shape", [(3, 4), (3, 2, 4)])
def test_states_join_on_the_device(where, shape):
    pool = DevicePool(graphs_on(where))
    old = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    new = -old[:2]
    (joined,) = pool.join_states(on_device((old,), where), (new,))
    assert isinstance(joined, DeviceState)
    np.testing.assert_array_equal(np.asarray(joined), np.concatenate([old, new]))


def test_a_coverage_state_of_another_width_is_padded_on_the_host():
    pool = DevicePool(graphs_on())
    old, new = np.ones((2, 5), np.float32), np.full((1, 3), 2.0, np.float32)
    (joined,) = pool.join_states(on_device((old,)), on_device((new,)))
    np.testing.assert_array_equal(joined, join_rows(old, new))
    assert joined.shape == (3, 5) and not joined[2, 3:].any()


@pytest.mark.parametrize("kind", ["reslot", "concat"])
@pytest.mark.parametrize("dtype", sorted(FLOAT_TYPES))
def test_committed_graphs_are_what_the_builder_makes(kind, dtype):
    """``python -m service.devicegraphs`` rewrites them after a change to the builder."""
    path = graph_path(kind, dtype)
    assert path.read_bytes() == build(kind, dtype).SerializeToString(), (
        f"{path.name} is stale: run python -m service.devicegraphs"
    )


def test_graphs_are_package_data():
    pyproject = (Path(__file__).resolve().parents[2] / "pyproject.toml").read_text()
    assert '"graphs/*.onnx"' in pyproject


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_a_type_without_graphs_is_refused(dtype):
    with pytest.raises(ValueError, match=f"no device graph for {np.dtype(dtype).name} tensors"):
        graph_path("reslot", dtype)
