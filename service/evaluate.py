"""``nmt-eval``: translate a file (via a server or a local bundle) and score it.

Prints sacreBLEU's signature line (``BLEU = ...``) and chrF.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from models.tokenizer import read_lines
from service.errors import RETRY_HINT
from service.limits import EngineConfig


def skip_blank(translate: Callable[[list[str]], list[str]], lines: list[str]) -> list[str]:
    """Translate the non-blank lines; a blank source line gets an empty translation
    (the service rejects empty texts, and a blank line has nothing to translate)."""
    keep = [i for i, line in enumerate(lines) if line.strip()]
    out = [""] * len(lines)
    for i, hyp in zip(keep, translate([lines[i] for i in keep]) if keep else [], strict=True):
        out[i] = hyp
    return out


def translate_with_bundle(bundle_dir: Path, lines: list[str], beam: int) -> list[str]:
    """Best translations with the bundle's own decoding defaults at beam size ``beam``."""
    import dataclasses

    from service.bundle import load_bundle
    from service.decoding import decode
    from service.runtime import RuntimeConfig

    bundle = load_bundle(bundle_dir, RuntimeConfig(providers=("cpu",)))
    options = dataclasses.replace(bundle.decoding, beam_size=beam, n_best=1)
    sources = [bundle.src_tokenizer.encode(line) or [bundle.config.unk_id] for line in lines]
    nbest = decode(bundle.model, sources, options=options, special=bundle.special)
    return [bundle.tgt_tokenizer.decode(h[0].tokens) for h in nbest]


def error_line(exc: Exception) -> str:
    """One line for any failure; a gRPC error's repr spans several."""
    code, details = getattr(exc, "code", None), getattr(exc, "details", None)
    if callable(code) and callable(details):
        return f"{code().name}: {' '.join(str(details()).split())}"
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


# Requests nmt-eval keeps in flight: enough to fill the server's batches, few enough to
# stay far below its in-flight and queue limits.
EVAL_WINDOW = 8
# A request of batch x beam rows must fit in the server's max_live_rows (its default).
EVAL_ROWS = EngineConfig.max_live_rows
OVERLOAD_RETRIES = 20


def _overloaded(exc) -> bool:
    """The server's own "busy, retry with backoff" (queue full, too many in flight), not
    gRPC's RESOURCE_EXHAUSTED for a message over its size limit, which never succeeds.

    ``exc``: a ``grpc.RpcError`` (grpc is imported only where a server is used)."""
    import grpc

    return exc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and RETRY_HINT in (exc.details() or "")


def translate_with_server(
    server: str, lines: list[str], beam: int, *, batch: int = 32, timeout: float = 300.0
) -> list[str]:
    """Translate ``lines`` with a running server, at most :data:`EVAL_WINDOW` requests of
    at most ``batch`` sentences (fewer for wide beams) in flight; an overloaded server
    (RESOURCE_EXHAUSTED) is retried with backoff."""
    import grpc

    from service.proto.nmt.v1 import translator_pb2 as pb
    from service.proto.nmt.v1 import translator_pb2_grpc as pb_grpc

    options = pb.DecodeOptions(
        strategy=pb.STRATEGY_BEAM if beam > 1 else pb.STRATEGY_GREEDY, beam_size=beam
    )
    batch = max(1, min(batch, EVAL_ROWS // max(1, beam)))
    chunks = [lines[i : i + batch] for i in range(0, len(lines), batch)]
    results: list[list[str] | None] = [None] * len(chunks)
    with grpc.insecure_channel(server) as channel:
        stub = pb_grpc.TranslatorStub(channel)

        def send(i: int):
            request = pb.TranslateRequest(texts=chunks[i], options=options)
            return stub.Translate.future(request, timeout=timeout)

        pending = deque((i, send(i), 0) for i in range(min(EVAL_WINDOW, len(chunks))))
        next_chunk = len(pending)
        while pending:
            i, future, tries = pending.popleft()
            try:
                response = future.result()
            except grpc.RpcError as exc:
                if not _overloaded(exc) or tries >= OVERLOAD_RETRIES:
                    raise
                time.sleep(min(2.0, 0.05 * 2**tries))
                pending.append((i, send(i), tries + 1))
                continue
            results[i] = [t.hypotheses[0].text for t in response.translations]
            if next_chunk < len(chunks):
                pending.append((next_chunk, send(next_chunk), 0))
                next_chunk += 1
    return [text for chunk in results for text in chunk]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt-eval", description=__doc__.splitlines()[0])
    p.add_argument("--src", type=Path, required=True)
    p.add_argument("--ref", type=Path, required=True)
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="HOST:PORT of a running nmt-serve")
    where.add_argument("--bundle", type=Path, help="bundle directory (decode locally)")
    p.add_argument("--beam", type=int, default=1)
    p.add_argument("--limit", type=int, default=None, help="first N lines only")
    p.add_argument("--out", type=Path, default=None, help="write the translations here")
    args = p.parse_args(argv)
    try:
        import sacrebleu
    except ImportError:
        print("nmt-eval: error: needs sacrebleu: pip install sacrebleu", file=sys.stderr)
        return 2
    try:
        src, ref = read_lines(args.src), read_lines(args.ref)
    except OSError as exc:
        which = "--src" if exc.filename == str(args.src) else "--ref"
        print(
            f"nmt-eval: error: cannot read {which} {exc.filename}: {exc.strerror}", file=sys.stderr
        )
        return 2
    if len(src) != len(ref):
        print(
            f"nmt-eval: error: {len(src)} source lines but {len(ref)} references", file=sys.stderr
        )
        return 2
    if args.limit:
        src, ref = src[: args.limit], ref[: args.limit]
    start = time.monotonic()
    try:
        if args.server:
            hyps = skip_blank(lambda ls: translate_with_server(args.server, ls, args.beam), src)
        else:
            hyps = skip_blank(lambda ls: translate_with_bundle(args.bundle, ls, args.beam), src)
    except Exception as exc:  # noqa: BLE001 - a CLI reports one line, not a traceback
        print(f"nmt-eval: error: {error_line(exc)}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - start
    if args.out:
        args.out.write_text("".join(h + "\n" for h in hyps), encoding="utf-8")
    print(sacrebleu.corpus_bleu(hyps, [ref]))
    print(sacrebleu.corpus_chrf(hyps, [ref]))
    print(f"{len(src)} sentences in {seconds:.1f} s ({len(src) / seconds:.1f} sentences/s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
