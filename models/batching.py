"""Tokenised parallel data and length-bucketed batches."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from models.config import BOS_ID, EOS_ID, PAD_ID
from models.tokenizer import Tokenizer, read_lines


@dataclass
class Batch:
    """src: ``(batch, src_len)``; lengths: ``(batch,)``; tgt_in/tgt_out: ``(batch, tgt_len)``
    (BOS + target and target + EOS, padded with PAD); index: positions in the split."""

    src: Tensor
    lengths: Tensor
    tgt_in: Tensor
    tgt_out: Tensor
    index: list[int]

    def to(self, device: torch.device) -> Batch:
        return Batch(
            self.src.to(device),
            self.lengths.to(device),
            self.tgt_in.to(device),
            self.tgt_out.to(device),
            self.index,
        )

    @property
    def target_tokens(self) -> int:
        return int((self.tgt_out != PAD_ID).sum())


@dataclass
class ParallelData:
    src_text: list[str]
    tgt_text: list[str]
    src_ids: list[list[int]]
    tgt_ids: list[list[int]]

    @classmethod
    def load(
        cls,
        data_dir: Path,
        split: str,
        src_tok: Tokenizer,
        tgt_tok: Tokenizer,
        *,
        max_len: int | None = None,
    ) -> ParallelData:
        """Read ``split.en``/``split.es``; drop pairs longer than ``max_len`` tokens."""
        src = read_lines(data_dir / f"{split}.en")
        tgt = read_lines(data_dir / f"{split}.es")
        if len(src) != len(tgt):
            raise ValueError(f"{split}: {len(src)} English lines but {len(tgt)} Spanish lines")
        src_ids = src_tok.encode_batch(src)
        tgt_ids = tgt_tok.encode_batch(tgt)
        keep = [
            i
            for i in range(len(src))
            if src_ids[i] and (max_len is None or max(len(src_ids[i]), len(tgt_ids[i])) < max_len)
        ]
        return cls(
            [src[i] for i in keep],
            [tgt[i] for i in keep],
            [src_ids[i] for i in keep],
            [tgt_ids[i] for i in keep],
        )

    def __len__(self) -> int:
        return len(self.src_ids)


def pad(rows: Sequence[Sequence[int]], value: int = PAD_ID) -> Tensor:
    """``(len(rows), max_len)`` int64 tensor, right-padded."""
    width = max(len(r) for r in rows)
    out = torch.full((len(rows), width), value, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def make_batch(data: ParallelData, index: Sequence[int]) -> Batch:
    src = [data.src_ids[i] for i in index]
    tgt = [data.tgt_ids[i] for i in index]
    return Batch(
        src=pad(src),
        lengths=torch.tensor([len(s) for s in src], dtype=torch.long),
        tgt_in=pad([[BOS_ID, *t] for t in tgt]),
        tgt_out=pad([[*t, EOS_ID] for t in tgt]),
        index=list(index),
    )


def bucket_batches(
    data: ParallelData, *, max_tokens: int, shuffle: bool, seed: int = 0
) -> Iterator[Batch]:
    """Batches of similar-length pairs (dense, little padding) of at most ``max_tokens``
    padded tokens per side; batch order shuffled per ``seed`` when ``shuffle``."""
    rng = random.Random(seed)
    order = sorted(
        range(len(data)),
        key=lambda i: (len(data.src_ids[i]), len(data.tgt_ids[i]), rng.random() if shuffle else i),
    )
    groups: list[list[int]] = []
    current: list[int] = []
    width = 0
    for i in order:
        w = max(len(data.src_ids[i]), len(data.tgt_ids[i]) + 1)
        if current and max(width, w) * (len(current) + 1) > max_tokens:
            groups.append(current)
            current, width = [], 0
        current.append(i)
        width = max(width, w)
    if current:
        groups.append(current)
    if shuffle:
        rng.shuffle(groups)
    for g in groups:
        yield make_batch(data, g)
