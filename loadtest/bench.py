"""Benchmark the service against sequential PyTorch and ONNX Runtime decoding, in one run.

``python -m loadtest.bench [--sentences 500] [--clients 1,8,32,64] [--parts ...]``

On one machine, one model and the same N test sentences it measures

1. ``torch``: PyTorch eager reference decoding (:mod:`models.search`), one sentence at
   a time, greedy and beam (the baselines every ratio refers to);
2. ``onnx``: :func:`service.loop.decode` over the bundle's ORT sessions, one
   sentence at a time (no batching);
3. ``service``: the gRPC service in-process on 127.0.0.1 with 1, 8, 32, 64 concurrent
   closed-loop clients (:func:`loadtest.concurrency.closed_loop`) in child processes
   (:class:`loadtest.clients.ClientProcess`, ``--client-processes``), greedy and beam;
4. ``noop``: the same clients against a gRPC server with no model
   (:class:`loadtest.clients.NoopTranslator`): the most sentences/s one sentence per
   request can reach on this machine, whatever the model costs;
5. ``peak``: the fp32 matmul peak (:mod:`loadtest.roofline`) the achieved FLOP/s of the
   service is compared with;
6. ``profile``: ONNX Runtime's profile of one decoder step (:mod:`loadtest.ortprofile`)
   at one row and at the batch shape the service ran at its highest greedy concurrency.

Greedy ratios compare with PyTorch greedy, beam ratios with PyTorch beam. Writes
``<out>.md`` and ``<out>.json`` and prints the markdown.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import platform
import shlex
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from loadtest import plot, report, threadcpu
from loadtest.benchargs import parse_args, providers
from loadtest.clients import ClientProcess, start_noop_server
from loadtest.machine import cpu_name, shown
from loadtest.outputs import write_result
from loadtest.roofline import measure_peak, model_flops
from models.config import ModelConfig
from models.options import DecodeOptions
from nmt_client import DecodeOptions as ClientOptions
from service.remote import RemoteEngine, on_engine

log = logging.getLogger("loadtest.bench")


def gpu_name() -> str:
    try:
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=30,
        )
        return out.stdout.strip().splitlines()[0]
    except (OSError, IndexError, subprocess.SubprocessError):
        return "unknown"


def runtime_snapshot(model) -> dict:
    """Counters of :class:`service.runtime.OnnxModel` (copied so deltas can be taken)."""
    return dict(vars(model.stats))


def engine_stats(engine) -> dict:
    """:func:`runtime_snapshot` of ``engine``'s model, run where the engine runs."""
    return runtime_snapshot(engine.bundle.model)


def lane_count(engine) -> int:
    """The decode lanes ``engine`` runs (service/lanes.py), where it runs."""
    return len(getattr(engine, "lanes", ())) or 1


def engine_cpu(engine) -> dict:
    """:func:`threadcpu.snapshot` of the process ``engine`` runs in (``engine`` unused)."""
    return threadcpu.snapshot()


def delta(after: dict, before: dict) -> dict:
    return {k: after[k] - before[k] for k in after}


def flop_fields(stats: dict, flops, src_len: float, wall: float, peak: float | None) -> dict:
    """Achieved FLOP/s of a run from its ORT counters (``stats``) and wall time."""
    dec = flops.decoder_per_token(src_len) * stats["decoder_rows"]
    enc = flops.encoder_per_source_token * stats["source_tokens"]
    enc += flops.encoder_per_sentence * stats["sentences_encoded"]
    ort_seconds = stats["decoder_seconds"] + stats["encoder_seconds"]
    out = {
        "decoder_rows": stats["decoder_rows"],
        "decoder_calls": stats["decoder_calls"],
        "rows_per_call": round(stats["decoder_rows"] / max(1, stats["decoder_calls"]), 1),
        "padded_src_len": round(stats["decoder_row_positions"] / max(1, stats["decoder_rows"]), 1),
        "ort_decoder_s": round(stats["decoder_seconds"], 3),
        "ort_encoder_s": round(stats["encoder_seconds"], 3),
        "ort_busy_pct": round(100 * ort_seconds / wall, 1),
        "achieved_gflops": round((dec + enc) / wall / 1e9, 2),
        "in_ort_gflops": round((dec + enc) / max(ort_seconds, 1e-9) / 1e9, 2),
    }
    if peak:
        out["pct_of_peak"] = round(100 * out["achieved_gflops"] / peak, 1)
        out["in_ort_pct_of_peak"] = round(100 * out["in_ort_gflops"] / peak, 1)
    return out


