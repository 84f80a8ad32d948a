"""The encoder-memory pool of the sentences a decode loop is working on.

Slot ``i`` of ``memory`` ``(slots, width, D)``, ``keys`` ``(slots, width, K)`` and
``mask`` ``(slots, width)`` (bool) belongs to one sentence; decoder rows point at their
sentence's slot through ``row_sentence`` and the decoder graph gathers from there.

Admitting sentences copies only the new ones into spare capacity (the old approach of
concatenating the whole pool cost a full copy per admission). The pool is rebuilt,
keeping only live slots, when most slots are dead or when it is much wider than the
longest live sentence: every decoder step gathers and attends over the full width, so
padding left behind by a finished long sentence costs every row every step. A rebuilt
pool keeps spare capacity too: rebuilt to exactly its live slots, the very next
admission had to reallocate and copy it all again (144 reallocations per 2,000 greedy
sentences at 32 live, one per rebuild or more; now 28).
"""

from __future__ import annotations

import numpy as np

# Spare slots allocated when the pool grows: at least this many, or half the pool.
MIN_SPARE_SLOTS = 16


def grown_capacity(needed: int) -> int:
    """Slots to allocate when ``needed`` slots no longer fit (the host and device pools)."""
    return needed + max(MIN_SPARE_SLOTS, needed // 2)


def rebuilt_capacity(live: int) -> int:
    """Slots of a pool rebuilt around ``live`` slots: room for as many again (see
    :meth:`MemoryPool.compact`)."""
    return 2 * live + MIN_SPARE_SLOTS


class MemoryPool:
    """Encoder outputs per sentence slot; ``memory``/``keys``/``mask`` are contiguous views
    of the first ``slots`` slots of larger buffers (``None`` while empty)."""

    def __init__(self) -> None:
        self._memory: np.ndarray | None = None
        self._keys: np.ndarray | None = None
        self._mask: np.ndarray | None = None
        self.slots = 0
        self._views: tuple[np.ndarray | None, ...] = (None, None, None)

    # The views are rebuilt only when the pool changes (not on every step's read);
    # nothing ever writes into the slots a handed-out view covers.
    @property
    def memory(self) -> np.ndarray | None:
        return self._views[0]

    @property
    def keys(self) -> np.ndarray | None:
        return self._views[1]

    @property
    def mask(self) -> np.ndarray | None:
        return self._views[2]

    def _refresh(self) -> None:
        if self._mask is None:
            self._views = (None, None, None)
        else:
            n = self.slots
            self._views = (self._memory[:n], self._keys[:n], self._mask[:n])

    @property
    def width(self) -> int:
        return 0 if self._mask is None else self._mask.shape[1]

    @property
    def capacity(self) -> int:
        return 0 if self._mask is None else self._mask.shape[0]

    def rebuilt_width(self, needed: int) -> int:
        """The width :meth:`compact` gives a pool whose longest sentence has ``needed``
        tokens: exactly that."""
        return needed

    def append(self, memory: np.ndarray, keys: np.ndarray, mask: np.ndarray) -> int:
        """Add sentences (``memory`` ``(n, src_len, D)``, ``keys`` ``(n, src_len, K)``,
        ``mask`` ``(n, src_len)``); returns the slot of the first one."""
        n, src_len = mask.shape
        first = self.slots
        if first + n > self.capacity or src_len > self.width:  # (capacity 0 while empty)
            self._grow(first + n, max(src_len, self.width), memory, keys)
        width = self.width
        for buf, new in ((self._memory, memory), (self._keys, keys), (self._mask, mask)):
            buf[first : first + n, :src_len] = new
            if src_len < width:
                buf[first : first + n, src_len:] = 0
        self.slots = first + n
        self._refresh()
        return first

    @staticmethod
    def _buffers(
        cap: int, width: int, memory: np.ndarray, keys: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Uninitialised buffers for ``cap`` slots of ``width``, shaped and typed like
        ``memory``/``keys``. Nothing reads a slot before append writes all of it
        (padding included), so zero-filling the spare slots would be wasted work."""
        return (
            np.empty((cap, width, memory.shape[2]), dtype=memory.dtype),
            np.empty((cap, width, keys.shape[2]), dtype=keys.dtype),
            np.empty((cap, width), dtype=bool),
        )

    def _grow(self, needed: int, width: int, memory: np.ndarray, keys: np.ndarray) -> None:
        cap = grown_capacity(needed)
        buffers = self._buffers(cap, width, memory, keys)
        if self._mask is not None and self.slots:
            n, old = self.slots, self.width
            for buf, view in zip(buffers, (self.memory, self.keys, self.mask), strict=True):
                buf[:n, :old] = view
                buf[:n, old:] = 0
        self._memory, self._keys, self._mask = buffers

    def compact(self, keep: list[int], width: int) -> None:
        """Keep only slots ``keep`` (in that order, renumbered 0..) and ``width`` columns.

        The rebuilt pool has room for as many slots again (plus MIN_SPARE_SLOTS): the
        loop rebuilds once half the slots are dead, so with a steady number of live
        sentences the next rebuild comes before the pool has to grow."""
        index = np.asarray(keep, dtype=np.int64)
        n = len(keep)
        buffers = self._buffers(rebuilt_capacity(n), width, self._memory, self._keys)
        for buf, old in zip(buffers, (self._memory, self._keys, self._mask), strict=True):
            buf[:n] = old[index, :width]
        self._memory, self._keys, self._mask = buffers
        self.slots = n
        self._refresh()

    def clear(self) -> None:
        self._memory = self._keys = self._mask = None
        self.slots = 0
        self._refresh()

    def join_states(self, old: tuple, new: tuple) -> tuple:
        """Decoder states with the rows of ``new`` (newly admitted sentences) after
        those of ``old``."""
        return tuple(join_rows(a, b) for a, b in zip(old, new, strict=True))


def join_rows(old: np.ndarray, new: np.ndarray) -> np.ndarray:
    """The rows of state ``new`` after those of ``old`` (either may be device-resident:
    ``np.asarray`` copies it to the host, as admitting sentences always did).

    A coverage state ``(rows, width)`` runs over source positions, so a batch of shorter
    or longer sentences has another width: the narrower side is padded with zeros (no
    attention past a sentence's end) and the decoder graph fits the result to the pool
    (:mod:`export.spec`). Every other state has the same shape past the rows.
    """
    old, new = np.asarray(old), np.asarray(new)
    if old.ndim == new.ndim == 2 and old.shape[1] != new.shape[1]:
        width = max(old.shape[1], new.shape[1])
        old, new = (np.pad(a, ((0, 0), (0, width - a.shape[1]))) for a in (old, new))
    return np.concatenate([old, new])
