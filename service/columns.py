"""Per-sentence columns of the decode loop's array blocks (:mod:`service.greedyrows`,
:mod:`service.beamrows`): each field an array with one entry per sentence, in the order
of the block's ``entries``, whose ``row`` attribute the block keeps equal to that index.
Adding and dropping sentences is the same for both kinds of block."""

from __future__ import annotations

from itertools import compress
from typing import Any

import numpy as np


def append_columns(block: Any, columns: dict[str, list[int]]) -> None:
    """Append to each int64 field ``name`` of ``block`` the new sentences' ``values``."""
    for name, values in columns.items():
        added = np.asarray(values, dtype=np.int64)
        setattr(block, name, np.concatenate([getattr(block, name), added]))


def keep_sentences(block: Any, mask: np.ndarray, fields: tuple[str, ...]) -> None:
    """Keep only the sentences of ``mask`` ``(sentences,)`` bool in ``block``'s arrays
    ``fields`` and its ``entries`` (each entry's ``row`` renumbered)."""
    for name in fields:
        setattr(block, name, getattr(block, name)[mask])
    block.entries = list(compress(block.entries, mask.tolist()))
    for j, entry in enumerate(block.entries):
        entry.row = j
