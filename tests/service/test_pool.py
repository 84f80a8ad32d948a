"""The host memory pool hands out the same view objects until it changes (a fresh view
per read would cost every step), and a view handed out never changes under its reader.
The device pool is held to the same slots in ``test_devicepool.py``."""

from __future__ import annotations

import numpy as np

from service.pool import MemoryPool


def sentences(n: int, src_len: int, start: float = 0.0):
    """``n`` sentences of ``src_len`` positions: memory ``(n, src_len, 3)``, keys
    ``(n, src_len, 2)``, mask ``(n, src_len)``."""
    memory = start + np.arange(n * src_len * 3, dtype=np.float32).reshape(n, src_len, 3)
    keys = -memory[..., :2].copy()
    return memory, keys, np.ones((n, src_len), dtype=bool)


def views(pool: MemoryPool) -> tuple:
    return pool.memory, pool.keys, pool.mask


def same_objects(a: tuple, b: tuple) -> bool:
    return all(x is y for x, y in zip(a, b, strict=True))


def test_views_are_stable_until_the_pool_changes():
    pool = MemoryPool()
    assert views(pool) == (None, None, None)
    pool.append(*sentences(2, 4))
    first = views(pool)
    assert same_objects(first, views(pool))

    pool.append(*sentences(1, 3, start=100.0))  # fits the spare capacity: no regrowth
    second = views(pool)
    assert not any(x is y for x, y in zip(first, second, strict=True))
    assert second[0].shape == (3, 4, 3) and same_objects(second, views(pool))
    # the first view still shows exactly what it showed: nothing wrote into its slots
    np.testing.assert_array_equal(first[0], sentences(2, 4)[0])

    pool.compact([2, 0], width=3)
    third = views(pool)
    assert not any(x is y for x, y in zip(second, third, strict=True))
    np.testing.assert_array_equal(third[0][0], sentences(1, 3, start=100.0)[0][0])
    np.testing.assert_array_equal(third[0][1], sentences(2, 4)[0][0, :3])
    assert same_objects(third, views(pool))

    pool.clear()
    assert views(pool) == (None, None, None) and pool.slots == 0


def test_padding_beyond_a_short_sentence_is_zero_and_masked():
    pool = MemoryPool()
    pool.append(*sentences(1, 5))
    pool.append(*sentences(1, 2, start=7.0))
    assert pool.mask[1].tolist() == [True, True, False, False, False]
    assert not pool.memory[1, 2:].any() and not pool.keys[1, 2:].any()


def test_a_rebuilt_pool_keeps_room_for_as_many_slots_again():
    # Rebuilt to exactly its live slots, the next admission reallocated and copied the
    # whole pool again; the loop rebuilds once half the slots are dead, so room for as
    # many again means a steady load rebuilds without ever growing in between.
    pool = MemoryPool()
    pool.append(*sentences(6, 4))
    pool.compact([5, 1, 3], width=4)
    buffer = pool._memory
    assert pool.capacity >= 2 * 3
    np.testing.assert_array_equal(pool.memory, sentences(6, 4)[0][[5, 1, 3]])
    for start in (100.0, 200.0, 300.0):
        pool.append(*sentences(1, 2, start=start))
    assert pool._memory is buffer, "appends within the spare room must not reallocate"
    assert pool.slots == 6 and pool.mask.sum(axis=1).tolist() == [4, 4, 4, 2, 2, 2]
    assert not pool.memory[3:, 2:].any(), "padding of the new slots is zero"


def test_growing_wider_zeroes_the_new_columns_of_live_slots():
    # Grown buffers are not zero-filled; the live slots' new columns must be zeroed.
    pool = MemoryPool()
    pool.append(*sentences(2, 3, start=1.0))
    pool.append(*sentences(1, 6, start=50.0))
    assert pool.width == 6
    np.testing.assert_array_equal(pool.memory[:2, :3], sentences(2, 3, start=1.0)[0])
    assert not pool.memory[:2, 3:].any() and not pool.keys[:2, 3:].any()
    assert pool.mask.sum(axis=1).tolist() == [3, 3, 6]
