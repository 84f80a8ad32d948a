"""Diverse beam search in groups (:class:`service.diverse.GroupedBeam`) on the scripted
fake decoder, its validation, and over the wire. Against fairseq's own n-best lists:
``tests/export/test_fairseq_search_options.py``."""

from __future__ import annotations

import dataclasses
import math

import pytest

from models.options import DecodeOptions, DecodeOptionsError
from models.scoring import ScoringRules
from service.decoding import make_search
from service.diverse import GROUPED_BEAM, GROUPED_FAIRSEQ_BEAM
from service.strategies import BEAM, Prefix, strategy_for
from tests.service.test_decoding import (
    EOS,
    SPECIAL,
    random_sources,
    random_table,
    run,
    vector,
)


def two_words(src, prefix):
    """Step 0: 4 and 5 best, 6 and 7 behind; then EOS."""
    if not prefix:
        return {4: -0.1, 5: -0.2, 6: -1.0, 7: -1.5}
    return {EOS: -0.01}


@pytest.mark.parametrize("search", ["standard", "fairseq"])
def test_a_second_group_avoids_the_first_groups_tokens(search):
    """Worked by hand, beam 2 in 2 groups of 1, strength 2. Group 0 takes 4 and 5 (its
    2 candidates); for group 1 they cost 2 more (-2.1, -2.2), so it takes 6 and 7. The
    candidates interleave as 4, 6, 5, 7: 4 and 6 go on (plain beam: 4 and 5), 6 unpenalised
    (group 0 did not take it). Next step both end with EOS, group 1's paying 2 (EOS was
    among group 0's candidates): 6's score keeps that penalty, its log-prob is the
    model's."""
    plain = DecodeOptions(beam_size=2, n_best=2, search=search)
    (got,) = run(two_words, [(8,)], plain)
    assert [h.tokens for h in got] == [(4,), (5,)]
    grouped = dataclasses.replace(plain, diverse_beam_groups=2, diverse_beam_strength=2.0)
    (got,) = run(two_words, [(8,)], grouped)
    assert [h.tokens for h in got] == [(4,), (6,)]
    assert [h.log_prob for h in got] == pytest.approx([-0.11, -1.01], abs=1e-6)
    rules = ScoringRules.of(grouped)
    assert got[0].score == pytest.approx(rules.score(-0.11, 1), abs=1e-6)
    assert got[1].score == pytest.approx(rules.score(-1.01 - 2.0, 1), abs=1e-6)


@pytest.mark.parametrize("search", ["standard", "fairseq"])
@pytest.mark.parametrize("groups", [2, 4])
def test_groups_keep_the_models_log_probs_and_change_the_lists(search, groups):
    options = DecodeOptions(beam_size=4, n_best=4, search=search, return_token_scores=True)
    sources = random_sources(13, 30)
    table = random_table(3)
    plain = run(table, sources, options)
    grouped = dataclasses.replace(options, diverse_beam_groups=groups, diverse_beam_strength=1.0)
    got = run(table, sources, grouped)
    changed = 0
    for src, p, d in zip(sources, plain, got, strict=True):
        assert len(d) == 4
        changed += [h.tokens for h in p] != [h.tokens for h in d]
        for h in d:
            tokens = (*h.tokens, EOS)
            want = [float(vector(table(src, tokens[:j]))[t]) for j, t in enumerate(tokens)]
            assert h.token_log_probs == pytest.approx(want, abs=0, rel=0)
            assert h.log_prob == pytest.approx(math.fsum(want), abs=1e-4)
        scores = [h.score for h in d]
        assert scores == sorted(scores, reverse=True)
    assert changed >= 10, changed


def test_a_grouped_sentence_and_its_batch_mates_do_not_change_each_other():
    options = DecodeOptions(beam_size=4, n_best=4, search="fairseq")
    grouped = dataclasses.replace(options, diverse_beam_groups=2, diverse_beam_strength=0.7)
    sources = random_sources(17, 24)
    table = random_table(8)
    asked = [grouped if i % 2 else options for i in range(len(sources))]
    together = run(table, sources, asked)
    plain = run(table, sources, options)
    for i, src in enumerate(sources):
        alone = run(table, [src], asked[i])[0]
        assert [(h.tokens, h.score) for h in together[i]] == [(h.tokens, h.score) for h in alone]
        if i % 2 == 0:
            assert [h.tokens for h in together[i]] == [h.tokens for h in plain[i]]


