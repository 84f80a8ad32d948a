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
from service.runtime import RuntimeConfig


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


def test_prepare_makes_every_batch_bucket_at_a_width(models, tiny_bundle):
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    graphs.prepare((16,))
    assert sorted(graphs._buckets) == [(b, 16) for b in BATCH_BUCKETS]
    assert all(len(b.sets) == PREPARED_SETS for b in graphs._buckets.values())
    ids, lengths = batch(plain, tiny_bundle, 3)
    if graphs.bucket(3, ids.shape[1]) == (BATCH_BUCKETS[0], 16):
        fixed.model.encode(ids, lengths)
        assert len(graphs._buckets) == len(BATCH_BUCKETS)  # nothing new made
    graphs._make = lambda dims, capture: (_ for _ in ()).throw(RuntimeError("no device"))
    graphs.prepare((32,))
    assert not graphs.enabled


def test_lanes_sharing_the_model_encode_side_by_side(models, tiny_bundle):
    """Lanes share one model: a call while another thread's is on the buffers runs the
    plain way, and every call encodes what a plain call does."""
    plain, fixed = models
    calls = [batch(plain, tiny_bundle, n, offset=n) for n in (1, 3, 6, 9, 12)]
    want = [plain.model.encode(*c).memory for c in calls]
    errors = []

    def encode_all():
        for _ in range(20):
            for c, w in zip(calls, want, strict=True):
                got = np.array(fixed.model.encode(*c).memory)[:, : c[0].shape[1]]
                if not np.array_equal(got, w):
                    errors.append(c)

    threads = [threading.Thread(target=encode_all) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    stats = fixed.model.stats
    assert 0 < stats.graph_encodes <= stats.encoder_calls == 3 * 20 * len(calls)


def test_once_prepared_nothing_more_is_made(models, tiny_bundle):
    """On CUDA the sets are captured at start-up only (a capture while serving could
    collide with the decoder thread's device calls): a call outside the prepared
    buckets, or with both sets of its bucket held, runs the plain way."""
    plain, fixed = models
    graphs = fixed.model.encoder_graphs
    graphs.prepare((16,), sets=2)
    assert graphs.prepared
    candidates = [batch(plain, tiny_bundle, 1, offset=i) for i in range(40)]
    narrow = [c for c in candidates if c[0].shape[1] <= 16][:3]
    wide = next(c for c in candidates if c[0].shape[1] > 16)
    assert len(narrow) == 3
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