def bench_torch(args, sentences: list[str], options: dict[str, DecodeOptions]) -> list[dict]:
    from loadtest.baselines import TorchBaseline

    base = TorchBaseline(args.checkpoint, args.torch_threads, args.device)
    rows = []
    for strategy, opts in options.items():
        log.info("PyTorch eager %s, %d sentences", strategy, len(sentences))
        stats = base.run(sentences, opts)
        rows.append(
            {"system": "pytorch-eager", "strategy": strategy, "clients": None}
            | stats.summary()
            | {"texts": stats.texts}
        )
    return rows


def bench_onnx(args, bundle_dir, sentences, options, flops, src_len, peak) -> list[dict]:
    from loadtest.baselines import OnnxBaseline

    base = OnnxBaseline(bundle_dir, args.threads, providers(args), io_binding=args.io_binding)
    rows = []
    for strategy, opts in options.items():
        log.info("ONNX Runtime sequential %s, %d sentences", strategy, len(sentences))
        base.run(sentences[:3], opts, warmup=0)  # warm-up, not measured
        before = runtime_snapshot(base.bundle.model)
        stats = base.run(sentences, opts, warmup=0)
        used = delta(runtime_snapshot(base.bundle.model), before)
        rows.append(
            {"system": "onnxruntime-sequential", "strategy": strategy, "clients": None}
            | stats.summary()
            | flop_fields(used, flops, src_len, stats.seconds, peak)
            | {"texts": stats.texts}
        )
    return rows


def client_options(opts: DecodeOptions) -> ClientOptions:
    """The request options of the service's clients for the baselines' ``opts``."""
    return ClientOptions(beam_size=opts.beam_size, return_scores=False)


def warm_up(
    clients: ClientProcess, target: str, sentences: list[str], request, levels: list[int]
) -> None:
    """A short level at the highest measured concurrency that starts every client process
    and warms the server: its arenas grown, and on CUDA the graphs of the step shapes
    that load brings captured (a server captures them in its first seconds of such load;
    a level of a second would otherwise measure mostly captures)."""
    n = max(4, clients.processes, *levels)
    clients.run_level(target, sentences[: 2 * n], n, request)


def measured_level(
    clients: ClientProcess,
    target: str,
    sentences: list[str],
    n: int,
    request: ClientOptions,
    engine=None,
    frontends: list[int] = (),
) -> tuple[dict, list[str]]:
    """One client level with the CPU it cost: this process's by thread group, plus the
    engine process's when ``engine`` runs in a child (its scheduler and encoder threads
    are there), the further front-end processes' (``frontends``: their pids) and the
    client processes' (``clients``), in ms per sentence."""
    remote = isinstance(engine, RemoteEngine)
    cpu_before = threadcpu.snapshot()
    child_before = on_engine(engine, engine_cpu) if remote else {}
    fronts_before = threadcpu.process_seconds(list(frontends))
    level, texts = clients.run_level(target, sentences, n, request)
    fronts = threadcpu.process_seconds(list(frontends)) - fronts_before
    cpu = threadcpu.breakdown(cpu_before, threadcpu.snapshot(), len(sentences))
    if frontends:
        cpu["frontends"] = round(1000 * fronts / len(sentences), 3)
        cpu["total"] = round(cpu["total"] + cpu["frontends"], 3)
    if remote:
        child = threadcpu.breakdown(child_before, on_engine(engine, engine_cpu), len(sentences))
        cpu = {k: round(cpu.get(k, 0.0) + child.get(k, 0.0), 3) for k in cpu | child}
    cpu["clients"] = round(1000 * level.pop("client_cpu_s") / len(sentences), 3)
    level.pop("strategy")
    return level | {"cpu_ms_per_sentence": cpu["total"], "cpu_ms_by_thread": cpu}, texts


