"""``nmt-serve``'s command line and ``NMT_<FLAG>`` variables, derived from the fields of
:mod:`service.config`'s dataclasses so that a default is written once.

:data:`FLAGS` lists each flag once: the config section and field it sets, and its help.
Its type and default come from the field; the help shows the default; the README's
configuration table is checked against this list by ``tests/service/test_config.py``.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from service.config import (
    DEFAULT_REPOSITORY,
    ENGINE_PROCESS_MODES,
    NEVER_AT_ZERO,
    SECTIONS,
    ServerConfig,
)
from service.limits import ADMISSION, MAX_SECONDS
from service.logs import LOG_FORMATS
from service.sessions import (
    CHUNKED_TOPK_MODES,
    CUDA_GRAPH_MODES,
    GRAPH_OPTIMIZATION_LEVELS,
    HOST_GREEDY_STEPS,
    IO_BINDING_MODES,
    MAX_GREEDY_STEPS,
)


@dataclass(frozen=True)
class Flag:
    """One ``--flag`` (and its ``NMT_FLAG`` variable) setting ``section.name``."""

    section: str
    name: str
    help: str
    flag: str = ""  # when it differs from the field's name
    choices: tuple[str, ...] | None = None
    # Text -> value, for fields whose type is not int/float/str/bool (paths, lists).
    parse: Callable[[str], Any] | None = None
    # Value -> text, as the flag spells it (the default shown in --help).
    show: Callable[[Any], str] = str
    none: str = "none"  # what a default of None means

    @property
    def option(self) -> str:
        return "--" + (self.flag or self.name).replace("_", "-")

    @property
    def variable(self) -> str:
        return variable(self.option)

    @property
    def default(self) -> Any:
        (f,) = [f for f in dataclasses.fields(SECTIONS[self.section]) if f.name == self.name]
        return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _optional_path(text: str) -> Path | None:
    return Path(text) if text else None


def _device_count(text: str) -> int | None:
    """A count, or the device's default (``ADMISSION``) for ``auto``."""
    if text.strip().lower() == "auto":
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not an integer or auto") from None


def _by_device(name: str) -> str:
    """The device defaults of an admission setting, as its help states them."""
    return f"{ADMISSION[False][name]} on a CPU, {ADMISSION[True][name]} on CUDA"


def _comma_list(text: str) -> tuple[str, ...]:
    return tuple(x.strip() for x in text.split(",") if x.strip())


# A boolean field shown and set as on/off (rather than a store_true switch).
ON_OFF: dict[str, Any] = {
    "choices": ("on", "off"),
    "parse": lambda text: text == "on",
    "show": lambda on: "on" if on else "off",
}


