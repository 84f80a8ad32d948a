"""The decode loop's beam arrays (:mod:`service.beamrows`) give exactly what each
sentence's own beam search gives: same n-best tokens, log-probs and scores, whatever else
is in the loop, when sentences join, leave, are dropped, probed, stream or fail."""

from __future__ import annotations

import numpy as np
import pytest

from models.options import DecodeOptions
from service import strategies
from service.beamrows import BeamRows, _runs
from service.decoding import SentenceSearch, make_search
from service.loop import DecodeLoop
from tests.service import test_greedyrows as greedy_tests
from tests.service.test_decoding import SPECIAL, FakeStepModel, random_sources, random_table
from tests.service.test_greedyrows import BATCHABLE as GREEDY_PLAIN
from tests.service.test_greedyrows import decode_failing, exact

PLAIN_BEAMS = [
    DecodeOptions(beam_size=3),
    DecodeOptions(beam_size=3, n_best=3, max_length=8),
    DecodeOptions(beam_size=2, n_best=2, min_length=4, max_length=9),
    DecodeOptions(beam_size=4, length_penalty=0.0, max_length_ratio=0.5, max_length_offset=1),
    # more candidates than the 10-token vocabulary has: the ranking runs out (-inf)
    DecodeOptions(beam_size=5, n_best=5, max_length=30),
]
OTHER_BEAMS = [
    DecodeOptions(beam_size=3, search="eole"),
    DecodeOptions(beam_size=3, return_attention=True),
    DecodeOptions(beam_size=3, ban_unk=True),
    DecodeOptions(beam_size=3, block_ngram_repeat=2),
    DecodeOptions(beam_size=3, coverage_penalty=0.2),
]
MIX = PLAIN_BEAMS + OTHER_BEAMS + GREEDY_PLAIN[:2]


@pytest.fixture(autouse=True)
def arrays_from_one_sentence(monkeypatch):
    """The arrays from the first plain sentence (the service: from 16)."""
    monkeypatch.setattr(strategies, "ARRAY_MIN_SENTENCES", 1)


def per_sentence(monkeypatch) -> None:
    """Every beam search through its strategy object, as before the beam arrays."""
    monkeypatch.setattr(SentenceSearch, "beam_batchable", property(lambda self: False))


def beam_count(loop: DecodeLoop) -> int:
    return sum(len(b) for b in loop._beams.values())


def decode_all(sources, options, **kwargs) -> dict:
    """:func:`tests.service.test_greedyrows.decode_all`, ``seen`` counting the beam
    arrays' sentences."""
    return greedy_tests.decode_all(sources, options, count=beam_count, **kwargs)


@pytest.mark.parametrize("options", PLAIN_BEAMS)
def test_plain_beams_go_into_the_arrays(options):
    search = make_search(4, options, SPECIAL)
    assert search.beam_batchable and not search.batchable


@pytest.mark.parametrize("options", OTHER_BEAMS + GREEDY_PLAIN)
def test_other_searches_keep_their_strategy(options):
    assert not make_search(4, options, SPECIAL).beam_batchable
    assert not make_search(4, DecodeOptions(beam_size=3), SPECIAL, prefix=(9,)).beam_batchable


@pytest.mark.parametrize("join_every", [1, 2])
@pytest.mark.parametrize("probe", [False, True], ids=["", "probed"])
def test_beam_rows_equal_each_search_on_its_own(monkeypatch, join_every, probe):
    """Mixed with per-sentence searches (Eole's beam, bans, attention, coverage) and
    greedy rows, several beam sizes at once, joining at once or one by one, probed or
    not: n-best tokens, log-probs and scores are bit-identical to the per-sentence
    path's."""
    sources = random_sources(3, 36, max_len=12)
    options = [MIX[i % len(MIX)] for i in range(len(sources))]
    seen: list[int] = []
    rows = decode_all(sources, options, join_every=join_every, probe=probe, seen=seen)
    assert max(seen) >= 4, "the beam arrays were not used"
    assert any(len(r) == 5 for r in rows.values()), "no 5-best list"
    per_sentence(monkeypatch)
    exact(rows, decode_all(sources, options, join_every=join_every))


