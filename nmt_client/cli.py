"""``nmt-translate``: translate text with a running ``nmt-serve``; optional attention
heatmap.

Sentences come from the command line, or from stdin (one a line, blank lines kept
blank) when none is given; each prints one line (``--n-best N``: N lines, ranked)."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from nmt_client.decoding_args import add_decoding_args, check_decoding_args, options_from_args
from nmt_client.errors import InvalidRequest, TranslatorError, printable, sentence_index
from nmt_client.glossary import Glossary
from nmt_client.heatmap import MATPLOTLIB_HINT, have_matplotlib, plot_attention
from nmt_client.options import DecodeOptions
from nmt_client.progress import Progress
from nmt_client.results import Diagnostics, Hypothesis, Result
from nmt_client.translator import DEFAULT_RETRIES, DEFAULT_TARGET, DEFAULT_TIMEOUT, Translator

PROG = "nmt-translate"
MAX_WAIT_SECONDS = 3600.0
# Reading a pipe, a batch not yet full is sent once no line has come for this long.
PIPE_LINGER_SECONDS = 0.05
# Texts a request from stdin; with --split-sentences fewer, each text's sentences counting
# against the server's sentences a request (64 by default).
BATCH_SIZE = 32
SPLIT_BATCH_SIZE = 4


def add_connection_args(p: argparse.ArgumentParser, *, server_default: str | None) -> None:
    """``--server``, ``--model``, ``--timeout``, ``--retries`` and the TLS flags."""
    g = p.add_argument_group("connection")
    if server_default is not None:
        g.add_argument(
            "--server",
            metavar="HOST:PORT",
            default=server_default,
            help="the server (default: %(default)s)",
        )
    g.add_argument(
        "--model", metavar="NAME", default=None, help="model name (default: the server's default)"
    )
    g.add_argument(
        "--timeout",
        metavar="S",
        type=float,
        default=DEFAULT_TIMEOUT,
        help="deadline of a call in seconds, retries included (default: %(default)s)",
    )
    g.add_argument(
        "--retries",
        metavar="N",
        type=int,
        default=DEFAULT_RETRIES,
        help="times a call is sent again while the server "
        "is busy or unreachable, with backoff (default: %(default)s)",
    )
    g.add_argument(
        "--wait-ready",
        metavar="S",
        type=float,
        default=0.0,
        help="first wait up to S seconds for the server to be reachable and report "
        "SERVING (a server still loading or starting; default: no wait)",
    )
    g.add_argument("--tls", action="store_true", help="TLS with the system's CA certificates")
    g.add_argument(
        "--tls-ca",
        metavar="PEM",
        type=Path,
        default=None,
        help="CA certificate (PEM) that signed the server's certificate; implies TLS",
    )
    g.add_argument(
        "--tls-cert",
        metavar="PEM",
        type=Path,
        default=None,
        help="client certificate (PEM), for "
        "a server started with --tls-client-ca (mTLS); needs --tls-key",
    )
    g.add_argument(
        "--tls-key", metavar="PEM", type=Path, default=None, help="the client certificate's key"
    )
    g.add_argument(
        "--tls-server-name",
        metavar="NAME",
        default=None,
        help="name the server's certificate is checked against (default: the host of --server)",
    )


class InputError(Exception):
    """Input the CLI cannot send (a line that is not UTF-8): exit 2, one line."""


_TOO_MANY = re.compile(r"^(\d+) sentences in one request; the limit is (\d+)")


def text_index(details: str) -> tuple[int, str] | None:
    """A refusal that names one source of the request (``texts[i]...``, the server's
    and the local bundle's wording): ``(i, the rest of the message)``; else ``None``."""
    named = sentence_index(details)
    return None if named is None or named[0] != "texts" else (named[1], named[2])


def bundle_error(exc: BaseException, details: str | None = None) -> str:
    """One line for an error of a ``--bundle`` command (decoding in this process), in the
    words a server would answer it with: ``INVALID_ARGUMENT: texts[0] ...``; ``details``
    in place of the exception's message (a line number for its ``texts[i]``)."""
    offline = sys.modules.get("service.offline")  # loaded by the --bundle path itself
    name = offline.status_name(exc) if offline is not None else None
    text = " ".join(str(exc).split()) if details is None else details
    return f"{name or type(exc).__name__}: {text}"


def explain_batch_error(
    exc: TranslatorError, *, where: Callable[[int], str] | None = None
) -> TranslatorError:
    """``exc`` said in the CLI's terms: a request over the server's sentence limit asks
    for a lower ``--batch-size``; ``texts[i]`` (an index within one request) becomes
    ``where(i)`` (the input line it came from), when given."""
    if not isinstance(exc, InvalidRequest):
        return exc
    details = exc.details
    too_many = _TOO_MANY.match(details)
    if too_many:
        n, limit = too_many.groups()
        details = (
            f"{n} sentences in one request; the server's limit is {limit}: "
            f"lower --batch-size to at most {limit}"
        )
    elif where is not None and (named := text_index(details)):
        details = where(named[0]) + named[1]
    else:
        return exc
    return type(exc)(exc.code, details, request_id=exc.request_id, attempts=exc.attempts)


# Each TLS flag, the PEM block its file must hold and what that is.
PEM_FLAGS = (
    ("tls_ca", b"-----BEGIN CERTIFICATE-----", "certificate"),
    ("tls_cert", b"-----BEGIN CERTIFICATE-----", "certificate"),
    ("tls_key", b"PRIVATE KEY-----", "private key"),
)


def check_connection_args(args: argparse.Namespace) -> str | None:
    if not 0 < args.timeout < math.inf:
        return f"--timeout {args.timeout} must be a finite positive number of seconds"
    if args.retries < 0:
        return f"--retries {args.retries} must be >= 0"
    if not 0 <= args.wait_ready <= MAX_WAIT_SECONDS:
        return f"--wait-ready {args.wait_ready} must be between 0 and {MAX_WAIT_SECONDS} seconds"
    if (args.tls_cert is None) != (args.tls_key is None):
        return "--tls-cert and --tls-key go together: give both or neither"
    for flag, marker, noun in PEM_FLAGS:
        path = getattr(args, flag)
        if path is None:
            continue
        option = f"--{flag.replace('_', '-')}"
        if not path.is_file():
            return f"{option} {path}: no such file"
        try:
            data = path.read_bytes()
        except OSError as exc:
            return f"{option} {path}: {exc.strerror or 'cannot read it'}"
        # gRPC would log its TLS errors and fail the call with a hint about the server
        if marker not in data:
            return (
                f"{option} {path} holds no PEM {noun} ({marker.decode()}...): give the {noun} file"
            )
    return None


def translator_from_args(args: argparse.Namespace, server: str, **kwargs) -> Translator:
    tls = bool(args.tls or args.tls_ca or args.tls_cert)
    translator = Translator(
        server,
        tls=tls,
        root_certificates=args.tls_ca,
        certificate_chain=args.tls_cert,
        private_key=args.tls_key,
        server_name=args.tls_server_name,
        timeout=args.timeout,
        retries=args.retries,
        model=args.model,
        **kwargs,
    )
    if args.wait_ready > 0:
        try:
            translator.wait_ready(args.wait_ready)
        except BaseException:
            translator.close()
            raise
    return translator


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0].replace("\n", " ").replace("``", ""),
        epilog=__doc__.split("\n\n", 1)[1].replace("\n", " ").replace("``", ""),
    )
    p.add_argument("text", nargs="*", help="sentences to translate (none: read stdin)")
    add_connection_args(p, server_default=DEFAULT_TARGET)
    d = add_decoding_args(p)
    d.add_argument(
        "--prefix",
        metavar="TEXT",
        default="",
        help="force every translation to start with this target-language text (its "
        "tokens add their log-probs to the scores, but for a converted Eole model); sentences "
        "on the command line only",
    )
    d.add_argument(
        "--constraint",
        metavar="PHRASE",
        action="append",
        default=[],
        help="a target-language phrase every translation must contain (repeat for more; "
        "lexically constrained beam search, as fairseq's --constraints); sentences on the "
        "command line only",
    )
    d.add_argument(
        "--glossary",
        metavar="TSV",
        type=Path,
        default=None,
        help="a glossary, 'source term<TAB>target term' a line: each sentence whose text "
        "holds a source term (whole words, any case) must translate it to its target term "
        "(a --constraint for that sentence); stdin lines too",
    )
    d.add_argument(
        "--ordered-constraints",
        action="store_true",
        help="the --constraint phrases appear in the order given (default: any order)",
    )
    o = p.add_argument_group("output")
    o.add_argument("--scores", action="store_true", help="print each hypothesis's score")
    o.add_argument(
        "--skip-refused",
        action="store_true",
        help="a sentence the server refuses (too long, no tokens...) is left blank (in "
        "--json: an object with its error) and named on stderr, and the rest is "
        "translated; exit status 1 at the end if any was (default: stop at the first)",
    )
    o.add_argument(
        "--json",
        action="store_true",
        help="print one JSON object a sentence: its source and hypotheses (text, tokens, "
        "score, log_prob, finish_reason: eos, or length where the length limit cut it; "
        "token_log_probs and alignment when asked for); null for a blank line",
    )
    o.add_argument(
        "--token-scores",
        action="store_true",
        help="print each hypothesis's tokens with their log-probs (token=log-prob ... "
        "</s>=log-prob), as nmt-score --tokens prints them",
    )
    o.add_argument(
        "--alignment",
        action="store_true",
        help="print each hypothesis's hard alignment to the source's pieces: source-target "
        "index pairs (0-0 2-1 ...), as fairseq's --print-alignment hard",
    )
    o.add_argument(
        "--diagnostics",
        action="store_true",
        help="print each hypothesis's attention diagnostics: mean entropy (nats), coverage "
        "deficit, over-attention, unknown-piece share of the source",
    )
    o.add_argument(
        "--stream",
        action="store_true",
        help="print the translation as the server decodes it (one sentence)",
    )
    o.add_argument(
        "--split-sentences",
        action="store_true",
        help="cut each text (argument or line) into its sentences, translate them one by "
        "one and join the translations (the models were trained on single sentences: a "
        "paragraph translates badly as one); one hypothesis each",
    )
    o.add_argument(
        "--batch-size",
        metavar="N",
        type=int,
        default=None,
        help=f"texts per request when reading stdin (default: {BATCH_SIZE}, "
        f"{SPLIT_BATCH_SIZE} with --split-sentences, whose sentences count against the "
        "server's limit a request)",
    )
    o.add_argument(
        "--attention-png",
        metavar="PNG",
        type=Path,
        default=None,
        help="write the attention heatmap "
        "of the first sentence's best hypothesis to this PNG (needs matplotlib)",
    )
    o.add_argument(
        "--words",
        action="store_true",
        help="heatmap of words instead of "
        "SentencePiece pieces: a source word's weight is the sum over its pieces, a "
        "target word's row the mean of its pieces' rows",
    )
    o.add_argument("--list-models", action="store_true", help="list the server's models and exit")
    return p


