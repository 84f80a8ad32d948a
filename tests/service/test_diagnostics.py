"""Attention diagnostics (:mod:`service.diagnostics`) on hand-made attention matrices."""

from __future__ import annotations

import math

import numpy as np
import pytest

from service.diagnostics import diagnose, entropies, unk_share

UNK = 1


def test_uniform_rows_have_entropy_log_n():
    a = np.full((3, 4), 0.25, dtype=np.float32)
    d = diagnose(a, [5, 6, 7, 8], UNK)
    assert d.entropy_mean == pytest.approx(math.log(4))
    assert d.entropy_max == pytest.approx(math.log(4))
    # each position gets 3 * 0.25 = 0.75 in total: neither under- nor over-covered
    assert d.coverage_deficit == 0.0 and d.over_attention == 0.0


def test_one_hot_rows_have_zero_entropy_and_show_coverage():
    # five steps over four positions: 0 twice, 1 three times, 2 and 3 never
    a = np.zeros((5, 4))
    for t, i in enumerate([0, 0, 1, 1, 1]):
        a[t, i] = 1.0
    d = diagnose(a, [5, 6, 7, 8], UNK)
    assert d.entropy_mean == 0.0 and d.entropy_max == 0.0
    assert d.coverage_deficit == pytest.approx(2 / 4)  # positions 2 and 3
    assert d.over_attention == pytest.approx(2 / 4)  # 2.0 and 3.0 > 1.5


def test_mean_and_max_differ_across_steps():
    a = np.array([[1.0, 0.0], [0.5, 0.5]])
    assert entropies(a).tolist() == pytest.approx([0.0, math.log(2)])
    d = diagnose(a, [5, 6], UNK)
    assert d.entropy_mean == pytest.approx(math.log(2) / 2)
    assert d.entropy_max == pytest.approx(math.log(2))


def test_unk_share():
    assert unk_share([UNK, 5, UNK, 6], UNK) == 0.5
    assert unk_share([], UNK) == 0.0
    assert diagnose(None, [UNK, 5], UNK).unk_share == 0.5


@pytest.mark.parametrize(
    "attention",
    [
        None,
        np.zeros((0, 3)),
        np.zeros((3, 0)),
        np.zeros((2, 3)),
        np.full((2, 3), np.nan),
        np.array([np.inf, -1.0, 0.0]),  # not 2-D
    ],
    ids=["none", "no-steps", "no-source", "all-zero", "all-nan", "1-d"],
)
def test_unusable_attention_gives_none_never_nan(attention):
    d = diagnose(attention, [5, 6, 7], UNK)
    assert d.entropy_mean is None and d.entropy_max is None
    assert d.coverage_deficit is None and d.over_attention is None
    assert d.unk_share == 0.0


def test_nan_and_negative_weights_count_as_zero():
    a = np.array([[np.nan, 1.0, 1.0], [-3.0, 0.0, 2.0]])
    d = diagnose(a, [5, 6, 7], UNK)
    for value in (d.entropy_mean, d.entropy_max, d.coverage_deficit, d.over_attention):
        assert value is not None and math.isfinite(value)
    # rows renormalised: [0, .5, .5] and [0, 0, 1]; coverage 0, .5, 1.5
    assert d.entropy_max == pytest.approx(math.log(2))
    assert d.coverage_deficit == pytest.approx(1 / 3)
    assert d.over_attention == 0.0


def test_metrics_record_diagnostics_and_skip_undefined_ones():
    from prometheus_client import CollectorRegistry, generate_latest

    from service.diagnostics import observe
    from service.metrics import create_metrics

    registry = CollectorRegistry()
    metrics = create_metrics(registry)
    observe(metrics, "en-es", diagnose(np.full((2, 4), 0.25), [5, 6, 7, 8], UNK))
    observe(metrics, "en-es", diagnose(np.full((2, 3), np.nan), [5, 6, 7], UNK))
    value = registry.get_sample_value
    assert value("nmt_attention_entropy_count", {"model": "en-es"}) == 1
    assert value("nmt_attention_entropy_sum", {"model": "en-es"}) == pytest.approx(math.log(4))
    assert value("nmt_coverage_deficit_count", {"model": "en-es"}) == 1
    # 2 * 0.25 = 0.5 per position: not under 0.5
    assert value("nmt_coverage_deficit_sum", {"model": "en-es"}) == 0.0
    text = generate_latest(registry).decode()
    assert "nmt_attention_entropy_bucket" in text and "nmt_coverage_deficit_bucket" in text
    assert "nan" not in text.lower()


