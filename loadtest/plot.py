"""Throughput against clients, drawn from ``nmt-bench`` result files.

``python -m loadtest.plot loadtest/results/bench-cpu.json [more.json ...] --out
docs/throughput.svg`` draws one row of panels per result file, greedy on the left and
beam on the right: sentences/s of every system that ran at several client counts (the
service, an A/B tree's service, the no-model gRPC server) as lines over the clients, and
the systems that ran one sentence at a time (PyTorch eager, ONNX Runtime sequential) as
dashed levels. Each panel names its file, so a figure in the README points at the numbers
it was drawn from. Needs matplotlib (``pip install 'rnn-nmt-serving[viz]'``).
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# Colours by system, so that the same system looks the same in every panel; the rest
# (A/B trees) take the next of OTHER_COLOURS in order.
COLOURS = {
    "grpc-service": "#1f77b4",
    "grpc-noop": "#7f7f7f",
    "pytorch-eager": "#d62728",
    "onnxruntime-sequential": "#ff7f0e",
}
OTHER_COLOURS = ("#2ca02c", "#9467bd", "#8c564b", "#e377c2")
LABELS = {
    "grpc-service": "service (this tree, in-process)",
    "grpc-noop": "gRPC server with no model",
    "pytorch-eager": "PyTorch eager, one sentence at a time",
    "onnxruntime-sequential": "ONNX Runtime, one sentence at a time",
}


class PlotError(ValueError):
    """A result file that cannot be drawn; the message says which and why."""


def load_rows(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """A result file's settings and rows, each row checked: a system, a strategy, a
    finite positive ``sentences_per_s`` and clients (a count, or null for the
    one-at-a-time baselines)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlotError(f"{path}: not a readable JSON file ({exc})") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not rows or not isinstance(rows, list):
        raise PlotError(f"{path}: no result rows (not a file written by python -m loadtest.bench)")
    for i, row in enumerate(rows):
        rate = row.get("sentences_per_s") if isinstance(row, dict) else None
        if not isinstance(rate, int | float) or not math.isfinite(rate) or rate <= 0:
            raise PlotError(f"{path}: row {i} has no finite positive sentences_per_s ({rate!r})")
        if not row.get("system") or not row.get("strategy"):
            raise PlotError(f"{path}: row {i} names no system or strategy")
        clients = row.get("clients")
        if clients is not None and (not isinstance(clients, int) or clients < 1):
            raise PlotError(f"{path}: row {i} has clients {clients!r}")
    return data.get("settings") or {}, rows


def title_of(path: Path, settings: dict[str, Any]) -> str:
    """What a row of panels measured: the machine and the bundle."""
    device = settings.get("gpu") if settings.get("device") == "cuda" else settings.get("cpu")
    cores = settings.get("cores")
    machine = f"{device or settings.get('device', 'unknown device')}" + (
        f", {cores} cores" if cores else ""
    )
    bundle = settings.get("bundle", "")
    precision = settings.get("bundle_precision")
    what = f"{Path(bundle).name and bundle}" + (f" ({precision})" if precision else "")
    return f"{path.name}\n{machine}" + (f"; {what}" if bundle else "")


def _label(system: str, settings: dict[str, Any]) -> str:
    """A system's legend: an A/B row (``system@commit``) says which tree it was, this
    run's own (the first of ``settings["ab_trees"]``) or the other."""
    if "@" not in system:
        return LABELS.get(system, system)
    base, commit = system.split("@", 1)
    trees = settings.get("ab_trees") or []
    name = LABELS.get(base, base).split(" (")[0]
    if trees and trees[0].get("commit") == commit:
        return f"{name}: this tree, nmt-serve subprocess"
    tree = next((t.get("tree") for t in trees[1:] if t.get("commit") == commit), None)
    return f"{name}: A/B tree {commit}" + (f" ({tree})" if tree else "") + ", subprocess"


