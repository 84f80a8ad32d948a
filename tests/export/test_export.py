"""Every model variant exports to ONNX graphs that pass the parity gate, and the gate
catches graphs that do not reproduce their model."""

from __future__ import annotations

import dataclasses

import numpy as np
import onnx
import pytest
import torch

from export import spec
from export.parity import ParityError, ParityReport, ParityThresholds, max_abs_diff, run_gate
from models.config import ATTENTION_TYPES, LUONG_ONLY_ATTENTION, PLACEMENTS, RNN_TYPES
from models.options import DecodeOptions
from models.translate import translate_ids
from service import poolwidth
from service.decoding import SpecialIds, StepOutput, make_search
from service.loop import decode
from tests.export.helpers import TINY, TorchStepModel, export_onnx, random_sources, tiny_model

VARIANTS = [
    pytest.param(dict(rnn_type=r, attention=a, placement=p), id=f"{r}-{a}-{p}")
    for r in RNN_TYPES
    for a in ATTENTION_TYPES
    for p in PLACEMENTS
    if p == "luong" or a not in LUONG_ONLY_ATTENTION
] + [
    pytest.param(dict(encoder_layers=2, decoder_layers=2), id="gru-2x2-layers"),
    pytest.param(
        dict(rnn_type="lstm", encoder_layers=2, decoder_layers=2, placement="luong"),
        id="lstm-2x2-layers-luong",
    ),
    pytest.param(dict(bidirectional=False), id="gru-unidirectional"),
    pytest.param(
        dict(rnn_type="lstm", bidirectional=False, attention="dot", decoder_hidden=8),
        id="lstm-unidirectional-dot",
    ),
    pytest.param(dict(placement="luong", input_feed=False), id="gru-luong-no-input-feed"),
    pytest.param(
        dict(rnn_type="lstm", placement="luong", input_feed=False, attention="dot"),
        id="lstm-luong-dot-no-input-feed",
    ),
    pytest.param(dict(coverage=True), id="gru-additive-bahdanau-coverage"),
    pytest.param(
        dict(rnn_type="lstm", attention="concat", placement="luong", coverage=True),
        id="lstm-concat-luong-coverage",
    ),
    pytest.param(
        dict(placement="luong", input_feed=False, coverage=True),
        id="gru-additive-luong-no-input-feed-coverage",
    ),
    pytest.param(
        dict(attention="local-p", placement="luong", local_window=1), id="gru-local-p-window-1"
    ),
]


def gate(model, onnx_model, **kwargs) -> ParityReport:
    # Untrained models loop on a few tokens, which makes exactly tied beam scores common;
    # the gate is tie-sensitive (see test_tied_scores_rank_like_the_reference), so these
    # sources are ones without ties for every variant here.
    sources = random_sources(model.config.src_vocab_size, n=20, max_len=8, seed=5)
    return run_gate(model, onnx_model, sources, beam_sentences=10, max_len=20, **kwargs)


@pytest.mark.parametrize("overrides", VARIANTS)
def test_every_variant_passes_the_parity_gate(overrides, tmp_path):
    model = tiny_model(seed=0, **overrides)
    onnx_model = export_onnx(model, tmp_path)
    report = gate(model, onnx_model)
    assert report.max_log_prob_diff <= 1e-4
    assert report.max_attention_diff <= 1e-5
    assert report.max_memory_diff <= 1e-4
    assert report.greedy_mismatches == 0 and report.greedy_sentences == 20
    assert report.beam_mismatches == 0 and report.beam_sentences == 10
    assert report.max_score_diff <= 1e-4
    assert report.batches_checked > 0 and report.failures == []

    names = model.config.state_names
    enc = onnx.load(str(tmp_path / spec.ENCODER_FILE)).graph
    dec = onnx.load(str(tmp_path / spec.DECODER_FILE)).graph
    assert [i.name for i in enc.input] == spec.encoder_inputs()
    assert [o.name for o in enc.output] == spec.encoder_outputs(names)
    # ONNX Runtime feeds by name; the decoder's top_k input is re-added after tracing
    # (export.graphs._make_k_dynamic), so only the set of names is part of the contract.
    assert sorted(i.name for i in dec.input) == sorted(spec.decoder_inputs(names))
    assert [o.name for o in dec.output] == spec.decoder_outputs(names)
    assert [n.op_type for n in dec.node].count("TopK") == 1
    for path in (spec.ENCODER_FILE, spec.DECODER_FILE):
        m = onnx.load(str(tmp_path / path))
        assert {o.domain: o.version for o in m.opset_import}.get("") == spec.OPSET
    # nothing left for the load-time rewrite of older bundles (service.poolwidth) to do
    assert poolwidth.width_invariant((tmp_path / spec.DECODER_FILE).read_bytes())[1] == 0
    assert_alone_as_batched(onnx_model, model.config.src_vocab_size)