def test_long_targets_widen_the_history(monkeypatch):
    """Targets longer than the token matrix's first width (16) keep every token."""
    sources = random_sources(8, 6, max_len=12)
    options = [
        DecodeOptions(beam_size=3, n_best=3, min_length=18, max_length=40, max_length_ratio=4.0)
    ] * 6
    got = decode_all(sources, options)
    assert max(len(h.tokens) for r in got.values() for h in r) > 16
    exact(got, dict(enumerate(decoding_alone(monkeypatch, sources, options))))


def decoding_alone(monkeypatch, sources, options) -> list:
    """Each sentence decoded in a loop of its own through its strategy object."""
    monkeypatch.setattr(strategies, "ARRAY_MIN_SENTENCES", 2)
    out = []
    for src, opt in zip(sources, options, strict=True):
        loop = DecodeLoop(FakeStepModel(random_table(7)), SPECIAL)
        search = make_search(len(src), opt, SPECIAL)
        loop.add([list(src)], [search], [0])
        assert not loop._beams  # one sentence: below the threshold
        while loop.active:
            loop.step()
        out.append(search.results())
    return out


def test_dropped_sentences_leave_the_others_exact(monkeypatch):
    sources = random_sources(5, 16, max_len=12)
    options = [PLAIN_BEAMS[i % 4] if i % 3 else OTHER_BEAMS[1] for i in range(16)]
    drop = {1, 2, 6, 9}
    rows = decode_all(sources, options, drop=drop)
    assert not drop & set(rows)
    per_sentence(monkeypatch)
    alone = decode_all(sources, options)
    exact(rows, {i: r for i, r in alone.items() if i not in drop})


def test_streaming_sees_what_the_per_sentence_search_shows(monkeypatch):
    """The stable prefix a stream reads at every step, from the arrays' token matrix,
    is the per-sentence search's, step for step, and the whole best target at the end."""
    sources = random_sources(9, 12, max_len=10)
    options = [PLAIN_BEAMS[i % len(PLAIN_BEAMS)] for i in range(12)]
    shown: dict = {}
    got = decode_all(sources, options, shown=shown)
    per_sentence(monkeypatch)
    want_shown: dict = {}
    decode_all(sources, options, shown=want_shown)
    assert shown == want_shown
    assert all(shown[i][-1] == got[i][0].tokens for i in got)
    assert any(len(set(prefixes)) > 2 for prefixes in shown.values()), "nothing streamed"


def test_searches_that_leave_hold_no_reference_to_the_arrays():
    sources = random_sources(9, 12, max_len=10)
    options = [PLAIN_BEAMS[i % len(PLAIN_BEAMS)] for i in range(12)]
    loop = DecodeLoop(FakeStepModel(random_table(7)), SPECIAL)
    searches = [make_search(len(s), o, SPECIAL) for s, o in zip(sources, options, strict=True)]
    loop.add([list(s) for s in sources], searches, list(range(12)))
    assert all(s.live_tokens is not None for s in searches)
    loop.drop({0, 1})
    while loop.active:
        loop.step()
    assert all(s.live_tokens is None for s in searches)


def test_a_failing_finish_fails_only_its_sentence(monkeypatch):
    """A search that raises recording a finished hypothesis leaves the loop through
    ``failed``; every other sentence takes its steps exactly as without it."""
    sources = random_sources(11, 12, max_len=10)
    options = [PLAIN_BEAMS[i % 4] for i in range(12)]
    loop = decode_failing(monkeypatch, sources, options, "add_finished")
    assert loop.live_rows == 0 and not loop._beams


