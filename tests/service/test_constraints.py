"""Lexically constrained decoding (:mod:`service.constraints`): the constraint states
against fairseq's own unit tests, the search on the scripted fake decoder, request
validation, and over the wire. Against fairseq's own n-best lists:
``tests/export/test_fairseq_constraints.py``."""

from __future__ import annotations

import numpy as np
import pytest

from models.options import DecodeOptions
from service.constraints import CONSTRAINED, Constraints
from service.decoding import SpecialIds, make_search
from service.errors import InvalidRequest
from service.limits import MAX_CONSTRAINTS, validate_constraints
from service.loop import decode
from tests.service.test_decoding import (
    EOS,
    SPECIAL,
    FakeStepModel,
    random_sources,
    random_table,
    run,
    vector,
)

# fairseq's tests/test_constraints.py (commit 3d262bb2): (phrases, tokens read, expected)
PHRASES = [[1, 2, 3], [1, 3], [1, 4], [4, 5, 6, 7], [1], [4, 5]]
UNORDERED = [
    (PHRASES, [], (0, 0, False)),
    (PHRASES, [1, 2], (2, 0, False)),
    (PHRASES, [1, 2, 94], (1, 1, False)),
    (PHRASES, [1, 3, 999, 1, 4], (4, 2, False)),
    (PHRASES, [1, 3, 999, 1, 4, 999], (4, 2, False)),
    (PHRASES, [4, 5, 6, 8], (2, 1, False)),
    (PHRASES, [1, 2, 3, 1, 3, 1, 4, 4, 5, 6, 7, 1, 4, 5], (14, 6, True)),
    (PHRASES, [1, 2, 3, 999, 1, 3, 1, 4, 4, 5, 6, 7, 1, 4, 5, 117], (14, 6, True)),
    ([[1], [2, 3]], [1, 1], (1, 1, False)),
    ([[1, 2], [1, 2]], [1, 2, 1, 2], (4, 2, True)),
    ([[1, 2], [1, 2]], [1, 2, 1, 2, 1], (4, 2, True)),
    ([[1, 2], [3, 4]], [1, 2, 3, 4, 5], (4, 2, True)),
]
ORDERED = [
    (PHRASES, [], (0, 0, False)),
    (PHRASES, [1, 2], (2, 0, False)),
    (PHRASES, [1, 2, 94], (0, 0, False)),
    (PHRASES, [1, 3, 999, 1, 4], (0, 0, False)),
    (PHRASES, [1, 2, 3, 999, 999], (3, 1, False)),
    (PHRASES, [1, 2, 3, 77, 1, 3, 1], (6, 2, False)),
    (PHRASES, [1, 2, 3, 1, 3, 1, 4, 4, 5, 6, 7, 1, 4, 5], (14, 6, True)),
    (PHRASES, [1, 2, 999, 1, 2, 3, 999, 1, 3, 1, 4, 4, 5, 6, 7, 1, 4, 5, 117], (14, 6, True)),
    ([[1], [2, 3]], [1, 1], (1, 1, False)),
    ([[1, 2], [1, 2]], [1, 2, 1, 2], (4, 2, True)),
    ([[1, 2], [1, 2]], [1, 2, 1, 2, 1], (4, 2, True)),
    ([[1, 2], [3, 4]], [1, 2, 3, 4, 5], (4, 2, True)),
]


@pytest.mark.parametrize(
    "ordered, phrases, tokens, want",
    [(False, *case) for case in UNORDERED] + [(True, *case) for case in ORDERED],
)
def test_states_agree_with_fairseqs_own_tests(ordered, phrases, tokens, want):
    state = Constraints(tuple(map(tuple, phrases)), ordered).start()
    for token in tokens:
        state = state.advance(token)
    assert (state.bank, state.num_completed, state.finished) == want


def test_unordered_next_tokens_are_the_roots_and_the_nodes_children():
    state = Constraints(tuple(map(tuple, PHRASES))).start()
    assert state.next_tokens() == {1, 4}
    state = state.advance(1)
    assert state.next_tokens() == {1, 4, 2, 3}
    assert state.advance(2).next_tokens() == {1, 4, 3}


