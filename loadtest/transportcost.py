"""What a call costs the server in transport alone: gRPC (``grpc.aio``) against the
HTTP/JSON API (aiohttp), with no model, side by side in one run.

``python -m loadtest.transportcost [--clients 1,32] [--rounds 3] --out PREFIX``

Three servers with no model run in this process, on one event loop thread
(``transport-loop``), each answering ``Translate`` with every sentence as its own one-best
translation (replies as large as real ones), as ``nmt-serve`` registers its methods:

* ``grpc-stream``: a ``grpc.aio`` handler with a streaming request side and raw bytes,
  the request read under a timeout and parsed by hand (``service/servicer.py``);
* ``grpc-unary``: the same as a plain unary-unary handler (what a servicer without the
  receive timeout would register);
* ``http``: aiohttp's low-level server, the request and reply in proto3's JSON mapping
  (``service/httpapi.py``).

Closed-loop clients in a child process (:class:`loadtest.clients.ClientProcess`) load one
server at a time, the servers' order rotated every round. Per server and client count it
reports calls/s and the server's CPU per call by thread: the event loop (handlers,
protobuf or JSON, and gRPC's compiled asyncio code), gRPC's completion-queue poller
thread, and native threads (gRPC's C core). Writes ``PREFIX.json`` and ``PREFIX.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import threading
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import grpc
from google.protobuf import json_format

from loadtest.clients import ClientProcess, echo_reply
from loadtest.concurrency import DEFAULT_SENTENCES, HTTP_SCHEME, int_list, read_sentences_arg
from loadtest.machine import cpu_name
from loadtest.outputs import write_result
from loadtest.threadcpu import breakdown, snapshot
from nmt_api import SERVICE_NAME
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_client import DecodeOptions

SERVERS = ("grpc-stream", "grpc-unary", "http")
LOOP_THREAD = "transport-loop"
RECEIVE_SECONDS = 30.0


def thread_group(name: str | None) -> str:
    """Where a thread's CPU goes: the servers' event loop, gRPC's poller, the rest."""
    if name is None:
        return "native"  # gRPC's C-core threads
    if name.startswith(LOOP_THREAD):
        return "loop"
    if "_poll_wrapper" in name:
        return "poller"  # grpc.aio's completion-queue thread
    return "other"


async def _stream_call(requests, context) -> bytes:
    async with asyncio.timeout(RECEIVE_SECONDS):
        raw = await anext(requests)
    return echo_reply(pb.TranslateRequest.FromString(raw)).SerializeToString()


async def _unary_call(raw: bytes, context) -> bytes:
    return echo_reply(pb.TranslateRequest.FromString(raw)).SerializeToString()


async def _grpc_server(handler) -> tuple[grpc.aio.Server, int]:
    server = grpc.aio.server()
    methods = grpc.method_handlers_generic_handler(SERVICE_NAME, {"Translate": handler})
    server.add_generic_rpc_handlers([methods])
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    return server, port


async def _http_server():
    from aiohttp import web

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        message = json_format.Parse(await request.read(), pb.TranslateRequest())
        fields = json_format.MessageToDict(echo_reply(message), preserving_proto_field_name=True)
        body = json.dumps(fields, ensure_ascii=False, separators=(",", ":")).encode()
        return web.Response(body=body, content_type="application/json")

    runner = web.ServerRunner(web.Server(handle, access_log=None))
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


