"""Decoder steps on fixed, bucketed buffers (:mod:`service.cudagraphs`), the path CUDA
graphs replay. The CPU provider runs the same buffers, bindings and ping-pong without
capturing a graph, so CI checks here that the path decodes exactly what plain steps
decode; ``tests/service/test_gpu.py`` checks the captured graphs on a GPU."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from models.options import DecodeOptions
from service.bundle import BundleError, load_bundle
from service.cudagraphs import ROW_BUCKETS, GraphSteps, static_state_dims
from service.decoding import make_search
from service.devicepool import MIN_BUCKET_SLOTS, MIN_BUCKET_WIDTH, DevicePool, bucketed
from service.loop import DecodeLoop, decode
from service.sessions import RuntimeConfig

OPTIONS = [
    DecodeOptions(),
    DecodeOptions(beam_size=3, n_best=2),
    DecodeOptions(beam_size=2),
    DecodeOptions(beam_size=5, n_best=3),
]


def load(tiny_bundle, **runtime):
    return load_bundle(
        tiny_bundle.bundle_dir, RuntimeConfig(("cpu",), intra_op_threads=1, **runtime)
    )


def assert_same(got, want, *, atol: float = 1e-5) -> None:
    """The same tokens (and attention shapes) as plain steps, scores within ``atol``:
    padded rows and columns change the GEMMs' and softmax's shapes, which rounds the last
    bits differently (as any other batch composition does), never a token. Scores of a
    hundred and more differ by a float32 ulp or two there (1.5e-5 at 151, seen on an AMD
    EPYC): hence a relative tolerance of a few ulps beside ``atol``."""
    assert [[h.tokens for h in n] for n in got] == [[h.tokens for h in n] for n in want]
    for g, w in zip(got, want, strict=True):
        close = dict(abs=atol, rel=4e-7)
        assert [h.score for h in g] == pytest.approx([h.score for h in w], **close)
        assert [h.log_prob for h in g] == pytest.approx([h.log_prob for h in w], **close)
        for hg, hw in zip(g, w, strict=True):
            if hw.attention is not None:
                np.testing.assert_allclose(hg.attention, hw.attention, atol=atol)


def sources(bundle, tiny_bundle, n: int = 40) -> list[list[int]]:
    return [bundle.src_tokenizer.encode(s) for s in (tiny_bundle.sentences * 3)[:n]]


def test_mode_validation(tiny_bundle):
    with pytest.raises(ValueError, match="cuda_graphs must be one of"):
        RuntimeConfig(("cpu",), cuda_graphs="yes")
    with pytest.raises(BundleError, match="--cuda-graphs on needs .*--io-binding on"):
        load(tiny_bundle, cuda_graphs="on", io_binding="off")
    # auto: only with CUDA (nothing to capture on a CPU)
    assert load(tiny_bundle, io_binding="on").model.graph_steps is None
    assert load(tiny_bundle, io_binding="on", cuda_graphs="on").model.graph_steps is not None


@pytest.mark.parametrize("batch_size", [1, 5, 40])
def test_fixed_buffer_steps_decode_exactly_like_plain_steps(tiny_bundle, batch_size):
    """Sentences join mid-decode (states copied into the fixed buffers, the pool grown
    and compacted into bucketed, reused buffers), rows change bucket, beams and greedy
    mix: every token and score equals plain IO-binding steps'."""
    plain = load(tiny_bundle, io_binding="on")
    fixed = load(tiny_bundle, io_binding="on", cuda_graphs="on")
    src = sources(plain, tiny_bundle)
    options = [OPTIONS[i % len(OPTIONS)] for i in range(len(src))]
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=batch_size)
    got = decode(fixed.model, src, options=options, special=fixed.special, batch_size=batch_size)
    assert_same(got, want)
    steps = fixed.model.graph_steps
    # every step fitted (all under the largest bucket, one thread)
    stats = fixed.model.stats
    assert stats.graph_steps == stats.decoder_calls > 0
    # the encoder calls ran on fixed-shape sessions too (service.encodergraphs)
    assert stats.graph_encodes == stats.encoder_calls > 0
    assert stats.graph_upload_seconds > 0 and stats.graph_run_seconds > 0
    assert stats.graph_download_seconds > 0
    # a handful of buffer sets recur: far fewer graphs than steps
    assert 0 < steps.graphs < stats.graph_steps // 4


