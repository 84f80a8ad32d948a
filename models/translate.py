"""Translate text with a PyTorch checkpoint (reference decoders), and score it with BLEU.

``python -m models.translate [--checkpoint PT] [--beam N] TEXT...`` is the quick way to
try a checkpoint without exporting it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from models.batching import pad
from models.checkpoint import CheckpointError, load_checkpoint
from models.commands import show_defaults
from models.options import DecodeOptions, Hypothesis
from models.search import beam_search, greedy_search
from models.seq2seq import Seq2Seq
from models.tokenizer import Tokenizer

DEMO_CHECKPOINT = Path(__file__).resolve().parent / "pretrained" / "en-es" / "model.pt"


def translate_ids(
    model: Seq2Seq,
    sources: Sequence[Sequence[int]],
    *,
    options: DecodeOptions,
    batch_size: int = 64,
) -> list[list[Hypothesis]]:
    """Decode token-id sentences; returns the n-best list of each, in input order.

    Greedy runs batched (sorted by length); beam runs one sentence at a time.
    """
    order = sorted(range(len(sources)), key=lambda i: len(sources[i]))
    results: list[list[Hypothesis]] = [[] for _ in sources]
    device = next(model.parameters()).device
    for start in range(0, len(order), batch_size):
        chunk = order[start : start + batch_size]
        src = pad([sources[i] for i in chunk]).to(device)
        lengths = torch.tensor([len(sources[i]) for i in chunk], device=device)
        if options.beam_size == 1:
            nbest = [[h] for h in greedy_search(model, src, lengths, options=options)]
        else:
            nbest = beam_search(model, src, lengths, options=options)
        for i, hyps in zip(chunk, nbest, strict=True):
            results[i] = hyps
    return results


def translate_texts(
    model: Seq2Seq,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    texts: Sequence[str],
    *,
    options: DecodeOptions,
    batch_size: int = 64,
) -> list[str]:
    """Best translation of each text."""
    ids = [src_tok.encode(t) or [src_tok.encode(".")[0]] for t in texts]
    nbest = translate_ids(model, ids, options=options, batch_size=batch_size)
    return [tgt_tok.decode(hyps[0].tokens) for hyps in nbest]


def bleu(hypotheses: Sequence[str], references: Sequence[str]) -> float:
    import sacrebleu

    return float(sacrebleu.corpus_bleu(list(hypotheses), [list(references)]).score)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Translate with a PyTorch checkpoint.")
    parser.add_argument("text", nargs="+")
    parser.add_argument("--checkpoint", type=Path, default=DEMO_CHECKPOINT)
    parser.add_argument("--beam", type=int, default=5)
    args = show_defaults(parser).parse_args(argv)
    try:
        ckpt = load_checkpoint(args.checkpoint)
        options = DecodeOptions(beam_size=args.beam)
    except (CheckpointError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    for line in translate_texts(
        ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, args.text, options=options
    ):
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
