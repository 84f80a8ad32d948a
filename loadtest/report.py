"""Ratios, target checks and the markdown report of :mod:`loadtest.bench` results.

A result is ``{"settings", "flops", "peak", "rows", "targets"}``; every row is one
measured configuration: ``system`` (``pytorch-eager``, ``onnxruntime-sequential``,
``grpc-service``, ``grpc-noop``: a server with no model), ``strategy`` (``greedy`` or
``beamN``), ``clients`` (servers only) and its sentences/s, target tokens/s and
latency percentiles in ms.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

BASELINE = "pytorch-eager"
SERVICE = "grpc-service"
NOOP = "grpc-noop"

# (name, strategy kind, clients, what is compared, threshold)
TARGETS = (
    ("greedy throughput at 32 clients >= 20x PyTorch greedy", "greedy", 32, "speedup", 20.0),
    ("single-request greedy p50 <= 0.5x PyTorch greedy p50", "greedy", 1, "p50_ratio", 0.5),
    ("beam throughput at 32 clients >= 5x PyTorch beam", "beam", 32, "speedup", 5.0),
)
PEAK_TARGET = 50.0
# this tree's service over another tree's (``nmt-bench --ab-tree``): greedy, 32 clients
AB_TARGET = 1.25


def ab_comparisons(rows: list[dict], labels: list[str]) -> list[dict]:
    """This tree's service (``labels[0]``) against each other tree's, per strategy and
    client count: sentences/s and p50 of both and their ratio (this over the other; the
    rounds' medians), and ``round_ratios``: the same ratio within each interleaved
    round, which a machine whose speed drifts during the run moves far less."""
    if len(labels) < 2:
        return []
    mine = {
        (r["strategy"], r["clients"]): r for r in rows if r["system"] == f"{SERVICE}@{labels[0]}"
    }
    out = []
    for label in labels[1:]:
        for r in rows:
            this = mine.get((r["strategy"], r.get("clients")))
            if r["system"] != f"{SERVICE}@{label}" or this is None:
                continue
            out.append(
                {
                    "strategy": r["strategy"],
                    "clients": r["clients"],
                    "this": labels[0],
                    "other": label,
                    "this_sentences_per_s": this["sentences_per_s"],
                    "other_sentences_per_s": r["sentences_per_s"],
                    # None when the other tree served nothing (every call failed)
                    "ratio": round(this["sentences_per_s"] / r["sentences_per_s"], 3)
                    if r["sentences_per_s"]
                    else None,
                    "this_p50_ms": this["p50_ms"],
                    "other_p50_ms": r["p50_ms"],
                    "round_ratios": _round_ratios(this, r),
                }
            )
    return out


def _round_ratios(this: dict, other: dict) -> list[float]:
    """This row's sentences/s over the other's in each round (none where a round of the
    other served nothing, or the rows do not have the same rounds)."""
    mine, theirs = this.get("sentences_per_s_all", []), other.get("sentences_per_s_all", [])
    if len(mine) != len(theirs):
        return []
    return [round(a / b, 3) for a, b in zip(mine, theirs, strict=True) if b]


def _kind(strategy: str) -> str:
    return "greedy" if strategy == "greedy" else "beam"


def median_rows(rounds: list[list[dict]]) -> list[dict]:
    """One row per configuration over repeated rounds: the round with the median
    sentences/s (its latencies and counters with it, so a row stays one real run), plus
    ``rounds`` and every round's ``sentences_per_s_all``. With an even count the lower
    middle is taken."""
    if len(rounds) == 1:
        return rounds[0]
    out = []
    for runs in zip(*rounds, strict=True):
        keys = {(r["system"], r["strategy"], r.get("clients")) for r in runs}
        if len(keys) != 1:
            raise ValueError(f"rounds measured different configurations: {sorted(keys)}")
        ordered = sorted(runs, key=lambda r: r["sentences_per_s"])
        row = dict(ordered[(len(ordered) - 1) // 2])
        row["rounds"] = len(runs)
        row["sentences_per_s_all"] = [r["sentences_per_s"] for r in runs]
        out.append(row)
    return out


def add_ratios(rows: list[dict]) -> None:
    """Add ``speedup`` (sentences/s over PyTorch's, same strategy), ``p50_ratio`` (p50 over
    PyTorch's) and ``same_as_pytorch`` (identical best translations) to every row, and
    drop the rows' ``texts``. A service row that sent the test set several times over
    (``--repeat``) is compared with PyTorch's translations repeated as often: every
    answer counts, not only the first round's."""
    texts = [r.pop("texts", None) for r in rows]
    base = {r["strategy"]: i for i, r in enumerate(rows) if r["system"] == BASELINE}
    for r, mine in zip(rows, texts, strict=True):
        i = base.get(r["strategy"])
        if i is None:
            r["speedup"] = r["p50_ratio"] = r["same_as_pytorch"] = None
            continue
        ref, ref_texts = rows[i], texts[i]
        r["speedup"] = round(r["sentences_per_s"] / ref["sentences_per_s"], 2)
        r["p50_ratio"] = round(r["p50_ms"] / ref["p50_ms"], 3)
        if mine is not None and ref_texts is not None:
            if len(mine) % len(ref_texts):
                raise ValueError(
                    f"{r['system']} {r['strategy']}: {len(mine)} translations are no whole "
                    f"number of rounds of PyTorch's {len(ref_texts)}"
                )
            ref_texts = ref_texts * (len(mine) // len(ref_texts))
            r["same_as_pytorch"] = sum(a == b for a, b in zip(mine, ref_texts, strict=True))
        else:
            r["same_as_pytorch"] = None


def _row(rows: list[dict], system: str, kind: str, clients: int) -> dict | None:
    return next(
        (
            r
            for r in rows
            if r["system"] == system and _kind(r["strategy"]) == kind and r["clients"] == clients
        ),
        None,
    )


def targets(
    rows: list[dict], ab: list[dict] | None = None, flagged: Sequence[str] = ()
) -> list[dict]:
    """Each target with the measured value and whether it is met (None: not measured).

    A throughput target also gets ``ceiling``: the same ratio for the server with no
    model under the same clients (None where that was not measured), the most any
    model could reach there. With A/B comparisons (:func:`ab_comparisons`), the greedy
    32-client ratio against each other tree is a target too; not against this tree with
    flags added (the labels ``flagged``, ``--ab-flags``): that ratio says what the flags
    did, not what this tree gained over an earlier one."""
    out = []
    for c in ab or []:
        if c["strategy"] == "greedy" and c["clients"] == 32 and c["other"] not in flagged:
            out.append(
                {
                    "target": f"greedy throughput at 32 clients >= {AB_TARGET:g}x the service "
                    f"of {c['other']} (same run)",
                    "value": c["ratio"],
                    "threshold": AB_TARGET,
                    "met": None if c["ratio"] is None else c["ratio"] >= AB_TARGET,
                }
            )
    for name, kind, clients, field, threshold in TARGETS:
        row = _row(rows, SERVICE, kind, clients)
        value = None if row is None else row.get(field)
        met = None
        if value is not None:
            met = value >= threshold if field == "speedup" else value <= threshold
        target = {"target": name, "value": value, "threshold": threshold, "met": met}
        if field == "speedup":
            noop = _row(rows, NOOP, kind, clients)
            target["ceiling"] = None if noop is None else noop.get("speedup")
        out.append(target)
    service = [r for r in rows if r["system"] == SERVICE and r.get("pct_of_peak") is not None]
    if service:
        top = max(r["clients"] for r in service)
        best = max((r for r in service if r["clients"] == top), key=lambda r: r["pct_of_peak"])
        out.append(
            {
                "target": f"model FLOP/s at saturation ({top} clients, {best['strategy']}) "
                f">= {PEAK_TARGET:g}% of the matmul peak",
                "value": best["pct_of_peak"],
                "threshold": PEAK_TARGET,
                "met": best["pct_of_peak"] >= PEAK_TARGET,
            }
        )
    return out


def _fmt(value, digits: int = 1) -> str:
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def markdown(result: dict) -> str:
    """The whole report: settings, results table, roofline and targets."""
    s = result["settings"]
    lines = [
        "# Benchmark: service vs sequential PyTorch and ONNX Runtime",
        "",
        *(
            [f"* device: **{s['gpu']}** (PyTorch on CUDA; ORT CUDA provider, IO binding)"]
            if s.get("device") == "cuda"
            else []
        ),
        f"* machine: {s['cpu']}, {s['cores']} cores; Python {s['python']}, "
        f"onnxruntime {s['onnxruntime']}" + (f", torch {s['torch']}" if s.get("torch") else ""),
        f"* threads: ORT intra-op {s['ort_intra_op_threads']} (ONNX baseline), "
        f"{_service_threads(s)} (service), torch {_fmt(s['torch_threads'])}",
        f"* {s['sentences']} sentences of `{s['sentence_file']}` "
        + (
            f"(sent {s['repeat']} times over to the service levels) "
            if s.get("repeat", 1) > 1
            else ""
        )
        + f"(mean {s['mean_source_tokens']} source tokens), bundle `{s['bundle']}` "
        f"({s.get('bundle_precision', 'fp32')})"
        + (f", checkpoint `{s['checkpoint']}`" if s.get("checkpoint") else ""),
        f"* service: {s['service']}",
        *(
            [
                f"* every row is the median of {s['rounds']} interleaved rounds by sentences/s "
                "(the JSON lists each round's sentences/s)"
            ]
            if s.get("rounds", 1) > 1
            else []
        ),
        *(
            ["* **warning: the checkpoint is not the one the bundle was exported from**"]
            if s.get("checkpoint_is_the_bundles") is False
            else []
        ),
        "* tokens = target tokens of the best hypothesis incl. EOS; latency = per sentence, "
        "text in to text out; × PyTorch = sentences/s over PyTorch eager of the same "
        "strategy; p50 ratio = p50 over PyTorch's p50; same = identical best translations",
        "",
        "| system | strategy | clients | sentences/s | tokens/s | p50 ms | p95 ms | p99 ms "
        "| × PyTorch | p50 ratio | same | GFLOP/s | % peak |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        lines.append(
            f"| {r['system']} | {r['strategy']} | {_fmt(r.get('clients'))} "
            f"| {_fmt(r['sentences_per_s'])} | {_fmt(r['tokens_per_s'], 0)} "
            f"| {_fmt(r['p50_ms'])} | {_fmt(r['p95_ms'])} | {_fmt(r['p99_ms'])} "
            f"| {_fmt(r['speedup'], 2)} | {_fmt(r['p50_ratio'], 2)} "
            f"| {_fmt(r['same_as_pytorch'])}/{r['sentences']} "
            f"| {_fmt(r.get('achieved_gflops'))} | {_fmt(r.get('pct_of_peak'))} |"
        )
    failed = [r for r in result["rows"] if r.get("errors")]
    if failed:
        lines += [
            "",
            "* **calls that failed** (a closed-loop client moves on to its next sentence; "
            "sentences/s and latencies count the answered ones; at more clients than the "
            "server's `--max-queue` admits, the excess is refused with RESOURCE_EXHAUSTED): "
            + "; ".join(
                f"{r['system']} {r['strategy']} x{r['clients']}: {r['errors']} of "
                f"{r['sentences'] + r['errors']}"
                for r in failed
            ),
        ]
    f = result["flops"]
    lines += [
        "",
        "## Roofline",
        "",
        f"* encoder: {f['encoder_per_source_token'] / 1e6:.3f} MFLOP per source token "
        f"+ {f['encoder_per_sentence'] / 1e6:.3f} MFLOP per sentence (bridge)",
        f"* decoder: {f['decoder_fixed_per_token'] / 1e6:.3f} MFLOP per generated token "
        f"+ {f['decoder_per_token_per_source_token'] / 1e3:.2f} kFLOP per source position "
        f"= {f['decoder_per_token_at_mean_src'] / 1e6:.3f} MFLOP at the mean source length; "
        "parts: "
        + ", ".join(f"{k} {v / 1e6:.3f}" for k, v in f["decoder_parts_per_token"].items()),
    ]
    peak = result.get("peak")
    if peak:
        lines.append(
            f"* fp32 matmul peak with {peak['threads']} threads: **{peak['peak_gflops']} "
            f"GFLOP/s** ({peak['peak_from']['library']} {peak['peak_from']['shape']}); all: "
            + ", ".join(
                f"{x['library']} {'x'.join(map(str, x['shape']))} {x['gflops']}"
                for x in peak["rates"]
            )
        )
    lines += [
        "",
        "ORT busy % = decoder plus encoder time inside ORT over the run's wall time (above "
        "100 when the encoder thread and the decoder run at once).",
        "",
        "| system | strategy | clients | rows/call | padded src len | ORT busy % "
        "| GFLOP/s (wall) | GFLOP/s (in ORT) | % peak (wall) | % peak (in ORT) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        if "achieved_gflops" not in r:
            continue
        lines.append(
            f"| {r['system']} | {r['strategy']} | {_fmt(r.get('clients'))} "
            f"| {_fmt(r['rows_per_call'])} | {_fmt(r['padded_src_len'])} "
            f"| {_fmt(r['ort_busy_pct'])} | {_fmt(r['achieved_gflops'])} "
            f"| {_fmt(r['in_ort_gflops'])} | {_fmt(r.get('pct_of_peak'))} "
            f"| {_fmt(r.get('in_ort_pct_of_peak'))} |"
        )
    lines += [
        "",
        "## Where the CPU goes",
        "",
        "CPU milliseconds per sentence (CPU total: every thread of the benchmark's process, "
        "which holds the server; the scheduler and encoder threads include the ORT calls "
        "they make; "
        "clients: the client process, not in the total) and wall milliseconds per sentence "
        "inside ORT:",
        "",
        "| system | strategy | clients | CPU total | scheduler | encoder | gRPC handlers "
        "| exited | other | clients CPU | ORT decoder wall | ORT encoder wall |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["rows"]:
        by = r.get("cpu_ms_by_thread", {})
        other = (by["other"] or 0.0) + (by.get("native") or 0.0) if "other" in by else None
        n = r["sentences"]
        dec = 1000 * r["ort_decoder_s"] / n if "ort_decoder_s" in r else None
        enc = 1000 * r["ort_encoder_s"] / n if "ort_encoder_s" in r else None
        lines.append(
            f"| {r['system']} | {r['strategy']} | {_fmt(r.get('clients'))} "
            f"| {_fmt(r.get('cpu_ms_per_sentence'), 2)} | {_fmt(by.get('scheduler'), 2)} "
            f"| {_fmt(by.get('encoder'), 2)} | {_fmt(by.get('grpc_handlers'), 2)} "
            f"| {_fmt(by.get('exited'), 2)} "
            f"| {_fmt(other, 2)} "
            f"| {_fmt(by.get('clients'), 2)} | {_fmt(dec, 2)} | {_fmt(enc, 2)} |"
        )
    lines += latency_table(result["rows"])
    profiles = result.get("decoder_profiles") or []
    if profiles:
        ops = sorted(
            {op for pr in profiles for op in pr["by_op_us"]},
            key=lambda op: -max(pr["by_op_us"].get(op, 0.0) for pr in profiles),
        )
        lines += [
            "",
            "## One decoder step inside ONNX Runtime",
            "",
            "ORT's own profiler on the session the service uses for that many rows; µs per "
            "step (framework = step time not spent in kernels, the profiler's own per-node "
            "cost included; GEMM GFLOP/s over GEMM/MatMul kernel time):",
            "",
            "| rows × source positions | threads | step µs unprofiled | step µs | kernels µs "
            "| framework µs | GEMM share % "
            "| GEMM GFLOP/s | " + " | ".join(ops[:8]) + " |",
            "|---" * (8 + len(ops[:8])) + "|",
        ]
        for pr in profiles:
            lines.append(
                f"| {pr['rows']} × {pr['src_len']} | {pr['threads']} | {pr['step_us_unprofiled']} "
                f"| {pr['step_us']} | {pr['kernels_us']} "
                f"| {pr['framework_us']} | {_fmt(pr['gemm_share_pct'])} "
                f"| {_fmt(pr['gemm_gflops'])} | "
                + " | ".join(_fmt(pr["by_op_us"].get(op)) for op in ops[:8])
                + " |"
            )
    lines += ab_table(result.get("ab") or [])
    lines += ["", "## Targets", ""]
    for t in result["targets"]:
        mark = {True: "met", False: "NOT met", None: "not measured"}[t["met"]]
        if t.get("ceiling") is not None:
            mark += f"; a gRPC server with no model reaches {t['ceiling']:.2f} here"
        lines.append(f"* {t['target']}: {_fmt(t['value'], 2)} ({mark})")
    return "\n".join(lines) + "\n"


def ab_table(ab: list[dict]) -> list[str]:
    """The A/B section of the report (nothing without comparisons)."""
    if not ab:
        return []
    lines = [
        "",
        "## A/B: this tree's service against another's",
        "",
        "Both served as `nmt-serve` subprocesses with the same flags (but those `--ab-flags` "
        "adds) and model repository, under the same clients, in the same run. ratio: this "
        "over the other, the rounds' medians; rounds: the same ratio within each round, "
        "lowest to highest:",
        "",
        "| strategy | clients | this | sentences/s | p50 ms | other | sentences/s | p50 ms "
        "| ratio | rounds |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in ab:
        spread = sorted(c.get("round_ratios") or [])
        rounds = f"{spread[0]:.2f}–{spread[-1]:.2f}" if spread else "–"
        lines.append(
            f"| {c['strategy']} | {c['clients']} | {c['this']} "
            f"| {_fmt(c['this_sentences_per_s'])} | {_fmt(c['this_p50_ms'])} "
            f"| {c['other']} | {_fmt(c['other_sentences_per_s'])} "
            f"| {_fmt(c['other_p50_ms'])} | {_fmt(c['ratio'], 3)} | {rounds} |"
        )
    return lines


def latency_table(rows: list[dict]) -> list[str]:
    """Markdown lines: where a request's latency goes, from the server's own timing in
    each reply (:func:`loadtest.concurrency.server_times`); none when no row has it."""
    timed = [r for r in rows if r.get("server_total_ms")]  # (no-model server: no engine)
    if not timed:
        return []
    lines = [
        "",
        "## Where a request's time goes",
        "",
        "Mean milliseconds per request (one sentence each), from the timing each reply "
        "carries: in the engine's queue, in encoder calls, decoding (from admission to the "
        "end, encoder calls left out; waiting to join the decode loop included), and the "
        "rest of the client's latency outside the engine (gRPC both ways, the front end's "
        "tokenising and replying, the pipe to an engine process and back, the client):",
        "",
        "| system | strategy | clients | mean ms | queue | encode | decode | engine total "
        "| outside the engine |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in timed:
        lines.append(
            f"| {r['system']} | {r['strategy']} | {_fmt(r.get('clients'))} "
            f"| {_fmt(r.get('mean_ms'), 2)} | {_fmt(r['server_queue_ms'], 2)} "
            f"| {_fmt(r['server_encode_ms'], 2)} | {_fmt(r['server_decode_ms'], 2)} "
            f"| {_fmt(r['server_total_ms'], 2)} | {_fmt(r['outside_engine_ms'], 2)} |"
        )
    return lines


README_START = "<!-- bench:start (written by python -m loadtest.bench --readme README.md) -->"
README_END = "<!-- bench:end -->"


def readme_block(result: dict, command: str) -> str:
    """The README's performance section body: settings, results table and targets."""
    md = markdown(result).splitlines()
    head = md[2 : md.index("## Roofline") - 1]  # settings bullets + results table
    targets = md[md.index("## Targets") + 2 :]
    peak = result.get("peak")
    lines = [f"`{command}`", "", *head, ""]
    if peak:
        lines.append(
            f"Roofline: fp32 matmul peak {peak['peak_gflops']} GFLOP/s measured in the same "
            "run; the % peak column is the model's FLOPs per second of wall time over it."
        )
        lines.append("")
    lines += ["Targets:", "", *targets]
    return "\n".join(line for line in lines).rstrip() + "\n"


def update_readme(path: Path, block: str) -> None:
    """Replace the text between the README's benchmark markers with ``block``."""
    text = path.read_text(encoding="utf-8")
    if README_START not in text or README_END not in text:
        raise ValueError(f"{path} has no {README_START!r} ... {README_END!r} markers")
    before, rest = text.split(README_START, 1)
    if README_END not in rest:
        raise ValueError(f"{path}: {README_END!r} comes before {README_START!r}")
    after = rest.split(README_END, 1)[1]
    path.write_text(f"{before}{README_START}\n{block}{README_END}{after}", encoding="utf-8")


def _service_threads(settings: dict) -> str:
    """The service's ORT intra-op threads as the report states them (older results have
    only the baseline's, which the service then used too)."""
    threads = settings.get("service_intra_op_threads", settings["ort_intra_op_threads"])
    return "the server's choice" if threads == 0 else str(threads)
