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
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import grpc

from loadtest.concurrency import LoopResult, closed_loop, summarize
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from nmt_client import DecodeOptions


def _closed_loop_child(
    target: str, sentences: list[str], clients: int, options: DecodeOptions
) -> tuple[LoopResult, list[str], float]:
    """:func:`closed_loop` in a child: what it measured, each sentence's best text, and
    the child's CPU seconds."""
    texts = [""] * len(sentences)
    cpu = time.process_time()
    loop = closed_loop(target, sentences, clients, options, outputs=texts)
    return loop, texts, time.process_time() - cpu


class ClientProcess:
    """Child processes (spawned, so no server state is forked into them) that run
    closed-loop client levels on request. Use as a context manager.

    With ``processes`` > 1 a level's clients and sentences are dealt out over that many
    processes (never more than there are clients), which run side by side: one Python
    process tops out at a few thousand requests a second whatever the server does, which
    a GPU server can exceed."""

    def __init__(self, processes: int = 1) -> None:
        if processes < 1:
            raise ValueError(f"client processes must be >= 1, got {processes}")
        self.processes = processes
        context = multiprocessing.get_context("spawn")
        self._pool = ProcessPoolExecutor(processes, mp_context=context)

    def run_level(
        self, target: str, sentences: list[str], clients: int, options: DecodeOptions
    ) -> tuple[dict, list[str]]:
        """All ``sentences`` through ``clients`` closed-loop clients in the child
        processes; returns the level's numbers (:func:`loadtest.concurrency.summarize`,
        with ``client_cpu_s``: the children's CPU seconds) and the best translation of
        every sentence, in order."""
        shares = min(self.processes, clients, len(sentences)) or 1
        futures = [
            self._pool.submit(
                _closed_loop_child,
                target,
                list(sentences[k::shares]),
                clients // shares + (k < clients % shares),
                options,
            )
            for k in range(shares)
        ]
        done = [f.result() for f in futures]
        texts = [""] * len(sentences)
        for k, (_, share, _) in enumerate(done):
            texts[k::shares] = share
        level = summarize(clients, options, [loop for loop, _, _ in done])
        level["client_cpu_s"] = round(sum(cpu for _, _, cpu in done), 4)
        level["client_processes"] = shares
        return level, texts

    def close(self) -> None:
        self._pool.shutdown()

    def __enter__(self) -> ClientProcess:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class NoopTranslator(pb_grpc.TranslatorServicer):
    """``Translate`` with no model: each sentence comes back as its own one-best
    hypothesis (text and whitespace tokens), so replies are as large as real ones."""

    def Translate(self, request: pb.TranslateRequest, context) -> pb.TranslateResponse:  # noqa: N802
        reply = pb.TranslateResponse(model="noop")
        for text in request.texts:
            words = text.split()
            translation = reply.translations.add(source_tokens=len(words))
            translation.hypotheses.add(text=text, tokens=words)
        return reply


def start_noop_server(*, workers: int = 128) -> tuple[grpc.Server, str]:
    """A started :class:`NoopTranslator` server on a free 127.0.0.1 port with the same
    handler pool size as ``nmt-serve``: ``(server, "127.0.0.1:PORT")``."""
    server = grpc.server(ThreadPoolExecutor(max_workers=workers, thread_name_prefix="grpc"))
    pb_grpc.add_TranslatorServicer_to_server(NoopTranslator(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, f"127.0.0.1:{port}"