@pytest.mark.parametrize("batch_size", [1, 6, 16])
def test_greedy_steps_through_fixed_buffers_decode_like_plain_bound_calls(tiny_bundle, batch_size):
    """Several greedy steps a call on the fixed buffers (their own graph per bucket, the
    decoder's state buffers shared): the same tokens as plain bound calls of as many
    steps, while beam requests come and go (calls switch between one step and several,
    the states staying in the shared buffers) and rows change bucket."""
    plain = load(tiny_bundle, io_binding="on", greedy_steps=3)
    fixed = load(tiny_bundle, io_binding="on", cuda_graphs="on", greedy_steps=3)
    model = fixed.model
    assert model.greedy_graph_steps is not None and model.greedy_graph_steps.steps == 3
    assert model.greedy_graph_steps._states is model.graph_steps._states
    src = sources(plain, tiny_bundle)
    # EOS blocked, then forced mid-call (the mask uploaded each call), and beams
    greedy = [DecodeOptions(min_length=7, max_length=11), DecodeOptions()]
    options = [greedy[i % 2] if i % 5 else OPTIONS[1] for i in range(len(src))]
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=batch_size)
    got = decode(model, src, options=options, special=fixed.special, batch_size=batch_size)
    assert_same(got, want)
    stats = model.stats
    assert stats.graph_steps == stats.decoder_calls  # every call on the fixed buffers
    assert stats.decoder_steps > stats.decoder_calls  # some of them several steps
    assert 0 < model.greedy_graph_steps.graphs < stats.graph_steps


def test_greedy_steps_run_on_fixed_buffers_only_in_their_owners_thread(tiny_bundle):
    """The greedy steps' buffers belong to the decoder's owner: a second thread's calls
    run plain (bound), and both threads decode right."""
    plain = load(tiny_bundle, io_binding="on", greedy_steps=3)
    fixed = load(tiny_bundle, io_binding="on", cuda_graphs="on", greedy_steps=3)
    src = sources(plain, tiny_bundle, 8)
    options = DecodeOptions()
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=8)
    assert_same(decode(fixed.model, src, options=options, special=fixed.special), want)
    before = fixed.model.stats.graph_steps
    result = []
    worker = threading.Thread(
        target=lambda: result.append(
            decode(fixed.model, src, options=options, special=fixed.special, batch_size=8)
        )
    )
    worker.start()
    worker.join()
    assert_same(result[0], want)
    assert fixed.model.stats.graph_steps == before  # the other thread's calls ran plain


def test_attention_and_nbest_through_fixed_buffers(tiny_bundle):
    plain = load(tiny_bundle, io_binding="on")
    fixed = load(tiny_bundle, io_binding="on", cuda_graphs="on")
    src = sources(plain, tiny_bundle, 12)
    options = DecodeOptions(beam_size=4, n_best=4, return_attention=True)
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=3)
    got = decode(fixed.model, src, options=options, special=fixed.special, batch_size=3)
    assert_same(got, want)
    assert fixed.model.stats.graph_steps > 0


def test_steps_beyond_the_largest_bucket_run_plain(tiny_bundle):
    """More rows than the largest bucket: those steps take the plain path (and the next
    fitting step copies the plain path's states into the fixed buffers)."""
    plain = load(tiny_bundle, io_binding="on")
    fixed = load(tiny_bundle, io_binding="on", cuda_graphs="on")
    model = fixed.model
    small = GraphSteps(
        model.graph_steps.session,
        "cpu",
        model.state_names,
        static_state_dims(model.decoder, model.state_names),
        model._graphs.copy_rows,
        model.stats,
        capture=False,
        max_rows=8,
    )
    assert small.buckets == (8,)
    model.graph_steps = small
    src = sources(plain, tiny_bundle, 12)
    options = DecodeOptions(beam_size=3, n_best=2)
    want = decode(plain.model, src, options=options, special=plain.special, batch_size=12)
    got = decode(model, src, options=options, special=fixed.special, batch_size=12)
    assert_same(got, want)
    # 12 sentences x 3 beams run plain; steps shrink to 8 rows or fewer as they finish
    assert 0 < model.stats.graph_steps < model.stats.decoder_calls


