"""The memory pool hands out the same view objects until it changes: the runtime caches
device copies per array object under IO binding, so a stale view after a change (or a
fresh object on every read) would be a wrong answer (or an upload per step)."""

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
