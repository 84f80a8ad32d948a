"""Locust load test of the ``nmt.v1.Translator`` service, over gRPC or its HTTP/JSON API.

Headless run, 32 users for 60 s, statistics in /tmp/nmt_stats.csv (and _failures, _history):

    locust -f loadtest/locustfile.py --headless -u 32 -r 8 -t 60s \\
        --host 127.0.0.1:50051 --csv /tmp/nmt --only-summary

``--host`` is ``HOST:PORT`` (a ``grpc://`` prefix is accepted, ``grpcs://`` uses TLS with
the system roots), or ``http://HOST:PORT`` (``https://``) for the HTTP/JSON API
(``nmt-serve --http-port``): the same tasks, each a ``POST /v1/translate``. Each user
keeps one channel (one keep-alive connection) and loops over three weighted tasks:

* ``Translate greedy short`` (6): a sentence from the shorter half of the file, greedy;
* ``Translate beam5 long`` (3): a sentence from the longest quarter, beam 5 with scores;
* ``Translate beam5 attention`` (1): any sentence, beam 5, attention matrix returned.

A gRPC client interceptor times every RPC and fires Locust's ``request`` event named
after its task (over HTTP, Locust's own client does). ``RESOURCE_EXHAUSTED`` (the server's
overload answer: queue full or too many in flight; HTTP 429) is reported as ``<task>
[RESOURCE_EXHAUSTED]``, a row of its own, so overload is never mixed up with other
failures; an HTTP failure is reported by the gRPC status its error body names.

Options (flag, environment variable, default):

* ``--sentences``, ``NMT_SENTENCES``: one sentence per line; models/pretrained/en-es/test.en
  when it exists, else models/sample/sample.en;
* ``--model``, ``NMT_MODEL``: model name, empty for the server's default;
* ``--rpc-timeout``, ``NMT_RPC_TIMEOUT``: deadline of every RPC in seconds, 30;
* ``--think-time``, ``NMT_THINK_TIME``: seconds a user waits between RPCs, 0 (closed loop);
* ``--slo-max-fail-ratio``, ``NMT_SLO_MAX_FAIL_RATIO``: 0.01 (overload counts as failure);
* ``--slo-p95-ms``, ``NMT_SLO_P95_MS``: 2000 (all requests, milliseconds).

On exit the SLO check logs its verdict and sets the exit code: 0 when every threshold
holds, 1 when one is violated, no request was made or a task raised.
"""

from __future__ import annotations

import collections
import contextlib
import json
import logging
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from pathlib import Path
from typing import Any

import grpc
import grpc.experimental.gevent as grpc_gevent
from google.protobuf import json_format
from locust import User, events, task
from locust.contrib.fasthttp import FastHttpSession
from locust.env import Environment
from locust.runners import WorkerRunner

from nmt_api import TIMEOUT_HEADER
from nmt_client import DecodeOptions, Translator, TranslatorError

# Locust users are greenlets: gRPC must yield to gevent instead of blocking the process.
grpc_gevent.init_gevent()

log = logging.getLogger(__name__)

ROOT = Path(__file__).resolve().parent.parent
PRETRAINED_SENTENCES = ROOT / "models" / "pretrained" / "en-es" / "test.en"
SAMPLE_SENTENCES = ROOT / "models" / "sample" / "sample.en"
NAME_KEY = "x-locust-name"  # metadata the interceptor consumes; never sent to the server
OVERLOAD = grpc.StatusCode.RESOURCE_EXHAUSTED
OVERLOAD_SUFFIX = f" [{OVERLOAD.name}]"
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # attention matrices of long sentences are large
GREEDY_SHORT = "Translate greedy short"
BEAM_LONG = "Translate beam5 long"
BEAM_ATTENTION = "Translate beam5 attention"
# Each task's request options, by the name Locust reports it under.
TASKS = {
    GREEDY_SHORT: DecodeOptions(beam_size=1, return_scores=False),
    BEAM_LONG: DecodeOptions(beam_size=5),
    BEAM_ATTENTION: DecodeOptions(beam_size=5, return_attention=True),
}


def default_sentences() -> Path:
    return PRETRAINED_SENTENCES if PRETRAINED_SENTENCES.is_file() else SAMPLE_SENTENCES


@dataclass(frozen=True)
class Target:
    """Where Locust's ``--host`` points: ``HOST:PORT``, over TLS or not, by gRPC or HTTP."""

    address: str
    tls: bool
    http: bool

    @property
    def base_url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.address}"


