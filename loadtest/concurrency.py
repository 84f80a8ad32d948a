"""Measure the service at several client concurrencies, side by side in one run.

``python -m loadtest.concurrency [--server HOST:PORT] [--clients 1,8,32] [--sentences N]``

Without ``--server`` it starts an in-process server on the committed model repository
(127.0.0.1, a free port). The client threads run in child processes
(:class:`loadtest.clients.ClientProcess`), so they never share the server's GIL. Each
sends one sentence per request, in a closed loop, over its own channel; every
concurrency level translates the same sentences. Prints a markdown table and writes
JSON with ``--json``.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from nmt_client import DecodeOptions, Translator, TranslatorError

DEFAULT_SENTENCES = (
    Path(__file__).resolve().parent.parent / "models" / "pretrained" / "en-es" / "test.en"
)


def read_sentences_arg(p: argparse.ArgumentParser, path: Path, count: int) -> list[str]:
    """The first ``count`` non-blank lines of ``--file path``; an unreadable or empty file
    is a one-line ``p.error``."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        p.error(f"--file {path}: {getattr(exc, 'strerror', None) or exc}")
    texts = [line for line in lines if line.strip()][:count]
    if not texts:
        p.error(f"--file {path} has no sentences (no non-blank lines)")
    return texts


def int_list(p: argparse.ArgumentParser, flag: str, text: str) -> list[int]:
    """``flag``'s comma-separated integers (each >= 1); anything else is a one-line
    ``p.error``."""
    try:
        values = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        p.error(f"{flag} takes comma-separated integers, got {text!r}")
    if not values or min(values) < 1:
        p.error(f"{flag} takes integers >= 1, got {text!r}")
    return values


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    k = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[k]


@dataclass
class LoopResult:
    """What one closed loop measured: per-sentence latencies (seconds), target tokens of
    the best hypotheses (EOS included), failed calls, and its start and end on the wall
    clock (``time.time()``, comparable across processes)."""

    latencies: list[float] = field(default_factory=list)
    tokens: int = 0
    errors: int = 0
    start: float = 0.0
    end: float = 0.0
    # the server's own timing of each answered request (nmt.v1.Timing), summed in ms:
    # queue, encode, decode, total (see summarize)
    server_ms: dict[str, float] = field(default_factory=dict)


CONNECTION_MODES = ("process", "client")
# The parts of a request's time its reply reports (nmt.v1.Timing): waiting in the engine's
# queue, in encoder calls, decoding (from admission to the last sentence's end, encoder
# calls left out: waiting to join the decode loop included), and all three together
# (from the front end's submission to the engine's last step for it).
SERVER_TIMES = ("queue", "encode", "decode", "total")


def closed_loop(
    target: str,
    sentences: list[str],
    clients: int,
    options: DecodeOptions,
    *,
    outputs: list[str | None] | None = None,
    take: Callable[[], int] | None = None,
    connections: str = "process",
) -> LoopResult:
    """All ``sentences`` through ``clients`` concurrent closed-loop clients, each a
    :class:`nmt_client.Translator` of its own that never retries (a failed call counts
    as an error).

    With ``outputs`` (a list as long as ``sentences``) the best translation of sentence
    ``i`` is stored at ``outputs[i]``. ``take()``: the index of the next sentence to
    send (default: 0, 1, 2, ... within this loop; loops in several processes share one
    counter, :class:`loadtest.clients.ClientProcess`); an index past the end stops a
    client. ``connections``: ``process``, the clients' channels share one TCP connection
    (gRPC's global subchannel pool: what a program with several channels to one target
    gets), or ``client``, one connection each (as separate programs or hosts have; what
    ``SO_REUSEPORT`` spreads over several server processes, ``--frontends``).

    A ``target`` of the form ``http://HOST:PORT`` is the server's HTTP/JSON API
    (``--http-port``): each client POSTs ``/v1/translate`` over a keep-alive connection
    of its own (:class:`HttpTranslate`).
    """
    if connections not in CONNECTION_MODES:
        raise ValueError(f"connections must be one of {list(CONNECTION_MODES)}")
    channel_options = [("grpc.use_local_subchannel_pool", 1)] if connections == "client" else []
    result = LoopResult()
    lock = threading.Lock()
    if take is None:
        counter = itertools.count()

        def take() -> int:
            with lock:
                return next(counter)

    def client():
        if target.startswith(HTTP_SCHEME):
            return HttpTranslate(target, options)
        return Translator(target, timeout=60, retries=0, channel_options=channel_options)

    def worker() -> None:
        with client() as translator:
            while True:
                i = take()
                if i >= len(sentences):
                    return
                start = time.perf_counter()
                try:
                    (reply,) = translator.translate([sentences[i]], options=options)
                except (TranslatorError, HttpFailed):
                    with lock:
                        result.errors += 1
                    continue
                elapsed = time.perf_counter() - start
                best = reply.best
                timing = reply.timing
                with lock:
                    result.latencies.append(elapsed)
                    result.tokens += len(best.tokens) + 1
                    if outputs is not None:
                        outputs[i] = best.text
                    if timing is not None:
                        for name in SERVER_TIMES:
                            ms = getattr(timing, f"{name}_ms")
                            result.server_ms[name] = result.server_ms.get(name, 0.0) + ms

    threads = [threading.Thread(target=worker) for _ in range(clients)]
    result.start = time.time()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    result.end = time.time()
    return result


