"""What the diverse searches buy and cost on a bundle, in process: diverse siblings
(``diversity_rate``; :class:`service.diverse.Siblings`) and diverse beam search in
groups (``diverse_beam_groups``, ``diverse_beam_strength``; :class:`service.diverse.GroupedBeam`).

``python -m loadtest.diversity [--bundle DIR] [--sentences 500] [--rates 0,0.5,1,2]
[--strengths 0.5,1,2] [--groups G] [--beam 5] [--rounds 3] [--out STEM] [--svg FILE]``

The service's decode loop (:func:`service.loop.decode`) translates the first
``--sentences`` sentences of the demo model's test split with beam ``--beam`` and as many
hypotheses: plain (rate 0), once per diversity rate, and once per group strength with
``--groups`` groups (default: one hypothesis a group, ``--beam``). For each it measures:

* ``bleu``: corpus BLEU of the best hypotheses (sacrebleu), what a user reads;
* ``oracle_bleu``: corpus BLEU of the hypothesis of each list that scores the best
  sentence BLEU against its reference: how good the list is as a set of alternatives
  (for a reranker, a reviewer picking one);
* ``distinct_1``, ``distinct_2``: distinct words and word pairs over all the list's
  hypotheses, divided by their count, averaged over sentences (Li et al. 2016's measure
  of a list's diversity; 1/beam: every hypothesis alike, 1: no word shared);
* ``distinct_texts``: hypotheses of a list with a text no other has (detokenised), on
  average (diverse beam search keeps a hypothesis two groups both found);
* ``sentences_per_second``: the median of ``--rounds`` interleaved rounds (a diverse
  search decodes its sentences outside the loop's beam arrays, one at a time).

Writes ``STEM.json`` and ``STEM.md`` with ``--out``; ``--svg`` draws BLEU and oracle
BLEU against distinct-2, one point per setting (needs matplotlib).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from pathlib import Path

from loadtest.outputs import write_result

ROOT = Path(__file__).resolve().parent.parent
SEARCHES = ("siblings", "groups")


def distinct(texts: list[str], n: int) -> float:
    """Distinct n-grams of words over ``texts`` divided by their count (0 if none)."""
    grams = [tuple(w[i : i + n]) for w in (t.split() for t in texts) for i in range(len(w) - n + 1)]
    return len(set(grams)) / len(grams) if grams else 0.0


def settings(rates: list[float], strengths: list[float]) -> list[tuple[str, float]]:
    """(search, its setting) of every run: plain beam first (siblings at rate 0)."""
    return (
        [("siblings", 0.0)]
        + [("siblings", r) for r in rates if r > 0]
        + [("groups", s) for s in strengths]
    )


def measure(
    bundle_dir: Path,
    n: int,
    rates: list[float],
    beam: int,
    rounds: int,
    strengths: list[float] = (),
    groups: int | None = None,
) -> dict:
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
    groups = groups or beam
    runs = settings(rates, list(strengths))

    def options(search: str, value: float):
        base = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=beam)
        if search == "siblings":
            return dataclasses.replace(base, diversity_rate=value)
        return dataclasses.replace(base, diverse_beam_groups=groups, diverse_beam_strength=value)

    seconds: dict[tuple[str, float], list[float]] = {run: [] for run in runs}
    found = {}
    for r in range(rounds):  # interleaved, the order rotated each round
        for run in runs[r % len(runs) :] + runs[: r % len(runs)]:
            asked = options(*run)
            start = time.perf_counter()
            found[run] = decode(bundle.model, sources, options=asked, special=bundle.special)
            seconds[run].append(time.perf_counter() - start)
    rows = []
    for search, value in runs:
        outs = [[tgt.decode(list(h.tokens)) for h in hyps] for hyps in found[search, value]]
        best = [o[0] for o in outs]
        oracle = [
            max(o, key=lambda h, r=ref: sentence_bleu.sentence_score(h, [r]).score)
            for o, ref in zip(outs, refs, strict=True)
        ]
        rows.append({
            "search": search,
            "setting": value,
            "bleu": BLEU().corpus_score(best, [refs]).score,
            "oracle_bleu": BLEU().corpus_score(oracle, [refs]).score,
            "distinct_1": sum(distinct(o, 1) for o in outs) / len(outs),
            "distinct_2": sum(distinct(o, 2) for o in outs) / len(outs),
            "distinct_texts": sum(len(set(o)) for o in outs) / len(outs),
            "sentences_per_second": sorted(n / t for t in seconds[search, value])[rounds // 2],
            "example": outs[0],
        })  # fmt: skip
    shown = bundle_dir.resolve()
    shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
    return {"bundle": str(shown), "sentences": n, "beam": beam, "groups": groups,
            "rounds": rounds, "source": texts[0], "runs": rows}  # fmt: skip


def _label(result: dict, row: dict) -> str:
    if row["search"] == "siblings":
        return "plain beam" if row["setting"] == 0 else f"diversity_rate {row['setting']:g}"
    return f"{result['groups']} groups, strength {row['setting']:g}"


def report(result: dict) -> str:
    lines = [
        f"{result['sentences']} test sentences, beam {result['beam']}, "
        f"{result['beam']}-best lists; bundle `{result['bundle']}`; sentences/s: the median "
        f"of {result['rounds']} interleaved rounds",
        "",
        "| search | BLEU (best) | oracle BLEU | distinct-1 | distinct-2 | distinct texts | "
        "sentences/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in result["runs"]:
        lines.append(
            f"| {_label(result, r)} | {r['bleu']:.2f} | {r['oracle_bleu']:.2f} | "
            f"{r['distinct_1']:.3f} | {r['distinct_2']:.3f} | {r['distinct_texts']:.2f} | "
            f"{r['sentences_per_second']:.1f} |"
        )
    lines += ["", f'The first sentence, "{result["source"]}":', ""]
    for r in result["runs"]:
        lines.append(f"* {_label(result, r)}: " + " / ".join(r["example"]))
    return "\n".join(lines)


def draw(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    styles = {
        "siblings": ("o", "#1f77b4", "diversity_rate"),
        "groups": ("s", "#d62728", f"{result['groups']} groups, strength"),
    }
    plain = result["runs"][0]
    for search, (marker, colour, name) in styles.items():
        rows = [r for r in result["runs"] if r["search"] == search]
        if search == "groups" and rows:
            rows = [plain, *rows]  # strength 0 would not be plain beam: start from it
        if not rows:
            continue
        x = [r["distinct_2"] for r in rows]
        for what, dash in (("bleu", "-"), ("oracle_bleu", "--")):
            label = f"{name}: {'BLEU of the best' if what == 'bleu' else 'oracle BLEU'}"
            ax.plot(x, [r[what] for r in rows], marker + dash, color=colour, label=label,
                    markersize=5)  # fmt: skip
        for r in rows[1:]:
            where = (r["distinct_2"], r["oracle_bleu"])
            ax.annotate(f"{r['setting']:g}", where, textcoords="offset points",
                        xytext=(0, 6), ha="center", fontsize=8)  # fmt: skip
    ax.set_xlabel(f"distinct-2 of the {result['beam']}-best lists (more: more varied)")
    ax.set_ylabel("BLEU")
    ax.set_title(
        f"diverse searches on the demo model, beam {result['beam']}, {result['sentences']} "
        "sentences (leftmost: plain beam)",
        fontsize=9,
    )
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, metadata={"Date": None})
    plt.close(fig)


def _numbers(text: str, flag: str) -> list[float]:
    values = [float(v) for v in text.split(",") if v.strip()]
    if not all(math.isfinite(v) and v >= 0 for v in values):
        raise ValueError(f"{flag} {text!r}: each must be a finite number >= 0")
    return values


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.diversity", description=__doc__)
    p.add_argument("--bundle", type=Path, default=ROOT / "model_repository" / "en-es" / "8")
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument("--rates", default="0.5,1,2,4,8", help="comma-separated diversity rates")
    p.add_argument("--strengths", default="0.5,1,2,4", help="comma-separated group strengths")
    p.add_argument("--groups", type=int, default=None, help="groups (default: --beam)")
    p.add_argument("--beam", type=int, default=5)
    p.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds")
    p.add_argument("--out", type=Path, default=None, help="write STEM.json and STEM.md")
    p.add_argument("--svg", type=Path, default=None, help="draw the trade-off here")
    args = p.parse_args(argv)
    try:
        rates = _numbers(args.rates, "--rates")
        strengths = _numbers(args.strengths, "--strengths")
    except ValueError as exc:
        message = str(exc) if "each must" in str(exc) else "give numbers, e.g. 0.5,1"
        print(f"python -m loadtest.diversity: {message}", file=sys.stderr)
        return 2
    if args.sentences < 1 or args.beam < 2 or args.rounds < 1:
        print("--sentences and --rounds must be >= 1, --beam >= 2", file=sys.stderr)
        return 2
    groups = args.groups or args.beam
    if groups < 2 or args.beam % groups:
        print(f"--groups {groups} must be >= 2 and divide --beam {args.beam}", file=sys.stderr)
        return 2
    result = measure(args.bundle, args.sentences, rates, args.beam, args.rounds, strengths, groups)
    text = report(result)
    print(text)
    if args.out is not None:
        command = " ".join(["python -m loadtest.diversity", *(argv or sys.argv[1:])])
        write_result(args.out, result, f"`{command}`\n\n{text}")
    if args.svg is not None:
        draw(result, args.svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
