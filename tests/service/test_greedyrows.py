"""The decode loop's greedy arrays (:mod:`service.greedyrows`) give exactly what each
sentence's own search gives: same tokens, log-probs and scores, whatever else is in the
loop, when sentences join, leave, are dropped, probed, or fail."""

from __future__ import annotations

import numpy as np
import pytest

from models.options import DecodeOptions
from service import strategies
from service.decoding import SentenceSearch, make_search
from service.loop import DecodeLoop
from tests.service.test_decoding import SPECIAL, FakeStepModel, random_sources, random_table

BATCHABLE = [
    DecodeOptions(),
    DecodeOptions(max_length=6),
    DecodeOptions(min_length=4, max_length=9),
    DecodeOptions(length_penalty=0.0, max_length_ratio=0.5, max_length_offset=1),
    # Eole's rules: BOS in the length, the EOS forced at the limit not scored
    DecodeOptions(search="eole", max_length=5),
]
PER_SENTENCE = [
    DecodeOptions(return_attention=True),
    DecodeOptions(ban_unk=True),
    DecodeOptions(block_ngram_repeat=2),
    DecodeOptions(coverage_penalty=0.2),
    DecodeOptions(sampling_topk=3, seed=1),
    DecodeOptions(beam_size=3, n_best=2, max_length=8),
]


@pytest.fixture(autouse=True)
def arrays_from_one_sentence(monkeypatch):
    """The arrays from the first plain greedy sentence (the service: from 16)."""
    monkeypatch.setattr(strategies, "ARRAY_MIN_SENTENCES", 1)


def per_sentence(monkeypatch) -> None:
    """Every search through its strategy object, as before the greedy arrays."""
    monkeypatch.setattr(SentenceSearch, "batchable", property(lambda self: False))


def greedy_count(loop: DecodeLoop) -> int:
    return len(loop._greedy)


def decode_all(
    sources, options, *, join_every=1, drop=(), probe=False, seen=None, count=greedy_count,
    shown=None,
) -> dict:  # fmt: skip
    """One loop; a sentence joins every ``join_every`` steps; the handles in ``drop``
    are dropped at step 3; with ``probe`` every step is probed first over every other
    sentence. ``seen``: filled with ``count(loop)`` at each step (default: the greedy
    rows); ``shown``: each sentence's stable prefix at each step and once done (what a
    stream sends)."""
    loop = DecodeLoop(FakeStepModel(random_table(7)), SPECIAL)
    results: dict = {}
    pending = list(range(len(sources)))
    steps = 0
    while pending or loop.active:
        if pending and steps % join_every == 0:
            take = pending if join_every == 1 else pending[:1]
            loop.add(
                [list(sources[i]) for i in take],
                [make_search(len(sources[i]), options[i], SPECIAL) for i in take],
                list(take),
            )
            pending = [i for i in pending if i not in take]
        if steps == 3 and drop:
            loop.drop(set(drop))
        if probe and loop.active:
            loop.probe(loop.active[::2])
        if seen is not None:
            seen.append(count(loop))
        if shown is not None:
            for a in loop.active:
                shown.setdefault(a.handle, []).append(a.search.stable_prefix())
        for handle, search in loop.step():
            results[handle] = search.results()
            if shown is not None:
                shown[handle].append(search.stable_prefix())
        steps += 1
        assert steps < 500
    return results


def decode_failing(monkeypatch, sources, options, method: str) -> DecodeLoop:
    """Decode ``sources`` in one loop with ``SentenceSearch.<method>`` raising for
    sentences as long as ``sources[4]``: exactly those must leave through ``failed``,
    every other one must end as without them. Returns the loop, run to its end."""
    want = decode_all(sources, options)
    real = getattr(SentenceSearch, method)
    bad = sources[4]

    def failing(self, *args, **kwargs):
        if self.src_len == len(bad):
            raise RuntimeError("injected")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SentenceSearch, method, failing)
    loop = DecodeLoop(FakeStepModel(random_table(7)), SPECIAL)
    loop.add(
        [list(s) for s in sources],
        [make_search(len(s), o, SPECIAL) for s, o in zip(sources, options, strict=True)],
        list(range(len(sources))),
    )
    got, failed = {}, []
    while loop.active:
        for handle, search in loop.step(failed):
            got[handle] = search.results()
    losers = {i for i, s in enumerate(sources) if len(s) == len(bad)}
    assert {h for h, _ in failed} == losers and all("injected" in str(e) for _, e in failed)
    exact(got, {i: r for i, r in want.items() if i not in losers})
    return loop


def exact(got: dict, want: dict) -> None:
    assert sorted(got) == sorted(want)
    for i in want:
        assert [(h.tokens, h.log_prob, h.score) for h in got[i]] == [
            (h.tokens, h.log_prob, h.score) for h in want[i]
        ], f"sentence {i}"


@pytest.mark.parametrize("options", BATCHABLE)
def test_batchable_searches_are_plain_greedy(options):
    assert make_search(4, options, SPECIAL).batchable


