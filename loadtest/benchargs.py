"""Benchmark the service against sequential PyTorch and ONNX Runtime decoding, in one run.

The command line of ``python -m loadtest.bench`` (:mod:`loadtest.bench` runs it): every
flag, and every input checked before a measurement starts (a one-line error, exit 2).
"""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Sequence
from pathlib import Path

from loadtest import report
from loadtest.concurrency import CONNECTION_MODES, read_sentences_arg
from loadtest.machine import ROOT
from models.commands import show_defaults
from models.options import DecodeOptions
from service.calls import RpcConfig
from service.config import ENGINE_PROCESS_MODES, ServerConfig
from service.limits import EngineConfig
from service.sessions import CUDA_GRAPH_MODES, IO_BINDING_MODES, RuntimeConfig

PRETRAINED = ROOT / "models" / "pretrained" / "en-es"
PARTS = ("torch", "onnx", "service", "noop", "peak", "profile")


def providers(args: argparse.Namespace) -> tuple[str, ...]:
    """ORT providers of the run: CUDA alone on ``--device cuda`` (a silent CPU fallback
    would report CPU numbers as GPU ones)."""
    return ("cuda",) if args.device == "cuda" else ("cpu",)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--model-repository", type=Path, default=ROOT / "model_repository")
    p.add_argument("--model", default="en-es", help="model name in the repository")
    p.add_argument("--checkpoint", type=Path, default=PRETRAINED / "model.pt")
    p.add_argument("--file", type=Path, default=PRETRAINED / "test.en")
    p.add_argument("--sentences", type=int, default=500)
    p.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="the service levels (service, noop, --ab-tree) send the sentences this many "
        "times over, the sequential baselines once: longer levels on a fast server (2,000 "
        "sentences at 256 clients last half a second on a GPU), the same test set",
    )
    p.add_argument("--clients", default="1,8,32,64", help="comma-separated concurrencies")
    p.add_argument("--beam", type=int, default=5, help="beam size of the beam rows")
    p.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where PyTorch, the ONNX baseline and the service run (cuda: ORT's CUDA "
        "provider with IO binding; peak and profile measure the CPU and are left out)",
    )
    p.add_argument(
        "--io-binding",
        choices=IO_BINDING_MODES,
        default="auto",
        help="ORT IO binding of the ONNX baseline and the service (auto: on with CUDA)",
    )
    p.add_argument(
        "--greedy-steps",
        type=int,
        default=RuntimeConfig.greedy_steps,
        help="the service's decoder steps per call for plain greedy rows (nmt-serve "
        "--greedy-steps; 0: the server's auto, also for the A/B trees); A/B trees "
        "without service/greedysteps.py run one step a call",
    )
    p.add_argument(
        "--cuda-graphs",
        choices=CUDA_GRAPH_MODES,
        default=RuntimeConfig.cuda_graphs,
        help="the service's decoder steps replayed from CUDA graphs (nmt-serve "
        "--cuda-graphs; auto: on with CUDA); the A/B trees get the flag only when it is "
        "not auto",
    )
    p.add_argument(
        "--encoder-thread",
        choices=("on", "off"),
        default=None,
        help="the service's encoder on a thread of its own (nmt-serve --encoder-thread; "
        "default: the server's)",
    )
    p.add_argument(
        "--engine-process",
        choices=ENGINE_PROCESS_MODES,
        default=ServerConfig.engine_process,
        help="the service's engine in a child process (auto: on with CUDA); the A/B trees "
        "get the flag only when it is not auto",
    )
    p.add_argument(
        "--frontends",
        type=int,
        default=ServerConfig.frontends,
        help="the service's gRPC processes sharing its engine process (nmt-serve --frontends)",
    )
    p.add_argument(
        "--max-inflight",
        type=int,
        default=None,
        help="the service's calls in flight per gRPC process (nmt-serve --max-inflight; "
        "default: the server's), e.g. at least --clients so that no level is refused",
    )
    p.add_argument(
        "--max-queue",
        type=int,
        default=None,
        help="the service's queued requests (nmt-serve --max-queue; default: the server's)",
    )
    p.add_argument(
        "--max-live-rows",
        type=int,
        default=None,
        help="hypothesis rows the service decodes at once (nmt-serve --max-live-rows; "
        "default: the server's)",
    )
    p.add_argument(
        "--decode-lanes",
        type=int,
        default=None,
        help="the service's decode lanes per model (nmt-serve --decode-lanes; default: the "
        "server's, 0 = auto)",
    )
    p.add_argument(
        "--connections",
        choices=CONNECTION_MODES,
        default="process",
        help="process: a client process's clients share one TCP connection (gRPC's "
        "default); client: one each, as separate programs have (what --frontends and "
        "SO_REUSEPORT spread over processes)",
    )
    p.add_argument("--parts", default=None, help=f"any of {','.join(PARTS)} (default: all)")
    p.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="ORT intra-op threads of the service and the ONNX baseline (default: all cores)",
    )
    p.add_argument(
        "--service-threads",
        type=int,
        default=None,
        help="ORT intra-op threads of the service (nmt-serve --intra-op-threads; 0: the "
        "server's own choice, which splits the cores between its decode lanes; "
        "default: --threads)",
    )
    p.add_argument(
        "--torch-threads", type=int, default=None, help="PyTorch threads (default: --threads)"
    )
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="write OUT.md, OUT.json and, with matplotlib, OUT.svg (loadtest/plot.py)",
    )
    p.add_argument(
        "--readme",
        type=Path,
        default=None,
        help="also write the results table between the benchmark markers of this README",
    )
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="measure everything this many times, interleaved, and keep each row's median "
        "round (a shared machine is noisy)",
    )
    p.add_argument("--peak-seconds", type=float, default=0.3, help="time per peak trial")
    p.add_argument(
        "--ab-tree",
        type=Path,
        action="append",
        default=[],
        help="also serve the source tree DIR (e.g. a git worktree of the previous main) "
        "and this one, each as an nmt-serve subprocess, under the same clients: the A/B "
        "rows (repeat for several trees)",
    )
    p.add_argument(
        "--ab-flags",
        action="append",
        default=[],
        metavar="FLAGS",
        help="also serve this tree with these nmt-serve flags added (one string; write "
        "--ab-flags='--greedy-steps 4', with '=', so that it is not read as a flag), as "
        "an A/B row against this tree without them, in the same rounds: a ratio below 1 "
        "means the flags made it faster (repeat for several sets)",
    )
    p.add_argument(
        "--client-processes",
        type=int,
        default=1,
        help="processes the clients of a level are dealt out over (one Python process "
        "sends a few thousand requests a second at most: a GPU server needs several)",
    )
    args = show_defaults(p).parse_args(argv)
    clients_text = args.clients
    try:
        args.clients = [int(c) for c in args.clients.split(",") if c.strip()]
    except ValueError:
        args.clients = []
    if not args.clients or min(args.clients) < 1:
        p.error(f"--clients {clients_text!r}: give positive integers, e.g. 1,8,32")
    if args.parts is None:
        args.parts = ",".join(
            PARTS if args.device == "cpu" else ("torch", "onnx", "service", "noop")
        )
    args.parts = [x.strip() for x in args.parts.split(",") if x.strip()]
    unknown = sorted(set(args.parts) - set(PARTS))
    if unknown:
        p.error(f"unknown parts {unknown}; choose from {','.join(PARTS)}")
    if args.torch_threads is None:
        args.torch_threads = args.threads
    if args.service_threads is None:
        args.service_threads = args.threads
    if args.service_threads < 0:
        p.error(f"--service-threads must be >= 0 (0: the server's), got {args.service_threads}")
    if args.sentences < 1 or args.threads < 1 or args.torch_threads < 1:
        p.error("--sentences, --threads and --torch-threads must be positive")
    if args.rounds < 1:
        p.error("--rounds must be >= 1")
    if args.repeat < 1:
        p.error(f"--repeat must be >= 1, got {args.repeat}")
    if args.client_processes < 1:
        p.error(f"--client-processes must be >= 1, got {args.client_processes}")
    try:  # the server's own checks of these flags
        ServerConfig(frontends=args.frontends, engine_process=args.engine_process)
        if args.max_inflight is not None:
            RpcConfig(max_inflight=args.max_inflight)
        if args.max_queue is not None:
            EngineConfig(max_queue=args.max_queue)
        if args.decode_lanes is not None:
            EngineConfig(decode_lanes=args.decode_lanes)
        if args.max_live_rows is not None:
            EngineConfig(max_live_rows=args.max_live_rows)
        RuntimeConfig(greedy_steps=args.greedy_steps)
    except ValueError as exc:
        p.error(str(exc))
    from loadtest.trees import ab_servers

    args.ab_labels = ab_servers(p, ROOT, args.ab_tree, args.ab_flags)
    if args.device == "cuda" and {"peak", "profile"} & set(args.parts):
        p.error("peak and profile measure the CPU; leave them out of --parts with --device cuda")
    if not (math.isfinite(args.peak_seconds) and args.peak_seconds > 0):
        p.error(f"--peak-seconds must be a positive number of seconds, got {args.peak_seconds}")
    check_inputs(p, args)
    return args


