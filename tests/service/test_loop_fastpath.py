"""The vectorised decode loop (:mod:`service.loop`), its memory pool (:mod:`service.pool`)
and length-grouped encoding give exactly the results of the plain per-sentence path."""

from __future__ import annotations

import numpy as np
import pytest

from models.options import DecodeOptions
from service.decoding import BeamSearch, GreedySearch, length_groups, make_search
from service.loop import DecodeLoop
from service.pool import MemoryPool
from tests.service.test_decoding import (
    SPECIAL,
    FakeStepModel,
    assert_same,
    random_sources,
    random_table,
)


class SlowGreedy(GreedySearch):
    """Not exactly :class:`GreedySearch`, so the loop drives it through ``advance()``."""


class SlowBeam(BeamSearch):
    """Not exactly :class:`BeamSearch`, so the loop drives it through ``advance()``."""


def slow_search(src_len: int, options: DecodeOptions):
    cls = SlowGreedy if options.beam_size == 1 else SlowBeam
    return cls(src_len, options, SPECIAL)


OPTIONS = [
    DecodeOptions(max_length=9),
    DecodeOptions(max_length=9, min_length=3),
    DecodeOptions(beam_size=2, n_best=2, max_length=8),
    DecodeOptions(beam_size=3, n_best=3, max_length=9, min_length=2, return_attention=True),
    DecodeOptions(beam_size=2, n_best=1, length_penalty=0.0, max_length_ratio=1.0),
    DecodeOptions(return_attention=True, max_length_offset=1, max_length_ratio=0.5),
]


def run_loop(sources, options, make, join_every: int = 2) -> dict:
    """Admit one sentence every ``join_every`` steps into one loop; all results."""
    loop = DecodeLoop(FakeStepModel(random_table(42)), SPECIAL)
    results: dict = {}
    pending = list(range(len(sources)))
    steps = 0
    while pending or loop.active:
        if pending and steps % join_every == 0:
            i = pending.pop(0)
            loop.add([list(sources[i])], [make(len(sources[i]), options[i])], [i])
        for handle, search in loop.step():
            results[handle] = search.results()
        steps += 1
        assert steps < 1000
    return results


@pytest.mark.parametrize("join_every", [1, 3])
def test_vectorised_loop_equals_per_sentence_advance(join_every):
    sources = random_sources(9, 18, max_len=12)
    options = [OPTIONS[i % len(OPTIONS)] for i in range(len(sources))]
    fast = run_loop(sources, options, lambda n, o: make_search(n, o, SPECIAL), join_every)
    slow = run_loop(sources, options, slow_search, join_every)
    assert sorted(fast) == sorted(slow) == list(range(len(sources)))
    for i in fast:
        assert_same(fast[i], slow[i])
        for f, s in zip(fast[i], slow[i], strict=True):
            if f.attention is None:
                assert s.attention is None
            else:
                np.testing.assert_array_equal(f.attention, s.attention)


def test_live_rows_counts_beam_rows():
    loop = DecodeLoop(FakeStepModel(random_table(1)), SPECIAL)
    opts = [DecodeOptions(), DecodeOptions(beam_size=3, n_best=3, min_length=4)]
    searches = [make_search(n, o, SPECIAL) for n, o in zip((2, 3), opts, strict=True)]
    loop.add([[4, 5], [6, 7, 8]], searches, ["a", "b"])
    assert loop.live_rows == 2
    loop.step()
    assert loop.live_rows == sum(len(a.search.inputs()[0]) for a in loop.active)
    assert loop.live_rows >= 3


def test_pool_appends_without_copying_old_slots_and_compacts():
    pool = MemoryPool()
    mask = np.array([[True, True, False]])
    first = pool.append(np.ones((1, 3, 2), np.float32), np.ones((1, 3, 1), np.float32), mask)
    assert first == 0 and pool.memory.shape == (1, 3, 2) and pool.capacity > 1
    buffer = pool._memory
    second = pool.append(
        np.full((2, 2, 2), 2, np.float32), np.full((2, 2, 1), 2, np.float32), np.ones((2, 2), bool)
    )
    assert second == 1 and pool._memory is buffer, "fits the spare capacity: no reallocation"
    assert pool.memory.shape == (3, 3, 2) and pool.memory.flags.c_contiguous
    assert (pool.memory[1:, 2] == 0).all() and not pool.mask[1:, 2].any()
    wide = pool.append(
        np.ones((1, 5, 2), np.float32), np.ones((1, 5, 1), np.float32), np.ones((1, 5), bool)
    )
    assert wide == 3 and pool.width == 5
    np.testing.assert_array_equal(pool.memory[1, :2], 2.0)
    assert not pool.mask[:3, 3:].any() and (pool.memory[:3, 3:] == 0).all()
    pool.compact([3, 1], 4)
    assert pool.slots == 2 and pool.memory.shape == (2, 4, 2)
    np.testing.assert_array_equal(pool.mask, [[True] * 4, [True, True, False, False]])
    pool.clear()
    assert pool.memory is None and pool.slots == 0 and pool.width == 0


@pytest.mark.parametrize(
    ("lengths", "max_padding", "groups"),
    [
        ([], 16, []),
        ([7], 0, [[0]]),
        ([4, 4, 4], 0, [[0, 1, 2]]),
        ([5, 30, 6, 7, 29, 12], 16, [[0, 2, 3], [5], [4, 1]]),
        ([5, 30, 6], 1000, [[0, 2, 1]]),
        ([3, 9, 2], 0, [[2], [0], [1]]),
    ],
)
def test_length_groups(lengths, max_padding, groups):
    got = length_groups(lengths, max_padding)
    assert got == groups
    assert sorted(i for g in got for i in g) == list(range(len(lengths)))
    for g in got:
        longest = max(lengths[i] for i in g)
        assert len(g) == 1 or longest * len(g) - sum(lengths[i] for i in g) <= max_padding