def bench_service(
    args, model_name, sentences, options, flops, src_len, peak, clients: ClientProcess
) -> list[dict]:
    from prometheus_client import CollectorRegistry

    from loadtest.concurrency import start_server

    server, target = start_server(
        args.model_repository,
        intra_op_threads=args.service_threads,
        registry=CollectorRegistry(),
        providers=providers(args),
        io_binding=args.io_binding,
        engine_process=args.engine_process,
        frontends=args.frontends,
        max_inflight=args.max_inflight,
        max_queue=args.max_queue,
        decode_lanes=args.decode_lanes,
        max_live_rows=args.max_live_rows,
        cuda_graphs=args.cuda_graphs,
        encoder_thread=None if args.encoder_thread is None else args.encoder_thread == "on",
        greedy_steps=args.greedy_steps,
    )
    engine = server.engines[model_name]
    fronts = [m.process.pid for m in server.frontends.members] if server.frontends else []
    lanes = on_engine(engine, lane_count)
    rows = []
    try:
        for strategy, opts in options.items():
            request = client_options(opts)
            # warm-up, not measured (it also starts the client processes)
            warm_up(clients, target, sentences, request, args.clients)
            for n in args.clients:
                log.info("service %s, %d clients, %d sentences", strategy, n, len(sentences))
                before = on_engine(engine, engine_stats)
                level, texts = measured_level(
                    clients, target, sentences, n, request, engine, fronts
                )
                # the clients' own span: the client processes start before it
                wall = level["seconds"]
                used = delta(on_engine(engine, engine_stats), before)
                steps = max(1, used["graph_steps"])
                log.info(
                    "  %d of %d decoder steps on the fixed buffers (CUDA graphs); a step "
                    "%.3f ms in ORT calls: upload %.3f, run %.3f, outputs to the host %.3f; "
                    "%d of %d encoder calls on fixed shapes, %.3f ms a call",
                    used["graph_steps"],
                    used["decoder_calls"],
                    1e3 * used["decoder_seconds"] / max(1, used["decoder_calls"]),
                    *(
                        1e3 * used[f"graph_{p}_seconds"] / steps
                        for p in ("upload", "run", "download")
                    ),
                    used["graph_encodes"],
                    used["encoder_calls"],
                    1e3 * used["encoder_seconds"] / max(1, used["encoder_calls"]),
                )
                rows.append(
                    {"system": "grpc-service", "strategy": strategy}
                    | {"engine_process": server.engine_process, "frontends": args.frontends}
                    | {"decode_lanes": lanes}
                    | level
                    | flop_fields(used, flops, src_len, wall, peak)
                    | {"texts": texts}
                )
    finally:
        server.stop(0)
    return rows


def bench_trees(args, sentences, options, clients: ClientProcess, number: int) -> list[dict]:
    """The service of this tree and of every ``--ab-tree`` side by side: each started as
    an ``nmt-serve`` subprocess with the same flags on this run's model repository, the
    same client levels against each (rows ``grpc-service@COMMIT``; the CPU and ORT
    breakdowns are the in-process ``service`` rows'). Round ``number`` runs the trees in
    reverse order when it is even, so a machine that drifts over a run favours none."""
    from loadtest.trees import free_port, start_server, stop, wait_serving

    flags = [
        "--providers", ",".join(providers(args)),
        "--intra-op-threads", str(args.service_threads),
        "--io-binding", args.io_binding,
    ]  # fmt: skip
    if args.engine_process != "auto":  # else each tree its own default (older: no auto)
        flags += ["--engine-process", args.engine_process]
    if args.frontends != 1:  # older trees know no --frontends
        flags += ["--frontends", str(args.frontends)]
    if args.cuda_graphs != "auto":  # older trees know no --cuda-graphs
        flags += ["--cuda-graphs", args.cuda_graphs]
    if args.encoder_thread is not None:
        flags += ["--encoder-thread", args.encoder_thread]
    for flag, value in (
        ("--max-inflight", args.max_inflight),
        ("--max-queue", args.max_queue),
        ("--decode-lanes", args.decode_lanes),  # older trees know none: given only when set
        ("--max-live-rows", args.max_live_rows),
    ):
        if value is not None:
            flags += [flag, str(value)]
    rows: dict[str, list[dict]] = {}
    trees = args.ab_labels if number % 2 else args.ab_labels[::-1]
    for tree, label, extra in trees:
        rows[label] = []
        port = free_port()
        own = flags
        if args.greedy_steps and (Path(tree) / "service" / "greedysteps.py").exists():
            # a number, to every tree that has them (older ones have none; auto, 0, is
            # left to each tree's own default: older trees do not know 0)
            own = [*flags, "--greedy-steps", str(args.greedy_steps)]
        own = [*own, *extra]  # --ab-flags: last, so they win
        process = start_server(tree, port, own, model_repository=args.model_repository)
        target = f"127.0.0.1:{port}"
        try:
            wait_serving(port, process=process)
            for strategy, opts in options.items():
                request = client_options(opts)
                warm_up(clients, target, sentences, request, args.clients)
                for n in args.clients:
                    log.info("service of %s, %s, %d clients", label, strategy, n)
                    level, texts = clients.run_level(target, sentences, n, request)
                    level.pop("strategy")
                    cpu = level.pop("client_cpu_s")
                    level["cpu_ms_by_thread"] = {"clients": round(1000 * cpu / len(sentences), 3)}
                    rows[label].append(
                        {"system": f"{report.SERVICE}@{label}", "strategy": strategy}
                        | level
                        | {"texts": texts}
                    )
        finally:
            stop(process)
    return [row for _, label, _ in args.ab_labels for row in rows[label]]  # same order each round