HTTP_SCHEME = "http://"


class HttpFailed(Exception):
    """An HTTP call that did not answer 200."""


class HttpTranslate:
    """A benchmark client of the HTTP/JSON API: ``translate(texts, options=)`` as
    :class:`nmt_client.Translator` answers it (``TranslationResult`` objects), over one
    keep-alive connection. The options are fixed at construction, their JSON built once
    (outside the client CPU a benchmark measures); ``translate`` takes the same options
    only to stand in for a ``Translator``, and refuses others."""

    def __init__(self, target: str, options: DecodeOptions) -> None:
        import http.client

        from google.protobuf import json_format

        host, _, port = target.removeprefix(HTTP_SCHEME).rstrip("/").rpartition(":")
        self._conn = http.client.HTTPConnection(host, int(port), timeout=60)
        self.options = options
        self._options = json_format.MessageToDict(
            options.to_proto(), preserving_proto_field_name=True
        )

    def translate(self, texts: list[str], *, options: DecodeOptions):
        import http.client

        from google.protobuf import json_format

        from nmt_api.nmt.v1 import translator_pb2 as pb
        from nmt_client.results import results_from_proto

        if options != self.options:
            raise ValueError("HttpTranslate sends the options it was made with; make another")
        body = json.dumps({"texts": texts, "options": self._options})
        try:
            self._conn.request("POST", "/v1/translate", body=body)
            response = self._conn.getresponse()
            data = response.read()
        except (OSError, http.client.HTTPException) as exc:
            self._conn.close()  # reconnects on the next request
            raise HttpFailed(str(exc)) from None
        if response.status != 200:
            raise HttpFailed(f"HTTP {response.status}: {data[:200]!r}")
        reply = json_format.Parse(data, pb.TranslateResponse())
        return results_from_proto(texts, reply, scores=options.return_scores)

    def __enter__(self) -> HttpTranslate:
        return self

    def __exit__(self, *exc) -> None:
        self._conn.close()


def strategy_name(beam: int) -> str:
    """The name a benchmark gives a beam size: ``greedy`` (1) or ``beamN``."""
    return "greedy" if beam == 1 else f"beam{beam}"


def beam_of(strategy: str) -> int:
    """The beam size a benchmark's strategy name stands for (ValueError for no such name)."""
    return 1 if strategy == "greedy" else int(strategy.removeprefix("beam"))


def summarize(clients: int, options: DecodeOptions, loops: Sequence[LoopResult]) -> dict:
    """One level's numbers from the closed loops that ran it side by side (one per client
    process): throughput over the wall time from the first start to the last end."""
    latencies = [x for loop in loops for x in loop.latencies]
    mean = statistics.fmean(latencies) if latencies else None
    tokens = sum(loop.tokens for loop in loops)
    wall = max(loop.end for loop in loops) - min(loop.start for loop in loops)
    return {
        "clients": clients,
        "strategy": strategy_name(options.beam_size or 1),
        "sentences": len(latencies),
        "errors": sum(loop.errors for loop in loops),
        "seconds": round(wall, 4),
        "sentences_per_s": round(len(latencies) / wall, 2),
        "tokens_per_s": round(tokens / wall, 1),
        "p50_ms": round(1000 * percentile(latencies, 50), 1),
        "p95_ms": round(1000 * percentile(latencies, 95), 1),
        "p99_ms": round(1000 * percentile(latencies, 99), 1),
        "mean_ms": round(1000 * mean, 1) if mean is not None else None,
        **server_times(loops, len(latencies), mean),
    }