def assert_alone_as_batched(onnx_model, vocab_size: int) -> None:
    """Each source decodes bit for bit alike alone and beside longer ones (a memory pool
    wider than it: its attention's sums over the source must not change with the width),
    greedy and beam 3 with token log-probs."""
    special = SpecialIds(0, 2, 3)
    sources = random_sources(vocab_size, n=12, max_len=24, seed=7)
    longest = max(sources, key=len)
    for beam in (1, 3):
        options = DecodeOptions(beam_size=beam, n_best=beam, return_token_scores=True)
        for source in sources:
            (alone,) = decode(onnx_model, [source], options=options, special=special)
            together = decode(onnx_model, [source, longest], options=options, special=special)[0]
            assert [(h.tokens, h.score, h.token_log_probs) for h in alone] == [
                (h.tokens, h.score, h.token_log_probs) for h in together
            ], (beam, source)


@pytest.mark.parametrize(
    ("overrides", "names"),
    [
        (dict(), ("hidden",)),
        (dict(rnn_type="lstm"), ("hidden", "cell")),
        (dict(placement="luong"), ("hidden", "feed")),
        (dict(rnn_type="lstm", placement="luong"), ("hidden", "cell", "feed")),
        (dict(rnn_type="lstm", placement="luong", input_feed=False), ("hidden", "cell")),
        (dict(coverage=True), ("hidden", "coverage")),
        (
            dict(rnn_type="lstm", placement="luong", coverage=True),
            ("hidden", "cell", "feed", "coverage"),
        ),
    ],
)
def test_state_names(overrides, names):
    assert tiny_model(**overrides).config.state_names == names


# -- the coverage state ------------------------------------------------------------


@pytest.fixture(scope="module")
def coverage_model(tmp_path_factory):
    model = tiny_model(seed=0, rnn_type="lstm", placement="luong", coverage=True)
    return model, export_onnx(model, tmp_path_factory.mktemp("coverage"))


def test_coverage_state_is_the_running_sum_of_attention(coverage_model):
    """PyTorch and ONNX steps carry the same coverage, the sum of the attention so far:
    0 at padding, and 1 more over each row's real positions every step."""
    model, onnx_model = coverage_model
    src = np.array([[5, 6, 7, 8, 9], [9, 10, 11, 0, 0], [12, 0, 0, 0, 0]], dtype=np.int64)
    lengths = np.array([5, 3, 1], dtype=np.int64)
    enc_o = onnx_model.encode(src, lengths)
    with torch.no_grad():
        enc_t = model.encode(torch.from_numpy(src), torch.from_numpy(lengths))
    rows = np.arange(3, dtype=np.int64)
    state_t, state_o = enc_t.state, enc_o.states
    assert (state_o[-1] == 0).all() and state_o[-1].shape == (3, 5)
    total = np.zeros((3, 5))
    for step, token in enumerate([model.config.bos_id, 7, 8, 9]):
        prev = np.full(3, token, dtype=np.int64)
        with torch.no_grad():
            _, state_t, attn_t = model.decoder(
                torch.from_numpy(prev), state_t, enc_t.keys, enc_t.memory, enc_t.mask
            )
        out = onnx_model.step(
            prev_tokens=prev,
            parent_rows=rows,
            row_sentence=rows,
            memory=enc_o.memory,
            keys=enc_o.keys,
            mask=enc_o.mask,
            states=state_o,
            top_k=3,
        )
        state_o = out.states
        total += out.attention
        np.testing.assert_allclose(state_o[-1], state_t[-1].numpy(), atol=1e-5)
        np.testing.assert_allclose(state_o[-1], total, atol=1e-5)
        np.testing.assert_allclose(attn_t.numpy(), out.attention, atol=1e-5)
        assert (state_o[-1][~enc_o.mask] == 0).all()
        np.testing.assert_allclose(state_o[-1].sum(1), step + 1, atol=1e-5)