def bench_noop(args, sentences, clients: ClientProcess) -> list[dict]:
    """The service's greedy requests against a server with no model."""
    server, target = start_noop_server()
    request = client_options(DecodeOptions())
    rows = []
    try:
        warm_up(clients, target, sentences, request, args.clients)  # not measured
        for n in args.clients:
            log.info("no-model gRPC server, %d clients, %d sentences", n, len(sentences))
            level, _ = measured_level(clients, target, sentences, n, request)
            rows.append({"system": report.NOOP, "strategy": "greedy"} | level)
    finally:
        server.stop(0)
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    from service.bundle import read_manifest

    bundle_dir, sentences = args.bundle_dir, args.texts
    manifest = read_manifest(bundle_dir, verify=False)
    config = ModelConfig.from_dict(manifest["model_config"])
    options = {"greedy": DecodeOptions(), f"beam{args.beam}": DecodeOptions(beam_size=args.beam)}
    flops = model_flops(config)
    from models.tokenizer import Tokenizer

    src_tok = Tokenizer.from_file(bundle_dir / "source.spm.model")
    src_len = sum(len(src_tok.encode(s)) for s in sentences) / len(sentences)

    peak = None
    if "peak" in args.parts:
        log.info("measuring the fp32 matmul peak with %d threads", args.threads)
        peak = measure_peak(args.threads, min_seconds=args.peak_seconds)
    peak_gflops = peak["peak_gflops"] if peak else None
    rounds: list[list[dict]] = []
    for number in range(1, args.rounds + 1):
        if args.rounds > 1:
            log.info("round %d of %d", number, args.rounds)
        rows: list[dict] = []
        if "torch" in args.parts:
            rows += bench_torch(args, sentences, options)
        if "onnx" in args.parts:
            rows += bench_onnx(args, bundle_dir, sentences, options, flops, src_len, peak_gflops)
        sent = sentences * args.repeat  # what the service levels send
        with ClientProcess(args.client_processes, connections=args.connections) as clients:
            if "service" in args.parts:
                rows += bench_service(
                    args, args.model, sent, options, flops, src_len, peak_gflops, clients
                )
            if "noop" in args.parts:
                rows += bench_noop(args, sent, clients)
            if args.ab_labels:
                rows += bench_trees(args, sent, options, clients, number)
        rounds.append(rows)
    rows = report.median_rows(rounds)
    report.add_ratios(rows)
    profiles = []
    if "profile" in args.parts:
        from loadtest.ortprofile import profile_decoder

        shapes = [(1, round(src_len))]
        greedy = [r for r in rows if r["system"] == "grpc-service" and r["strategy"] == "greedy"]
        if greedy:
            top = max(greedy, key=lambda r: r["clients"])
            shapes.append((round(top["rows_per_call"]), round(top["padded_src_len"])))
        for n, width in shapes:
            log.info("ORT profile of a decoder step: %d rows x %d source positions", n, width)
            profiles.append(
                profile_decoder(bundle_dir, rows=n, src_len=width, threads=args.threads)
            )

    import onnxruntime

    result = {
        "settings": {
            "device": args.device,
            "gpu": gpu_name() if args.device == "cuda" else None,
            "cpu": cpu_name(),
            "cores": os.cpu_count(),
            "python": platform.python_version(),
            "onnxruntime": onnxruntime.__version__,
            "ort_intra_op_threads": args.threads,
            "service_intra_op_threads": args.service_threads,
            "io_binding": args.io_binding,
            "cuda_graphs": args.cuda_graphs,
            "greedy_steps": args.greedy_steps,
            "encoder_thread": args.encoder_thread,
            "torch_threads": args.torch_threads if "torch" in args.parts else None,
            "sentences": len(sentences),
            "repeat": args.repeat,
            "rounds": args.rounds,
            "sentence_file": shown(args.file),
            "mean_source_tokens": round(src_len, 2),
            "bundle": shown(bundle_dir),
            "bundle_precision": manifest.get("precision", "fp32"),
            "checkpoint": shown(args.checkpoint) if "torch" in args.parts else None,
            "model_config": config.to_dict(),
            "service": "in-process server on 127.0.0.1, closed-loop client threads in "
            + (
                "a child process"
                if args.client_processes == 1
                else f"{args.client_processes} child processes"
            )
            + f" ({args.connections} connections)"
            + ", one sentence per request, default engine limits, --engine-process "
            + args.engine_process
            + f", --frontends {args.frontends}"
            + "".join(
                f", {flag} {value}"
                for flag, value in (
                    ("--max-inflight", args.max_inflight),
                    ("--max-queue", args.max_queue),
                    ("--decode-lanes", args.decode_lanes),
                    ("--max-live-rows", args.max_live_rows),
                )
                if value is not None
            ),
            "ab_trees": [
                {"tree": str(t), "commit": label, "flags": e} for t, label, e in args.ab_labels
            ],
        },
        "flops": flops.to_dict()
        | {"decoder_per_token_at_mean_src": flops.decoder_per_token(src_len)},
        "peak": peak,
        "decoder_profiles": profiles,
        "rows": rows,
        "ab": (ab := report.ab_comparisons(rows, [label for _, label, _ in args.ab_labels])),
        "targets": report.targets(
            rows, ab, flagged=[label for _, label, extra in args.ab_labels if extra]
        ),
    }
    if "torch" in args.parts:
        import torch

        from service.bundle import sha256_file

        result["settings"]["torch"] = torch.__version__
        exported_from = manifest.get("checkpoint", {}).get("sha256")
        same = exported_from == sha256_file(args.checkpoint)
        result["settings"]["checkpoint_is_the_bundles"] = same
        if not same:
            log.warning("%s is not the checkpoint the bundle was exported from", args.checkpoint)
    markdown = report.markdown(result)
    print(markdown)
    if args.out:
        write_result(args.out, result, markdown)
        log.info("wrote %s.md and %s.json", args.out, args.out)
        _figure(args.out)
    if args.readme:
        command = shlex.join(
            ["python", "-m", "loadtest.bench", *(argv if argv is not None else sys.argv[1:])]
        )
        report.update_readme(args.readme, report.readme_block(result, command.strip()))
        log.info("updated the performance table of %s", args.readme)
    return 0


def _figure(out: Path) -> None:
    """OUT.svg, sentences/s against clients (loadtest/plot.py), linked atop OUT.md; only
    with matplotlib installed (the viz extra): the numbers are in OUT.md and OUT.json."""
    if importlib.util.find_spec("matplotlib") is None:
        log.info("no figure: matplotlib is not installed (pip install 'rnn-nmt-serving[viz]')")
        return
    figure = out.with_suffix(".svg")
    try:
        plot.draw([out.with_suffix(".json")], figure)
    except plot.PlotError as exc:  # e.g. a level where every request failed
        log.warning("no figure: %s", exc)
        return
    md = out.with_suffix(".md")
    md.write_text(f"![sentences/s against clients]({figure.name})\n\n" + md.read_text())
    log.info("wrote %s", figure)


if __name__ == "__main__":
    sys.exit(main())
