"""Write a demo model's ``MODEL_CARD.md`` from the files its training and evaluation wrote.

``python -m models.card CHECKPOINT --results EVAL.json --summary RUN/summary.json
--corpus DATA/manifest.json --command "nmt-train ..." --out MODEL_CARD.md``

Nothing is measured here: the scores come from ``python -m models.everyday --out EVAL.json``
(the model and Apertium on the everyday set and the test split), the learning curve from
``nmt-train``'s ``summary.json``, the data from ``nmt-data build``'s ``manifest.json``. The
card refuses results that were computed for another checkpoint (sha256).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from models.commands import show_defaults

EXAMPLES = 12
SYSTEM_NAMES = {"greedy": "model, greedy", "beam5": "model, beam 5", "apertium": "Apertium"}


class CardError(ValueError):
    """The inputs of a card do not belong together (another checkpoint, missing set)."""


def describe(cfg: dict) -> str:
    """One line naming the architecture, e.g. 'bidirectional GRU encoder, ...'."""
    rnn = cfg["rnn_type"].upper()
    enc = f"{'bidirectional ' if cfg['bidirectional'] else ''}{rnn} encoder"
    layers = cfg["decoder_layers"]
    dec = f"{rnn} decoder" + (f" ({layers} layers)" if layers > 1 else "")
    family = "Bahdanau" if cfg["placement"] == "bahdanau" else "Luong"
    att = f"{cfg['attention']} attention ({family} placement)"
    feed = ", input feeding" if cfg.get("input_feed") else ""
    return f"{enc}, {dec}, {att}{feed}"


def _in_repository(path: str) -> str:
    """``models/...`` for a file of the repository recorded by its absolute path."""
    head, sep, tail = path.rpartition("/models/")
    return f"models/{tail}" if sep else path


def data_lines(corpus: dict) -> list[str]:
    oversample = corpus.get("oversample", {})
    rows = [
        "| source | Debian package (version) | licence | kept | train (× repeats) | valid | test |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, s in corpus["sources"].items():
        times = oversample.get(name, 1)
        train = f"{s['train']:,}" + (f" (× {times})" if times > 1 else "")
        rows.append(
            f"| {name}: {s['description']} | `{s['package']}` ({s['version']}) | "
            f"{s['licence']} | {s['kept']:,} | {train} | {s['valid']:,} | {s['test']:,} |"
        )
    excluded = ", ".join(
        f"`{_in_repository(e['file'])}` ({e['sentences']})"
        for e in corpus.get("excluded_test_sets", [])
    )
    apertium = corpus["apertium"]
    return [
        f"- Built by `{corpus['command']}` on {corpus['date']}: English sentences from "
        f"Debian packages, translated into Spanish by Apertium `{apertium['mode']}` "
        f"(`apertium-eng-spa` {apertium['apertium-eng-spa']}, {apertium['licence']}); pairs "
        "with Apertium's unknown-word marks are dropped.",
        f"- Every sentence of these test sets is kept out of all splits: {excluded}.",
        "",
        *rows,
    ]


def score_lines(results: dict) -> list[str]:
    rows = [
        "| set | system | BLEU | chrF | BLEU / Apertium's | seconds |",
        "|---|---|---|---|---|---|",
    ]
    for name, entry in results["sets"].items():
        ratios = entry.get("bleu_vs_apertium", {})
        for system, s in entry["systems"].items():
            ratio = f"{ratios[system]:.0%}" if ratios.get(system) is not None else "-"
            rows.append(
                f"| {name} ({entry['sentences']:,}) | {SYSTEM_NAMES.get(system, system)} | "
                f"{s['bleu']:.2f} | {s['chrf']:.2f} | {ratio} | {s['seconds']:.0f} |"
            )
    return rows


def example_lines(results: dict, count: int = EXAMPLES) -> list[str]:
    rows = results["sets"].get("everyday", {}).get("translations", [])
    if not rows:
        return []
    step = max(1, len(rows) // count)
    return [
        "| English | model, beam 5 | Apertium | reference (by hand) |",
        "|---|---|---|---|",
        *[
            f"| {r['en']} | {r.get('beam5', '-')} | {r.get('apertium', '-')} | {r['ref']} |"
            for r in rows[::step][:count]
        ],
    ]


def history_lines(history: Sequence[dict]) -> list[str]:
    select = any("select_bleu" in h for h in history)
    head = "| epoch | train loss | valid loss | valid BLEU |" + (
        " selection BLEU |" if select else ""
    )
    rows = [head + " pairs/s | minutes |", "|---" * (7 if select else 6) + "|"]
    for h in history:
        extra = f" {h['select_bleu']:.2f} |" if select else ""
        rows.append(
            f"| {h['epoch']} | {h['train_loss']:.3f} | {h['valid_loss']:.3f} | "
            f"{h['valid_bleu']:.2f} |{extra} {h['pairs_per_second']:.0f} | "
            f"{h['elapsed_seconds'] / 60:.1f} |"
        )
    return rows


def render(
    *,
    title: str,
    checkpoint: Path,
    config: dict,
    parameters: int,
    results: dict,
    summary: dict,
    corpus: dict,
    command: str,
    notes: str = "",
) -> str:
    """The card's Markdown text."""
    digest = hashlib.sha256(checkpoint.read_bytes()).hexdigest()
    if results.get("checkpoint_sha256") != digest:
        raise CardError(
            f"{results.get('command', 'the results')} scored another checkpoint "
            f"(sha256 {results.get('checkpoint_sha256')}, {checkpoint} is {digest}); "
            "re-run python -m models.everyday --checkpoint on this one"
        )
    history = summary["history"]
    best = max(history, key=lambda h: h.get("select_bleu", h["valid_bleu"]))
    everyday = results["sets"].get("everyday", {})
    lines = [
        f"# {title}",
        "",
        f"An attention RNN encoder-decoder ({describe(config)}) that translates English to "
        "Spanish. It is a **demo**: its training data are English sentences from Debian "
        "packages translated by the Apertium rule-based engine, so it learns to imitate "
        "Apertium — its mistakes included — on short everyday and dictionary-style English. "
        "It is not a general-purpose translator.",
        "",
        "## Data",
        *data_lines(corpus),
        "",
        f"- SentencePiece unigram, {config['src_vocab_size']:,} / {config['tgt_vocab_size']:,} "
        "pieces (separate English / Spanish models, trained on the training split), "
        "pad/unk/bos/eos = 0/1/2/3.",
        "",
        "## Model",
        f"- {parameters:,} parameters, {checkpoint.stat().st_size / 2**20:.1f} MiB on disk; "
        "config:",
        "",
        "```json",
        json.dumps(config, indent=2),
        "```",
        "",
        "## Training",
        f"- Command: `{command}`",
        f"- {len(history)} epochs, {history[-1]['elapsed_seconds'] / 60:.1f} minutes on "
        f"{summary.get('device', '?')}, {summary['train_pairs']:,} training lines per epoch; "
        "AdamW + label smoothing 0.1. The committed checkpoint is epoch "
        f"{best['epoch']}, the best by "
        + (
            "greedy BLEU on the validation lines of the non-WordNet sources "
            "(selection BLEU; `--select-on`)."
            if "select_bleu" in best
            else "validation BLEU."
        ),
        "",
        *history_lines(history),
        "",
        "## Evaluation",
        "",
        f"`{results['command']}` ({results['date']}, {results['threads']} CPU threads, "
        "PyTorch reference decoders, sacreBLEU 13a). The everyday set "
        f"(`{everyday.get('source', 'models/everyday/everyday.en')}`) has Spanish references "
        "written by hand, so Apertium — the teacher — is the ceiling this model can learn "
        "towards; the test split's references are Apertium's own output (Apertium scores 100 "
        "there by construction).",
        "",
        *score_lines(results),
        "",
    ]
    examples = example_lines(results)
    if examples:
        lines += ["## Examples (everyday set, evenly spaced)", "", *examples, ""]
    if notes:
        lines += ["## Notes", "", notes.strip(), ""]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m models.card", description=__doc__.splitlines()[0])
    p.add_argument("checkpoint", type=Path)
    p.add_argument("--results", type=Path, required=True, help="python -m models.everyday JSON")
    p.add_argument("--summary", type=Path, required=True, help="summary.json of the run")
    p.add_argument("--corpus", type=Path, required=True, help="manifest.json of nmt-data build")
    p.add_argument("--command", required=True, help="the training command, for the record")
    p.add_argument("--title", default="en-es demo model")
    p.add_argument("--notes", type=Path, default=None, help="Markdown appended as 'Notes'")
    p.add_argument("--out", type=Path, required=True)
    args = show_defaults(p).parse_args(argv)
    from models.checkpoint import read_payload

    try:
        payload = read_payload(args.checkpoint)
        text = render(
            title=args.title,
            checkpoint=args.checkpoint,
            config=payload["config"],
            parameters=sum(v.numel() for v in payload["state_dict"].values()),
            results=json.loads(args.results.read_text(encoding="utf-8")),
            summary=json.loads(args.summary.read_text(encoding="utf-8")),
            corpus=json.loads(args.corpus.read_text(encoding="utf-8")),
            command=args.command,
            notes=args.notes.read_text(encoding="utf-8") if args.notes else "",
        )
    except (OSError, KeyError, json.JSONDecodeError, CardError) as exc:
        print(f"models.card: error: {exc}", file=sys.stderr)
        return 2
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
