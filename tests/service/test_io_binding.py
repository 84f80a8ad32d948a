"""IO binding in :class:`service.runtime.OnnxModel`: decoder states stay on the device
between steps, encoder memory is uploaded once per pool change, and every number equals
the plain ``session.run`` path. The CPU provider runs the same code path as CUDA, so CI
covers it; the CUDA test needs a GPU and onnxruntime-gpu."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from models.options import DecodeOptions
from service.bundle import BundleError, load_bundle
from service.loop import decode
from service.runtime import DeviceState, RuntimeConfig

OPTIONS = [DecodeOptions(), DecodeOptions(beam_size=3, n_best=2), DecodeOptions(beam_size=2)]


def load(tiny_bundle, providers=("cpu",), **runtime):
    config = RuntimeConfig(providers, intra_op_threads=1, **runtime)
    return load_bundle(tiny_bundle.bundle_dir, config)


def sources(bundle, tiny_bundle, n: int = 24) -> list[list[int]]:
    return [bundle.src_tokenizer.encode(s) for s in tiny_bundle.sentences[:n]]


def test_mode_validation():
    with pytest.raises(ValueError, match="io_binding must be one of"):
        RuntimeConfig(("cpu",), io_binding="yes")


def test_auto_is_off_on_cpu(tiny_bundle):
    assert load(tiny_bundle).model.io_binding is False
    assert load(tiny_bundle, io_binding="on").model.io_binding is True


def test_bound_step_keeps_states_on_the_device_and_matches(tiny_bundle):
    plain, bound = load(tiny_bundle).model, load(tiny_bundle, io_binding="on").model
    ids = np.array([[5, 6, 7], [8, 9, 0]], dtype=np.int64)
    enc = plain.encode(ids, np.array([3, 2], dtype=np.int64))
    kwargs = dict(
        prev_tokens=np.array([2, 2], dtype=np.int64),
        parent_rows=np.array([0, 1], dtype=np.int64),
        row_sentence=np.array([0, 1], dtype=np.int64),
        memory=enc.memory,
        keys=enc.keys,
        mask=enc.mask,
        top_k=4,
    )
    a = plain.step(states=enc.states, **kwargs)
    b = bound.step(states=enc.states, **kwargs)
    assert all(isinstance(s, DeviceState) for s in b.states)
    host = (b.topk_values, b.topk_ids, b.eos_values, b.attention)
    for x, y in zip((a.topk_values, a.topk_ids, a.eos_values, a.attention), host, strict=True):
        assert isinstance(y, np.ndarray)
        np.testing.assert_array_equal(x, y)
    for x, y in zip(a.states, b.states, strict=True):
        assert y.shape == x.shape
        np.testing.assert_array_equal(x, np.asarray(y))

    # Later steps: device states go straight back in; the pool, seen a second time, is
    # uploaded once and then reused.
    assert bound._bound_values == ()
    again = dict(kwargs, parent_rows=np.array([1, 1], dtype=np.int64))
    a2 = plain.step(states=a.states, **again)
    b2 = bound.step(states=b.states, **again)
    uploaded = bound._bound_values
    assert len(uploaded) == 3 and all(isinstance(v, ort.OrtValue) for v in uploaded)
    a3 = plain.step(states=a2.states, **again)
    b3 = bound.step(states=b2.states, **again)
    assert bound._bound_values is uploaded
    for x, y in ((a2, b2), (a3, b3)):
        np.testing.assert_array_equal(x.topk_values, y.topk_values)
        np.testing.assert_array_equal(x.states[0], np.asarray(y.states[0]))


def test_pool_is_uploaded_on_its_second_step_only(tiny_bundle):
    bound = load(tiny_bundle, io_binding="on").model
    memory = np.zeros((1, 2, 3), dtype=np.float32)
    assert bound._on_device((memory, memory)) is None  # first sight: host input
    first = bound._on_device((memory, memory))
    assert all(isinstance(v, ort.OrtValue) for v in first)
    assert bound._on_device((memory, memory)) is first
    copy = memory.copy()
    assert bound._on_device((copy, memory)) is None  # the pool changed
    assert bound._on_device((memory, memory)) is first  # an older upload is still valid
    second = bound._on_device((copy, memory))
    assert second is not first and bound._on_device((copy, memory)) is second


def test_decode_loop_with_io_binding_equals_without(tiny_bundle):
    """Admissions mid-decode concatenate device states with new ones; compaction swaps
    the pool's arrays: the translations and scores must not change at all."""
    plain, bound = load(tiny_bundle), load(tiny_bundle, io_binding="on")
    src = sources(plain, tiny_bundle)
    options = [OPTIONS[i % len(OPTIONS)] for i in range(len(src))]
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=5)
    got = decode(bound.model, src, options=options, special=bound.special, batch_size=5)
    assert got == want
    assert bound.model.stats.decoder_calls == plain.model.stats.decoder_calls > len(src) // 5


needs_cuda = pytest.mark.skipif(
    "CUDAExecutionProvider" not in ort.get_available_providers(),
    reason="needs a GPU and onnxruntime-gpu",
)


@needs_cuda
def test_cuda_io_binding_translates_like_cpu(tiny_bundle):
    cpu = load(tiny_bundle)
    try:
        gpu = load(tiny_bundle, providers=("cuda",), require_gpu=True)
    except BundleError as exc:  # onnxruntime-gpu installed, but no usable GPU or CUDA
        pytest.skip(f"the CUDA provider does not run here: {exc}")
    assert gpu.model.provider == "CUDAExecutionProvider" and gpu.model.io_binding
    src = sources(cpu, tiny_bundle)
    want = decode(cpu.model, src, options=OPTIONS[1], special=cpu.special)
    got = decode(gpu.model, src, options=OPTIONS[1], special=gpu.special)
    assert [[h.tokens for h in n] for n in got] == [[h.tokens for h in n] for n in want]
    for g, w in zip(got, want, strict=True):
        assert [h.score for h in g] == pytest.approx([h.score for h in w], abs=1e-4)
