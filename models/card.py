"""Evaluate a checkpoint on a test split and write its ``MODEL_CARD.md``.

``python -m models.card CHECKPOINT --data DIR --out MODEL_CARD.md [--train-log summary.json]``
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from models.checkpoint import load_checkpoint
from models.options import DecodeOptions
from models.tokenizer import read_lines
from models.translate import bleu, translate_texts

EXAMPLES = 8


def evaluate(
    ckpt, src: list[str], ref: list[str], beam: int
) -> tuple[float, float, list[str], float]:
    import sacrebleu

    start = time.monotonic()
    hyps = translate_texts(
        ckpt.model,
        ckpt.src_tokenizer,
        ckpt.tgt_tokenizer,
        src,
        options=DecodeOptions(beam_size=beam),
    )
    seconds = time.monotonic() - start
    score = bleu(hyps, ref)
    chrf = sacrebleu.corpus_chrf(hyps, [ref]).score
    return score, chrf, hyps, seconds


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--data", type=Path, required=True)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--summary", type=Path, default=None, help="summary.json of the run")
    p.add_argument("--command", default="", help="the training command, for the record")
    args = p.parse_args(argv)
    torch.set_num_threads(2)
    ckpt = load_checkpoint(args.checkpoint)
    src, ref = read_lines(args.data / "test.en"), read_lines(args.data / "test.es")
    g_bleu, g_chrf, g_hyps, g_sec = evaluate(ckpt, src, ref, 1)
    b_bleu, b_chrf, _, b_sec = evaluate(ckpt, src, ref, 5)
    summary = json.loads(args.summary.read_text()) if args.summary else {}
    history = summary.get("history", [])
    train_minutes = history[-1]["elapsed_seconds"] / 60 if history else float("nan")
    cfg = ckpt.config.to_dict()
    lines = [
        "# en-es demo model",
        "",
        "An attention RNN encoder-decoder (Bahdanau et al., 2015 family) that translates "
        "English to Spanish. It is a **demo**: its training data are WordNet glosses and "
        "examples translated by the Apertium rule-based engine, so it learns to imitate "
        "Apertium on dictionary-style English, not to translate arbitrary text well.",
        "",
        "## Data",
        f"- `nmt-data build` from Debian `wordnet-base` + `apertium-eng-spa`: "
        f"{summary.get('train_pairs', '?')} training pairs (<= 50 tokens), 2,000 valid, "
        "2,000 test (`test.en` / `test.es` beside this card).",
        f"- SentencePiece unigram, {cfg['src_vocab_size']} pieces per side "
        "(separate English / Spanish models), pad/unk/bos/eos = 0/1/2/3. The size and "
        "the per-side split were chosen, not selected by a measured comparison of "
        "alternatives (one training run takes an hour on the 2-core machine).",
        "",
        "## Model",
        f"- {ckpt.model.parameter_count():,} parameters; config:",
        "",
        "```json",
        json.dumps(cfg, indent=2),
        "```",
        "",
        "## Training",
        f"- Command: `{args.command}`" if args.command else "- Command: see README",
        f"- {len(history)} epochs, {train_minutes:.1f} minutes on "
        f"{summary.get('device', '?')} ({platform.processor() or platform.machine()}, "
        f"{torch.get_num_threads()} threads), "
        "AdamW + label smoothing 0.1, best epoch by validation BLEU.",
        "",
        "| epoch | train loss | valid loss | valid BLEU | pairs/s |",
        "|---|---|---|---|---|",
        *[
            f"| {h['epoch']} | {h['train_loss']:.3f} | {h['valid_loss']:.3f} | "
            f"{h['valid_bleu']:.2f} | {h['pairs_per_second']:.0f} |"
            for h in history
        ],
        "",
        "## Test split (2,000 sentences, sacreBLEU 13a, PyTorch reference decoders)",
        "",
        "| decoding | BLEU | chrF | seconds (CPU, 2 threads) |",
        "|---|---|---|---|",
        f"| greedy | {g_bleu:.2f} | {g_chrf:.2f} | {g_sec:.0f} |",
        f"| beam 5 | {b_bleu:.2f} | {b_chrf:.2f} | {b_sec:.0f} |",
        "",
        "## Examples (greedy, test split)",
        "",
        "| English | model | Apertium reference |",
        "|---|---|---|",
        *[f"| {s} | {h} | {r} |" for s, h, r in zip(src, g_hyps, ref, strict=False)][:EXAMPLES],
        "",
    ]
    args.out.write_text("\n".join(lines))
    print(f"greedy BLEU {g_bleu:.2f}, beam 5 BLEU {b_bleu:.2f}; wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
