"""``nmt-eval``: translate a file with a running server (or a local bundle) and score it.

Prints sacreBLEU's signature line (``BLEU = ...``) and chrF; with ``--glossary``, the
term usage (Dinu et al. 2019: how many of the target terms the sources call for the
translations hold), and with ``--constrain`` those terms are decoded as constraints.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from nmt_client.cli import (
    add_connection_args,
    bundle_error,
    check_connection_args,
    text_index,
    translate_lines,
    translator_from_args,
)
from nmt_client.decoding_args import add_decoding_args, check_decoding_args, options_from_args
from nmt_client.errors import TranslatorError
from nmt_client.glossary import Glossary
from nmt_client.options import DecodeOptions
from nmt_client.progress import Progress
from nmt_client.translator import Translator

PROG = "nmt-eval"
SACREBLEU_HINT = "nmt-eval needs sacrebleu: pip install 'rnn-nmt-serving[eval]'"
# Requests nmt-eval keeps in flight: enough to fill the server's batches, few enough to
# stay far below its in-flight and queue limits.
EVAL_WINDOW = 8
# A --bundle request of batch x beam rows must fit in the default --max-live-rows (a
# server's requests are sized to its own limits by Translator.translate_many).
EVAL_ROWS = 256
# A busy server is waited out: up to 20 retries, backoff capped at 2 s.
OVERLOAD_RETRIES = 20


def read_lines(path: Path, flag: str) -> list[str]:
    """``path``'s lines; a line that is not UTF-8 raises ``ValueError`` naming it."""
    with open(path, "rb") as fh:
        lines = fh.read().split(b"\n")
    if lines[-1] == b"":
        lines.pop()  # the newline that ends the last line
    try:
        return [line.decode("utf-8").rstrip("\r") for line in lines]
    except UnicodeDecodeError:
        number = next(i for i, line in enumerate(lines, 1) if not _is_utf8(line))
        raise ValueError(
            f"{flag} {path}: line {number} is not valid UTF-8: convert the file to UTF-8"
        ) from None


def _is_utf8(line: bytes) -> bool:
    try:
        line.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def skip_blank(translate: Callable[[list[str]], list[str]], lines: list[str]) -> list[str]:
    """Translate the non-blank lines; a blank source line gets an empty translation
    (the service rejects empty texts, and a blank line has nothing to translate)."""
    keep = [i for i, line in enumerate(lines) if line.strip()]
    out = [""] * len(lines)
    for i, hyp in zip(keep, translate([lines[i] for i in keep]) if keep else [], strict=True):
        out[i] = hyp
    return out