@pytest.mark.parametrize("options", PER_SENTENCE)
def test_other_searches_keep_their_strategy(options):
    assert not make_search(4, options, SPECIAL).batchable
    assert not make_search(4, DecodeOptions(), SPECIAL, prefix=(9,)).batchable


@pytest.mark.parametrize("join_every", [1, 2])
@pytest.mark.parametrize("probe", [False, True], ids=["", "probed"])
def test_greedy_rows_equal_each_search_on_its_own(monkeypatch, join_every, probe):
    """Mixed with per-sentence searches (beam, sampling, bans, attention), joining at
    once or one by one, probed or not: tokens, log-probs and scores are bit-identical
    to the per-sentence path's."""
    sources = random_sources(3, 30, max_len=12)
    mix = BATCHABLE + PER_SENTENCE
    options = [mix[i % len(mix)] for i in range(len(sources))]
    seen: list[int] = []
    rows = decode_all(sources, options, join_every=join_every, probe=probe, seen=seen)
    assert max(seen) >= 4, "the greedy arrays were not used"
    per_sentence(monkeypatch)
    exact(rows, decode_all(sources, options, join_every=join_every))


def test_dropped_sentences_leave_the_others_exact(monkeypatch):
    sources = random_sources(5, 16, max_len=12)
    options = [BATCHABLE[i % len(BATCHABLE)] if i % 3 else PER_SENTENCE[5] for i in range(16)]
    drop = {1, 2, 6, 9}
    rows = decode_all(sources, options, drop=drop)
    assert not drop & set(rows)
    per_sentence(monkeypatch)
    alone = decode_all(sources, options)
    exact(rows, {i: r for i, r in alone.items() if i not in drop})


def test_streaming_reads_the_targets_the_rows_extend():
    """A greedy row's search shows its tokens so far at every step (what a stream
    sends), and ends with exactly them."""
    loop = DecodeLoop(FakeStepModel(random_table(3)), SPECIAL)
    sources = random_sources(9, 6, max_len=10)
    searches = [make_search(len(s), DecodeOptions(), SPECIAL) for s in sources]
    loop.add([list(s) for s in sources], searches, list(range(6)))
    shown: dict[int, list[tuple]] = {i: [] for i in range(6)}
    while loop.active:
        for a in loop.active:
            shown[a.handle].append(a.search.stable_prefix())
        loop.step()
    for i, search in enumerate(searches):
        final = search.results()[0].tokens
        assert search.done and final and shown[i][0] == ()
        assert shown[i] == [final[:n] for n in range(len(shown[i]))]


def test_a_failing_finish_fails_only_its_sentence(monkeypatch):
    """A search that raises ending leaves the loop through ``failed``; every other
    sentence, greedy rows included, takes its step exactly once."""
    sources = random_sources(11, 12, max_len=10)
    options = [BATCHABLE[i % len(BATCHABLE)] for i in range(12)]
    loop = decode_failing(monkeypatch, sources, options, "finish")
    assert loop.live_rows == 0 and len(loop._greedy) == 0


def test_rows_keep_their_own_slots_through_compaction():
    """Long sentences finish first here, so the pool is rebuilt narrower while greedy
    rows are live: each row must still read its own sentence's memory."""
    rng = np.random.default_rng(0)
    sources = [list(rng.integers(4, 40, n)) for n in (3, 3, 14, 4, 13, 3, 12, 5)]
    options = [DecodeOptions(max_length=4 if len(s) > 10 else 12) for s in sources]
    loop_rows = decode_all(sources, options)
    for i, src in enumerate(sources):
        (alone,) = decode_all([src], [options[i]]).values()
        exact({0: loop_rows[i]}, {0: alone})


def test_few_greedy_sentences_are_decoded_one_at_a_time(monkeypatch):
    """Below ARRAY_MIN_SENTENCES plain greedy sentences the loop keeps them per sentence
    (the arrays' fixed cost a step exceeds what they save); once that many are in the
    loop, those that join go into the arrays; the results do not change."""
    monkeypatch.setattr(strategies, "ARRAY_MIN_SENTENCES", 6)
    sources = random_sources(13, 12, max_len=10)
    options = [DecodeOptions(max_length=30)] * 12
    loop = DecodeLoop(FakeStepModel(random_table(7)), SPECIAL)
    searches = [make_search(len(s), o, SPECIAL) for s, o in zip(sources, options, strict=True)]
    for i in range(4):  # four alone: below the threshold
        loop.add([list(sources[i])], [searches[i]], [i])
    assert len(loop._greedy) == 0 and len(loop.active) == 4
    loop.add([list(s) for s in sources[4:6]], searches[4:6], [4, 5])  # 6 in the loop now
    assert len(loop._greedy) == 2 and len(loop.active) == 6
    loop.add([list(s) for s in sources[6:]], searches[6:], list(range(6, 12)))
    assert len(loop._greedy) == 8
    got = {}
    while loop.active:
        for handle, search in loop.step():
            got[handle] = search.results()
    per_sentence(monkeypatch)
    exact(got, decode_all(sources, options))
