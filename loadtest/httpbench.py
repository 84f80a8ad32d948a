"""The HTTP/JSON API against gRPC, side by side in one run.

``python -m loadtest.httpbench [--clients 1,8,32] [--beams 1,5] [--rounds 3] --out PREFIX``

One in-process server on the committed repository (CPU) serves both its gRPC port and
its HTTP port (``--http-port``, ``service/httpapi.py``). Closed-loop clients in a child
process (:class:`loadtest.clients.ClientProcess`) send one sentence a request, the same
sentences over each transport: gRPC through :class:`nmt_client.Translator`, HTTP through
a keep-alive ``http.client`` connection per client POSTing ``/v1/translate``. Within a
round the two alternate level by level, the order swapped every round. Per level it
reports sentences/s and p50 (the median over the rounds), the server's CPU per sentence
(this process's CPU time: the server runs here, the clients elsewhere) and how many best
translations equal gRPC's. Writes ``PREFIX.json`` and ``PREFIX.md``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from loadtest.concurrency import (
    DEFAULT_SENTENCES,
    HTTP_SCHEME,
    int_list,
    read_sentences_arg,
    start_server,
    strategy_name,
)
from loadtest.machine import cpu_name
from loadtest.outputs import write_result
from nmt_client import DecodeOptions

TRANSPORTS = ("grpc", "http")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest.httpbench", description=__doc__)
    p.add_argument("--clients", default="1,8,32", help="concurrent clients per level")
    p.add_argument("--beams", default="1,5", help="beam sizes (1: greedy)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--sentences", type=int, default=300, help="sentences per level")
    p.add_argument("--file", type=Path, default=DEFAULT_SENTENCES, help="one sentence a line")
    p.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.md")
    args = p.parse_args(argv)
    args.clients = int_list(p, "--clients", args.clients)
    args.beams = int_list(p, "--beams", args.beams)
    if args.rounds < 1 or args.sentences < 1:
        p.error("--rounds and --sentences must be >= 1")
    args.texts = read_sentences_arg(p, args.file, args.sentences)
    return args


def summarize(runs: list[dict], texts: dict) -> list[dict]:
    """Per strategy, clients and transport: the medians over the rounds, the ratio of
    HTTP's sentences/s to gRPC's, and the best translations that equal gRPC's."""
    out = []
    keys = sorted({(r["strategy"], r["clients"]) for r in runs}, key=lambda k: (k[0], k[1]))
    for strategy, clients in keys:
        row: dict = {"strategy": strategy, "clients": clients}
        for transport in TRANSPORTS:
            mine = [
                r
                for r in runs
                if (r["strategy"], r["clients"], r["transport"]) == (strategy, clients, transport)
            ]
            row[f"{transport}_sentences_per_s"] = statistics.median(
                r["sentences_per_s"] for r in mine
            )
            row[f"{transport}_p50_ms"] = statistics.median(r["p50_ms"] for r in mine)
            row[f"{transport}_server_cpu_ms"] = statistics.median(
                r["server_cpu_ms_per_sentence"] for r in mine
            )
            row[f"{transport}_client_cpu_ms"] = statistics.median(
                1000 * r["client_cpu_s"] / max(r["sentences"], 1) for r in mine
            )
            row[f"{transport}_errors"] = sum(r["errors"] for r in mine)
        row["http_over_grpc"] = round(row["http_sentences_per_s"] / row["grpc_sentences_per_s"], 3)
        grpc_texts = texts[(strategy, clients, "grpc")]
        http_texts = texts[(strategy, clients, "http")]
        row["same_best"] = sum(
            a == b and a != "" for a, b in zip(grpc_texts, http_texts, strict=True)
        )
        row["sentences"] = len(grpc_texts)
        out.append(row)
    return out


def markdown(result: dict) -> str:
    lines = [
        f"# HTTP/JSON API against gRPC ({result['date']})",
        "",
        f"`{result['command']}`",
        "",
        f"Machine: {result['machine']}",
        "",
        "Medians over the rounds. CPU: milliseconds per sentence, of the server's process and",
        "of the client process (both on this machine's cores).",
        "",
        "| strategy | clients | gRPC sent./s | HTTP sent./s | HTTP/gRPC | gRPC p50 ms "
        "| HTTP p50 ms | server CPU gRPC / HTTP | client CPU gRPC / HTTP | same best "
        "| errors |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["summary"]:
        lines.append(
            f"| {r['strategy']} | {r['clients']} | {r['grpc_sentences_per_s']:.1f} "
            f"| {r['http_sentences_per_s']:.1f} | {r['http_over_grpc']:.2f}x "
            f"| {r['grpc_p50_ms']:.1f} | {r['http_p50_ms']:.1f} "
            f"| {r['grpc_server_cpu_ms']:.2f} / {r['http_server_cpu_ms']:.2f} "
            f"| {r['grpc_client_cpu_ms']:.2f} / {r['http_client_cpu_ms']:.2f} "
            f"| {r['same_best']}/{r['sentences']} | {r['grpc_errors'] + r['http_errors']} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from loadtest.clients import ClientProcess

    server, grpc_target = start_server(http_port=0)
    targets = {"grpc": grpc_target, "http": f"{HTTP_SCHEME}127.0.0.1:{server.http_port}"}
    runs: list[dict] = []
    texts: dict = {}
    try:
        with ClientProcess() as clients_process:
            for round_ in range(args.rounds):
                order = TRANSPORTS if round_ % 2 == 0 else TRANSPORTS[::-1]
                for beam in args.beams:
                    options = DecodeOptions(beam_size=beam, return_scores=False)
                    for clients in args.clients:
                        for transport in order:
                            cpu = time.process_time()
                            level, best = clients_process.run_level(
                                targets[transport], args.texts, clients, options
                            )
                            cpu = time.process_time() - cpu
                            level |= {
                                "transport": transport,
                                "round": round_,
                                "server_cpu_ms_per_sentence": round(
                                    1000 * cpu / max(level["sentences"], 1), 3
                                ),
                            }
                            runs.append(level)
                            texts.setdefault((strategy_name(beam), clients, transport), best)
                            print(
                                f"round {round_} {level['strategy']} {clients} clients "
                                f"{transport}: {level['sentences_per_s']} sentences/s, "
                                f"p50 {level['p50_ms']} ms",
                                file=sys.stderr,
                            )
    finally:
        server.stop(0)
    result = {
        "date": date.today().isoformat(),
        "command": "python -m loadtest.httpbench "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "summary": summarize(runs, texts),
        "runs": runs,
    }
    report = markdown(result)
    write_result(args.out, result, report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
