"""``nmt-translate``: translate text with a running server; optional attention heatmap."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path

import grpc
import numpy as np

from service.proto.nmt.v1 import translator_pb2 as pb
from service.proto.nmt.v1 import translator_pb2_grpc as pb_grpc


def attention_array(att: pb.AttentionMatrix) -> np.ndarray:
    """``(rows, cols)`` = ``(target tokens incl. EOS, source tokens)``."""
    return np.asarray(att.values, dtype=np.float32).reshape(att.rows, att.cols)


def plot_attention(att: pb.AttentionMatrix, path: Path, *, title: str = "") -> None:
    """Alignment heatmap like Bahdanau et al. (2015): source on x, target on y."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    weights = attention_array(att)
    width = max(4.0, 0.45 * att.cols + 1.5)
    height = max(3.0, 0.4 * att.rows + 1.2)
    fig, ax = plt.subplots(figsize=(width, height), dpi=120)
    ax.imshow(weights, cmap="gray", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(att.cols), list(att.source_tokens), rotation=60, ha="right")
    ax.set_yticks(range(att.rows), list(att.target_tokens))
    ax.xaxis.tick_top()
    ax.set_xticks(np.arange(-0.5, att.cols, 1), minor=True)
    ax.set_yticks(np.arange(-0.5, att.rows, 1), minor=True)
    ax.tick_params(which="minor", length=0)
    if title:
        ax.set_title(title, pad=20, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def build_request(args: argparse.Namespace, texts: Sequence[str]) -> pb.TranslateRequest:
    options = pb.DecodeOptions(
        strategy=pb.STRATEGY_BEAM if args.beam > 1 else pb.STRATEGY_GREEDY,
        beam_size=args.beam,
        n_best=args.n_best,
        return_attention=args.attention_png is not None,
        return_scores=args.scores,
    )
    return pb.TranslateRequest(texts=list(texts), model=args.model, options=options)


def _check_args(args: argparse.Namespace) -> str | None:
    """What is wrong with the arguments, found before anything is sent (``None``: fine)."""
    if args.beam < 1 or args.n_best < 1:
        return "--beam and --n-best must be >= 1"
    if args.n_best > args.beam:
        return f"--n-best {args.n_best} needs --beam {args.n_best} or more"
    if not args.timeout > 0:
        return f"--timeout {args.timeout} must be a positive number of seconds"
    png = args.attention_png
    if png is not None:
        if importlib.util.find_spec("matplotlib") is None:
            return "--attention-png needs matplotlib: pip install 'rnn-nmt-serving[viz]'"
        if not png.parent.is_dir():
            return f"--attention-png {png}: directory {png.parent} does not exist"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="nmt-translate", description=__doc__.splitlines()[0])
    p.add_argument("text", nargs="+", help="sentences to translate")
    p.add_argument("--server", default="127.0.0.1:50051", help="HOST:PORT")
    p.add_argument("--model", default="", help="model name (default: the server's default)")
    p.add_argument("--beam", type=int, default=1, help="beam size (1: greedy)")
    p.add_argument("--n-best", type=int, default=1)
    p.add_argument("--scores", action="store_true", help="print scores")
    p.add_argument(
        "--attention-png",
        type=Path,
        default=None,
        help="write the attention heatmap of the first sentence's best hypothesis",
    )
    p.add_argument("--timeout", type=float, default=30.0, help="deadline in seconds")
    args = p.parse_args(argv)
    problem = _check_args(args)
    if problem:
        print(f"nmt-translate: error: {problem}", file=sys.stderr)
        return 2
    try:
        with grpc.insecure_channel(args.server) as channel:
            stub = pb_grpc.TranslatorStub(channel)
            response = stub.Translate(build_request(args, args.text), timeout=args.timeout)
    except grpc.RpcError as exc:
        print(f"nmt-translate: error: {exc.code().name}: {exc.details()}", file=sys.stderr)
        return 1
    for translation in response.translations:
        for rank, hyp in enumerate(translation.hypotheses):
            prefix = f"{rank + 1}\t" if args.n_best > 1 else ""
            suffix = f"\t{hyp.score:.4f}" if args.scores else ""
            print(f"{prefix}{hyp.text}{suffix}")
    if args.attention_png is not None:
        best = response.translations[0].hypotheses[0]
        try:
            plot_attention(best.attention, args.attention_png, title=f"{args.text[0]}\n{best.text}")
        except OSError as exc:
            print(
                f"nmt-translate: error: could not write {args.attention_png}: {exc.strerror}",
                file=sys.stderr,
            )
            return 1
        print(f"attention heatmap: {args.attention_png}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