@pytest.mark.parametrize("width", [2, 4, 7], ids=["narrower", "same", "wider"])
def test_the_graph_fits_the_coverage_state_to_the_memory(coverage_model, width):
    """A server feeds the coverage back at the width its memory pool had: the graph cuts
    it, or pads it with zeros, to the memory's width (export.spec)."""
    _, onnx_model = coverage_model
    src = np.array([[5, 6, 7, 8], [9, 10, 0, 0]], dtype=np.int64)
    enc = onnx_model.encode(src, np.array([4, 2], dtype=np.int64))
    coverage = np.random.default_rng(0).random((2, width)).astype(np.float32)
    coverage[1, 2:] = 0.0  # nothing past the second sentence's end
    fitted = np.zeros((2, 4), dtype=np.float32)
    fitted[:, : min(width, 4)] = coverage[:, :4]

    def step(cov):
        return onnx_model.step(
            prev_tokens=np.full(2, 7, dtype=np.int64),
            parent_rows=np.array([0, 1]),
            row_sentence=np.array([0, 1]),
            memory=enc.memory,
            keys=enc.keys,
            mask=enc.mask,
            states=(*enc.states[:-1], cov),
            top_k=3,
        )

    got, want = step(coverage), step(fitted)
    assert got.states[-1].shape == (2, 4)
    np.testing.assert_array_equal(got.states[-1], want.states[-1])
    np.testing.assert_array_equal(got.topk_values, want.topk_values)
    np.testing.assert_allclose(got.states[-1], fitted + got.attention, atol=1e-6)


def test_coverage_survives_the_pool_widening_and_narrowing(coverage_model):
    """A short sentence joins a long one's loop (its coverage is narrower: padded), the
    long one leaves early and the pool narrows (the coverage fed back is wider: cut);
    each decodes as the reference does alone."""
    from service.loop import DecodeLoop

    model, onnx_model = coverage_model
    special = SpecialIds(0, 2, 3)
    long, short = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14], [15, 16]
    quick = DecodeOptions(beam_size=3, n_best=2, max_length=3, return_attention=True)
    slow = DecodeOptions(beam_size=2, n_best=2, max_length=12, return_attention=True)
    loop = DecodeLoop(onnx_model, special)
    loop.add([long], [make_search(len(long), quick, special)], ["long"])
    loop.step()
    loop.add([short], [make_search(len(short), slow, special)], ["short"])
    widths, results = [], {}
    while loop.active:
        for handle, search in loop.step():
            results[handle] = search.results()
        widths.append(loop.pool.width)
    assert widths[0] == len(long) and len(short) in widths, "the pool did not narrow"
    for handle, src, options in (("long", long, quick), ("short", short, slow)):
        [want] = translate_ids(model, [src], options=options)
        assert [h.tokens for h in results[handle]] == [h.tokens for h in want]
        for g, w in zip(results[handle], want, strict=True):
            assert g.score == pytest.approx(w.score, abs=1e-5)
            np.testing.assert_allclose(g.attention, w.attention, atol=1e-5)


# -- one exported model, many checks ----------------------------------------------


@pytest.fixture(scope="module")
def lstm_luong(tmp_path_factory):
    model = tiny_model(seed=0, rnn_type="lstm", placement="luong", attention="concat")
    onnx_model = export_onnx(model, tmp_path_factory.mktemp("lstm-luong"))
    return model, onnx_model