FLAGS: tuple[Flag, ...] = (
    Flag("", "model_repository", "<name>/<version>/ bundles to serve", parse=Path),
    Flag("", "default_model", "model used when a request names none", none="the first model"),
    Flag("", "host", "address(es) the gRPC server binds (a name binds all it resolves to)"),
    Flag("", "port", "gRPC port (0: any free port)"),
    Flag("", "metrics_host", "address of the /metrics endpoint (127.0.0.1 keeps it local)"),
    Flag("", "metrics_port", "Prometheus /metrics port; -1 disables it"),
    Flag(
        "",
        "http_port",
        "port of the HTTP/JSON API on --host (POST /v1/translate, /v1/translate/stream, "
        "/v1/score; GET /v1/models, /v1/health/live, /v1/health/ready, /v1/openapi.json "
        "and a demo page at /): the gRPC methods as JSON; -1: off",
    ),
    Flag(
        "",
        "http_cors_origins",
        "comma-separated origins whose browser pages may call the HTTP API (CORS), e.g. "
        "https://app.example.com, or * for any",
        parse=_comma_list,
        show=lambda origins: ",".join(origins) or "none: only the server's own pages",
    ),
    Flag(
        "",
        "http_max_connections",
        "HTTP connections open at once; a new one past it is answered 503 (Retry-After) "
        "and closed (0: no cap; at start it is lowered to what the open-files limit, "
        "ulimit -n, leaves room for)",
    ),
    Flag(
        "",
        "http_send_timeout",
        "seconds an HTTP answer may wait, unread, before its connection is closed: the "
        "bytes waiting to be sent must shrink within it (0: never)",
    ),
    Flag(
        "runtime",
        "providers",
        "ONNX Runtime execution providers in preference order (cuda, cpu)",
        parse=_comma_list,
        show=",".join,
    ),
    Flag("runtime", "require_gpu", "fail at start instead of falling back to the CPU"),
    Flag(
        "runtime",
        "io_binding",
        "keep decode state on the device through ORT IO binding: encoder outputs, the "
        "memory pool and decoder states stay there (auto: on with CUDA)",
        choices=IO_BINDING_MODES,
    ),
    Flag(
        "runtime",
        "cuda_graphs",
        "replay decoder steps and encoder calls from CUDA graphs on fixed, bucketed "
        "device buffers (auto: on with CUDA and IO binding; on: also elsewhere, "
        "without capturing)",
        choices=CUDA_GRAPH_MODES,
    ),
    Flag(
        "runtime",
        "chunked_topk",
        "choose the decoder's top-k over the vocabulary in two levels, from the best "
        "chunks of 32 columns: the same tokens and scores, cheaper than one TopK on a CPU "
        "(auto: on for the CPU provider; on: on CUDA too, neither measured nor tested there)",
        choices=CHUNKED_TOPK_MODES,
    ),
    Flag(
        "engine",
        "background_encoder",
        "encode admitted sentences on a thread of their own while the decoder steps; "
        "with nothing decoding the scheduler encodes them itself (off: always on the "
        "scheduler thread, between decoder steps)",
        flag="encoder_thread",
        **ON_OFF,
    ),
    Flag(
        "runtime",
        "optimization",
        "ONNX Runtime graph optimization level of every session",
        flag="graph_optimization",
        choices=GRAPH_OPTIMIZATION_LEVELS,
    ),
    Flag(
        "runtime",
        "greedy_steps",
        f"decoder steps per ONNX Runtime call while every sentence is plain greedy "
        f"(1..{MAX_GREEDY_STEPS}; streams then get tokens in bursts of that many; 0: auto, "
        f"{HOST_GREEDY_STEPS} on host arrays, 1 with IO binding, i.e. on CUDA, where "
        f"more are not measured yet)",
    ),
    Flag("runtime", "intra_op_threads", "ONNX Runtime intra-op threads (0: ORT picks)"),
    Flag("runtime", "inter_op_threads", "ONNX Runtime inter-op threads"),
    Flag(
        "engine",
        "max_live_rows",
        "hypothesis rows decoded together in one step (0: auto, 256 on a CPU, 1024 on CUDA)",
    ),
    Flag("engine", "max_queue", "requests waiting to start; more are refused"),
    Flag("engine", "max_sentences_per_request", "sentences per request", flag="max_sentences"),
    Flag("engine", "max_source_tokens", "source pieces per sentence"),
    Flag("engine", "max_beam_size", "largest beam a request may ask for"),
    Flag("engine", "max_n_best", "most hypotheses a request may ask for"),
    Flag(
        "engine",
        "response_cache",
        "sentences per model whose n-best lists are kept to answer repeats without "
        "decoding them (0: off)",
    ),
    Flag(
        "engine",
        "max_target_length",
        "largest max_length a request may ask for, and the longest target a score request "
        "may give (pieces); a request that sets no max_length gets 256 or this, if lower",
    ),
    Flag(
        "engine",
        "max_sampling_topk",
        "largest sampling_topk a request may ask for (every row of a step gets that many "
        "candidates)",
    ),
    *(
        Flag("engine", name, f"{text} (auto: {_by_device(name)})", parse=_device_count, none="auto")
        for name, text in (
            ("encode_batch_sentences", "most sentences one admission hands the encoder"),
            (
                "encode_max_padding",
                "padding tokens an encoder batch may carry before it is split into length "
                "groups, one encoder call each",
            ),
            (
                "admit_batch",
                "while sentences decode, queued requests wait until this many have gathered "
                "(or --admit-wait-steps decoder steps have passed) to be admitted together",
            ),
        )
    ),
    Flag(
        "engine",
        "admit_wait_steps",
        "decoder steps queued requests wait for --admit-batch to gather (0: admitted at once)",
    ),
    Flag("", "tls_cert", "serve TLS with this certificate (PEM)", parse=_optional_path),
    Flag("", "tls_key", "private key (PEM) of --tls-cert", parse=_optional_path),
    Flag(
        "",
        "tls_client_ca",
        "CA certificate (PEM): mutual TLS, every client must present a certificate it signed",
        parse=_optional_path,
    ),
    Flag(
        "rpc",
        "max_inflight",
        "translation calls decoding or queued at once; more are refused "
        "(RESOURCE_EXHAUSTED, retry with backoff); health checks never count",
    ),
    Flag("rpc", "default_timeout", "deadline, in seconds, of a translation call that sets none"),
    Flag(
        "rpc",
        "receive_timeout",
        "seconds a call may take, from its headers, to send its request message",
    ),
    Flag(
        "rpc",
        "max_message_bytes",
        "largest request accepted and reply sent; gRPC clients receive 4 MiB by default, "
        "so raise it on both sides together",
    ),
    Flag("transport", "keepalive_time", "seconds of silence before the server pings a peer"),
    Flag("transport", "keepalive_timeout", "seconds to wait for the ping's answer"),
    Flag("transport", "max_connection_idle", "close a connection without calls (0: never)"),
    Flag(
        "transport",
        "max_connection_age",
        "close every connection after this many seconds, calls allowed to finish in "
        "--max-connection-age-grace (0: never)",
    ),
    Flag("transport", "max_connection_age_grace", "seconds calls may run on after the age"),
    Flag("transport", "max_streams_per_connection", "concurrent calls one connection may open"),
    Flag(
        "engine",
        "stall_timeout",
        "seconds an engine may go without a scheduler iteration while it has work before "
        "the watchdog reports NOT_SERVING and nmt-serve exits 1",
    ),
    Flag(
        "engine",
        "decode_lanes",
        "engines per model sharing its ONNX Runtime sessions, each decoding its own "
        "requests, so one's Python step overlaps another's decoder call (0: auto, 2 on a "
        "CPU with two cores or more, 1 on CUDA; with --intra-op-threads 0 each lane's "
        "sessions get cores/lanes threads)",
    ),
    Flag("", "reflection", "gRPC server reflection (grpc.reflection.v1 and v1alpha)"),
    Flag("", "shutdown_grace", "seconds to drain on SIGTERM"),
    Flag(
        "",
        "drain_announce",
        "seconds of the shutdown grace spent answering health checks NOT_SERVING while "
        "still serving, before new calls are refused",
    ),
    Flag(
        "",
        "reuse_port",
        "let several nmt-serve processes share --port (SO_REUSEPORT; the kernel spreads "
        "connections over them); without it a port in use is an error at start",
    ),
    Flag(
        "",
        "engine_process",
        "run each model's scheduler and ONNX Runtime sessions in a child process of their "
        "own (gRPC, protobuf and tokenization stay here): the two no longer share a GIL "
        "(auto: on with CUDA)",
        choices=ENGINE_PROCESS_MODES,
    ),
    Flag(
        "",
        "frontends",
        "gRPC processes serving --port (SO_REUSEPORT) that share each model's engine "
        "process: one batch and one queue per model, more CPU for protobuf, tokenization "
        "and the event loop (needs --engine-process auto or on)",
    ),
    Flag("log", "level", "Python logging level", flag="log_level"),
    Flag(
        "log",
        "format",
        "text, or json: one JSON object a line with the call's request id",
        flag="log_format",
        choices=LOG_FORMATS,
    ),
    Flag(
        "log",
        "access_log",
        "one log line per call: method, status, seconds, sentences, strategy, request id",
    ),
)