def holds(tokens: tuple[int, ...], phrases, ordered: bool) -> bool:
    """Whether ``tokens`` contain every phrase (as many times as it is given), each
    where no other one is, in the order given when ``ordered``."""
    used: set[int] = set()
    start = 0
    for phrase in phrases:
        n = len(phrase)
        spots = [
            i
            for i in range(start if ordered else 0, len(tokens) - n + 1)
            if tokens[i : i + n] == tuple(phrase) and not used & set(range(i, i + n))
        ]
        if not spots:
            return False
        used |= set(range(spots[0], spots[0] + n))
        start = spots[0] + n
    return True


def test_holds_reads_order_and_repeats():
    assert holds((4, 5, 6, 7), [(5,), (7,)], ordered=True)
    assert not holds((4, 7, 6, 5), [(5,), (7,)], ordered=True)
    assert holds((4, 7, 6, 5), [(5,), (7,)], ordered=False)
    assert not holds((4, 5, 6), [(5,), (5,)], ordered=False)
    assert not holds((), [(5,)], ordered=False)


CASES = [
    [(7,)],
    [(8, 9)],
    [(6,), (9, 4)],
    [(5,), (5,)],
    [(4, 8), (4, 6)],  # two phrases sharing their first token
]


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
@pytest.mark.parametrize("beam", [1, 2, 5])
def test_every_hypothesis_holds_its_phrases(ordered, beam):
    options = DecodeOptions(beam_size=beam, n_best=beam)
    sources = random_sources(11, 10, max_len=6)
    constraints = [Constraints(CASES[i % len(CASES)], ordered) for i in range(len(sources))]
    got = run(random_table(3), sources, options, constraints=constraints)
    met = 0
    for src, c, hyps in zip(sources, constraints, got, strict=True):
        assert hyps
        limit = 2 * len(src) + 10 - 1  # tokens before EOS under the default length rules
        for h in hyps:
            # only the length limit ends a hypothesis with its phrases unmet
            assert holds(h.tokens, c.phrases, ordered) or len(h.tokens) >= limit, (c, h.tokens)
        met += holds(hyps[0].tokens, c.phrases, ordered)
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
    # the random model gives some phrases little chance: a few best ones run to the limit
    assert met >= 0.6 * len(sources), met


def test_constrained_and_plain_sentences_do_not_change_each_other():
    options = DecodeOptions(beam_size=4, n_best=2)
    sources = random_sources(5, 8)
    constraints = [Constraints(CASES[i % 3]) if i % 2 else None for i in range(len(sources))]
    together = run(random_table(9), sources, options, constraints=constraints)
    plain = run(random_table(9), sources, options)
    for i, (src, c) in enumerate(zip(sources, constraints, strict=True)):
        alone = run(random_table(9), [src], options, constraints=[c])[0]
        assert [h.tokens for h in together[i]] == [h.tokens for h in alone]
        if c is None:
            assert [h.tokens for h in together[i]] == [h.tokens for h in plain[i]]


def test_the_length_limit_ends_a_hypothesis_with_its_phrases_unmet():
    """fairseq stops on an assertion; here every live hypothesis ends at the limit and
    the request gets its n-best list."""
    options = DecodeOptions(beam_size=2, n_best=2, max_length=3)
    (got,) = run(random_table(2), [(4, 5)], options, constraints=[Constraints(((6, 7, 8, 9),))])
    assert len(got) == 2 and all(len(h.tokens) <= 3 for h in got)


def step0_table(src, prefix):
    """EOS at once is by far the likeliest; 7, the phrase, comes later."""
    if not prefix:
        return {EOS: -0.05, 5: -3.0, 6: -3.5}
    return {EOS: -0.5, 5: -1.5, 6: -2.0, 7: -2.5}


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_no_hypothesis_ends_before_its_phrases_even_at_the_first_step(beam):
    """fairseq bans EOS for unmet phrases from its second step on, leaving the first to
    its min_len >= 1; with min_length 0 (Eole's and OpenNMT-py's converted models) the
    empty translation would come back first."""
    options = DecodeOptions(beam_size=beam, n_best=beam, min_length=0)
    (got,) = run(step0_table, [(4, 5)], options, constraints=[Constraints(((7,),))])
    assert got and all(7 in h.tokens for h in got)


