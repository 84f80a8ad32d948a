"""Encoder calls on fixed-shape sessions (:mod:`service.encodergraphs`), the path CUDA
graphs replay on a GPU. On the CPU provider the same sessions and buffers run without
capturing, so CI checks here that padding a call to its bucket changes no output."""

from __future__ import annotations

import logging
import threading

import numpy as np
import pytest

from export import spec
from service.bundle import load_bundle
from service.decoding import pad_batch
from service.devicepool import DeviceSlice, DeviceState
from service.encodergraphs import (
    BATCH_BUCKETS,
    MAX_SETS,
    MAX_WIDTH,
    PREPARED_SETS,
    encoder_layout,
)
from service.sessions import RuntimeConfig


def load(tiny_bundle, **runtime):
    return load_bundle(
        tiny_bundle.bundle_dir, RuntimeConfig(("cpu",), intra_op_threads=1, **runtime)
    )


def batch(bundle, tiny_bundle, n: int, offset: int = 0):
    texts = (tiny_bundle.sentences * 20)[offset : offset + n]
    return pad_batch([bundle.src_tokenizer.encode(t) for t in texts], bundle.config.pad_id)


def host(enc):
    return [np.array(x) for x in (enc.memory, enc.keys, enc.mask, *enc.states)]


@pytest.fixture
def models(tiny_bundle):
    return load(tiny_bundle, io_binding="off"), load(tiny_bundle, io_binding="on", cuda_graphs="on")


@pytest.mark.parametrize("sentences", [1, 5, 8, 9, 40])
def test_a_padded_call_encodes_exactly_what_a_plain_call_does(models, tiny_bundle, sentences):
    plain, fixed = models
    ids, lengths = batch(plain, tiny_bundle, sentences)
    want = host(plain.model.encode(ids, lengths))
    enc = fixed.model.encode(ids, lengths)
    assert isinstance(enc.memory, DeviceSlice)
    got = host(enc)
    width = ids.shape[1]
    bucket = fixed.model.encoder_graphs.bucket(sentences, width)
    assert got[0].shape[:2] == (sentences, bucket[1]) and bucket[0] >= sentences
    for w, g in zip(want, got, strict=True):
        # memory, keys and mask are as wide as the bucket: their first columns are the
        # plain call's, bit for bit, the rest padding
        assert np.array_equal(g[:, :width] if w.ndim >= 2 and g.shape[1] != w.shape[1] else g, w)
    assert not got[2][:, width:].any()
    assert not got[0][:, width:].any()
    assert fixed.model.stats.graph_encodes == 1 == fixed.model.stats.encoder_calls


def test_outputs_not_yet_joined_are_never_overwritten(models, tiny_bundle):
    """An admission's groups are all encoded before any joins the loop: each call takes
    an output set nothing refers to; a set is used again once its views are gone."""
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    # different sentences, one bucket
    candidates = [batch(plain, tiny_bundle, 4, offset=i) for i in range(40)]
    key = graphs.bucket(4, candidates[0][0].shape[1])
    calls = [c for c in candidates if graphs.bucket(4, c[0].shape[1]) == key][: MAX_SETS + 1]
    assert len(calls) == MAX_SETS + 1
    held = [fixed.model.encode(*c) for c in calls[:MAX_SETS]]
    snapshots = [host(e) for e in held]
    # every set of the bucket is held: the next call runs the plain way (right, too)
    extra = fixed.model.encode(*calls[-1])
    assert isinstance(extra.memory, DeviceState)
    assert np.array_equal(np.array(extra.memory), plain.model.encode(*calls[-1]).memory)
    for enc, snap, call in zip(held, snapshots, calls, strict=False):
        assert all(np.array_equal(a, b) for a, b in zip(host(enc), snap, strict=True))
        assert np.array_equal(snap[0][:, : call[0].shape[1]], plain.model.encode(*call).memory)
    (bucket,) = graphs._buckets.values()
    assert len(bucket.sets) == MAX_SETS
    # a state the loop keeps (a view of the set's buffer) holds its set too
    state = held[0].states[0]
    del held, snapshots, extra
    again = fixed.model.encode(*calls[0])
    assert isinstance(again.memory, DeviceSlice) and len(bucket.sets) == MAX_SETS
    assert again.memory.buffer is not state.buffer
    assert fixed.model.stats.graph_encodes == MAX_SETS + 1