# -- NMT_ variables ----------------------------------------------------------------

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off", "")


def variable(option: str) -> str:
    """The environment variable of a flag: ``--max-live-rows`` -> ``NMT_MAX_LIVE_ROWS``."""
    return "NMT_" + option.lstrip("-").replace("-", "_").upper()


def _from_text(flag: Flag, text: str, source: str) -> Any:
    """The value of ``text`` (from the command line or ``NMT_*``) for ``flag``; a
    :class:`ValueError` naming ``source`` when it is none."""
    default = flag.default
    # From NMT_*: "NMT_PORT='x' ..."; from the command line argparse names the flag itself.
    given = f"{text!r}" if source.startswith("-") else f"{source}={text!r}"
    if flag.choices is not None:
        text = _choice(flag.choices, text)
        if text not in flag.choices:
            raise ValueError(f"{given}: {flag.option} must be one of {', '.join(flag.choices)}")
    if flag.parse is not None:
        try:
            return flag.parse(text)
        except ValueError as exc:  # name the variable (argparse names a flag itself)
            raise ValueError(str(exc) if source.startswith("-") else f"{given}: {exc}") from None
    if isinstance(default, bool):
        word = text.strip().lower()
        if word in TRUE_WORDS or word in FALSE_WORDS:
            return word in TRUE_WORDS
        raise ValueError(
            f"{given}: use one of {', '.join(TRUE_WORDS)} "
            f"or {', '.join(w for w in FALSE_WORDS if w)}"
        )
    if isinstance(default, (int, float)):
        try:
            value = type(default)(text)
        except ValueError:
            noun = "an integer" if isinstance(default, int) else "a number"
            raise ValueError(f"{given} is not {noun}") from None
        # Every float is a duration; inf would reach int(seconds * 1000) or time.sleep as
        # a traceback. NaN and negatives are left to the dataclasses' own checks.
        if isinstance(value, float) and value > MAX_SECONDS:
            never = "; 0 means never" if flag.name in NEVER_AT_ZERO else ""
            raise ValueError(
                f"{given}: {flag.option} must be a finite number of seconds, "
                f"at most {MAX_SECONDS} (about 24 days){never}"
            )
        return value
    return text


