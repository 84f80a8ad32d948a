"""IO binding in :class:`service.runtime.OnnxModel`: encoder outputs, the memory pool
and the decoder states stay on the device (:mod:`service.devicepool`), and every number
equals the plain ``session.run`` path. The CPU provider runs the same code path as CUDA,
so CI covers it; the CUDA test needs a GPU and onnxruntime-gpu."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from models.options import DecodeOptions
from service.bundle import BundleError, load_bundle
from service.devicepool import DevicePool, DeviceState
from service.loop import decode
from service.pool import MemoryPool
from service.sessions import RuntimeConfig

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


def _float16_memory_bundle(tiny_bundle, directory):
    """A copy of the tiny bundle whose encoder emits its memory as float16 (a Cast on
    that output), its manifest's checksum updated."""
    import json
    import shutil

    import onnx
    from onnx import TensorProto, helper

    from export import spec
    from service.bundle import sha256_file

    bundle = directory / "fp16-memory"
    shutil.copytree(tiny_bundle.bundle_dir, bundle)
    model = onnx.load(bundle / "encoder.onnx")
    memory = next(o for o in model.graph.output if o.name == spec.MEMORY)
    for node in model.graph.node:  # every node keeps its float32 memory
        node.output[:] = [f"{spec.MEMORY}_f32" if o == spec.MEMORY else o for o in node.output]
        node.input[:] = [f"{spec.MEMORY}_f32" if i == spec.MEMORY else i for i in node.input]
    model.graph.node.append(
        helper.make_node("Cast", [f"{spec.MEMORY}_f32"], [spec.MEMORY], to=TensorProto.FLOAT16)
    )
    memory.type.tensor_type.elem_type = TensorProto.FLOAT16
    onnx.save(model, bundle / "encoder.onnx")
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["files"]["encoder.onnx"] = sha256_file(bundle / "encoder.onnx")
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    return bundle


def test_io_binding_refuses_an_encoder_without_float32_memory(tiny_bundle, tmp_path):
    bundle = _float16_memory_bundle(tiny_bundle, tmp_path)
    config = RuntimeConfig(("cpu",), intra_op_threads=1, io_binding="on")
    with pytest.raises(
        BundleError, match=r"float32 encoder outputs.*tensor\(float16\).*--io-binding off"
    ):
        load_bundle(bundle, config)
    # the host path takes it as it is
    assert (
        load_bundle(bundle, RuntimeConfig(("cpu",), intra_op_threads=1)).model.io_binding is False
    )


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

    # Later steps: device states go straight back in, the pool bound where it lies.
    pool = bound.new_pool()
    assert isinstance(pool, DevicePool) and isinstance(plain.new_pool(), MemoryPool)
    device_enc = bound.encode(ids, np.array([3, 2], dtype=np.int64))
    assert all(isinstance(x, DeviceState) for x in (device_enc.memory, *device_enc.states))
    pool.append(device_enc.memory, device_enc.keys, device_enc.mask)
    again = dict(kwargs, parent_rows=np.array([1, 1], dtype=np.int64))
    a2 = plain.step(states=a.states, **again)
    b2 = bound.step(
        states=b.states, **dict(again, memory=pool.memory, keys=pool.keys, mask=pool.mask)
    )
    for x, y in ((a2.topk_values, b2.topk_values), (a2.states[0], b2.states[0])):
        np.testing.assert_array_equal(x, np.asarray(y))


def test_decode_loop_with_io_binding_equals_without(tiny_bundle):
    """Admissions mid-decode concatenate device states with new ones; compaction swaps
    the pool's arrays: the translations and scores must not change at all."""
    # one step a call on both sides (IO binding's auto): the same calls
    plain, bound = load(tiny_bundle, greedy_steps=1), load(tiny_bundle, io_binding="on")
    src = sources(plain, tiny_bundle)
    options = [OPTIONS[i % len(OPTIONS)] for i in range(len(src))]
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=5)
    got = decode(bound.model, src, options=options, special=bound.special, batch_size=5)
    assert got == want
    assert bound.model.stats.decoder_calls == plain.model.stats.decoder_calls > len(src) // 5