def test_top_k_is_a_runtime_input(lstm_luong):
    model, onnx_model = lstm_luong
    cfg = model.config
    src = np.array([[5, 6, 7, 8], [9, 10, 0, 0]], dtype=np.int64)
    enc = onnx_model.encode(src, np.array([4, 2], dtype=np.int64))
    rows = np.array([0, 1, 1], dtype=np.int64)
    outs = {}
    for k in (1, 3, 7, cfg.tgt_vocab_size - 3):
        out = onnx_model.step(
            prev_tokens=np.full(3, cfg.bos_id, dtype=np.int64),
            parent_rows=rows,
            row_sentence=rows,
            memory=enc.memory,
            keys=enc.keys,
            mask=enc.mask,
            states=enc.states,
            top_k=k,
        )
        assert out.topk_values.shape == out.topk_ids.shape == (3, k)
        assert out.attention.shape == (3, 4)
        assert (np.diff(out.topk_values, axis=1) <= 0).all(), "top-k must be sorted"
        outs[k] = out
    full = outs[cfg.tgt_vocab_size - 3]
    # every token but pad/bos/eos
    for r in range(3):
        assert sorted(full.topk_ids[r]) == [cfg.unk_id, *range(4, cfg.tgt_vocab_size)]
    np.testing.assert_allclose(outs[3].topk_values, full.topk_values[:, :3])
    # the full distribution (top-k plus EOS) is normalised over non-pad/bos tokens
    total = np.exp(full.topk_values).sum(1) + np.exp(full.eos_values)
    assert ((total > 0.9) & (total <= 1 + 1e-5)).all()
    # padded source positions get exactly zero attention
    assert (full.attention[1:, 2:] == 0).all()
    np.testing.assert_allclose(full.attention.sum(1), 1.0, atol=1e-6)


def test_parent_rows_gather_states_in_the_graph(lstm_luong):
    """Feeding the previous outputs back with a permutation equals permuting first."""
    model, onnx_model = lstm_luong
    cfg = model.config
    src = np.array([[5, 6, 7], [9, 10, 11]], dtype=np.int64)
    enc = onnx_model.encode(src, np.array([3, 3], dtype=np.int64))
    step0 = onnx_model.step(
        prev_tokens=np.full(2, cfg.bos_id, dtype=np.int64),
        parent_rows=np.array([0, 1]),
        row_sentence=np.array([0, 1]),
        memory=enc.memory,
        keys=enc.keys,
        mask=enc.mask,
        states=enc.states,
        top_k=4,
    )
    common = dict(memory=enc.memory, keys=enc.keys, mask=enc.mask, top_k=4)
    gathered = onnx_model.step(
        prev_tokens=np.array([7, 8, 9], dtype=np.int64),
        parent_rows=np.array([1, 0, 1]),
        row_sentence=np.array([1, 0, 1]),
        states=step0.states,
        **common,
    )
    permuted = tuple(s[[1, 0, 1]] for s in step0.states)
    direct = onnx_model.step(
        prev_tokens=np.array([7, 8, 9], dtype=np.int64),
        parent_rows=np.array([0, 1, 2]),
        row_sentence=np.array([1, 0, 1]),
        states=permuted,
        **common,
    )
    for a, b in zip(
        (gathered.topk_values, gathered.attention, *gathered.states),
        (direct.topk_values, direct.attention, *direct.states),
        strict=True,
    ):
        np.testing.assert_allclose(a, b, atol=1e-6)


def test_report_fields(lstm_luong):
    model, onnx_model = lstm_luong
    report = gate(model, onnx_model, beam_size=3)
    d = report.to_dict()
    assert "failures" not in d
    assert d["beam_size"] == 3 and d["greedy_sentences"] == 20 and d["beam_sentences"] == 10
    assert d["seconds"] > 0


class Perturbed:
    """An ``OnnxModel`` whose decoder step outputs are edited after the fact."""

    def __init__(self, inner, edit) -> None:
        self.inner, self.edit = inner, edit

    def new_pool(self):
        return self.inner.new_pool()

    def encode(self, src_ids, src_lengths):
        return self.inner.encode(src_ids, src_lengths)

    def step(self, **kwargs) -> StepOutput:
        return self.edit(self.inner.step(**kwargs))