def test_another_threads_step_runs_plain(tiny_bundle):
    """The fixed buffers belong to the first thread that steps through them (one decode
    loop); a second loop's step on the same model runs plain, and both decode right."""
    plain = load(tiny_bundle, io_binding="on")
    fixed = load(tiny_bundle, io_binding="on", cuda_graphs="on")
    src = sources(plain, tiny_bundle, 8)
    want = decode(plain.model, src, options=OPTIONS[1], special=plain.special, batch_size=8)
    got = decode(fixed.model, src, options=OPTIONS[1], special=fixed.special, batch_size=8)
    replays = fixed.model.stats.graph_steps
    other = []
    thread = threading.Thread(
        target=lambda: other.append(
            decode(fixed.model, src, options=OPTIONS[1], special=fixed.special, batch_size=8)
        )
    )
    thread.start()
    thread.join()
    assert_same(got, want)
    assert_same(other[0], want)
    assert fixed.model.stats.graph_steps == replays > 0


def test_a_reused_thread_ident_does_not_pass_for_the_owner(tiny_bundle, monkeypatch):
    """A thread's ident may be reused once it ends: ownership follows the thread itself
    (here every thread reports the owner's ident, the worst case of reuse)."""
    import types

    from service import cudagraphs

    owner_ident = threading.get_ident()
    reusing = types.SimpleNamespace(
        get_ident=lambda: owner_ident, current_thread=threading.current_thread
    )
    monkeypatch.setattr(cudagraphs, "threading", reusing)
    fixed = load(tiny_bundle, io_binding="on", cuda_graphs="on")
    src = sources(fixed, tiny_bundle, 8)
    decode(fixed.model, src, options=OPTIONS[1], special=fixed.special, batch_size=8)
    replays = fixed.model.stats.graph_steps
    thread = threading.Thread(
        target=decode,
        args=(fixed.model, src),
        kwargs={"options": OPTIONS[1], "special": fixed.special, "batch_size": 8},
    )
    thread.start()
    thread.join()
    assert fixed.model.stats.graph_steps == replays > 0


def test_bucketed_shapes():
    assert bucketed(1, 1) == (MIN_BUCKET_SLOTS, MIN_BUCKET_WIDTH)
    assert bucketed(65, 17) == (128, 32)
    assert bucketed(128, 32) == (128, 32)
    assert bucketed(1000, 100) == (1024, 128)
    assert tuple(sorted(ROW_BUCKETS)) == ROW_BUCKETS


def test_fixed_pool_keeps_two_buffer_sets_per_shape(tiny_bundle):
    """Buffers come in bucketed shapes, two sets per shape kept for the pool's life: a
    compaction within a shape moves to the other set and back, a cleared pool's next
    admission takes a set it had: the addresses a graph was captured with recur."""
    model = load(tiny_bundle, io_binding="on", cuda_graphs="on").model
    pool = model.new_pool()
    assert isinstance(pool, DevicePool) and pool.fixed
    assert not model.graph_steps.capture

    def encoded(n: int, length: int):
        ids = np.full((n, length), 5, dtype=np.int64)
        return model.encode(ids, np.full(n, length, dtype=np.int64))

    enc = encoded(3, 5)
    pool.append(enc.memory, enc.keys, enc.mask)
    assert (pool.capacity, pool.width) == bucketed(3 + 16, 5)
    first = pool.memory.buffer.data_ptr()
    pool.compact([0, 2], 5)  # same bucket: the other buffer set
    second = pool.memory.buffer.data_ptr()
    assert second != first and pool.slots == 2
    pool.compact([1], 5)  # and back to the first one
    assert pool.memory.buffer.data_ptr() == first
    pool.clear()
    enc = encoded(2, 4)
    pool.append(enc.memory, enc.keys, enc.mask)
    assert pool.memory.buffer.data_ptr() in (first, second)
    assert [len(sets) for sets in pool._sets.values()] == [2]
    np.testing.assert_array_equal(np.asarray(pool.mask), _padded(np.asarray(enc.mask), pool.width))


def _padded(mask: np.ndarray, width: int) -> np.ndarray:
    out = np.zeros((mask.shape[0], width), dtype=bool)
    out[:, : mask.shape[1]] = mask
    return out