def _choice(choices: tuple[str, ...], text: str) -> str:
    """``text`` as one of ``choices`` when it is one in another case, or (for a flag that
    takes on and off) an on/off word of any case; else as it is."""
    word = text.strip().lower()
    if "on" in choices and "off" in choices:
        if word in TRUE_WORDS:
            return "on"
        if word in FALSE_WORDS and word:
            return "off"
    return word if word in choices else text


def _default(flag: Flag, environ: dict[str, str]) -> Any:
    raw = environ.get(flag.variable)
    # An empty variable is unset (compose's ${X:-}): a switch that is on stays on.
    if raw is None or raw == "":
        return flag.default
    return _from_text(flag, raw, flag.variable)


# The project's other NMT_* variables, which nmt-serve ignores and never warns about:
# docker-compose.yml's and the Locust file's (tests/service/test_config.py checks the
# list against those files).
OTHER_VARIABLES = frozenset(
    {
        "NMT_CPU_IMAGE", "NMT_GRPC_PORT", "NMT_HTTP_HOST_PORT", "NMT_METRICS_HOST_PORT",
        "NMT_MODEL_REPOSITORY_DIR", "NMT_REPLICAS",  # docker-compose.yml
        "NMT_MODEL", "NMT_RPC_TIMEOUT", "NMT_SENTENCES", "NMT_SLO_MAX_FAIL_RATIO",
        "NMT_SLO_P95_MS", "NMT_THINK_TIME",  # loadtest/locustfile.py
    }
)  # fmt: skip


def misspelt_variables(environ: dict[str, str] | None = None) -> list[str]:
    """One line for each ``NMT_*`` variable of ``environ`` that is no flag's but nearly
    one's (``NMT_MAX_QUEU``), or one's with words added or left off
    (``NMT_SHUTDOWN_GRACE_SECONDS``, ``NMT_MODEL_REPO``): nmt-serve would ignore it.
    The project's other ``NMT_*`` variables (:data:`OTHER_VARIABLES`) are not flagged."""
    environ = os.environ if environ is None else environ
    known = [flag.variable for flag in FLAGS]
    out = []
    for name in sorted(environ):
        if not name.startswith("NMT_") or name in known or name in OTHER_VARIABLES:
            continue
        near = difflib.get_close_matches(name, known, n=1, cutoff=0.85) or [
            k for k in known if k.startswith(name) or name.startswith(k + "_")
        ]
        if near:
            out.append(f"{name} is not an nmt-serve variable (ignored): {near[0]}?")
    return out


def _shown(flag: Flag) -> str:
    default = flag.default
    if isinstance(default, bool) and flag.parse is None:
        return "on" if default else "off"
    if default is None:
        return flag.none
    if isinstance(default, Path) and default == DEFAULT_REPOSITORY:
        return "model_repository/ of the checkout"
    return flag.show(default)