def _batch_size(args: argparse.Namespace) -> int:
    if args.batch_size is not None:
        return args.batch_size
    return SPLIT_BATCH_SIZE if args.split_sentences else BATCH_SIZE


def check_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, found before anything is sent (``None``: fine)."""
    problem = check_decoding_args(args)
    if problem:
        return problem
    if args.batch_size is not None and args.batch_size < 1:
        return "--batch-size must be >= 1"
    if args.split_sentences:
        joined = [
            flag
            for flag, on in (
                ("--n-best", args.n_best > 1),
                ("--stream", args.stream),
                ("--token-scores", args.token_scores),
                ("--alignment", args.alignment),
                ("--diagnostics", args.diagnostics),
                ("--attention-png", args.attention_png is not None),
                ("--prefix", bool(args.prefix)),
                ("--constraint", bool(args.constraint)),
                ("--glossary", args.glossary is not None),
            )
            if on
        ]
        if joined:
            return "--split-sentences joins one translation per sentence: drop " + ", ".join(joined)
    if args.stream and len(args.text) != 1:
        return (
            f"--stream translates one sentence given on the command line: give exactly one "
            f"(got {len(args.text)})"
        )
    if args.stream and args.n_best > 1:
        return "--stream sends the best hypothesis as it grows: drop --n-best"
    if args.stream and args.json:
        return "--json prints whole results: drop --stream"
    if args.json and (args.diagnostics or args.attention_png is not None):
        return (
            "--json carries text, tokens, scores, token scores and alignments: drop "
            "--diagnostics and --attention-png"
        )
    if args.stream and args.replace_unk:
        return "--replace-unk needs the finished translation's attention: drop --stream"
    if args.prefix and not args.text:
        return "--prefix goes with sentences on the command line, not stdin"
    if args.constraint and not args.text:
        return "--constraint goes with sentences on the command line, not stdin"
    if (args.constraint or args.glossary) and args.prefix:
        return "--constraint and --glossary do not go with --prefix: give one or the other"
    if args.ordered_constraints and not (args.constraint or args.glossary):
        return "--ordered-constraints orders --constraint or --glossary phrases: give some"
    if args.list_models and (args.text or args.model):
        return (
            "--list-models lists every model and translates nothing: drop the sentences and --model"
        )
    png = args.attention_png
    if png is not None:
        if not have_matplotlib():
            return f"--attention-png {MATPLOTLIB_HINT}"
        if png.is_dir():
            return f"--attention-png {png} is a directory: give a file name ending in .png"
        if png.suffix.lower() != ".png":
            return f"--attention-png {png}: the heatmap is a PNG: give a path ending in .png"
        if not png.parent.is_dir():
            return f"--attention-png {png}: directory {png.parent} does not exist"
    elif args.words:
        return "--words goes with --attention-png"
    return check_connection_args(args)


def _stdin_lines() -> Iterator[str]:
    """stdin's lines, decoded as UTF-8 whatever the locale; a line that is not UTF-8
    raises :class:`InputError` naming it."""
    if sys.stdin.isatty():
        print(f"{PROG}: reading sentences from stdin, one a line (Ctrl-D ends)", file=sys.stderr)
    binary = getattr(sys.stdin, "buffer", None)
    for number, line in enumerate(binary if binary is not None else sys.stdin, 1):
        try:
            text = line.decode("utf-8") if isinstance(line, bytes) else line
            text.encode("utf-8")  # a text stream may carry undecodable bytes as surrogates
        except UnicodeError:
            raise InputError(
                f"stdin line {number} is not valid UTF-8: convert the input to UTF-8 "
                "(e.g. iconv -f LATIN1 -t UTF-8)"
            ) from None
        yield text.rstrip("\r\n")


def translate_lines(
    translator: Translator, lines: Iterable[str], *, what: str = "line", **kwargs
) -> Iterator[Result | None]:
    """:meth:`Translator.translate_many` of ``lines``, read as far as needed; ``None``
    for a blank line (not sent: the server refuses empty text; answered as soon as it is
    read, not after the next line's translation). ``kwargs``: those of
    ``translate_many``. A refused request's error names the input ``what`` (``line``:
    ``line 9 has 160 source tokens...``) and, over the server's sentence limit,
    ``--batch-size``."""
    try:
        results = translator.translate_many(lines, keep_blank=True, **kwargs)
        for number, result in enumerate(results, 1):
            if result.error is not None:  # translate_many(skip_refused=True)
                print(f"{PROG}: {what} {number} left blank: {result.error}", file=sys.stderr)
            elif not result.hypotheses and not result.source.strip():
                yield None  # a blank line
                continue
            yield result
    except TranslatorError as exc:
        # texts[i] counts every line, blank ones too
        raise explain_batch_error(exc, where=lambda i: f"{what} {i + 1}") from None


def _stream(
    translator: Translator,
    text: str,
    options: DecodeOptions,
    *,
    scores: bool,
    diagnostics: bool = False,
    prefix: str = "",
    constraints: Sequence[str] = (),
    ordered: bool = False,
) -> Result | None:
    """Print the translation as it is decoded, then its score and diagnostics when asked
    for (both come with the final message); the final :class:`Result`."""
    shown, result = "", None
    updates = translator.stream(
        text, options=options, target_prefix=prefix, constraints=constraints,
        ordered_constraints=ordered,
    )  # fmt: skip
    for update in updates:
        if update.final:
            result = update.result
        if update.text.startswith(shown):
            print(update.text[len(shown) :], end="", flush=True)
        else:  # the best hypothesis left the stable prefix: start the line again
            print("\n" + update.text, end="", flush=True)
        shown = update.text
    best = result.best if result is not None else None
    suffix = f"\t{best.score:.4f}" if scores and best is not None and best.score is not None else ""
    if diagnostics and best is not None and best.diagnostics is not None:
        suffix += "\t" + _diagnostics_text(best.diagnostics)
    if best is not None and best.token_log_probs is not None:  # asked for: --token-scores
        suffix += "\t" + token_scores_text(best)  # () on a hypothesis of none: ""
    if best is not None and best.alignment is not None:  # asked for: --alignment
        suffix += "\t" + best.pharaoh()
    print(suffix)
    return result


def _cut_short(result: Result | None, number: int) -> list[int]:
    """``[number]`` when ``result``'s best translation ended at the length limit."""
    if result is None or not result.hypotheses:
        return []
    return [number] if result.best.finish_reason == "length" else []


