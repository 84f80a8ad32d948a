"""``nmt-score``: score given translations with a running ``nmt-serve`` (forced decoding).

Reads pairs (``--src`` and ``--tgt``, line by line; or tab-separated ``source<TAB>target``
lines from stdin) and prints one line per pair: the target's log-probability under the
model (natural log, end of sentence included), or with ``--normalize`` its score (as
Translate scores a hypothesis under the model's rules: by default the log-prob divided
by length ** length_penalty). A blank line or source prints a blank line. The summary
(pairs, tokens, perplexity) goes to stderr.
What it is for: filtering parallel data by the model's likelihood (dual conditional
cross-entropy), reranking n-best lists, checking a reference's fluency under the model.
As marian-scorer, fairseq-generate --score-reference, CTranslate2's score_batch."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from nmt_client.cli import (
    InputError,
    add_connection_args,
    bundle_error,
    check_connection_args,
    explain_batch_error,
    finite,
    token_scores_text,
    translator_from_args,
)
from nmt_client.decoding_args import add_length_penalty_form
from nmt_client.errors import InvalidRequest, TranslatorError, sentence_index
from nmt_client.evaluate import read_lines
from nmt_client.options import score_request
from nmt_client.progress import Progress
from nmt_client.results import Hypothesis, Result
from nmt_client.translator import DEFAULT_TARGET

PROG = "nmt-score"


def parser() -> argparse.ArgumentParser:
    intro, rest = __doc__.split("\n\n", 1)
    p = argparse.ArgumentParser(
        prog=PROG,
        description=intro.replace("\n", " ").replace("``", ""),
        epilog=rest.replace("\n", " ").replace("``", ""),
    )
    i = p.add_argument_group("input and output")
    i.add_argument("--src", type=Path, default=None, help="source sentences, one a line")
    i.add_argument("--tgt", type=Path, default=None, help="their translations to score, one a line")
    i.add_argument("--out", type=Path, default=None, help="write the lines here (default: stdout)")
    i.add_argument(
        "--normalize",
        action="store_true",
        help="print the length-normalised score instead of the log-prob",
    )
    i.add_argument(
        "--tokens",
        action="store_true",
        help="append each target token and its log-prob (token=log-prob ... </s>=log-prob)",
    )
    i.add_argument(
        "--json",
        action="store_true",
        help="one JSON object a line: log_prob, score, tokens, token_log_probs (and "
        "alignment, source_pieces with --alignment)",
    )
    i.add_argument(
        "--alignment",
        action="store_true",
        help="append the target's hard alignment to the source's pieces: source-target "
        "index pairs (0-0 2-1 ...), as fairseq's --print-alignment hard",
    )
    s = p.add_argument_group("scoring")
    s.add_argument(
        "--length-penalty",
        metavar="LP",
        type=float,
        default=None,
        help="score = log_prob / length ** LP (default: the model's)",
    )
    add_length_penalty_form(s)
    s.add_argument(
        "--coverage-penalty",
        metavar="BETA",
        type=float,
        default=None,
        help="GNMT coverage penalty in the score (default: the model's)",
    )
    s.add_argument(
        "--batch-size", metavar="N", type=int, default=32, help="pairs a request (default: 32)"
    )
    s.add_argument(
        "--concurrency",
        metavar="N",
        type=int,
        default=4,
        help="requests in flight (default: 4)",
    )
    s.add_argument(
        "--bundle",
        metavar="DIR",
        type=Path,
        default=None,
        help="score with this bundle in this process instead of a server (needs the "
        "serving package: ONNX Runtime and the tokenizers)",
    )
    add_connection_args(p, server_default=DEFAULT_TARGET)
    return p


def read_pairs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The pairs to score; raises :class:`InputError` (one line) for input it cannot use."""
    if (args.src is None) != (args.tgt is None):
        raise InputError("--src and --tgt go together: give both, or neither (pairs on stdin)")
    if args.src is not None:
        try:
            src, tgt = read_lines(args.src, "--src"), read_lines(args.tgt, "--tgt")
        except OSError as exc:
            raise InputError(f"cannot read {exc.filename}: {exc.strerror}") from None
        except ValueError as exc:  # not UTF-8
            raise InputError(str(exc)) from None
        if len(src) != len(tgt):
            raise InputError(f"{len(src)} source lines but {len(tgt)} target lines")
        return list(zip(src, tgt, strict=True))
    pairs: list[tuple[str, str]] = []
    lines = sys.stdin.buffer.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    for number, raw in enumerate(lines, 1):
        try:
            line = raw.decode("utf-8").rstrip("\r")
        except UnicodeDecodeError:
            raise InputError(f"stdin line {number} is not valid UTF-8") from None
        if not line.strip():  # a blank line: a blank output line, as a blank source
            pairs.append(("", ""))
            continue
        source, tab, target = line.partition("\t")
        if not tab:
            raise InputError(
                f"stdin line {number} has no tab: send source<TAB>target, or use --src/--tgt"
            )
        pairs.append((source, target))
    return pairs


