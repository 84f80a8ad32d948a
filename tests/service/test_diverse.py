"""The diverse searches (:mod:`service.diverse`) on the scripted fake decoder, their
validation, and over the wire: diverse siblings (Li et al. 2016; ``diversity_rate``;
:class:`~service.diverse.Siblings`) and diverse beam search in groups (Vijayakumar et al.
2018; ``diverse_beam_groups``; :class:`~service.diverse.GroupedBeam`). Against fairseq's
own n-best lists: ``tests/export/test_fairseq_search_options.py``."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from models.options import SEARCHES, DecodeOptions, DecodeOptionsError
from models.scoring import ScoringRules
from service.constraints import Constraints
from service.decoding import make_search
from service.diverse import GROUPED_BEAM, GROUPED_FAIRSEQ_BEAM, Siblings
from service.errors import InvalidRequest
from service.limits import validate_constraints
from service.strategies import BEAM, EOLE_BEAM, GREEDY, Prefix, strategy_for
from tests.service.test_decoding import (
    EOS,
    SPECIAL,
    random_sources,
    random_table,
    run,
    vector,
)

# One of each diverse search, beam 4: what every diverse search must do.
DIVERSE = {
    "siblings": DecodeOptions(beam_size=4, n_best=4, diversity_rate=1.0),
    "groups": DecodeOptions(
        beam_size=4, n_best=4, diverse_beam_groups=2, diverse_beam_strength=1.0
    ),
}


# ------------------------------------------------------------------ diverse siblings


def two_lineages(src, prefix):
    """Step 0: 4 then 5; from 4 both 6 and 7 beat anything from 5; then EOS."""
    steps = {
        (): {4: -0.1, 5: -0.5},
        (4,): {6: -0.1, 7: -0.2},
        (5,): {6: -1.0, 7: -1.2},
    }
    return steps.get(tuple(prefix), {EOS: -0.01})


def test_the_penalty_moves_a_place_to_another_parent():
    """Worked by hand. Plain beam 2 keeps 4 6 and 4 7 (-0.2, -0.3 against 5 6's -1.5);
    at rate 2 the second child of 4 pays 4 (-4.3) and the first child of 5 pays 2 (-3.5),
    so 5 6 takes the place. Each hypothesis's log-prob is the model's; its score keeps
    the penalties: 2 for each first child, at step 1 and at its EOS."""
    plain = DecodeOptions(beam_size=2, n_best=2)
    (got,) = run(two_lineages, [(8,)], plain)
    assert [h.tokens for h in got] == [(4, 6), (4, 7)]
    diverse = dataclasses.replace(plain, diversity_rate=2.0)
    (got,) = run(two_lineages, [(8,)], diverse)
    assert [h.tokens for h in got] == [(4, 6), (5, 6)]
    assert [h.log_prob for h in got] == pytest.approx([-0.21, -1.51], abs=1e-5)
    rules = ScoringRules.of(diverse)
    for h in got:
        assert h.score == pytest.approx(rules.score(h.log_prob - 4.0, 2, eos=True), abs=1e-5)


# Joey's search feeds EOS on to rows that ended, which the fake decoder refuses
@pytest.mark.parametrize("search", [s for s in SEARCHES if s != "joeynmt"])
def test_every_search_ranks_siblings_and_keeps_the_models_log_probs(search):
    """Each search keeps its own rules around the penalty; its hypotheses' token
    log-probs are the model's own and add up to their log-prob, and the n-best lists
    change (one first token for several hypotheses less often)."""
    options = DecodeOptions(beam_size=4, n_best=4, search=search, return_token_scores=True)
    sources = random_sources(3, 40)
    table = random_table(11)
    plain = run(table, sources, options)
    diverse = run(table, sources, dataclasses.replace(options, diversity_rate=1.5))
    changed, rules = 0, ScoringRules.of(options)
    for src, p, d in zip(sources, plain, diverse, strict=True):
        assert d and all(h.tokens for h in d)
        changed += [h.tokens for h in p] != [h.tokens for h in d]
        for h in d:
            tokens = (*h.tokens, EOS)[: len(h.token_log_probs)]
            want = [float(vector(table(src, tokens[:j]))[t]) for j, t in enumerate(tokens)]
            assert h.token_log_probs == pytest.approx(want, abs=0, rel=0)
            assert h.log_prob == pytest.approx(math.fsum(want), abs=1e-4)
            # every step but the first took at least the rate off the score's log-prob
            eos = len(h.token_log_probs) > len(h.tokens)
            unpenalised = rules.score(h.log_prob, len(h.tokens), eos=eos)
            assert h.score < unpenalised or search == "opennmt-tf"
    assert changed >= 10, changed

    def first_tokens(lists) -> float:
        return float(np.mean([len({h.tokens[0] for h in hyps}) for hyps in lists]))

    if search != "opennmt-tf":  # its n-best are its places, finished early ones too
        assert first_tokens(diverse) >= first_tokens(plain)


def test_a_huge_rate_keeps_one_child_per_parent():
    """With the penalty beyond any log-prob gap, a step's first children all rank before
    any second child: live hypotheses share a parent only when first children are short
    (EOS), so the n-best lists hold more distinct first tokens than plain beam's."""
    options = DecodeOptions(beam_size=4, n_best=4, search="fairseq")
    sources = random_sources(5, 40)
    plain = run(random_table(2), sources, options)
    diverse = run(random_table(2), sources, dataclasses.replace(options, diversity_rate=100.0))

    def distinct(lists) -> float:
        return float(np.mean([len({h.tokens[:1] for h in hyps}) for hyps in lists]))

    assert distinct(diverse) > distinct(plain) + 0.5, (distinct(diverse), distinct(plain))


def test_strategy_for_wraps_the_models_beam():
    diverse = DecodeOptions(beam_size=4, diversity_rate=0.5)
    s = strategy_for(diverse)
    assert isinstance(s, Siblings) and s.inner is BEAM
    s = strategy_for(dataclasses.replace(diverse, search="eole"))
    assert isinstance(s, Siblings) and s.inner is EOLE_BEAM
    s = strategy_for(diverse, prefix=True)
    assert isinstance(s, Prefix) and isinstance(s.inner, Siblings) and s.inner.inner is BEAM
    assert strategy_for(dataclasses.replace(diverse, diversity_rate=0.0)) is BEAM
    assert strategy_for(DecodeOptions()) is GREEDY
    search = make_search(3, diverse, SPECIAL)
    assert search.own_scores == [0.0] and not search.beam_batchable


@pytest.mark.parametrize(
    "fields, match",
    [
        ({"beam_size": 1, "diversity_rate": 0.5}, "use beam_size 2 or more"),
        ({"beam_size": 4, "diversity_rate": -0.1}, r"diversity_rate must be in \[0, 100\]"),
        ({"beam_size": 4, "diversity_rate": math.nan}, "diversity_rate must be in"),
        ({"beam_size": 4, "diversity_rate": math.inf}, "diversity_rate must be in"),
        ({"beam_size": 4, "diversity_rate": 100.5}, "diversity_rate must be in"),
    ],
)
def test_impossible_rates_are_refused(fields, match):
    with pytest.raises(DecodeOptionsError, match=match):
        DecodeOptions(**fields)


def test_a_step_capped_at_the_vocabulary_reads_the_real_eos():
    """With 2 x beam + bans past the vocabulary, the decoder's top-k also lists EOS, at
    -inf, beside its own column: the penalty and the token log-prob of an EOS are the
    real one's (a positive log-prob came back before, and token scores of -inf that
    depended on the batch)."""
    options = DecodeOptions(beam_size=8, n_best=8, ban_unk=True, max_length=2,
                            diversity_rate=1.0, return_token_scores=True)  # fmt: skip
    sources = random_sources(29, 6, max_len=3)
    table = random_table(4)
    for src, hyps in zip(sources, run(table, sources, options), strict=True):
        for h in hyps:
            assert h.log_prob <= 0.0
            tokens = (*h.tokens, EOS)
            want = [float(vector(table(src, tokens[:j]))[t]) for j, t in enumerate(tokens)]
            assert h.token_log_probs == pytest.approx(want, abs=0, rel=0)
    # the same sentence's token scores beside a wider beam
    plain = DecodeOptions(beam_size=2, n_best=2, return_token_scores=True, max_length=3)
    wide = DecodeOptions(beam_size=5, n_best=5, max_length=3)
    alone = run(table, sources[:1], plain)[0]
    beside = run(table, sources[:2], [plain, wide])[0]
    assert [h.token_log_probs for h in alone] == [h.token_log_probs for h in beside]
    assert all(np.isfinite(h.token_log_probs).all() for h in alone)


# ------------------------------------------------------------ diverse beam search


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


@pytest.mark.parametrize("search", ["standard", "fairseq"])
def test_a_target_prefix_counts_in_grouped_scores(search):
    """At strength 0 a grouped hypothesis's score is its log-prob's, prefix included (it
    was left out once: 135 of 200 lists in the wrong order, review of 2026-11-29)."""
    options = DecodeOptions(beam_size=4, n_best=4, search=search, diverse_beam_groups=2,
                            diverse_beam_strength=0.0)  # fmt: skip
    rules = ScoringRules.of(options)
    sources = random_sources(3, 40)
    for hyps in run(random_table(4), sources, options, prefixes=[(5, 6, 7)] * len(sources)):
        for h in hyps:
            assert h.score == pytest.approx(rules.score(h.log_prob, len(h.tokens)), abs=1e-5)


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


# ---------------------------------------------------------------------------- both


@pytest.mark.parametrize("kind", DIVERSE)
def test_a_diverse_sentence_and_its_batch_mates_do_not_change_each_other(kind):
    """Diverse sentences are chosen outside the beam arrays, one at a time; what each gets
    is what it gets alone, and the plain ones beside them are unchanged."""
    diverse = DIVERSE[kind]
    options = dataclasses.replace(diverse, diversity_rate=0.0, diverse_beam_groups=0)
    sources = random_sources(7, 36)
    table = random_table(4)
    asked = [diverse if i % 2 else options for i in range(len(sources))]
    together = run(table, sources, asked)
    plain = run(table, sources, options)
    for i, src in enumerate(sources):
        alone = run(table, [src], asked[i])[0]
        assert [(h.tokens, h.score) for h in together[i]] == [(h.tokens, h.score) for h in alone]
        if i % 2 == 0:
            assert [h.tokens for h in together[i]] == [h.tokens for h in plain[i]]


@pytest.mark.parametrize("kind", DIVERSE)
def test_a_target_prefix_starts_every_diverse_hypothesis(kind):
    sources = random_sources(9, 10)
    got = run(random_table(6), sources, DIVERSE[kind], prefixes=[(5, 6)] * len(sources))
    for hyps in got:
        assert len(hyps) == 4 and all(h.tokens[:2] == (5, 6) for h in hyps)


@pytest.mark.parametrize("high", [False, True], ids=["", "high"])
@pytest.mark.parametrize("kind", DIVERSE)
def test_log_probs_are_the_models_float32_sums(kind, high):
    """The hypothesis's log-prob is the model's log-probs added as a plain beam adds them
    (float32), not the penalised score with the penalties added back (which drifts: 6.6e-4
    at rate 100 on long sentences, review of 2026-11-29)."""
    options = dataclasses.replace(DIVERSE[kind], return_token_scores=True)
    if high:
        field = "diversity_rate" if kind == "siblings" else "diverse_beam_strength"
        options = dataclasses.replace(options, **{field: 100.0})
    sources = random_sources(23, 12, max_len=8)
    for hyps in run(random_table(21), sources, options):
        for h in hyps:
            total = np.float32(0.0)
            for x in h.token_log_probs:
                total = np.float32(total + np.float32(x))
            assert h.log_prob == float(total), (h.tokens, h.log_prob, float(total))


@pytest.mark.parametrize("kind", DIVERSE)
def test_constraints_and_diverse_searches_are_refused_together(kind):
    options = DIVERSE[kind]
    with pytest.raises(ValueError, match="constrained beam search is not diverse"):
        make_search(3, options, SPECIAL, constraints=Constraints(((5,),)))

    class Tokens:
        def encode(self, text: str) -> list[int]:
            return [5]

    with pytest.raises(InvalidRequest, match=r"constraints\[0\].*leave diversity_rate at 0"):
        validate_constraints([(["x"], False)], [[4, 5]], options, Tokens(), SPECIAL)


# ------------------------------------------------------------------------ over the wire


@pytest.fixture(scope="module", params=["off", "on"], ids=["in-process", "engine-process"])
def diverse_server(request, server_factory):
    return server_factory(server={"engine_process": request.param})


WIRE = {
    "siblings": {"diversity_rate": 1.0},
    "groups": {"diverse_beam_groups": 2, "diverse_beam_strength": 2.0},
}


@pytest.mark.parametrize("kind", WIRE)
def test_a_served_diverse_nbest_is_the_in_process_one(diverse_server, tiny_bundle, kind):
    from nmt_client import Translator
    from service.offline import translate_with_bundle
    from tests.service.server_helpers import proto_options

    texts = list(tiny_bundle.sentences[:4])
    with Translator(f"127.0.0.1:{diverse_server.port}", timeout=60, retries=0) as t:
        served = t.translate(texts, beam_size=4, n_best=4, **WIRE[kind])
        plain = t.translate(texts, beam_size=4, n_best=4)
    request = proto_options(beam=4, **WIRE[kind])
    assert [r.best.text for r in served] == translate_with_bundle(
        tiny_bundle.bundle_dir, texts, request
    )
    lists = [[h.tokens for h in r.hypotheses] for r in served]
    assert all(len(hyps) == 4 for hyps in lists)
    assert lists != [[h.tokens for h in r.hypotheses] for r in plain]
    for r in served:
        scores = [h.score for h in r.hypotheses]
        assert scores == sorted(scores, reverse=True)


@pytest.mark.parametrize("kind", WIRE)
def test_a_streamed_diverse_translation_ends_as_translate_gives_it(
    diverse_server, tiny_bundle, kind
):
    """The stream's text grows by the prefix every hypothesis shares and ends with the
    best one, which is Translate's."""
    from nmt_client import Translator

    text = tiny_bundle.sentences[2]
    with Translator(f"127.0.0.1:{diverse_server.port}", timeout=60, retries=0) as t:
        updates = list(t.stream(text, beam_size=4, n_best=3, **WIRE[kind]))
        (whole,) = t.translate([text], beam_size=4, n_best=3, **WIRE[kind])
    assert updates[-1].final and updates[-1].result.best.text == whole.best.text
    texts = [u.text for u in updates]
    assert all(b.startswith(a) for a, b in zip(texts, texts[1:], strict=False))


@pytest.mark.parametrize(
    "extra, match",
    [
        ({"beam_size": 1, "diversity_rate": 0.5}, "use beam_size 2 or more"),
        ({"beam_size": 4, "diversity_rate": 101.0}, "diversity_rate must be in [0, 100]"),
        ({"beam_size": 5, "diverse_beam_groups": 2}, "must divide beam_size 5"),
        ({"beam_size": 4, "diverse_beam_groups": 2, "diverse_beam_strength": 1e9}, "strength"),
        ({"beam_size": 4, "diverse_beam_groups": 2, "diversity_rate": 1.0}, "two diverse"),
    ],
)
def test_impossible_diverse_requests_are_invalid_argument(
    diverse_server, tiny_bundle, extra, match
):
    import grpc

    from nmt_api.nmt.v1 import translator_pb2 as pb
    from tests.service.server_helpers import rpc_error, stub_for

    channel, stub = stub_for(diverse_server.port)
    try:
        options = pb.DecodeOptions(**extra)
        request = pb.TranslateRequest(texts=[tiny_bundle.sentences[0]], options=options)
        error = rpc_error(lambda: stub.Translate(request, timeout=60))
    finally:
        channel.close()
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert match in error.details() and "\n" not in error.details()