def test_a_target_prefix_starts_every_grouped_hypothesis():
    options = DecodeOptions(beam_size=4, n_best=4, diverse_beam_groups=2)
    sources = random_sources(19, 8)
    got = run(random_table(6), sources, options, prefixes=[(5, 6)] * len(sources))
    for hyps in got:
        assert len(hyps) == 4 and all(h.tokens[:2] == (5, 6) for h in hyps)


def test_strategy_for_picks_the_grouped_beams():
    grouped = DecodeOptions(beam_size=4, diverse_beam_groups=2)
    assert strategy_for(grouped) is GROUPED_BEAM
    assert strategy_for(dataclasses.replace(grouped, search="fairseq")) is GROUPED_FAIRSEQ_BEAM
    prefixed = strategy_for(grouped, prefix=True)
    assert isinstance(prefixed, Prefix) and prefixed.inner is GROUPED_BEAM
    assert strategy_for(grouped, prefix=True) is prefixed  # one wrapper: the loop groups them
    assert strategy_for(dataclasses.replace(grouped, diverse_beam_groups=1)) is BEAM
    search = make_search(3, grouped, SPECIAL)
    assert search.own_scores == [0.0] and not search.beam_batchable


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"beam_size": 5, "diverse_beam_groups": 2}, "diverse_beam_groups 2 must divide beam"),
        ({"beam_size": 1, "diverse_beam_groups": 2}, "must divide beam_size 1"),
        ({"beam_size": 4, "diverse_beam_groups": -1}, "diverse_beam_groups must be >= 0"),
        (
            {"beam_size": 4, "diverse_beam_groups": 2, "search": "eole"},
            "works with the standard and fairseq beam searches, not this model's 'eole'",
        ),
        (
            {"beam_size": 4, "diverse_beam_groups": 2, "diversity_rate": 0.5},
            "two diverse searches",
        ),
        ({"beam_size": 4, "diverse_beam_strength": -1.0}, r"diverse_beam_strength must be in"),
        ({"beam_size": 4, "diverse_beam_strength": math.nan}, "diverse_beam_strength must be"),
    ],
)
def test_impossible_groups_are_refused(fields, match):
    with pytest.raises(DecodeOptionsError, match=match):
        DecodeOptions(**fields)


# ------------------------------------------------------------------------ over the wire


@pytest.fixture(scope="module", params=["off", "on"], ids=["in-process", "engine-process"])
def grouped_server(request, server_factory):
    return server_factory(server={"engine_process": request.param})


def test_a_served_grouped_translation_is_the_in_process_one(grouped_server, tiny_bundle):
    from nmt_client import Translator
    from service.offline import translate_with_bundle
    from tests.service.server_helpers import proto_options

    texts = list(tiny_bundle.sentences[:4])
    asked = {"beam_size": 4, "n_best": 4, "diverse_beam_groups": 2, "diverse_beam_strength": 2.0}
    with Translator(f"127.0.0.1:{grouped_server.port}", timeout=60, retries=0) as t:
        served = t.translate(texts, **asked)
        plain = t.translate(texts, beam_size=4, n_best=4)
    request = proto_options(beam=4, diverse_beam_groups=2, diverse_beam_strength=2.0)
    assert [r.best.text for r in served] == translate_with_bundle(
        tiny_bundle.bundle_dir, texts, request
    )
    lists = [[h.tokens for h in r.hypotheses] for r in served]
    assert all(len(hyps) == 4 for hyps in lists)
    assert lists != [[h.tokens for h in r.hypotheses] for r in plain]


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"beam_size": 5, "diverse_beam_groups": 2}, "must divide beam_size 5"),
        ({"beam_size": 4, "diverse_beam_groups": 2, "diverse_beam_strength": 1e9}, "strength"),
        ({"beam_size": 4, "diverse_beam_groups": 2, "diversity_rate": 1.0}, "two diverse"),
    ],
)
def test_impossible_groups_are_invalid_argument(grouped_server, tiny_bundle, extra, match):
    import grpc

    from nmt_api.nmt.v1 import translator_pb2 as pb
    from tests.service.server_helpers import rpc_error, stub_for

    channel, stub = stub_for(grouped_server.port)
    try:
        request = pb.TranslateRequest(
            texts=[tiny_bundle.sentences[0]], options=pb.DecodeOptions(**extra)
        )
        error = rpc_error(lambda: stub.Translate(request, timeout=60))
    finally:
        channel.close()
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert match in error.details() and "\n" not in error.details()