def finite(x: float | None) -> float | None:
    """``x`` as a JSON number: ``None`` (null) for a missing or non-finite one."""
    return x if x is not None and math.isfinite(x) else None


def json_line(result: Result | None, args: argparse.Namespace) -> str:
    """``--json``: one sentence's result as a JSON object on one line (``null``: blank;
    ``{"source", "error"}``: refused, with ``--skip-refused``)."""
    if result is None:
        return "null"
    if result.error is not None:
        return json.dumps({"source": result.source, "error": result.error}, ensure_ascii=False)
    hypotheses = []
    for hyp in result.hypotheses:
        record: dict[str, object] = {
            "text": hyp.text,
            "tokens": list(hyp.tokens),
            "score": finite(hyp.score),
            "log_prob": finite(hyp.log_prob),
            "finish_reason": hyp.finish_reason,
        }
        if args.token_scores:
            record["token_log_probs"] = [finite(x) for x in hyp.token_log_probs or ()]
        if args.alignment:
            record["alignment"] = list(hyp.alignment or ())
        hypotheses.append(record)
    out: dict[str, object] = {"source": result.source, "hypotheses": hypotheses}
    if args.alignment:
        out["source_pieces"] = list(result.source_pieces)
    return json.dumps(out, ensure_ascii=False, allow_nan=False)


