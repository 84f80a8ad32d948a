"""What diverse siblings (``diversity_rate``; :class:`service.strategies.Siblings`) buy
and cost on a bundle, in process.

``python -m loadtest.diversity [--bundle DIR] [--sentences 500] [--rates 0,0.5,1,2]
[--beam 5] [--rounds 3] [--out STEM] [--svg FILE]``

The service's decode loop (:func:`service.loop.decode`) translates the first
``--sentences`` sentences of the demo model's test split with beam ``--beam`` and as many
hypotheses, once per rate, and measures for each rate:

* ``bleu``: corpus BLEU of the best hypotheses (sacrebleu), what a user reads;
* ``oracle_bleu``: corpus BLEU of the hypothesis of each list that scores the best
  sentence BLEU against its reference: how good the list is as a set of alternatives
  (for a reranker, a reviewer picking one);
* ``distinct_1``, ``distinct_2``: distinct words and word pairs over all the list's
  hypotheses, divided by their count, averaged over sentences (Li et al. 2016's measure
  of a list's diversity; 1/beam: every hypothesis alike, 1: no word shared);
* ``distinct_texts``: hypotheses of a list with a text no other has (detokenised), on
  average; ``sentences_per_second`` (the median of ``--rounds`` interleaved rounds: a
  rate above 0 decodes its sentences outside the loop's beam arrays, one at a time).

Writes ``STEM.json`` and ``STEM.md`` with ``--out``; ``--svg`` draws BLEU and oracle
BLEU against distinct-2, one point per rate (needs matplotlib).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def distinct(texts: list[str], n: int) -> float:
    """Distinct n-grams of words over ``texts`` divided by their count (0 if none)."""
    grams = [tuple(w[i : i + n]) for w in (t.split() for t in texts) for i in range(len(w) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def measure(bundle_dir: Path, n: int, rates: list[float], beam: int, rounds: int) -> dict:
    from sacrebleu.metrics import BLEU

    from service.bundle import load_bundle
    from service.loop import decode
    from service.sessions import RuntimeConfig

    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",)))
    split = ROOT / "models" / "pretrained" / "en-es"
    texts = (split / "test.en").read_text(encoding="utf-8").splitlines()[:n]
    refs = (split / "test.es").read_text(encoding="utf-8").splitlines()[:n]
    sources = [bundle.src_tokenizer.encode(t)[: bundle.max_source_tokens] for t in texts]
    tgt = bundle.tgt_tokenizer
    sentence_bleu = BLEU(effective_order=True)
    seconds: dict[float, list[float]] = {rate: [] for rate in rates}
    found = {}
    for r in range(rounds):  # interleaved, the order rotated each round
        for rate in rates[r % len(rates) :] + rates[: r % len(rates)]:
            options = dataclasses.replace(
                bundle.decoding, beam_size=beam, n_best=beam, diversity_rate=rate
            )
            start = time.perf_counter()
            found[rate] = decode(bundle.model, sources, options=options, special=bundle.special)
            seconds[rate].append(time.perf_counter() - start)
    rows = []
    for rate in rates:
        lists = found[rate]
        outs = [[tgt.decode(list(h.tokens)) for h in hyps] for hyps in lists]
        best = [o[0] for o in outs]
        oracle = [
            max(o, key=lambda h, r=ref: sentence_bleu.sentence_score(h, [r]).score)
            for o, ref in zip(outs, refs, strict=True)
        ]
        rows.append({
            "rate": rate,
            "bleu": BLEU().corpus_score(best, [refs]).score,
            "oracle_bleu": BLEU().corpus_score(oracle, [refs]).score,
            "distinct_1": sum(distinct(o, 1) for o in outs) / len(outs),
            "distinct_2": sum(distinct(o, 2) for o in outs) / len(outs),
            "distinct_texts": sum(len(set(o)) for o in outs) / len(outs),
            "sentences_per_second": sorted(n / t for t in seconds[rate])[rounds // 2],
            "example": outs[0],
        })  # fmt: skip
    shown = bundle_dir.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    return {"bundle": str(shown), "sentences": n, "beam": beam, "rounds": rounds,
            "source": texts[0], "rates": rows}  # fmt: skip


def report(result: dict) -> str:
    lines = [
        f"{result['sentences']} test sentences, beam {result['beam']}, "
        f"{result['beam']}-best lists; bundle `{result['bundle']}`; sentences/s: the median "
        f"of {result['rounds']} interleaved rounds",
        "",
        "| diversity_rate | BLEU (best) | oracle BLEU | distinct-1 | distinct-2 | "
        "distinct texts | sentences/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["rates"]:
        lines.append(
            f"| {r['rate']:g} | {r['bleu']:.2f} | {r['oracle_bleu']:.2f} | "
            f"{r['distinct_1']:.3f} | {r['distinct_2']:.3f} | {r['distinct_texts']:.2f} | "
            f"{r['sentences_per_second']:.1f} |"
        )
    lines += ["", f'The first sentence, "{result["source"]}":', ""]
    for r in result["rates"]:
        lines.append(f"* {r['rate']:g}: " + " / ".join(r["example"]))
    return "\n".join(lines)


def draw(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rates = result["rates"]
    x = [r["distinct_2"] for r in rates]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    ax.plot(x, [r["bleu"] for r in rates], "o-", label="BLEU of the best")
    ax.plot(x, [r["oracle_bleu"] for r in rates], "s--", label="oracle BLEU of the list")
    for r in rates:
        ax.annotate(f"{r['rate']:g}", (r["distinct_2"], r["oracle_bleu"]),
                    textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)  # fmt: skip
    ax.set_xlabel(f"distinct-2 of the {result['beam']}-best lists (more: more varied)")
    ax.set_ylabel("BLEU")
    ax.set_title(f"diversity_rate, beam {result['beam']}, {result['sentences']} sentences",
                 fontsize=10)  # fmt: skip
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.diversity", description=__doc__)
    p.add_argument("--bundle", type=Path, default=ROOT / "model_repository" / "en-es" / "8")
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--rates", default="0,0.25,0.5,1,2", help="comma-separated rates")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--out", type=Path, default=None, help="write STEM.json and STEM.md")
    p.add_argument("--svg", type=Path, default=None, help="draw the trade-off here")
    args = p.parse_args(argv)
    try:
        rates = [float(r) for r in args.rates.split(",")]
    except ValueError:
        print(f"--rates {args.rates!r}: give numbers, e.g. 0,0.5,1", file=sys.stderr)
        return 2
    if args.sentences < 1 or args.beam < 2 or args.rounds < 1:
        print("--sentences and --rounds must be >= 1, --beam >= 2", file=sys.stderr)
        return 2
    if not all(math.isfinite(r) and r >= 0 for r in rates):
        print(f"--rates {args.rates!r}: each must be a finite number >= 0", file=sys.stderr)
        return 2
    result = measure(args.bundle, args.sentences, rates, args.beam, args.rounds)
    text = report(result)
    print(text)
    if args.out is not None:
        args.out.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n")
        command = " ".join(["python -m loadtest.diversity", *(argv or sys.argv[1:])])
        args.out.with_suffix(".md").write_text(f"`{command}`\n\n{text}\n")
    if args.svg is not None:
        draw(result, args.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
