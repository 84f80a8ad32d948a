"""The vectorised decode loop (:mod:`service.loop`), its memory pool (:mod:`service.pool`)
and length-grouped encoding give exactly the results of decoding each sentence alone."""

from __future__ import annotations

import numpy as np
import pytest

from models.options import DecodeOptions
from service.decoding import length_groups, make_search
from service.loop import DecodeLoop
from service.pool import MemoryPool
from tests.service.test_decoding import (
    SPECIAL,
    FakeStepModel,
    assert_same,
    random_sources,
    random_table,
    reference,
)

OPTIONS = [
    DecodeOptions(max_length=9),
    DecodeOptions(max_length=9, min_length=3),
    DecodeOptions(beam_size=2, n_best=2, max_length=8),
    DecodeOptions(beam_size=3, n_best=3, max_length=9, min_length=2, return_attention=True),
    DecodeOptions(beam_size=2, n_best=1, length_penalty=0.0, max_length_ratio=1.0),
    DecodeOptions(return_attention=True, max_length_offset=1, max_length_ratio=0.5),
    DecodeOptions(beam_size=3, n_best=2, search="eole", max_length=8, min_length=0),
    DecodeOptions(search="eole", max_length=7, return_attention=True),
]


def run_loop(sources, options, join_every: int = 2) -> dict:
    """Admit one sentence every ``join_every`` steps into one loop (1: all at once);
    all results."""
    loop = DecodeLoop(FakeStepModel(random_table(42)), SPECIAL)
    results: dict = {}
    pending = list(range(len(sources)))
    steps = 0
    while pending or loop.active:
        if join_every == 1 and pending:
            loop.add(
                [list(sources[i]) for i in pending],
                [make_search(len(sources[i]), options[i], SPECIAL) for i in pending],
                pending,
            )
            pending = []
        elif pending and steps % join_every == 0:
            i = pending.pop(0)
            loop.add([list(sources[i])], [make_search(len(sources[i]), options[i], SPECIAL)], [i])
        for handle, search in loop.step():
            results[handle] = search.results()
        steps += 1
        assert steps < 1000
    return results


@pytest.mark.parametrize("join_every", [1, 2, 3])
def test_mixed_strategies_in_one_loop_equal_each_sentence_alone(join_every):
    """Greedy, beam and Eole beam rows share every step (one ``select`` per strategy),
    sentences join mid-way: each result is the one it gets decoded alone, and the
    full-vocabulary reference's."""
    sources = random_sources(9, 18, max_len=12)
    options = [OPTIONS[i % len(OPTIONS)] for i in range(len(sources))]
    mixed = run_loop(sources, options, join_every)
    assert sorted(mixed) == list(range(len(sources)))
    for i, src in enumerate(sources):
        (alone,) = run_loop([src], [options[i]]).values()
        assert_same(mixed[i], alone)
        assert_same(mixed[i], reference(random_table(42), src, options[i]))
        for m, a in zip(mixed[i], alone, strict=True):
            if m.attention is None:
                assert a.attention is None and not options[i].return_attention
            else:
                np.testing.assert_array_equal(m.attention, a.attention)


def test_live_rows_counts_beam_rows():
    loop = DecodeLoop(FakeStepModel(random_table(1)), SPECIAL)
    opts = [DecodeOptions(), DecodeOptions(beam_size=3, n_best=3, min_length=4)]
    searches = [make_search(n, o, SPECIAL) for n, o in zip((2, 3), opts, strict=True)]
    loop.add([[4, 5], [6, 7, 8]], searches, ["a", "b"])
    assert loop.live_rows == 2
    loop.step()
    assert loop.live_rows == sum(a.search.rows for a in loop.active)
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