def _print_result(result: Result | None, args: argparse.Namespace) -> None:
    if args.json:
        print(json_line(result, args))
        return
    if result is None or result.error is not None or not result.hypotheses:
        print()  # a blank line, a refused one, or a search that found nothing: one line
        return
    for rank, hyp in enumerate(result.hypotheses):
        prefix = f"{rank + 1}\t" if args.n_best > 1 else ""
        suffix = f"\t{hyp.score:.4f}" if args.scores and hyp.score is not None else ""
        if args.diagnostics and hyp.diagnostics is not None:
            suffix += "\t" + _diagnostics_text(hyp.diagnostics)
        if args.token_scores:  # a column on every line, empty when a hypothesis has none
            suffix += "\t" + token_scores_text(hyp)
        if args.alignment:  # a column on every line, empty for a source of no tokens
            suffix += "\t" + hyp.pharaoh()
        print(f"{prefix}{hyp.text}{suffix}")


def token_scores_text(hyp: Hypothesis) -> str:
    """``token=log-prob ...`` of a hypothesis's tokens, then ``</s>``'s when it has one
    (a hypothesis stopped at its length limit may not)."""
    tokens = (*hyp.tokens, "</s>")[: len(hyp.token_log_probs or ())]
    return " ".join(
        f"{t}={lp:.4f}" for t, lp in zip(tokens, hyp.token_log_probs or (), strict=True)
    )


