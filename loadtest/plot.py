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
    "grpc-service": "service, in-process",
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
        number = isinstance(rate, int | float) and not isinstance(rate, bool)
        if not number or not math.isfinite(rate) or rate <= 0:
            raise PlotError(f"{path}: row {i} has no finite positive sentences_per_s ({rate!r})")
        if not row.get("system") or not row.get("strategy"):
            raise PlotError(f"{path}: row {i} names no system or strategy")
        clients = row.get("clients")
        count = isinstance(clients, int) and not isinstance(clients, bool)
        if clients is not None and (not count or clients < 1):
            raise PlotError(f"{path}: row {i} has clients {clients!r}")
    return data.get("settings") or {}, rows


def title_of(path: Path, settings: dict[str, Any]) -> str:
    """What a row of panels measured: the machine and the bundle."""
    cpu, cores = (settings.get("cpu") or "").replace("(R)", ""), settings.get("cores")
    host = f"{cpu or 'unknown CPU'}" + (f", {cores} CPU cores" if cores else "")
    machine = f"{settings['gpu']} ({host})" if settings.get("device") == "cuda" else host
    bundle = settings.get("bundle", "")
    precision = settings.get("bundle_precision")
    what = bundle + (f" ({precision})" if precision else "")
    return f"{path.name}\n{machine}" + (f"\n{what}" if bundle else "")


def _label(system: str, settings: dict[str, Any]) -> str:
    """A system's legend, naming the commit it ran where the file records one: the run's
    own tree is the first of ``settings["ab_trees"]``, an A/B row is ``system@commit``."""
    trees = settings.get("ab_trees") or []
    own = trees[0].get("commit") if trees else None
    if "@" not in system:
        label = LABELS.get(system, system)
        return label.replace("service,", f"service @ {own},") if own else label
    base, commit = system.split("@", 1)
    name = LABELS.get(base, base).split(",")[0]
    if commit == own:
        return f"{name} @ {commit}, nmt-serve subprocess"
    tree = next((t.get("tree") for t in trees[1:] if t.get("commit") == commit), None)
    return f"{name} @ {commit}, nmt-serve subprocess (A/B tree" + (f" {tree})" if tree else ")")


def draw(files: Sequence[Path], out: Path, hide: Sequence[str] = ()) -> list[str]:
    """Draw ``files`` into ``out`` (the format by its suffix: .svg, .png, .pdf), leaving
    out the systems ``hide``. Returns one line per panel saying what it drew."""
    # The object-oriented API, no pyplot: no global backend or figure registry to touch.
    import matplotlib
    from matplotlib.figure import Figure

    loaded = []
    seen: set[str] = set()
    for path in files:
        settings, rows = load_rows(path)
        seen |= {r["system"] for r in rows}
        rows = [r for r in rows if r["system"] not in hide]
        if not rows:
            raise PlotError(f"{path}: every row is of a hidden system ({', '.join(hide)})")
        loaded.append((path, settings, rows))
    if not loaded:
        raise PlotError("no result files given")
    unknown = sorted(set(hide) - seen)
    if unknown:
        raise PlotError(f"--hide {', '.join(unknown)}: no such system in these files")
    strategies = sorted({r["strategy"] for _, _, rows in loaded for r in rows}, key=_order)
    # Deterministic SVG output: no timestamps, fixed ids, so that a rerun on the same
    # files leaves the committed figure unchanged; text stays text (smaller, searchable).
    style = {"svg.hashsalt": "nmt-bench", "svg.fonttype": "none"}
    with matplotlib.rc_context(style):
        fig = Figure(figsize=(5.6 * len(strategies), 3.8 * len(loaded)))
        axes = fig.subplots(len(loaded), len(strategies), squeeze=False)
        said = _draw_panels(fig, axes, loaded, strategies)
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(out, metadata={"Date": None} if out.suffix == ".svg" else None)
        except OSError as exc:
            raise PlotError(f"{out}: cannot write the figure ({exc})") from None
    return said


def _draw_panels(fig, axes, loaded, strategies: list[str]) -> list[str]:
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
    return said


def _order(strategy: str) -> tuple[int, str]:
    return (0 if strategy == "greedy" else 1, strategy)


def _panel(ax, path: Path, settings, rows, strategy: str, colours) -> str:
    mine = [r for r in rows if r["strategy"] == strategy]
    ax.set_title(f"{strategy} — {title_of(path, settings)}", fontsize=8)
    if not mine:  # another file measured this strategy, this one did not
        ax.text(0.5, 0.5, f"no {strategy} rows in this file", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
        return f"{path.name} {strategy}: no rows"
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