@pytest.mark.parametrize("ordered", [False, True], ids=["unordered", "ordered"])
def test_at_the_limit_hypotheses_without_the_phrases_never_outrank_those_with(ordered):
    """At a tight length limit, rows that never met their phrases often score best;
    fairseq ends only those that met them (the others' EOS is -inf), and so does this
    search: an n-best list holds them all, or (nothing met them by the limit, where
    fairseq stops on an assertion) none."""
    options = DecodeOptions(beam_size=4, n_best=4, max_length=5)
    sources = random_sources(31, 40)
    constraints = [Constraints(CASES[i % len(CASES)], ordered) for i in range(len(sources))]
    got = run(random_table(7), sources, options, constraints=constraints)
    mixed, at_limit = [], 0
    for i, (c, hyps) in enumerate(zip(constraints, got, strict=True)):
        held = [holds(h.tokens, c.phrases, ordered) for h in hyps]
        if any(held) and not all(held):
            mixed.append(i)
        at_limit += any(len(h.tokens) == 4 for h in hyps)  # 5 with EOS
    assert mixed == []
    assert at_limit > len(sources) // 2  # the limit bit


def test_token_scores_are_the_models_own_for_constraint_tokens_too():
    """A phrase's token is often outside the step's top-k: its entry in
    ``token_log_probs`` is read from the step's whole row, the model's own number (not a
    difference of rounded cumulative scores)."""
    options = DecodeOptions(beam_size=2, n_best=2, return_token_scores=True)
    sources = random_sources(41, 8)
    table = random_table(5)
    # the decoder's own top-k (4 of the 10 tokens), not every token as run() asks
    got = decode(
        FakeStepModel(table), [list(x) for x in sources], options=options, special=SPECIAL,
        constraints=[Constraints(((7, 8),))] * len(sources),
    )  # fmt: skip
    for src, hyps in zip(sources, got, strict=True):
        for h in hyps:
            tokens = (*h.tokens, EOS)
            want = [float(vector(table(src, tokens[:j]))[t]) for j, t in enumerate(tokens)]
            assert h.token_log_probs == pytest.approx(want, abs=0, rel=0), h.tokens


def test_make_search_picks_the_constrained_search():
    c = Constraints(((5,),))
    assert make_search(3, DecodeOptions(), SPECIAL, constraints=c).strategy is CONSTRAINED
    assert (
        make_search(3, DecodeOptions(beam_size=4), SPECIAL, constraints=c).strategy is CONSTRAINED
    )
    with pytest.raises(ValueError, match="both a target prefix and constraints"):
        make_search(3, DecodeOptions(), SPECIAL, prefix=[5], constraints=c)


# -- request validation -------------------------------------------------------------


class Words:
    """Target tokenizer stand-in: one id per word (4 + its length), "zz" unknown."""

    def encode(self, text: str) -> list[int]:
        return [3 if w == "zz" else 4 + len(w) for w in text.split()]


WORD_SPECIAL = SpecialIds(pad=5, bos=6, eos=7, unk=3)  # "a", "bb", "ccc" are specials


def test_validate_constraints_aligns_with_the_texts():
    got = validate_constraints(
        [(["dddd", "eeeee ffff"], True), ([], False)],
        [[4, 5], [6]], DecodeOptions(), Words(), WORD_SPECIAL,
    )  # fmt: skip
    assert got == [Constraints(((8,), (9, 8)), True), None]
    one = validate_constraints(
        [(["dddd"], False)], [[4], [5]], DecodeOptions(), Words(), WORD_SPECIAL
    )
    assert one == [Constraints(((8,),)), None]


@pytest.mark.parametrize(
    "constraints, options, prefixes, match",
    [
        ([(["dddd"], False)] * 3, DecodeOptions(), (), r"3 constraint sets for 2 texts"),
        ([([""], False)], DecodeOptions(), (), r"constraints\[0\]\.phrases\[0\] has no tokens"),
        ([(["dddd ccc"], False)], DecodeOptions(), (), r"end-of-sentence token"),
        ([(["dddd", "zz"], False)], DecodeOptions(), (), r"phrases\[1\] \('zz'\) has a word"),
        ([(["dddd"], False)], DecodeOptions(sampling_topk=5), (), r"leave sampling_topk"),
        ([([], False), (["dddd"], False)], DecodeOptions(), [(), (9,)], r"target_prefix too"),
        ([(["dddd"] * (MAX_CONSTRAINTS + 1), False)], DecodeOptions(), (), r"at most 16"),
        ([(["dddd " * 12], False)], DecodeOptions(), (), r"12 target tokens; .* at most 11"),
    ],
)
def test_impossible_constraints_are_invalid(constraints, options, prefixes, match):
    with pytest.raises(InvalidRequest, match=match):
        validate_constraints(constraints, [[4], [5]], options, Words(), WORD_SPECIAL, prefixes)