def render(result: Result | None, args: argparse.Namespace) -> str:
    """One output line (without its newline); ``None``: a blank source (``null`` in
    ``--json``, whose lines stay JSON values; so does a non-finite number)."""
    if result is None:
        return "null" if args.json else ""
    h = result.best
    if args.json:
        record = {
            "log_prob": finite(h.log_prob),
            "score": finite(h.score),
            "tokens": list(h.tokens),
            "token_log_probs": [finite(x) for x in h.token_log_probs or ()],
        }
        if args.alignment:
            record["alignment"] = list(h.alignment or ())
            record["source_pieces"] = list(result.source_pieces)
        return json.dumps(record, ensure_ascii=False, allow_nan=False)
    line = f"{h.score if args.normalize else h.log_prob:.6f}"
    if args.tokens:
        line += "\t" + token_scores_text(h)
    if args.alignment:
        line += "\t" + h.pharaoh()
    return line


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    problem = check_connection_args(args) or (
        "--batch-size and --concurrency must be >= 1"
        if args.batch_size < 1 or args.concurrency < 1
        else None
    )
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2
    try:
        pairs = read_pairs(args)
    except InputError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if not pairs:
        print(f"{PROG}: error: no pairs to score", file=sys.stderr)
        return 2
    kept = [i for i, (source, _) in enumerate(pairs) if source.strip()]
    progress = Progress(len(kept), prog=PROG)
    start = time.monotonic()
    results: list[Result | None] = [None] * len(pairs)
    try:
        with contextlib.ExitStack() as stack:
            if args.bundle is not None:
                scored = _with_bundle(args, [pairs[i] for i in kept])
            else:
                translator = stack.enter_context(translator_from_args(args, args.server))
                scored = translator.score_many(
                    (pairs[i] for i in kept),
                    batch_size=args.batch_size,
                    concurrency=args.concurrency,
                    length_penalty=args.length_penalty,
                    length_penalty_form=args.length_penalty_form,
                    coverage_penalty=args.coverage_penalty,
                    return_alignment=args.alignment,
                )
            for n, result in enumerate(_counted(scored, progress)):
                results[kept[n]] = result
    except TranslatorError as exc:
        progress.close()
        print(f"{PROG}: error: {_explained(exc, kept)}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - --bundle: a CLI reports one line, not a traceback
        progress.close()
        named = sentence_index(str(exc))
        if named is not None:  # refused as the server would: texts[i] of the kept pairs
            field, index, rest = named
            side = "source" if field == "texts" else "target"
            details = f"line {kept[index] + 1}: the {side}{rest}"
            print(f"{PROG}: error: {bundle_error(exc, details)}", file=sys.stderr)
            return 1
        print(f"{PROG}: error: {bundle_error(exc)}", file=sys.stderr)
        return 1
    progress.close()
    out = "".join(render(r, args) + "\n" for r in results)
    if args.out is not None:
        try:
            args.out.write_text(out, encoding="utf-8")
        except OSError as exc:
            print(f"{PROG}: error: cannot write --out {args.out}: {exc.strerror}", file=sys.stderr)
            return 1
    else:
        sys.stdout.write(out)
    _summary([r for r in results if r is not None], time.monotonic() - start)
    return 0


def _with_bundle(args: argparse.Namespace, pairs: list[tuple[str, str]]) -> Iterator[Result]:
    """The pairs scored in this process (``--bundle``), as the server would score them.
    The one part that needs the serving package (ONNX Runtime and all): imported by name,
    only here, so that the client library never depends on the server (as ``nmt-eval
    --bundle``; tests/nmt_client/test_imports.py)."""
    offline = importlib.import_module("service.offline")
    options = score_request(
        [], [], length_penalty=args.length_penalty, coverage_penalty=args.coverage_penalty,
        length_penalty_form=args.length_penalty_form, return_alignment=args.alignment,
    ).options  # fmt: skip
    scored = offline.score_with_bundle(args.bundle, pairs, options, batch=args.batch_size)
    for pieces, h, source_pieces, alignment in scored:
        # text stays empty: the output lines print log-probs and tokens, never the text
        hyp = Hypothesis(
            "", tuple(pieces), h.score, h.log_prob, None, None, h.token_log_probs,
            None if alignment is None else tuple(alignment),
        )  # fmt: skip
        yield Result(source="", hypotheses=(hyp,), source_pieces=tuple(source_pieces))


def _counted(results: Iterator[Result], progress: Progress) -> Iterator[Result]:
    for result in results:
        progress.advance()
        yield result


def _explained(exc: TranslatorError, kept: list[int]) -> TranslatorError:
    """``exc`` in the CLI's terms: ``texts[i]``/``targets[i]`` (counted over all pairs
    sent, as ``score_many`` counts them) becomes the input line it came from."""
    named = sentence_index(exc.details) if isinstance(exc, InvalidRequest) else None
    if named is None or named[1] >= len(kept):
        return explain_batch_error(exc)
    field, at, rest = named
    side = "source" if field == "texts" else "target"
    details = f"line {kept[at] + 1}: the {side}{rest}"
    return type(exc)(exc.code, details, request_id=exc.request_id, attempts=exc.attempts)


def _summary(results: list[Result], seconds: float) -> None:
    """Pairs, target tokens (EOS included), their mean log-prob and perplexity."""
    tokens = sum(len(r.best.tokens) + 1 for r in results)
    total = sum(r.best.log_prob or 0.0 for r in results)
    mean = -total / tokens if tokens else math.nan
    ppl = math.exp(mean) if mean < 700 else math.inf  # exp overflows past ~709.8
    print(
        f"{PROG}: {len(results)} pairs, {tokens} target tokens (</s> counted), "
        f"log-prob {total:.4f} ({total / max(tokens, 1):.4f} a token, perplexity {ppl:.3f}), "
        f"{seconds:.1f} s",
        file=sys.stderr,
    )


if __name__ == "__main__":
    sys.exit(main())