def test_gate_rejects_shifted_log_probs(lstm_luong):
    model, onnx_model = lstm_luong
    wrong = Perturbed(
        onnx_model, lambda o: dataclasses.replace(o, topk_values=o.topk_values + 1e-2)
    )
    with pytest.raises(ParityError, match=r"log-probs differ by 1\.00e-02"):
        gate(model, wrong)


def test_gate_rejects_a_slightly_shifted_eos(lstm_luong):
    model, onnx_model = lstm_luong
    wrong = Perturbed(onnx_model, lambda o: dataclasses.replace(o, eos_values=o.eos_values - 5e-4))
    with pytest.raises(ParityError, match="log-probs differ"):
        gate(model, wrong)


def test_gate_rejects_wrong_attention(lstm_luong):
    model, onnx_model = lstm_luong

    def edit(o):
        att = o.attention.copy()
        att[:, 0] += 1e-3
        return dataclasses.replace(o, attention=att)

    with pytest.raises(ParityError, match="attention differs"):
        gate(model, Perturbed(onnx_model, edit))


def test_gate_rejects_a_different_model(lstm_luong):
    _, onnx_model = lstm_luong
    other = tiny_model(seed=1, rnn_type="lstm", placement="luong", attention="concat")
    with pytest.raises(ParityError) as info:
        gate(other, onnx_model)
    msg = str(info.value)
    assert "encoder memory differs" in msg and "greedy output differs" in msg


def test_gate_thresholds_are_configurable(lstm_luong):
    model, onnx_model = lstm_luong

    def shift(o):  # the same shift for every candidate: no ranking changes
        return dataclasses.replace(
            o, topk_values=o.topk_values - 5e-4, eos_values=o.eos_values - 5e-4
        )

    with pytest.raises(
        ParityError,
        match=r"log-probs differ by 5\.\d+e-04 \(more than 1e-04 \+ 1e-05 x \|log-prob\|\)",
    ):
        gate(model, Perturbed(onnx_model, shift))
    report = gate(model, Perturbed(onnx_model, shift), thresholds=ParityThresholds(1e-3, 1e-5))
    assert report.max_log_prob_diff == pytest.approx(5e-4, rel=1e-2)
    assert report.greedy_mismatches == report.beam_mismatches == 0


def test_log_prob_tolerance_grows_with_the_log_prob():
    """``max_abs_diff(..., rtol)``: what the gate holds to its absolute tolerance."""
    want = np.array([[-0.5, -20.0, -np.inf]])
    got = want - np.array([[5e-5, 1.6e-4, 0.0]])  # 1.6e-4: 8e-6 of 20
    assert max_abs_diff(got, want) == pytest.approx(1.6e-4)
    assert max_abs_diff(got, want, 1e-5) == pytest.approx(5e-5 - 5e-6)
    near_zero = want - np.array([[2e-4, 0.0, 0.0]])
    assert max_abs_diff(near_zero, want, 1e-5) == pytest.approx(2e-4 - 5e-6)
    assert max_abs_diff(np.array([[np.nan]]), np.array([[-1.0]]), 1e-5) == np.inf
    assert max_abs_diff(np.array([[-np.inf]]), np.array([[-1.0]]), 1e-5) == np.inf


