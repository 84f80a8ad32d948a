"""Do attention diagnostics tell in-domain from out-of-domain input? Serves the committed
model in process, translates the test split as it is, with its words shuffled, the
Spanish references fed as English (another language), and the everyday set, and reports
each set's distribution of mean attention entropy, coverage deficit and unknown-piece
share of the best hypothesis.

    python -m loadtest.diagnostics --sentences 300 --out loadtest/results/diagnostics-cpu
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from pathlib import Path

from loadtest.outputs import write_result
from models.commands import show_defaults

ROOT = Path(__file__).resolve().parents[1]
PRETRAINED = ROOT / "models" / "pretrained" / "en-es"
EVERYDAY = ROOT / "models" / "everyday" / "everyday.en"
FIGURES = ("entropy_mean", "coverage_deficit", "over_attention", "unk_share")


def sets(n: int, seed: int) -> dict[str, list[str]]:
    """``{name: sentences}``: the in-domain test split and three kinds of other input."""
    rng = random.Random(seed)
    en = [x for x in (PRETRAINED / "test.en").read_text().splitlines() if x.strip()][:n]
    es = [x for x in (PRETRAINED / "test.es").read_text().splitlines() if x.strip()][:n]

    def shuffled(line: str) -> str:
        words = line.split()
        rng.shuffle(words)
        return " ".join(words)

    return {
        "test split (in domain)": en,
        "everyday English": EVERYDAY.read_text().splitlines()[:n],
        "test split, words shuffled": [shuffled(x) for x in en],
        "Spanish fed as English": es,
    }


def quantiles(values: list[float]) -> dict[str, float]:
    qs = statistics.quantiles(values, n=10, method="inclusive")
    return {
        "p10": round(qs[0], 4),
        "median": round(statistics.median(values), 4),
        "p90": round(qs[-1], 4),
    }


def measure(address: str, texts: list[str]) -> dict[str, dict[str, float]]:
    from nmt_client import Translator

    with Translator(address, timeout=300) as t:
        results = list(
            t.translate_many(texts, batch_size=32, concurrency=2, return_diagnostics=True)
        )
    out: dict[str, dict[str, float]] = {}
    for name in FIGURES:
        values = [getattr(r.best.diagnostics, name) for r in results]
        out[name] = quantiles([v for v in values if v is not None])
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m loadtest.diagnostics", description=__doc__)
    p.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--sentences", type=int, default=300, help="sentences per set")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.md")
    args = show_defaults(p).parse_args(argv)

    from prometheus_client import CollectorRegistry

    from service.config import ServerConfig
    from service.server import create_server
    from service.sessions import RuntimeConfig

    config = ServerConfig(
        model_repository=args.model_repository,
        host="127.0.0.1",
        port=0,
        metrics_port=-1,
        runtime=RuntimeConfig(providers=("cpu",)),
    )
    server, port = create_server(config, registry=CollectorRegistry())
    server.start()
    server.warm_up()
    try:
        report = {
            name: measure(f"127.0.0.1:{port}", texts)
            for name, texts in sets(args.sentences, args.seed).items()
        }
    finally:
        server.stop(0)
    model = next(iter(server.engines.values())).bundle
    command = "python -m loadtest.diagnostics " + " ".join(sys.argv[1:] if argv is None else argv)
    data = {
        "command": command,
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "bundle": str(
            model.path.relative_to(ROOT) if model.path.is_relative_to(ROOT) else model.path
        ),
        "sentences_per_set": args.sentences,
        "greedy": True,
        "sets": report,
    }
    lines = [
        f"`{command}` ({data['date']}, bundle {data['bundle']}, greedy, best hypothesis; "
        "p10 / median / p90)",
        "",
        "| input | entropy (nats) | coverage deficit | over-attention | unknown pieces |",
        "|---|---|---|---|---|",
    ]
    for name, figures in report.items():
        cells = [
            " / ".join(f"{figures[f][q]:.3g}" for q in ("p10", "median", "p90")) for f in FIGURES
        ]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    write_result(args.out, data, "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