def parse_target(host: str | None) -> Target:
    """The :class:`Target` of Locust's ``--host``: ``HOST:PORT``, ``grpc://`` or
    ``grpcs://HOST:PORT`` (gRPC), ``http://`` or ``https://HOST:PORT`` (the HTTP API)."""
    if not host:
        raise ValueError("give the server as --host HOST:PORT, e.g. --host 127.0.0.1:50051")
    scheme, _, rest = host.strip().rpartition("://")
    if scheme not in ("", "grpc", "grpcs", "http", "https"):
        raise ValueError(f"--host: unknown scheme {scheme!r}: use grpc, grpcs, http or https")
    address = rest.rstrip("/")
    if not re.fullmatch(r"[^\s/]+:\d+", address):
        raise ValueError(
            "--host must be HOST:PORT (optionally grpc://HOST:PORT, or http://HOST:PORT for "
            f"the HTTP API), got {host!r}"
        )
    return Target(address, tls=scheme in ("grpcs", "https"), http=scheme.startswith("http"))


@dataclass(frozen=True)
class Corpus:
    """Sentences of the load, split by length (whitespace words)."""

    all: tuple[str, ...]
    short: tuple[str, ...]
    long: tuple[str, ...]

    @classmethod
    def from_file(cls, path: Path) -> Corpus:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
        sentences = tuple(line for line in lines if line)
        if not sentences:
            raise ValueError(f"{path} has no sentences (one sentence per line expected)")
        ordered = sorted(sentences, key=lambda s: len(s.split()))
        half, quarter = max(1, len(ordered) // 2), max(1, len(ordered) // 4)
        return cls(sentences, tuple(ordered[:half]), tuple(ordered[-quarter:]))


class RpcFailure(Exception):
    """A failed RPC as Locust reports it: status code and details (numbers masked, so
    the failures table groups equal causes)."""

    def __init__(self, code: grpc.StatusCode, details: str | None) -> None:
        super().__init__(f"{code.name}: {re.sub(r'[0-9]+', 'N', details or '')}")
        self.code = code


class _CallDetails(
    collections.namedtuple(
        "_CallDetails",
        ("method", "timeout", "metadata", "credentials", "wait_for_ready", "compression"),
    ),
    grpc.ClientCallDetails,
):
    """The call's details with the interceptor's own metadata taken out."""


class LocustInterceptor(grpc.UnaryUnaryClientInterceptor):
    """Times every unary RPC and fires ``request`` on ``events``.

    The request's name is the ``x-locust-name`` metadata value (removed before the call)
    or the RPC method; RESOURCE_EXHAUSTED gets the `` [RESOURCE_EXHAUSTED]`` suffix.
    """

    def __init__(self, events_: Any) -> None:
        self.events = events_

    def intercept_unary_unary(
        self,
        continuation: Callable[[grpc.ClientCallDetails, Any], Any],
        client_call_details: grpc.ClientCallDetails,
        request: Any,
    ) -> Any:
        name = client_call_details.method
        metadata = []
        for key, value in client_call_details.metadata or ():
            if key == NAME_KEY:
                name = value
            else:
                metadata.append((key, value))
        details = _CallDetails(
            client_call_details.method,
            client_call_details.timeout,
            metadata or None,
            client_call_details.credentials,
            getattr(client_call_details, "wait_for_ready", None),
            getattr(client_call_details, "compression", None),
        )
        exception: RpcFailure | None = None
        length = 0
        start = time.perf_counter()
        outcome = continuation(details, request)
        try:
            length = outcome.result().ByteSize()
        except grpc.RpcError as exc:
            exception = RpcFailure(exc.code(), exc.details())
            if exception.code == OVERLOAD:
                name += OVERLOAD_SUFFIX
        self.events.request.fire(
            request_type="grpc",
            name=name,
            response_time=(time.perf_counter() - start) * 1000.0,
            response_length=length,
            response=None,
            context={},
            exception=exception,
        )
        return outcome


_corpus: Corpus | None = None


@events.init_command_line_parser.add_listener
def add_arguments(parser: Any) -> None:
    group = parser.add_argument_group("nmt translator")
    group.add_argument(
        "--sentences",
        env_var="NMT_SENTENCES",
        default=str(default_sentences()),
        help="file with one source sentence per line",
    )
    group.add_argument("--model", env_var="NMT_MODEL", default="", help="model name ('' = default)")
    group.add_argument("--rpc-timeout", type=float, env_var="NMT_RPC_TIMEOUT", default=30.0)
    group.add_argument("--think-time", type=float, env_var="NMT_THINK_TIME", default=0.0)
    group.add_argument(
        "--slo-max-fail-ratio", type=float, env_var="NMT_SLO_MAX_FAIL_RATIO", default=0.01
    )
    group.add_argument("--slo-p95-ms", type=float, env_var="NMT_SLO_P95_MS", default=2000.0)


def _option(environment: Environment, name: str, default: Any) -> Any:
    options = environment.parsed_options
    return default if options is None else getattr(options, name, default)


def option_problem(environment: Environment) -> str | None:
    """What is wrong with the numeric options, else None. (A NaN or a ratio above 1 meant
    as a percentage made the SLO gate pass a run whose every request failed.)"""
    checks = (
        ("rpc_timeout", "--rpc-timeout / NMT_RPC_TIMEOUT", "seconds > 0", lambda v: v > 0),
        ("think_time", "--think-time / NMT_THINK_TIME", "seconds >= 0", lambda v: v >= 0),
        ("slo_max_fail_ratio", "--slo-max-fail-ratio / NMT_SLO_MAX_FAIL_RATIO",
         "a ratio in [0, 1] (0.01: 1 %)", lambda v: 0 <= v <= 1),
        ("slo_p95_ms", "--slo-p95-ms / NMT_SLO_P95_MS", "milliseconds > 0", lambda v: v > 0),
    )  # fmt: skip
    for name, flag, what, ok in checks:
        value = _option(environment, name, None)
        if value is not None and not (math.isfinite(float(value)) and ok(float(value))):
            return f"{flag} is {value}: give {what}"
    return None


@events.init.add_listener
def load_corpus(environment: Environment, **_kwargs: Any) -> None:
    """Check the options and the host (headless runs; the web UI asks for it) and read
    the sentences."""
    global _corpus
    if (problem := option_problem(environment)) is not None:
        log.error("%s", problem)
        raise SystemExit(2)
    if _option(environment, "headless", False):
        try:
            parse_target(environment.host)
        except ValueError as exc:
            log.error("%s", exc)
            raise SystemExit(2) from None
    path = Path(_option(environment, "sentences", default_sentences()))
    try:
        _corpus = Corpus.from_file(path)
    except (OSError, ValueError) as exc:
        log.error("cannot read the sentences (--sentences / NMT_SENTENCES): %s", exc)
        raise SystemExit(2) from None
    log.info(
        "%d sentences from %s (%d short, %d long)",
        len(_corpus.all),
        path,
        len(_corpus.short),
        len(_corpus.long),
    )


class GrpcTranslate:
    """The tasks over gRPC: one channel, a :class:`nmt_client.Translator` per task on it,
    each call timed and reported by :class:`LocustInterceptor`."""

    def __init__(self, user: User, target: Target, model: str, timeout: float) -> None:
        options = [("grpc.max_receive_message_length", MAX_MESSAGE_BYTES)]
        if target.tls:
            credentials = grpc.ssl_channel_credentials()
            self.channel = grpc.secure_channel(target.address, credentials, options)
        else:
            self.channel = grpc.insecure_channel(target.address, options)
        interceptor = LocustInterceptor(user.environment.events)
        intercepted = grpc.intercept_channel(self.channel, interceptor)
        # The task's name goes with every call for the interceptor; a failed call is
        # reported, never sent again.
        self.translators = {
            name: Translator(
                target.address,
                channel=intercepted,
                metadata=((NAME_KEY, name),),
                retries=0,
                timeout=timeout,
                model=model or None,
            )
            for name in TASKS
        }

    def translate(self, name: str, text: str) -> None:
        with contextlib.suppress(TranslatorError):  # the interceptor reported it
            self.translators[name].translate([text], options=TASKS[name])

    def close(self) -> None:
        self.channel.close()


# The gRPC code of an HTTP status that carries no error object of the server's (a proxy's
# page, no answer at all): gRPC's own mapping (grpc/doc/http-grpc-status-mapping.md),
# except 429, which is overload here as it is from the server.
HTTP_CODES = {
    0: grpc.StatusCode.UNAVAILABLE,  # no answer: refused, reset, TLS failed
    400: grpc.StatusCode.INTERNAL,
    401: grpc.StatusCode.UNAUTHENTICATED,
    403: grpc.StatusCode.PERMISSION_DENIED,
    404: grpc.StatusCode.UNIMPLEMENTED,
    429: OVERLOAD,
    502: grpc.StatusCode.UNAVAILABLE,
    503: grpc.StatusCode.UNAVAILABLE,
    504: grpc.StatusCode.UNAVAILABLE,
}


def http_failure(status: int, body: bytes, error: Exception | None) -> RpcFailure:
    """An HTTP answer other than 200 as the gRPC status its error body names; a body that
    is not the server's error object (a proxy's page) by its HTTP status, named in words
    (the failures table masks numbers), with the start of the body or the client's
    error."""
    try:
        answer = json.loads(body)
        return RpcFailure(grpc.StatusCode[answer["status"]], answer["message"])
    except (ValueError, KeyError, TypeError):
        pass
    try:
        phrase = HTTPStatus(status).phrase
    except ValueError:
        phrase = "no answer" if status == 0 else "unknown status"
    text = " ".join(body[:80].decode(errors="replace").split())
    if not text and error is not None:
        text = type(error).__name__
    code = HTTP_CODES.get(status, grpc.StatusCode.UNKNOWN)
    return RpcFailure(code, f"HTTP {phrase}: {text}")


class HttpTranslate:
    """The tasks over the HTTP/JSON API: ``POST /v1/translate`` on one keep-alive
    connection, timed and reported by Locust's own HTTP client."""

    def __init__(self, user: User, target: Target, model: str, timeout: float) -> None:
        self.session = FastHttpSession(
            target.base_url,
            user.environment.events.request,
            user=user,
            insecure=False,
            connection_timeout=timeout,
            network_timeout=timeout,
        )
        # the same deadline a gRPC call carries, as grpc-gateway takes it
        self.headers = {TIMEOUT_HEADER: f"{max(1, round(timeout * 1000))}m"}
        extra = {"model": model} if model else {}
        self.bodies = {
            name: {**extra, "options": json_format.MessageToDict(options.to_proto())}
            for name, options in TASKS.items()
        }

    def translate(self, name: str, text: str) -> None:
        body = {"texts": [text], **self.bodies[name]}
        with self.session.post(
            "/v1/translate", json=body, name=name, headers=self.headers, catch_response=True
        ) as response:
            if response.status_code == 200:
                response.success()
                return
            failure = http_failure(response.status_code, response.content or b"", response.error)
            if failure.code == OVERLOAD:
                response.request_meta["name"] = name + OVERLOAD_SUFFIX
            response.failure(failure)

    def close(self) -> None:
        self.session.client.clientpool.close()


class TranslatorUser(User):
    """One client with its own channel (or HTTP connection), one sentence per call."""

    def __init__(self, environment: Environment) -> None:
        super().__init__(environment)
        assert _corpus is not None, "the init event loads the corpus"
        self.corpus = _corpus
        self.rng = random.Random()
        self.model = str(_option(environment, "model", ""))
        self.timeout = float(_option(environment, "rpc_timeout", 30.0))
        self.think_time = float(_option(environment, "think_time", 0.0))
        self.client: GrpcTranslate | HttpTranslate | None = None

    def wait_time(self) -> float:
        return self.think_time

    def on_start(self) -> None:
        target = parse_target(self.host)
        transport = HttpTranslate if target.http else GrpcTranslate
        self.client = transport(self, target, self.model, self.timeout)

    def on_stop(self) -> None:
        if self.client is not None:
            self.client.close()

    def _translate(self, name: str, pool: Sequence[str]) -> None:
        assert self.client is not None, "on_start made it"
        self.client.translate(name, self.rng.choice(pool))

    @task(6)
    def greedy_short(self) -> None:
        self._translate(GREEDY_SHORT, self.corpus.short)

    @task(3)
    def beam_long(self) -> None:
        self._translate(BEAM_LONG, self.corpus.long)

    @task(1)
    def beam_attention(self) -> None:
        self._translate(BEAM_ATTENTION, self.corpus.all)


@events.quitting.add_listener
def check_slo(environment: Environment, **_kwargs: Any) -> None:
    """Log the run against the SLO and set the process exit code (0 met, 1 violated)."""
    if isinstance(environment.runner, WorkerRunner):
        return  # the master judges the aggregated statistics
    max_fail_ratio = float(_option(environment, "slo_max_fail_ratio", 0.01))
    max_p95_ms = float(_option(environment, "slo_p95_ms", 2000.0))
    total = environment.stats.total
    overloaded = sum(
        entry.num_requests
        for entry in environment.stats.entries.values()
        if entry.name.endswith(OVERLOAD_SUFFIX)
    )
    p95 = total.get_response_time_percentile(0.95) if total.num_requests else float("nan")
    log.info(
        "SLO check: %d requests, %d failures (%.2f%%, of which %d %s), p95 %.0f ms",
        total.num_requests,
        total.num_failures,
        100.0 * total.fail_ratio,
        overloaded,
        OVERLOAD.name,
        p95,
    )
    problems = []
    if total.num_requests == 0:
        problems.append("no request was made")
    else:
        if not total.fail_ratio <= max_fail_ratio:  # (NaN: violated)
            problems.append(f"failure ratio {total.fail_ratio:.4f} > {max_fail_ratio}")
        if not p95 <= max_p95_ms:
            problems.append(f"p95 {p95:.0f} ms > {max_p95_ms:.0f} ms")
    runner = environment.runner
    if runner is not None and runner.exceptions:
        problems.append(f"{len(runner.exceptions)} task exception(s), see the log")
    if problems:
        log.error("SLO violated: %s", "; ".join(problems))
        environment.process_exit_code = 1
    else:
        log.info("SLO met (failure ratio <= %s, p95 <= %.0f ms)", max_fail_ratio, max_p95_ms)
        environment.process_exit_code = 0