# -- over the wire: a real server, in process and with the engine in a child process ------


@pytest.fixture(scope="module", params=["off", "on"], ids=["in-process", "engine-process"])
def constraint_server(request, server_factory):
    return server_factory(server={"engine_process": request.param})


def _pieces(tiny_bundle, text: str) -> tuple[str, ...]:
    from models.tokenizer import Tokenizer

    tok = Tokenizer.from_file(tiny_bundle.bundle_dir / "target.spm.model")
    return tuple(tok.pieces(tok.encode(text)))


@pytest.mark.parametrize("beam, n_best", [(1, 1), (4, 3)])
def test_every_served_hypothesis_holds_its_phrases(constraint_server, tiny_bundle, beam, n_best):
    from nmt_client import Translator

    texts = list(tiny_bundle.sentences[:3])
    phrases = ["casa", "perro grande"]
    with Translator(f"127.0.0.1:{constraint_server.port}", timeout=60, retries=0) as t:
        results = t.translate(
            texts, beam_size=beam, n_best=n_best, constraints=[phrases, [], phrases[1:]]
        )
        plain = t.translate(texts[1:2], beam_size=beam, n_best=n_best)
    wanted = [[_pieces(tiny_bundle, p) for p in phrases], [], [_pieces(tiny_bundle, phrases[1])]]
    for i in (0, 2):
        assert len(results[i].hypotheses) == n_best
        assert holds(tuple(results[i].best.tokens), wanted[i], ordered=False)
    # A sentence without constraints decodes as it would alone.
    assert [h.tokens for h in results[1].hypotheses] == [h.tokens for h in plain[0].hypotheses]


def test_a_streamed_translation_holds_its_ordered_phrases(constraint_server, tiny_bundle):
    from nmt_client import Translator

    phrases = ["perro", "casa"]
    with Translator(f"127.0.0.1:{constraint_server.port}", timeout=60, retries=0) as t:
        updates = list(
            t.stream(tiny_bundle.sentences[0], constraints=phrases, ordered_constraints=True)
        )
    final = updates[-1]
    wanted = [_pieces(tiny_bundle, p) for p in phrases]
    assert final.final and holds(tuple(final.result.best.tokens), wanted, ordered=True)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"constraints": [["casa"]] * 4}, "4 constraint sets for 3 texts"),
        ({"constraints": [[" "]]}, r"constraints\[0\]\.phrases\[0\] has no tokens"),
        ({"constraints": [["casa"]], "target_prefix": ["la", "", ""]}, "target_prefix too"),
        ({"constraints": [["casa"]], "sampling_topk": 10}, "leave sampling_topk"),
    ],
)
def test_impossible_constraints_are_invalid_argument(constraint_server, tiny_bundle, kwargs, match):
    from nmt_client import InvalidRequest as ClientInvalid
    from nmt_client import Translator

    address = f"127.0.0.1:{constraint_server.port}"
    with Translator(address, timeout=60, retries=0) as t, pytest.raises(ClientInvalid, match=match):
        t.translate(list(tiny_bundle.sentences[:3]), **kwargs)


def test_the_sort_order_is_torchs_on_ties():
    """fairseq sorts its candidates with ``torch.sort`` (not stable): among equal keys
    the order is what PyTorch's CPU sort leaves, and fairseq's n-best lists depend on it
    (with a stable sort instead, 23 and 35 of 120 lstm_word lists differed)."""
    import torch

    from service.constraints import torch_sort_order

    rng = np.random.default_rng(0)
    unstable = 0
    for t in range(600):
        n = int(rng.integers(1, 60))
        if t % 2:  # stripes: small ints, many equal
            x = rng.integers(0, max(1, n // 3), n).astype(np.int64)
        else:  # sort keys: a few float32 values, repeated
            x = rng.choice(np.round(rng.normal(size=8), 2).astype(np.float32), n)
        descending = t % 2 == 0
        want = torch.tensor(x).sort(dim=0, descending=descending)[1].tolist()
        assert torch_sort_order(x.tolist(), descending) == want, x
        stable = np.argsort(-x if descending else x, kind="stable").tolist()
        unstable += stable != want
    assert unstable > 100  # the ties' order really is not a stable sort's
    assert torch_sort_order([]) == []