def test_calls_past_the_buckets_run_plain(models, tiny_bundle):
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    assert graphs.bucket(BATCH_BUCKETS[-1] + 1, 10) is None
    assert graphs.bucket(1, MAX_WIDTH + 1) is None
    assert graphs.bucket(3, 17) == (BATCH_BUCKETS[0], 32)
    ids, lengths = batch(plain, tiny_bundle, BATCH_BUCKETS[-1] + 1)
    enc = fixed.model.encode(ids, lengths)
    assert isinstance(enc.memory, DeviceState)
    assert np.array_equal(np.array(enc.memory), plain.model.encode(ids, lengths).memory)
    assert fixed.model.stats.graph_encodes == 0


def test_a_failing_call_turns_them_off_and_encodes_plainly(models, tiny_bundle, caplog):
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    ids, lengths = batch(plain, tiny_bundle, 3)
    fixed.model.encode(ids, lengths)
    (bucket,) = graphs._buckets.values()

    class Broken:
        def run_with_iobinding(self, *args):
            raise RuntimeError("capture refused")

    bucket.session = Broken()
    with caplog.at_level(logging.WARNING):
        enc = fixed.model.encode(ids, lengths)
    assert "encoder graphs off" in caplog.text and "capture refused" in caplog.text
    assert not graphs.enabled
    assert np.array_equal(np.array(enc.memory), plain.model.encode(ids, lengths).memory)


def test_only_beside_the_decoders_fixed_buffers(tiny_bundle):
    assert load(tiny_bundle, io_binding="on").model.encoder_graphs is None
    assert load(tiny_bundle, io_binding="off").model.encoder_graphs is None
    model = load(tiny_bundle, io_binding="on", cuda_graphs="on").model
    layout = encoder_layout(model.encoder, spec.encoder_outputs(model.state_names))
    assert layout.axes == ("batch", "src_len")
    assert [o[2][0] for o in layout.outputs[:3]] == [None, None, None]  # as long as the source
    assert all(None not in o[2] for o in layout.outputs[3:])  # states: fixed past the batch


def narrow_calls(plain, tiny_bundle, n: int):
    """``n`` different one-sentence calls of the (8, 16) bucket."""
    candidates = [batch(plain, tiny_bundle, 1, offset=i) for i in range(40)]
    calls = [c for c in candidates if c[0].shape[1] <= 16][:n]
    assert len(calls) == n
    return calls


def test_prepare_makes_every_batch_bucket_at_a_width(models, tiny_bundle, caplog):
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    graphs.prepare((16,))
    assert graphs.prepared and graphs.enabled
    assert sorted(graphs._buckets) == [(b, 16) for b in BATCH_BUCKETS]
    assert all(len(b.sets) == PREPARED_SETS for b in graphs._buckets.values())
    (call,) = narrow_calls(plain, tiny_bundle, 1)
    assert isinstance(fixed.model.encode(*call).memory, DeviceSlice)
    assert len(graphs._buckets) == len(BATCH_BUCKETS)  # nothing new made
    graphs._make = lambda dims, capture: (_ for _ in ()).throw(RuntimeError("no device"))
    with caplog.at_level(logging.WARNING):
        graphs.prepare((32,))
    assert not graphs.enabled and not graphs._buckets  # its sessions and buffers let go
    assert "preparing the fixed-shape encoder failed: no device" in caplog.text


@pytest.mark.parametrize("off", [1.0, np.nan], ids=["off by one", "NaN"])
def test_prepare_turns_off_a_graph_that_answers_unlike_a_plain_call(
    models, tiny_bundle, caplog, off
):
    """Each prepared set is replayed on random lengths and compared with a plain call:
    a capture that baked in its own lengths (an RNN reading ``sequence_lens`` on the
    host) answers wrong, and the graphs go off before serving; a NaN is no match."""
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    real = graphs._plain

    def wrong(ids, lengths):
        memory, *rest = real(ids, lengths)
        memory = memory.copy()
        memory[0, 0, 0] += off
        return [memory, *rest]

    graphs._plain = wrong
    with caplog.at_level(logging.WARNING):
        graphs.prepare((16,))
    assert not graphs.enabled and not graphs.prepared
    assert "a replay's memory differs from a plain call's (8 sentences of 16 tokens)" in caplog.text
    (call,) = narrow_calls(plain, tiny_bundle, 1)
    enc = fixed.model.encode(*call)
    assert isinstance(enc.memory, DeviceState)
    assert np.array_equal(np.array(enc.memory), plain.model.encode(*call).memory)