def test_gate_allows_float32_rounding_that_grows_with_the_log_prob(lstm_luong):
    """Log-probs off by 9e-5 + 9e-6 of themselves pass the gate (over 1e-4 in absolute
    terms, within the rtol part; scores likewise) and fail it with rtol 0."""
    model, onnx_model = lstm_luong

    def scale(o):  # every value lower by 9e-5 + 9e-6 |value|: no ranking changes
        def move(v):
            return v - (9e-5 + 9e-6 * np.abs(v))

        return dataclasses.replace(
            o, topk_values=move(o.topk_values), eos_values=move(o.eos_values)
        )

    report = gate(model, Perturbed(onnx_model, scale))
    assert report.max_log_prob_diff > 1e-4 >= report.max_log_prob_excess
    strict = ParityThresholds(log_prob_rtol=0.0)
    with pytest.raises(
        ParityError, match=r"log-probs differ by 1\.\d+e-04 \(more than 1e-04 \+ 0e\+00 x"
    ):
        gate(model, Perturbed(onnx_model, scale), thresholds=strict)

    def shift(o):
        return dataclasses.replace(
            o, topk_values=o.topk_values - 2e-4, eos_values=o.eos_values - 2e-4
        )

    with pytest.raises(ParityError, match="decoder log-probs differ by 2"):
        gate(model, Perturbed(onnx_model, shift), thresholds=ParityThresholds(log_prob_rtol=1e-5))


def test_tied_scores_rank_like_the_reference():
    model = tiny_model(seed=0)
    with torch.no_grad():  # every token equally likely: all scores of a length tie
        model.decoder.output.weight.zero_()
        model.decoder.output.bias.zero_()
    options = DecodeOptions(beam_size=3, n_best=3, max_length=4)
    sources = [[5, 6], [7]]
    ref = translate_ids(model, sources, options=options)
    got = decode(TorchStepModel(model), sources, options=options, special=SpecialIds(0, 2, 3))
    assert [[h.tokens for h in r] for r in ref] == [[h.tokens for h in g] for g in got]


@pytest.mark.parametrize("beam", [1, 3])
def test_min_length_beyond_the_limit_matches_reference(lstm_luong, beam):
    model, onnx_model = lstm_luong
    cfg = model.config
    options = DecodeOptions(beam_size=beam, n_best=beam, min_length=10, max_length=4)
    sources = random_sources(cfg.src_vocab_size, n=4, seed=5)
    ref = translate_ids(model, sources, options=options)
    got = decode(onnx_model, sources, options=options, special=SpecialIds(0, 2, 3))
    for r, g in zip(ref, got, strict=True):
        assert [h.tokens for h in r] == [h.tokens for h in g]
        assert [h.score for h in g] == pytest.approx([h.score for h in r], abs=1e-5)


@pytest.mark.parametrize(
    "options",
    [
        DecodeOptions(beam_size=2, n_best=2, length_penalty=0.0),
        DecodeOptions(beam_size=4, n_best=2, min_length=3, max_length=7, return_attention=True),
        DecodeOptions(max_length_ratio=0.5, max_length_offset=1, min_length=0),
    ],
    ids=["beam2-lp0", "beam4-minlen", "greedy-short"],
)
def test_decode_matches_reference_with_options(lstm_luong, options):
    model, onnx_model = lstm_luong
    sources = random_sources(TINY["src_vocab_size"], n=8, seed=9)
    ref = translate_ids(model, sources, options=options)
    got = decode(onnx_model, sources, options=options, special=SpecialIds(0, 2, 3), batch_size=3)
    for r, g in zip(ref, got, strict=True):
        assert [h.tokens for h in r] == [h.tokens for h in g]
        assert [h.score for h in g] == pytest.approx([h.score for h in r], abs=1e-5)
        assert [h.log_prob for h in g] == pytest.approx([h.log_prob for h in r], abs=1e-5)
        if options.return_attention:
            for hr, hg in zip(r, g, strict=True):
                np.testing.assert_allclose(hg.attention, hr.attention, atol=1e-5)


def test_what_tracing_writes_to_stderr_comes_back_only_when_it_fails(capfd):
    """The tracer's C++ warnings are dropped on success (a redirected stderr gets only the
    outcome); on failure what was written there, by torch or the user's modules, is shown."""
    import os

    from export.graphs import native_stderr_silenced

    with native_stderr_silenced():
        os.write(2, b"a native warning\n")
    assert capfd.readouterr().err == ""
    with pytest.raises(RuntimeError, match="traced wrong"), native_stderr_silenced():
        os.write(2, b"what the modules said\n")
        raise RuntimeError("traced wrong")
    assert capfd.readouterr().err == "what the modules said\n"