def draw(files: Sequence[Path], out: Path, hide: Sequence[str] = ()) -> list[str]:
    """Draw ``files`` into ``out`` (the format by its suffix: .svg, .png, .pdf), leaving
    out the systems ``hide``. Returns one line per panel saying what it drew."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    loaded = []
    for path in files:
        settings, rows = load_rows(path)
        rows = [r for r in rows if r["system"] not in hide]
        if not rows:
            raise PlotError(f"{path}: every row is of a hidden system ({', '.join(hide)})")
        loaded.append((path, settings, rows))
    if not loaded:
        raise PlotError("no result files given")
    strategies = sorted({r["strategy"] for _, _, rows in loaded for r in rows}, key=_order)
    # Deterministic SVG output: no timestamps, fixed ids, so that a rerun on the same
    # files leaves the committed figure unchanged.
    plt.rcParams["svg.hashsalt"] = "nmt-bench"
    plt.rcParams["svg.fonttype"] = "none"  # text stays text: smaller, searchable
    fig, axes = plt.subplots(
        len(loaded),
        len(strategies),
        figsize=(5.2 * len(strategies), 3.6 * len(loaded)),
        squeeze=False,
    )
    said = []
    for (path, settings, rows), panel_row in zip(loaded, axes, strict=True):
        extra = iter(OTHER_COLOURS)
        colours = dict(COLOURS)
        for system in dict.fromkeys(r["system"] for r in rows):
            if system not in colours:
                colours[system] = next(extra, "#17becf")
        for strategy, ax in zip(strategies, panel_row, strict=True):
            said.append(_panel(ax, path, settings, rows, strategy, colours))
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)
    plt.close(fig)
    return said


def _order(strategy: str) -> tuple[int, str]:
    return (0 if strategy == "greedy" else 1, strategy)


def _panel(ax, path: Path, settings, rows, strategy: str, colours) -> str:
    mine = [r for r in rows if r["strategy"] == strategy]
    curves: dict[str, list[tuple[int, float]]] = {}
    levels: dict[str, float] = {}
    for r in mine:
        if r["clients"] is None:
            levels[r["system"]] = r["sentences_per_s"]
        else:
            curves.setdefault(r["system"], []).append((r["clients"], r["sentences_per_s"]))
    for system, points in curves.items():
        points.sort()
        xs, ys = zip(*points, strict=True)
        ax.plot(xs, ys, marker="o", color=colours[system], label=_label(system, settings))
        for x, y in points:
            ax.annotate(f"{y:,.0f}", (x, y), textcoords="offset points", xytext=(0, 5),
                        ha="center", fontsize=7, color=colours[system])  # fmt: skip
    for system, rate in levels.items():
        label = f"{_label(system, settings)}: {rate:,.0f}"
        ax.axhline(rate, linestyle="--", color=colours[system], label=label)
    if curves:
        ax.set_xscale("log", base=2)
        ticks = sorted({x for points in curves.values() for x, _ in points})
        ax.set_xticks(ticks, [str(t) for t in ticks])
    top = max([y for points in curves.values() for _, y in points] + list(levels.values()))
    ax.set_ylim(0, top * 1.12)  # room for the labels above the highest point
    ax.set_xlabel("concurrent clients (one sentence a request)")
    ax.set_ylabel("sentences / s")
    ax.set_title(f"{strategy} — {title_of(path, settings)}", fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    return f"{path.name} {strategy}: {len(curves)} curves, {len(levels)} levels"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="+", type=Path, help="result JSON files of loadtest.bench")
    p.add_argument("--out", type=Path, required=True, help="the figure: .svg, .png or .pdf")
    p.add_argument(
        "--hide",
        action="append",
        default=[],
        metavar="SYSTEM",
        help="leave out a system's rows (e.g. grpc-noop, whose scale dwarfs a CPU's service)",
    )
    args = p.parse_args(argv)
    if args.out.suffix not in (".svg", ".png", ".pdf"):
        p.error(f"--out {args.out}: give a .svg, .png or .pdf file")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        p.error("needs matplotlib: pip install 'rnn-nmt-serving[viz]'")
    try:
        for line in draw(args.files, args.out, args.hide):
            print(line)
    except PlotError as exc:
        p.error(str(exc))
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
