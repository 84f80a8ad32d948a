"""Closed-loop benchmark clients in processes of their own, and a no-model gRPC server.

Clients of a real deployment never share the server's process. Client threads in the
server's process take the server's GIL for every request they build and every reply
they parse, so the benchmark runs them in child processes: the server keeps its own
interpreter and the machine's cores are shared the way they would be with local
clients. The children's CPU time is measured and reported beside the server's.

:class:`NoopTranslator` answers ``Translate`` without any model. The same clients
against it measure what gRPC in Python carries on this machine with no translation work
at all: the ceiling of any one-sentence-per-request throughput figure.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ThreadPoolExecutor

import grpc

from loadtest.concurrency import CONNECTION_MODES, closed_loop, summarize
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from nmt_client import DecodeOptions

CHILD_START_TIMEOUT = 120.0  # seconds for a spawned client process to import and report


def _client_main(conn, counter) -> None:
    """A client process: for each level the parent sends (target, sentences, clients,
    options), it says it is ready, waits for "go", runs its clients over the sentences
    the processes share (``counter``: the next index) and sends back the loop, the
    ``(index, best text)`` of the sentences it sent and its CPU seconds. ``None`` ends it."""

    def take() -> int:
        with counter.get_lock():
            i = counter.value
            counter.value += 1
        return i

    while (level := conn.recv()) is not None:
        target, sentences, clients, options, connections = level
        texts: list[str | None] = [None] * len(sentences)
        conn.send("ready")
        conn.recv()  # go
        cpu = time.process_time()
        loop = closed_loop(
            target, sentences, clients, options, outputs=texts, take=take, connections=connections
        )
        done = [(i, t) for i, t in enumerate(texts) if t is not None]
        conn.send((loop, done, time.process_time() - cpu))


class ClientProcess:
    """Child processes (spawned, so no server state is forked into them) that run
    closed-loop client levels on request. Use as a context manager.

    With ``processes`` > 1 a level's clients are dealt out over that many processes
    (never more than there are clients), which take the next sentence from one shared
    counter: one Python process tops out at a few thousand requests a second whatever
    the server does, which a GPU server can exceed. The processes start with the object
    and a level starts them all at once, when every one has its share ready.
    """

    def __init__(self, processes: int = 1, *, connections: str = "process") -> None:
        """``connections``: see :func:`loadtest.concurrency.closed_loop`."""
        if processes < 1:
            raise ValueError(f"client processes must be >= 1, got {processes}")
        if connections not in CONNECTION_MODES:
            raise ValueError(f"connections must be one of {list(CONNECTION_MODES)}")
        self.processes = processes
        self.connections = connections
        ctx = multiprocessing.get_context("spawn")
        self._counter = ctx.Value("q", 0)
        self._children = []
        for _ in range(processes):
            parent, child = ctx.Pipe()
            process = ctx.Process(target=_client_main, args=(child, self._counter), daemon=True)
            process.start()
            self._children.append((process, parent))

    def run_level(
        self, target: str, sentences: list[str], clients: int, options: DecodeOptions
    ) -> tuple[dict, list[str]]:
        """All ``sentences`` through ``clients`` closed-loop clients in the child
        processes; returns the level's numbers (:func:`loadtest.concurrency.summarize`,
        with ``client_cpu_s``: the children's CPU seconds, and ``client_processes``) and
        the best translation of every sentence, in order ("" for one that failed)."""
        if not self._children:
            raise RuntimeError("the client processes were stopped")
        shares = max(1, min(self.processes, clients))
        active = self._children[:shares]
        with self._counter.get_lock():
            self._counter.value = 0
        try:
            for k, (_, conn) in enumerate(active):
                share = clients // shares + (k < clients % shares)
                level = (target, list(sentences), share, options, self.connections)
                _send(active[k][0], conn, level)
            for process, conn in active:
                _receive(process, conn, CHILD_START_TIMEOUT)  # "ready"
            for process, conn in active:
                _send(process, conn, "go")
            done = [_receive(process, conn, None) for process, conn in active]
        except BaseException:
            # the others may be mid-level, waiting for a "go" that will not come
            self.close(kill=True)
            raise
        texts = [""] * len(sentences)
        for _, pairs, _ in done:
            for i, text in pairs:
                texts[i] = text
        level = summarize(clients, options, [loop for loop, _, _ in done])
        level["client_cpu_s"] = round(sum(cpu for _, _, cpu in done), 4)
        level["client_processes"] = shares
        return level, texts

    def close(self, *, kill: bool = False) -> None:
        """End the processes (``kill``: at once, whatever they are doing)."""
        for process, conn in self._children:
            if process.is_alive() and not kill:
                conn.send(None)
        for process, _ in self._children:
            process.join(0 if kill else 10)
            if process.is_alive():
                process.kill()
                process.join()
        self._children = []

    def __enter__(self) -> ClientProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _send(process, conn, message) -> None:
    try:
        conn.send(message)
    except OSError:  # its end of the pipe is gone
        process.join(1)
        raise RuntimeError(f"a client process died (exit code {process.exitcode})") from None


def _receive(process, conn, timeout: float | None):
    """The child's next message; a child that dies first (or says nothing within
    ``timeout`` seconds) fails the level in one line instead of hanging it."""
    waited = 0.0
    while not conn.poll(1.0):
        waited += 1.0
        if not process.is_alive():
            raise RuntimeError(f"a client process died (exit code {process.exitcode})")
        if timeout is not None and waited >= timeout:
            raise RuntimeError(f"a client process did not answer within {timeout:.0f} s")
    return conn.recv()


def echo_reply(request: pb.TranslateRequest) -> pb.TranslateResponse:
    """The answer of a server with no model: each sentence as its own one-best hypothesis
    (text and whitespace tokens), so replies are as large as real ones."""
    reply = pb.TranslateResponse(model="noop")
    for text in request.texts:
        words = text.split()
        translation = reply.translations.add(source_tokens=len(words))
        translation.hypotheses.add(text=text, tokens=words)
    return reply


class NoopTranslator(pb_grpc.TranslatorServicer):
    """``Translate`` with no model (:func:`echo_reply`)."""

    def Translate(self, request: pb.TranslateRequest, context) -> pb.TranslateResponse:  # noqa: N802
        return echo_reply(request)


def start_noop_server(*, workers: int = 128) -> tuple[grpc.Server, str]:
    """A started :class:`NoopTranslator` server on a free 127.0.0.1 port with the same
    handler pool size as ``nmt-serve``: ``(server, "127.0.0.1:PORT")``."""
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc"))
    pb_grpc.add_TranslatorServicer_to_server(NoopTranslator(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"