def test_the_first_thread_to_encode_owns_the_buffers_and_prepares_them(models, tiny_bundle):
    """ONNX Runtime keeps a CUDA graph per thread, and lanes share one model: the first
    thread that encodes (an engine's encoder thread, in the warm-up) owns the buffers
    and, where it captures, prepares every bucket in that first call; any other
    thread's calls run the plain way, and every call encodes what a plain call does."""
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    make = graphs._make
    graphs._make = lambda dims, capture: make(dims, False)  # a CPU cannot capture
    graphs.capture = True  # ... but goes through what a capturing owner does
    calls = [batch(plain, tiny_bundle, n, offset=n) for n in (1, 3, 6, 9, 12)]
    want = [plain.model.encode(*c).memory for c in calls]
    results: dict[str, list] = {}

    def encode_all(name: str):
        results[name] = [
            [np.array(fixed.model.encode(*c).memory)[:, : c[0].shape[1]] for c in calls]
            for _ in range(5)
        ]

    owner = threading.Thread(target=encode_all, args=("owner",))
    owner.start()
    owner.join()
    assert graphs.prepared and len(graphs._buckets) == len(BATCH_BUCKETS) * 4
    assert fixed.model.stats.graph_encodes == 5 * len(calls)
    others = [threading.Thread(target=encode_all, args=(f"lane{i}",)) for i in range(2)]
    for t in others:
        t.start()
    for t in others:
        t.join()
    encode_all("main")
    assert fixed.model.stats.graph_encodes == 5 * len(calls)  # none of theirs
    for runs in results.values():
        for got in runs:
            assert all(np.array_equal(g, w) for g, w in zip(got, want, strict=True))


def test_once_prepared_nothing_more_is_made(models, tiny_bundle):
    """On CUDA the sets are captured at start-up only (a capture while serving could
    collide with the decoder thread's device calls): a call outside the prepared
    buckets, or with both sets of its bucket held, runs the plain way."""
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    graphs.prepare((16,), sets=2)
    assert graphs.prepared
    narrow = narrow_calls(plain, tiny_bundle, 3)
    candidates = [batch(plain, tiny_bundle, 1, offset=i) for i in range(40)]
    wide = next(c for c in candidates if c[0].shape[1] > 16)
    held = [fixed.model.encode(*c) for c in narrow[:2]]
    assert all(isinstance(e.memory, DeviceSlice) for e in held)
    third = fixed.model.encode(*narrow[2])
    assert isinstance(third.memory, DeviceState)
    assert isinstance(fixed.model.encode(*wide).memory, DeviceState)
    assert np.array_equal(np.array(third.memory), plain.model.encode(*narrow[2]).memory)
    assert len(graphs._buckets) == len(BATCH_BUCKETS)
    assert all(len(b.sets) == 2 for b in graphs._buckets.values())
    del held
    assert isinstance(fixed.model.encode(*narrow[2]).memory, DeviceSlice)


def test_preparing_stops_at_its_time_budget(models, tiny_bundle, monkeypatch, caplog):
    """Preparing runs in the warm-up, whose translation waits a minute: past its budget
    the shapes made so far serve (the smallest first) and the others run plain."""
    from service import encodergraphs

    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    monkeypatch.setattr(encodergraphs, "PREPARE_SECONDS", 0.0)
    with caplog.at_level(logging.WARNING):
        graphs.prepare((16, 32))
    assert graphs.prepared and graphs.enabled
    assert list(graphs._buckets) == [(BATCH_BUCKETS[0], 16)]
    assert "stopped preparing after 0 s, 1 of 6 shapes made" in caplog.text
    (call,) = narrow_calls(plain, tiny_bundle, 1)
    assert isinstance(fixed.model.encode(*call).memory, DeviceSlice)
    ids, lengths = batch(plain, tiny_bundle, 20)
    assert isinstance(fixed.model.encode(ids, lengths).memory, DeviceState)