def request_size(batch: int, options: DecodeOptions) -> int:
    """Sentences a request: ``batch``, fewer when a wide beam would pass the server's
    default row limit."""
    return max(1, min(batch, EVAL_ROWS // max(1, options.beam_size or 1)))


def translate_with_server(
    translator: Translator,
    lines: list[str],
    options: DecodeOptions | None = None,
    *,
    batch: int = 32,
    progress: Progress | None = None,
    constraints_for: Callable[[str], Sequence[str]] | None = None,
) -> list[str]:
    """Best translations of ``lines`` from the server ("" for a blank line): requests of
    at most ``batch`` sentences (fewer where the server's limits take fewer at this beam
    size: :meth:`Translator.translate_many`), :data:`EVAL_WINDOW` in flight;
    the translator retries while the server is busy. A refused request's error names
    the ``--src`` line, and over the server's sentence limit asks for a lower
    ``--batch-size``."""
    options = dataclasses.replace(options or DecodeOptions(), n_best=1, return_scores=False)
    results = translate_lines(
        translator,
        lines,
        what="--src line",
        batch_size=batch,
        concurrency=EVAL_WINDOW,
        options=options,
        constraints_for=constraints_for,
    )
    out = []
    for r in results:
        out.append(r.text if r is not None else "")
        if progress is not None:
            progress.advance()
    return out


def translate_with_bundle(
    bundle_dir: Path,
    lines: list[str],
    options: DecodeOptions | None = None,
    progress: Progress | None = None,
    *,
    batch: int = 32,
    constraints_for: Callable[[str], Sequence[str]] | None = None,
) -> list[str]:
    """Best translations decoded in this process, the options applied as the server
    applies a request's, in requests of :func:`request_size` sentences. The one part of
    ``nmt-eval`` that needs the serving package (ONNX Runtime and all): imported here,
    only for ``--bundle``, so that the client library never depends on the server."""
    # By name, not an import statement: the package-layering test reads this package's
    # imports and keeps it free of the server's (tests/nmt_client/test_imports.py).
    offline = importlib.import_module("service.offline")
    options = options or DecodeOptions()
    return offline.translate_with_bundle(
        bundle_dir,
        lines,
        options.to_proto(),
        batch=request_size(batch, options),
        on_done=progress.advance if progress is not None else None,
        constraints=[constraints_for(t) for t in lines] if constraints_for else None,
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0].replace("``", ""))
    p.add_argument(
        "--src", metavar="PATH", type=Path, required=True, help="source sentences, one a line"
    )
    p.add_argument(
        "--ref", metavar="PATH", type=Path, required=True, help="reference translations, one a line"
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", metavar="HOST:PORT", help="HOST:PORT of a running nmt-serve")
    where.add_argument(
        "--bundle", metavar="DIR", type=Path, help="bundle directory (decode in this process)"
    )
    add_decoding_args(p, n_best=False, stream=False)
    p.add_argument(
        "--batch-size",
        metavar="N",
        type=int,
        default=32,
        help="sentences a request, fewer where the server's limits (or, with --bundle, "
        f"{EVAL_ROWS} rows) take fewer at this beam size (default: %(default)s)",
    )
    p.add_argument(
        "--limit",
        metavar="N",
        type=int,
        default=0,
        help="first N lines only (default, or 0: all)",
    )
    p.add_argument(
        "--out", metavar="PATH", type=Path, default=None, help="write the translations here"
    )
    p.add_argument(
        "--glossary",
        metavar="TSV",
        type=Path,
        default=None,
        help="'source term<TAB>target term' lines: print the term usage, how many of the "
        "target terms the sources call for (source term as whole words, any case) the "
        "translations hold",
    )
    p.add_argument(
        "--constrain",
        action="store_true",
        help="decode each sentence with its --glossary terms as constraints (lexically "
        "constrained beam search; give a beam, e.g. --beam 5)",
    )
    add_connection_args(p, server_default=None)
    p.set_defaults(retries=OVERLOAD_RETRIES, timeout=300.0)
    return p


def check_out(out: Path) -> str | None:
    """What keeps ``--out`` from being written (checked before translating)."""
    parent = out.parent
    if out.is_dir():
        return f"--out {out} is a directory: give a file path"
    if not parent.is_dir():
        return f"--out {out}: directory {parent} does not exist"
    if not os.access(out if out.exists() else parent, os.W_OK):
        return f"--out {out}: permission denied: give a writable path"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    p = parser()
    args = p.parse_args(argv)
    try:
        import sacrebleu
    except ImportError:
        print(f"{PROG}: error: {SACREBLEU_HINT}", file=sys.stderr)
        return 2
    problem = (
        check_decoding_args(args)
        or check_connection_args(args)
        or ("--batch-size must be >= 1" if args.batch_size < 1 else None)
        or (f"--limit {args.limit} must be >= 0 (0: all lines)" if args.limit < 0 else None)
        or (check_out(args.out) if args.out is not None else None)
        or ("--constrain decodes with --glossary terms: give --glossary" if args.constrain
            and args.glossary is None else None)
    )  # fmt: skip
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2
    try:
        src, ref = read_lines(args.src, "--src"), read_lines(args.ref, "--ref")
    except OSError as exc:
        which = "--src" if exc.filename == str(args.src) else "--ref"
        print(f"{PROG}: error: cannot read {which} {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    except ValueError as exc:  # not UTF-8
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    if len(src) != len(ref):
        print(f"{PROG}: error: {len(src)} source lines but {len(ref)} references", file=sys.stderr)
        return 2
    if not src:
        print(
            f"{PROG}: error: no sentences in --src {args.src}: give a non-empty file",
            file=sys.stderr,
        )
        return 2
    if args.limit:
        src, ref = src[: args.limit], ref[: args.limit]
    glossary, problem = Glossary.for_cli(args.glossary)
    if problem:
        print(f"{PROG}: error: {problem}", file=sys.stderr)
        return 2
    constraints_for = glossary.terms_for if args.constrain and glossary else None
    options = options_from_args(args)
    start = time.monotonic()
    progress = Progress(len(src), prog=PROG)
    try:
        if args.server:
            # --timeout bounds each request, retries included (not the whole file)
            with translator_from_args(args, args.server) as translator:
                hyps = translate_with_server(
                    translator, src, options, batch=args.batch_size, progress=progress,
                    constraints_for=constraints_for,
                )  # fmt: skip
        else:
            progress.advance(sum(not line.strip() for line in src))  # blank: not decoded
            hyps = skip_blank(
                lambda ls: translate_with_bundle(
                    args.bundle,
                    ls,
                    options,
                    progress,
                    batch=args.batch_size,
                    constraints_for=constraints_for,
                ),  # fmt: skip
                src,
            )
    except TranslatorError as exc:
        progress.close()
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:  # noqa: BLE001 - a CLI reports one line, not a traceback
        progress.close()
        named = text_index(str(exc)) if args.bundle else None
        if named is not None:  # refused as the server would: texts[i] of the non-blank lines
            line = [i for i, text in enumerate(src) if text.strip()][named[0]] + 1
            print(
                f"{PROG}: error: {bundle_error(exc, f'--src line {line}{named[1]}')}",
                file=sys.stderr,
            )
            return 1
        print(f"{PROG}: error: {bundle_error(exc)}", file=sys.stderr)
        return 1
    progress.close()
    seconds = time.monotonic() - start
    if args.out:
        try:
            args.out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
        except OSError as exc:
            print(f"{PROG}: error: cannot write --out {args.out}: {exc.strerror}", file=sys.stderr)
            return 1
    print(sacrebleu.corpus_bleu(hyps, [ref]))
    print(sacrebleu.corpus_chrf(hyps, [ref]))
    if glossary is not None:
        held, total = glossary.usage(src, hyps)
        share = f"{100 * held / total:.1f} %" if total else "n/a"
        how = "constrained" if args.constrain else "not constrained"
        print(f"term usage: {held} of {total} glossary terms ({share}; {how})")
    print(f"{len(src)} sentences in {seconds:.1f} s ({len(src) / seconds:.1f} sentences/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