class Servers:
    """The three servers on one event loop thread: ``targets`` by name; :meth:`stop`."""

    def __init__(self) -> None:
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self._loop.run_forever, name=LOOP_THREAD, daemon=True
        )
        self._thread.start()
        stream = grpc.stream_unary_rpc_method_handler(_stream_call)
        unary = grpc.unary_unary_rpc_method_handler(_unary_call)
        self._grpc = [self._run(_grpc_server(h)) for h in (stream, unary)]
        self._http = self._run(_http_server())
        self.targets = {
            "grpc-stream": f"127.0.0.1:{self._grpc[0][1]}",
            "grpc-unary": f"127.0.0.1:{self._grpc[1][1]}",
            "http": f"{HTTP_SCHEME}127.0.0.1:{self._http[1]}",
        }

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(60)

    def stop(self) -> None:
        for server, _ in self._grpc:
            self._run(server.stop(0))
        self._run(self._http[0].cleanup())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m loadtest.transportcost", description=__doc__)
    p.add_argument("--clients", default="1,32", help="concurrent clients per level")
    p.add_argument("--rounds", type=int, default=3, help="rounds, the servers' order rotated")
    p.add_argument("--sentences", type=int, default=2000, help="calls per level")
    p.add_argument("--file", type=Path, default=DEFAULT_SENTENCES, help="one sentence a line")
    p.add_argument("--out", type=Path, required=True, help="writes OUT.json and OUT.md")
    args = p.parse_args(argv)
    args.clients = int_list(p, "--clients", args.clients)
    if args.rounds < 1 or args.sentences < 1:
        p.error("--rounds and --sentences must be >= 1")
    texts = read_sentences_arg(p, args.file, args.sentences)
    args.texts = (texts * (args.sentences // len(texts) + 1))[: args.sentences]
    return args


def summarize(runs: list[dict]) -> list[dict]:
    """Medians over the rounds per client count and server."""
    out = []
    for clients in sorted({r["clients"] for r in runs}):
        for server in SERVERS:
            mine = [r for r in runs if (r["clients"], r["server"]) == (clients, server)]
            row = {"clients": clients, "server": server, "errors": sum(r["errors"] for r in mine)}
            row["calls_per_s"] = statistics.median(r["sentences_per_s"] for r in mine)
            for key in ("total", "loop", "poller", "native", "other"):
                row[f"cpu_ms_{key}"] = statistics.median(r["cpu_ms"].get(key, 0.0) for r in mine)
            row["client_cpu_ms"] = statistics.median(
                1000 * r["client_cpu_s"] / max(r["sentences"], 1) for r in mine
            )
            out.append(row)
    return out


def markdown(result: dict) -> str:
    lines = [
        f"# What a call costs the server in transport alone ({result['date']})",
        "",
        f"`{result['command']}`",
        "",
        f"Machine: {result['machine']}. Servers with no model, one at a time; medians over "
        "the rounds. Server CPU in ms per call, by thread: the event loop, gRPC's poller, "
        "native threads (gRPC's C core); the client process's CPU beside it.",
        "",
        "| clients | server | calls/s | server CPU | loop | poller | native | other "
        "| client CPU | errors |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in result["summary"]:
        lines.append(
            f"| {r['clients']} | {r['server']} | {r['calls_per_s']:.0f} "
            f"| {r['cpu_ms_total']:.3f} | {r['cpu_ms_loop']:.3f} | {r['cpu_ms_poller']:.3f} "
            f"| {r['cpu_ms_native']:.3f} | {r['cpu_ms_other']:.3f} "
            f"| {r['client_cpu_ms']:.3f} | {r['errors']} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    servers = Servers()
    runs: list[dict] = []
    options = DecodeOptions(return_scores=False)
    try:
        with ClientProcess() as clients_process:
            for round_ in range(args.rounds):
                order = SERVERS[round_ % 3 :] + SERVERS[: round_ % 3]
                for clients in args.clients:
                    for server in order:
                        before = snapshot(thread_group)
                        level, _ = clients_process.run_level(
                            servers.targets[server], args.texts, clients, options
                        )
                        cpu = breakdown(before, snapshot(thread_group), level["sentences"])
                        level |= {"server": server, "round": round_, "cpu_ms": cpu}
                        runs.append(level)
                        print(
                            f"round {round_} {clients} clients {server}: "
                            f"{level['sentences_per_s']} calls/s, {cpu['total']} ms CPU a call",
                            file=sys.stderr,
                        )
    finally:
        servers.stop()
    result = {
        "date": date.today().isoformat(),
        "command": "python -m loadtest.transportcost "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores",
        "summary": summarize(runs),
        "runs": runs,
    }
    text = markdown(result)
    write_result(args.out, result, text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