@pytest.mark.parametrize("cuda_graphs", ["off", "on"])
def test_forced_tokens_under_io_binding_equal_the_host_path(tiny_bundle, cuda_graphs):
    """Steps that force tokens fetch every row's log-probs (service.forced), bound to the
    host beside the top-k, past the fixed buffers of the graph steps: prefixes (greedy
    and beam) and whole forced targets (Score) beside free sentences, as on host arrays."""
    plain = load(tiny_bundle, greedy_steps=1)
    bound = load(tiny_bundle, io_binding="on", cuda_graphs=cuda_graphs)
    src = sources(plain, tiny_bundle)
    free = decode(plain.model, src, options=DecodeOptions(max_length=12), special=plain.special)
    eos = plain.special.eos
    prefixes = [(h[0].tokens[:2], (*h[0].tokens[::-1], eos), ())[i % 3] for i, h in enumerate(free)]
    options = [OPTIONS[i % 2] if i % 3 != 1 else DecodeOptions() for i in range(len(src))]
    kwargs = {"options": options, "prefixes": prefixes, "batch_size": 5}
    want = decode(plain.model, src, special=plain.special, **kwargs)
    got = decode(bound.model, src, special=bound.special, **kwargs)
    assert got == want
    scored = [hyps[0] for i, hyps in enumerate(got) if i % 3 == 1]
    assert scored and all(h.token_log_probs is not None for h in scored)


@pytest.mark.parametrize("batch_size", [3, 8])
def test_greedy_steps_with_io_binding_equal_them_on_host_arrays(tiny_bundle, batch_size):
    """Several greedy steps a call, bound: states stay on the device between calls (and
    between a call of several steps and a single step, when a beam request is in the
    batch), and every token, score and call equals the host path's with as many steps."""
    plain = load(tiny_bundle, greedy_steps=4)
    bound = load(tiny_bundle, io_binding="on", greedy_steps=4)
    assert bound.model.greedy_steps == plain.model.greedy_steps == 4
    src = sources(plain, tiny_bundle)
    # EOS blocked, then forced mid-call (the mask uploaded each call), and beams
    greedy = [DecodeOptions(min_length=7, max_length=11), DecodeOptions()]
    options = [greedy[i % 2] if i % 6 else OPTIONS[1] for i in range(len(src))]
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=batch_size)
    got = decode(bound.model, src, options=options, special=bound.special, batch_size=batch_size)
    assert got == want
    stats, host = bound.model.stats, plain.model.stats
    assert (stats.decoder_calls, stats.decoder_steps) == (host.decoder_calls, host.decoder_steps)
    assert stats.decoder_steps > stats.decoder_calls  # some calls ran several steps


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


def test_server_with_device_state_answers_like_the_host_path(server_factory, tiny_bundle):
    """The whole engine under IO binding: the encoder thread hands device-resident
    encodings to the scheduler, which admits them into the device pool while other
    requests decode; the answers are the host path's."""
    from tests.service.server_helpers import (
        answers_under_load,
        assert_same_answers,
        mixed_requests,
    )

    def runtime(mode: str) -> dict:
        return {"runtime": RuntimeConfig(("cpu",), intra_op_threads=1, io_binding=mode)}

    host, device = (server_factory(server=runtime(m)) for m in ("off", "on"))
    assert device.engines["tiny"].bundle.model.io_binding
    requests = mixed_requests(tiny_bundle.sentences)
    want, got = (answers_under_load(server.port, requests) for server in (host, device))
    # Which sentences share a step depends on timing, and fp32 GEMMs over other batch
    # shapes round differently in the last bits (two host-path servers differ alike):
    # the tokens are the same, the scores within 1e-4.
    assert_same_answers(got, want, atol=1e-4)