def test_rows_keep_their_own_slots_through_compaction(monkeypatch):
    """Long sentences finish first here, so the pool is rebuilt narrower while beam rows
    are live: each row must still read its own sentence's memory."""
    rng = np.random.default_rng(0)
    sources = [list(rng.integers(4, 10, n)) for n in (3, 3, 14, 4, 13, 3, 12, 5)]
    options = [
        DecodeOptions(beam_size=3, n_best=2, max_length=4 if len(s) > 10 else 12) for s in sources
    ]
    got = decode_all(sources, options)
    exact(got, dict(enumerate(decoding_alone(monkeypatch, sources, options))))


def test_few_beam_sentences_are_decoded_one_at_a_time(monkeypatch):
    """Below ARRAY_MIN_SENTENCES plain beam sentences of one beam size the loop keeps
    them per sentence; once that many are in the loop, those that join go into the
    arrays (one block per beam size); the results do not change."""
    monkeypatch.setattr(strategies, "ARRAY_MIN_SENTENCES", 6)
    sources = random_sources(13, 14, max_len=10)
    options = [DecodeOptions(beam_size=3, max_length=30)] * 12 + [
        DecodeOptions(beam_size=2, max_length=30)
    ] * 2
    loop = DecodeLoop(FakeStepModel(random_table(7)), SPECIAL)
    searches = [make_search(len(s), o, SPECIAL) for s, o in zip(sources, options, strict=True)]
    for i in range(4):  # four alone: below the threshold
        loop.add([list(sources[i])], [searches[i]], [i])
    assert not loop._beams and len(loop.active) == 4
    loop.add([list(s) for s in sources[4:6]], searches[4:6], [4, 5])  # 6 in the loop now
    assert len(loop._beams[3]) == 2 and len(loop.active) == 6
    loop.add([list(s) for s in sources[6:]], searches[6:], list(range(6, 14)))
    assert len(loop._beams[3]) == 8 and 2 not in loop._beams  # two of beam 2: too few
    got = {}
    while loop.active:
        for handle, search in loop.step():
            got[handle] = search.results()
    per_sentence(monkeypatch)
    exact(got, decode_all(sources, options))


def test_runs_lists_each_sentences_rows():
    got = _runs(np.array([0, 7, 3]), np.array([2, 0, 3]))
    assert got.tolist() == [0, 1, 3, 4, 5]
    assert _runs(np.zeros(0, np.int64), np.zeros(0, np.int64)).tolist() == []


def test_an_empty_block_carries_no_rows():
    block = BeamRows(3, 6, SPECIAL.eos)
    assert len(block) == 0 and block.live_rows == 0 and block.rows_of(np.zeros(0, np.int64)) == 0


def test_a_probe_chooses_for_its_sentences_what_the_whole_step_does():
    """A probe over some of the sentences (fault isolation) feeds their rows and ranks
    their candidates exactly as the step over all of them does."""
    sources = random_sources(4, 10, max_len=10)
    loop = DecodeLoop(FakeStepModel(random_table(7)), SPECIAL)
    options = DecodeOptions(beam_size=3, n_best=2, max_length=20)
    loop.add(
        [list(s) for s in sources],
        [make_search(len(s), options, SPECIAL) for s in sources],
        list(range(10)),
    )
    for _ in range(3):  # past step 0: three rows a sentence
        loop.step()
    (block,) = loop._beams.values()
    assert block.rows.tolist() == [3] * 10
    some = loop.active[1::3]
    picks = np.array([a.row for a in some])
    whole = loop._run(loop.active)[3][1]  # the choices: the greedy block's, then this
    part = loop._run(some)[3][1]
    for got, want in zip(part, whole, strict=True):
        assert np.array_equal(got, want[picks])
    inputs = block.inputs(picks)
    rows = np.concatenate([np.arange(3 * j, 3 * j + 3) for j in picks.tolist()])
    for got, want in zip(inputs, block.inputs(None), strict=True):
        assert np.array_equal(got, want[rows])