def test_server_on_fixed_buffers_answers_like_the_host_path(server_factory, tiny_bundle):
    """The whole engine with ``cuda_graphs="on"``: the scheduler thread owns the fixed
    buffers, the encoder thread's encodings join them mid-decode, requests of every kind
    overlap; the answers are the host path's."""
    from tests.service.server_helpers import (
        answers_under_load,
        assert_same_answers,
        mixed_requests,
    )

    def runtime(**modes) -> dict:
        return {"runtime": RuntimeConfig(("cpu",), intra_op_threads=1, **modes)}

    host = server_factory(server=runtime(io_binding="off"))
    fixed = server_factory(server=runtime(io_binding="on", cuda_graphs="on"))
    steps = fixed.engines["tiny"].bundle.model.graph_steps
    assert steps is not None
    requests = mixed_requests(tiny_bundle.sentences)
    want, got = (answers_under_load(server.port, requests) for server in (host, fixed))
    assert_same_answers(got, want, atol=1e-4)
    model = fixed.engines["tiny"].bundle.model
    assert model.stats.graph_steps > 0 and steps.enabled
    # every encoder call on fixed shapes, each bucket needing at most two output sets:
    # the batch being encoded and the one being joined (neither thread keeps an
    # outcome it has handed on, nor the scheduler one it has joined)
    stats = model.stats
    assert stats.graph_encodes == stats.encoder_calls > 0 and model.encoder_graphs.enabled
    # owned (on CUDA: prepared and captured, in the warm-up) by the engine's encoder thread
    assert model.encoder_graphs._owner.thread.name.startswith("nmt-encoder")
    assert all(len(b.sets) <= 2 for b in model.encoder_graphs._buckets.values())


def test_rebuilt_width_is_the_bucket_of_a_fixed_pool(tiny_bundle):
    model = load(tiny_bundle, io_binding="on", cuda_graphs="on").model
    assert model.new_pool().rebuilt_width(20) == 32
    assert model.new_pool().rebuilt_width(3) == MIN_BUCKET_WIDTH
    assert model.new_pool().rebuilt_width(33) == 64
    plain = load(tiny_bundle, io_binding="on").model.new_pool()
    assert not plain.fixed and plain.rebuilt_width(20) == 20
    assert load(tiny_bundle).model.new_pool().rebuilt_width(20) == 20  # host arrays


def _compactions(pool) -> list[tuple[int, int]]:
    """Record ``(slots kept, width asked)`` of every compaction of ``pool``."""
    calls: list[tuple[int, int]] = []
    compact = pool.compact

    def recording(keep, width):
        calls.append((len(keep), width))
        compact(keep, width)

    pool.compact = recording
    return calls


def test_a_fixed_pool_is_rebuilt_only_when_it_comes_out_narrower(tiny_bundle):
    """Sentences of 20 tokens fill 20 of a fixed pool's 32 columns (its bucket). The loop
    rebuilt such a pool after every step (20 <= 3/4 of 32), each time into a pool just
    as wide, moving every live slot. Only a rebuild that narrows the pool is worth it:
    once the 40-token sentence (64 columns) has ended, the pool shrinks to 32."""
    bundle = load(tiny_bundle, io_binding="on", cuda_graphs="on")
    loop = DecodeLoop(bundle.model, bundle.special)
    calls = _compactions(loop.pool)
    short = [[5 + i % 40 for i in range(20)] for _ in range(4)]
    stay = DecodeOptions(min_length=12, max_length=14)
    loop.add(short, [make_search(20, stay, bundle.special) for _ in short], [0, 1, 2, 3])
    assert loop.pool.width == 32
    for _ in range(4):
        assert loop.step() == []
    assert calls == [], "a pool as wide as its bucket needs was rebuilt"
    long = [[5 + i % 40 for i in range(40)]]
    loop.add(long, [make_search(40, DecodeOptions(max_length=1), bundle.special)], ["long"])
    assert loop.pool.width == 64
    finished = loop.step()
    assert [handle for handle, _ in finished] == ["long"]
    assert calls == [(4, 20)] and loop.pool.width == 32
    while loop.active:
        loop.step()
    assert calls == [(4, 20)]