def check_inputs(p: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Everything the benchmark reads, checked before any measurement starts (a
    one-line error, exit 2): ``args.bundle_dir`` and ``args.texts`` are set here."""
    from service.server import ServerError, find_bundles

    try:
        DecodeOptions(beam_size=args.beam)
    except ValueError as exc:
        p.error(f"--beam {args.beam}: {exc}")
    # The service runs with the default engine limits, which refuse larger beams.
    if "service" in args.parts and args.beam > EngineConfig().max_beam_size:
        p.error(f"--beam {args.beam}: the service allows at most {EngineConfig().max_beam_size}")
    try:
        bundles = find_bundles(args.model_repository, gpu=args.device == "cuda")
    except ServerError as exc:
        p.error(f"--model-repository: {exc}")
    if args.model not in bundles:
        p.error(f"--model {args.model!r} is not in {args.model_repository}: {', '.join(bundles)}")
    args.bundle_dir = bundles[args.model]
    args.texts = read_sentences_arg(p, args.file, args.sentences)
    if "torch" in args.parts and not args.checkpoint.is_file():
        p.error(f"--checkpoint {args.checkpoint} not found (needed by the torch part)")
    if args.readme is not None:
        try:
            text = args.readme.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            p.error(f"--readme {args.readme}: {getattr(exc, 'strerror', None) or exc}")
        if report.README_START not in text or report.README_END not in text:
            p.error(f"--readme {args.readme} has no bench:start ... bench:end markers")