def server_times(loops: Sequence[LoopResult], answered: int, mean: float | None) -> dict:
    """Mean milliseconds per request of each :data:`SERVER_TIMES` part (``server_*_ms``)
    over the ``answered`` requests, and of the rest of their ``mean`` latency (seconds;
    ``outside_engine_ms``: gRPC both ways, the front end's tokenising, rendering and
    replying, the pipe to an engine process and back, the client itself); empty when the
    replies carried no timing."""
    if not answered or mean is None or not all(loop.server_ms for loop in loops):
        return {}
    out = {
        f"server_{name}_ms": round(sum(loop.server_ms[name] for loop in loops) / answered, 2)
        for name in SERVER_TIMES
    }
    out["outside_engine_ms"] = round(1000 * mean - out["server_total_ms"], 2)
    return out


def start_server(
    model_repository: Path | None = None,
    *,
    intra_op_threads: int = 0,
    registry=None,
    providers: tuple[str, ...] = ("cpu",),
    io_binding: str = "auto",
    engine_process: str = "auto",
    frontends: int = 1,
    max_inflight: int | None = None,
    max_queue: int | None = None,
    decode_lanes: int | None = None,
    max_live_rows: int | None = None,
    cuda_graphs: str = "auto",
    encoder_thread: bool | None = None,
    greedy_steps: int | None = None,
    http_port: int = -1,
):
    """Start and warm up an in-process server on a free 127.0.0.1 port (no metrics
    endpoint; the CUDA provider is required when listed first); returns
    ``(server, "127.0.0.1:PORT")``. ``model_repository`` defaults to the server's own;
    ``max_inflight`` (per gRPC process), ``max_queue``, ``decode_lanes`` and
    ``max_live_rows``: the server's own when None; ``encoder_thread``: the engine's
    ``background_encoder`` (the server's own when None); ``greedy_steps``: the runtime's
    (its default when None); ``http_port``: the HTTP/JSON API's (0: a free port; the
    server's ``http_port`` then says which)."""
    from service.calls import RpcConfig
    from service.limits import EngineConfig
    from service.server import ServerConfig, create_server
    from service.sessions import RuntimeConfig

    extra: dict = {} if model_repository is None else {"model_repository": Path(model_repository)}
    if max_inflight is not None:
        extra["rpc"] = RpcConfig(max_inflight=max_inflight)
    engine = {
        "max_queue": max_queue,
        "decode_lanes": decode_lanes,
        "max_live_rows": max_live_rows,
        "background_encoder": encoder_thread,
    }
    engine = {k: v for k, v in engine.items() if v is not None}
    if engine:
        extra["engine"] = EngineConfig(**engine)
    server, port = create_server(
        ServerConfig(
            host="127.0.0.1",
            port=0,
            metrics_port=-1,
            runtime=RuntimeConfig(
                providers=providers,
                intra_op_threads=intra_op_threads,
                require_gpu=providers[0] == "cuda",
                io_binding=io_binding,
                cuda_graphs=cuda_graphs,
                **({} if greedy_steps is None else {"greedy_steps": greedy_steps}),
            ),
            engine_process=engine_process,
            frontends=frontends,
            http_port=http_port,
            **extra,
        ),
        registry=registry,
    )
    server.start()
    server.warm_up()
    return server, f"127.0.0.1:{port}"


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default=None, help="HOST:PORT (default: start one in-process)")
    p.add_argument("--clients", default="1,8,32")
    p.add_argument("--beams", default="1", help="comma-separated beam sizes, 1 = greedy")
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--file", type=Path, default=DEFAULT_SENTENCES)
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--client-processes", type=int, default=1, help="processes the clients share")
    args = p.parse_args(argv)
    if args.client_processes < 1:
        p.error(f"--client-processes must be >= 1, got {args.client_processes}")
    sentences = [s for s in args.file.read_text(encoding="utf-8").splitlines() if s.strip()]
    sentences = sentences[: args.sentences]
    server = None
    target = args.server
    if target is None:
        server, target = start_server()
    from loadtest.clients import ClientProcess

    rows = []
    try:
        with ClientProcess(args.client_processes) as client_process:
            for beam in (int(b) for b in args.beams.split(",")):
                options = DecodeOptions(beam_size=beam, return_scores=False)
                for clients in (int(c) for c in args.clients.split(",")):
                    level, _ = client_process.run_level(target, sentences, clients, options)
                    rows.append(level)
    finally:
        if server is not None:
            server.stop(0)
    print("| strategy | clients | sentences/s | tokens/s | p50 ms | p95 ms | p99 ms | errors |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['strategy']} | {r['clients']} | {r['sentences_per_s']} | {r['tokens_per_s']} "
            f"| {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | {r['errors']} |"
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