def build_parser(environ: dict[str, str] | None = None) -> argparse.ArgumentParser:
    """The ``nmt-serve`` parser; defaults from the dataclasses, overridden by ``NMT_*``
    variables of ``environ`` (``os.environ`` when None)."""
    environ = dict(os.environ if environ is None else environ)
    p = argparse.ArgumentParser(
        prog="nmt-serve",
        description="Serve translation models over gRPC. Every flag has an NMT_<FLAG> "
        "environment variable (e.g. NMT_PORT, NMT_MAX_LIVE_ROWS); on/off flags take "
        "1/true/yes/on or 0/false/no/off.",
    )
    for flag in FLAGS:
        value = _default(flag, environ)
        dest = f"{flag.section}.{flag.name}"
        text = f"{flag.help} (default: {_shown(flag)}; {flag.variable})"
        if isinstance(flag.default, bool) and flag.parse is None:
            p.add_argument(flag.option, dest=dest, action="store_true", default=value, help=text)
            continue

        def convert(s: str, flag: Flag = flag) -> Any:
            try:
                return _from_text(flag, s, flag.option)
            except ValueError as exc:
                raise argparse.ArgumentTypeError(str(exc)) from None

        p.add_argument(
            flag.option,
            dest=dest,
            type=convert,
            default=value,
            metavar="{" + ",".join(flag.choices) + "}"
            if flag.choices
            else flag.option.lstrip("-").replace("-", "_").upper(),
            help=text,
        )
    return p


def parse_args(
    argv: Sequence[str] | None = None, environ: dict[str, str] | None = None
) -> ServerConfig:
    """``nmt-serve``'s command line (and ``NMT_*`` variables) as a :class:`ServerConfig`;
    :class:`ValueError` with one line naming the flag or variable when a value is wrong."""
    parser = build_parser(environ)
    # The announce starts as a sentinel: argparse fills in defaults only for what the
    # namespace lacks, so it stays the sentinel unless the command line sets it.
    announce, unset = ".drain_announce", object()
    args = vars(parser.parse_args(argv, argparse.Namespace(**{announce: unset})))
    environ = os.environ if environ is None else environ
    announce_given = args[announce] is not unset or _flag("", "drain_announce").variable in environ
    if args[announce] is unset:
        args[announce] = parser.get_default(announce)
    values: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for flag in FLAGS:
        values[flag.section][flag.name] = args[f"{flag.section}.{flag.name}"]
    try:
        config = _config(values)
    except ValueError as exc:
        raise ValueError(_named(exc, values, argv, environ)) from None
    # The announce is part of the grace (TranslationServer.stop caps it there): one as long
    # as the grace leaves no time to drain. Only refused when set (flag or variable): a
    # short --shutdown-grace alone keeps capping the default announce.
    if (
        announce_given
        and config.drain_announce > 0
        and config.drain_announce >= config.shutdown_grace
    ):
        raise ValueError(
            f"--drain-announce {config.drain_announce:g} s leaves no time to drain within "
            f"--shutdown-grace {config.shutdown_grace:g} s (the announce is part of it): "
            "raise --shutdown-grace or lower --drain-announce (0: no announce)"
        )
    return config


def _config(values: dict[str, dict[str, Any]]) -> ServerConfig:
    nested = {section: SECTIONS[section](**kw) for section, kw in values.items() if section}
    return ServerConfig(**values[""], **nested)


def _named(
    exc: ValueError,
    values: dict[str, dict[str, Any]],
    argv: Sequence[str] | None,
    environ: Mapping[str, str],
) -> str:
    """``exc`` (a dataclass refusing a value) prefixed with the flag or variable that set
    it: the one whose default, put back alone, makes the error go away."""
    given = set(sys.argv[1:] if argv is None else argv)
    for flag in FLAGS:
        value = values[flag.section][flag.name]
        if value == flag.default:
            continue
        trial = {section: dict(kw) for section, kw in values.items()}
        trial[flag.section][flag.name] = flag.default
        try:
            _config(trial)
        except ValueError:
            continue
        if any(a == flag.option or a.startswith(flag.option + "=") for a in given):
            return f"{flag.option} {value}: {exc}"
        if flag.variable in environ:
            return f"{flag.variable}={environ[flag.variable]!r}: {exc}"
        return str(exc)
    return str(exc)


def _flag(section: str, name: str) -> Flag:
    """The flag that sets ``section``'s field ``name``."""
    (flag,) = [f for f in FLAGS if f.section == section and f.name == name]
    return flag
