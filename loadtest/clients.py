"""Closed-loop benchmark clients in a process of their own, and a no-model gRPC server.

Clients of a real deployment never share the server's process. Client threads in the
server's process take the server's GIL for every request they build and every reply
they parse, so the benchmark runs them in a child process: the server keeps its own
interpreter and the machine's cores are shared the way they would be with a local
client. The child's CPU time is measured and reported beside the server's.

:class:`NoopTranslator` answers ``Translate`` without any model. The same clients
against it measure what gRPC in Python carries on this machine with no translation work
at all: the ceiling of any one-sentence-per-request throughput figure.
"""

from __future__ import annotations

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

import grpc

from loadtest.concurrency import run_level
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_api.nmt.v1 import translator_pb2_grpc as pb_grpc
from nmt_client import DecodeOptions


def _run_level_child(
    target: str, sentences: list[str], clients: int, options: DecodeOptions
) -> tuple[dict, list[str]]:
    """:func:`run_level` in the child: the level's numbers, each sentence's best text, and
    the child's CPU time (``client_cpu_s``)."""
    texts = [""] * len(sentences)
    cpu = time.process_time()
    level = run_level(target, sentences, clients, options, outputs=texts)
    level["client_cpu_s"] = round(time.process_time() - cpu, 4)
    return level, texts


class ClientProcess:
    """One child process (spawned, so no server state is forked into it) that runs
    closed-loop client levels on request. Use as a context manager."""

    def __init__(self) -> None:
        self._pool = ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn"))

    def run_level(
        self, target: str, sentences: list[str], clients: int, options: DecodeOptions
    ) -> tuple[dict, list[str]]:
        """Like :func:`loadtest.concurrency.run_level`, in the child; returns the level
        (with ``client_cpu_s``) and the best translation of every sentence."""
        future = self._pool.submit(_run_level_child, target, list(sentences), clients, options)
        return future.result()

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