# -- over the wire -------------------------------------------------------------------


@pytest.fixture(scope="module")
def diag_server(server_factory):
    return server_factory()


@pytest.mark.parametrize("beam, n_best", [(1, 1), (3, 2)])
def test_served_diagnostics_match_the_returned_attention(diag_server, tiny_bundle, beam, n_best):
    from nmt_client import Translator
    from service.diagnostics import diagnose as reference

    texts = list(tiny_bundle.sentences[:3])
    with Translator(f"127.0.0.1:{diag_server.port}", timeout=60, retries=0) as t:
        only = t.translate(texts, beam_size=beam, n_best=n_best, return_diagnostics=True)
        both = t.translate(
            texts, beam_size=beam, n_best=n_best, return_diagnostics=True, return_attention=True
        )
        plain = t.translate(texts, beam_size=beam, n_best=n_best)
    unk = diag_server.engines["tiny"].bundle.source_unk_id
    src_tok = diag_server.engines["tiny"].bundle.src_tokenizer
    for text, r_only, r_both, r_plain in zip(texts, only, both, plain, strict=True):
        # Diagnostics alone bring no attention matrix, and change no translation.
        assert [h.tokens for h in r_only.hypotheses] == [h.tokens for h in r_plain.hypotheses]
        assert all(h.attention is None for h in r_only.hypotheses)
        assert all(h.diagnostics is None for h in r_plain.hypotheses)
        for h_only, h_both in zip(r_only.hypotheses, r_both.hypotheses, strict=True):
            want = reference(np.array(h_both.attention.matrix), src_tok.encode(text), unk)
            got = h_only.diagnostics
            assert got == h_both.diagnostics
            assert got.entropy_mean == pytest.approx(want.entropy_mean, rel=1e-5)
            assert got.entropy_max == pytest.approx(want.entropy_max, rel=1e-5)
            assert got.coverage_deficit == pytest.approx(want.coverage_deficit, rel=1e-5)
            assert got.over_attention == pytest.approx(want.over_attention, rel=1e-5)
            assert 0.0 <= got.entropy_mean <= math.log(len(src_tok.encode(text))) + 1e-5


def test_diagnostics_reach_the_histograms_only_when_asked(diag_server, tiny_bundle):
    from nmt_client import Translator

    registry = diag_server.registry

    def count() -> float:
        return registry.get_sample_value("nmt_attention_entropy_count", {"model": "tiny"}) or 0.0

    before = count()
    with Translator(f"127.0.0.1:{diag_server.port}", timeout=60, retries=0) as t:
        t.translate(list(tiny_bundle.sentences[:2]))
        assert count() == before
        t.translate(list(tiny_bundle.sentences[:2]), return_diagnostics=True)
    assert count() == before + 2  # one best hypothesis per sentence
    deficit = registry.get_sample_value("nmt_coverage_deficit_count", {"model": "tiny"})
    assert deficit and deficit >= 2


def test_the_reply_counts_the_source_tokenizers_own_unk():
    """A source vocabulary of its own (an Eole model's, d2l's) has its own unk id: the
    share counts that, not the target's unk id (here the source's ``<sos>``)."""
    from prometheus_client import CollectorRegistry

    from models.options import DecodeOptions, Hypothesis
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service.metrics import create_metrics
    from service.replies import Replies
    from tests.service.test_front import AnsweringFront, word_bundle

    bundle = word_bundle()
    assert bundle.config.unk_id == bundle.src_tokenizer.ids["<sos>"] != 5
    hyp = Hypothesis((4,), 0.0, 0.0, attention=np.full((2, 5), 0.2, dtype=np.float32))
    front = AnsweringFront(bundle, [hyp])
    _, (result,) = front.translate(["Zyx Qor world"], DecodeOptions(return_attention=True))
    assert result.source_ids == (1, 5, 5, 4, 2)  # <sos> zyx qor world <eos>
    replies = Replies(create_metrics(CollectorRegistry()), "words", 1 << 20)
    try:
        msg = replies.translation(front, "words", result, pb.DecodeOptions(return_diagnostics=True))
    finally:
        replies.pool.shutdown()
    assert msg.hypotheses[0].diagnostics.unk_share == pytest.approx(2 / 5)