def _diagnostics_text(d: Diagnostics) -> str:
    def num(x: float | None) -> str:
        return "n/a" if x is None else f"{x:.3f}"

    return (
        f"entropy={num(d.entropy_mean)} deficit={num(d.coverage_deficit)} "
        f"over={num(d.over_attention)} unk={num(d.unk_share)}"
    )


def _list_models(translator: Translator) -> None:
    for m in translator.list_models():
        default = "\tdefault" if m.is_default else ""
        fields = (m.name, m.version, m.precision, m.execution_provider)
        print("\t".join(map(printable, fields)) + default)


def run(args: argparse.Namespace) -> int:
    options = options_from_args(
        args,
        return_attention=args.attention_png is not None,
        return_scores=args.scores or args.json,
        return_diagnostics=args.diagnostics,
        return_token_scores=args.token_scores,
        return_alignment=args.alignment,
    )
    first: Result | None = None
    refused = 0  # sentences left blank (--skip-refused)
    cut: list[int] = []  # input lines (or sentences) whose best translation hit the limit
    glossary, problem = Glossary.for_cli(args.glossary)
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2

    def constraints_for(text: str) -> list[str]:
        terms = list(args.constraint)
        if glossary is not None:
            terms += [t for t in glossary.terms_for(text) if t not in terms]
        return terms

    with translator_from_args(args, args.server) as translator:
        if args.list_models:
            _list_models(translator)
            return 0
        if args.stream:
            first = _stream(
                translator,
                args.text[0],
                options,
                scores=args.scores,
                diagnostics=args.diagnostics,
                prefix=args.prefix,
                constraints=constraints_for(args.text[0]),
                ordered=args.ordered_constraints,
            )
            cut += _cut_short(first, 1)
        elif args.prefix:
            prefixes = [args.prefix] * len(args.text)
            for number, result in enumerate(
                translator.translate(args.text, options=options, target_prefix=prefixes), 1
            ):
                first = first or result
                cut += _cut_short(result, number)
                _print_result(result, args)
        else:
            interactive = not args.text and sys.stdin.isatty()
            constrained = bool(args.constraint) or glossary is not None
            # a file translated into a file: a progress line on the terminal between them
            shown = not (args.text or interactive or sys.stdout.isatty())
            progress = Progress(None, prog=PROG, enabled=shown and sys.stderr.isatty())
            lines = translate_lines(
                translator,
                args.text or _stdin_lines(),
                what="sentence" if args.text else "stdin line",
                batch_size=1 if interactive else _batch_size(args),
                concurrency=1 if interactive else 4,
                # a pipe from a program that waits for each answer: a partial batch goes
                linger=None if args.text or interactive else PIPE_LINGER_SECONDS,
                options=options,
                constraints_for=constraints_for if constrained else None,
                ordered_constraints=args.ordered_constraints,
                skip_refused=args.skip_refused,
                split_sentences=args.split_sentences,
            )
            try:
                for number, result in enumerate(lines, 1):
                    refused += result is not None and result.error is not None
                    cut += _cut_short(result, number)
                    first = first or result
                    _print_result(result, args)
                    sys.stdout.flush()
                    progress.advance()
            finally:
                progress.close()
    if cut:
        shown = ", ".join(map(str, cut[:10])) + (", ..." if len(cut) > 10 else "")
        what = "sentence" if args.text else "line"
        print(
            f"{PROG}: {len(cut)} translation(s) reached the length limit and may be cut short "
            f"({what} {shown}): allow more with --max-length or --max-length-ratio",
            file=sys.stderr,
        )
    status = 0
    if refused:
        print(f"{PROG}: {refused} sentence(s) refused and left blank", file=sys.stderr)
        status = 1
    if args.attention_png is not None and first is not None and first.hypotheses:
        best = first.best
        if best.attention is None:
            return status
        try:
            plot_attention(
                best.attention,
                args.attention_png,
                words=args.words,
                title=f"{first.source}\n{best.text}",
            )
        except OSError as exc:
            print(
                f"{PROG}: error: could not write {args.attention_png}: {exc.strerror}",
                file=sys.stderr,
            )
            return 1
        print(f"attention heatmap: {args.attention_png}", file=sys.stderr)
    return status


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_intermixed_args(argv)
    problem = check_args(args)
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2
    try:
        return run(args)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except TranslatorError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:  # | head: the reader has all it wants
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error
        return 0
    except OSError as exc:  # a certificate that cannot be read
        print(f"{PROG}: error: {exc.strerror or exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
