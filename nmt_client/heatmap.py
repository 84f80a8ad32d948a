"""Attention heatmaps (``nmt-translate --attention-png``), like Bahdanau et al. (2015):
source on x, target on y, a colour bar. Needs matplotlib (``pip install
'rnn-nmt-serving[viz]'``); merging pieces into words does not."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from nmt_client.results import EOS, Attention

MATPLOTLIB_HINT = "needs matplotlib: pip install 'rnn-nmt-serving[viz]'"
WORD_START = "\u2581"  # SentencePiece's "▁": the piece begins a new word
SPECIAL = ("</s>", "<s>", "<unk>", "<pad>")


def have_matplotlib() -> bool:
    return importlib.util.find_spec("matplotlib") is not None


def display_piece(piece: str) -> str:
    """A piece as shown: without the ``▁`` word marker (a bare ``▁`` stays visible)."""
    shown = piece.replace(WORD_START, "")
    return shown or WORD_START


def word_spans(pieces: tuple[str, ...] | list[str]) -> list[tuple[int, int, str]]:
    """``(first, end, word)`` per word: a word starts at a piece beginning with ``▁``
    (and at the first piece); special tokens such as ``</s>`` are words of their own."""
    spans: list[tuple[int, int, str]] = []
    for i, piece in enumerate(pieces):
        special = piece in SPECIAL
        if spans and not special and not piece.startswith(WORD_START):
            first, _, word = spans[-1]
            if word not in SPECIAL:
                spans[-1] = (first, i + 1, word + piece)
                continue
        spans.append((i, i + 1, piece if special else piece.replace(WORD_START, "")))
    return [(a, b, w or WORD_START) for a, b, w in spans]


def merge_words(att: Attention) -> Attention:
    """Attention between words instead of pieces: a source word's weight is the **sum**
    over its pieces (the attention it received; rows still sum to 1), a target word's
    row the **mean** of its pieces' rows (one distribution per word)."""
    src, tgt = word_spans(att.source_tokens), word_spans(att.target_tokens)
    matrix = att.matrix
    values: list[float] = []
    for t0, t1, _ in tgt:
        for s0, s1, _ in src:
            total = sum(matrix[r][c] for r in range(t0, t1) for c in range(s0, s1))
            values.append(total / (t1 - t0))
    return Attention(
        len(tgt), len(src), tuple(values), tuple(w for *_, w in src), tuple(w for *_, w in tgt)
    )


def plot_attention(att: Attention, path: Path, *, words: bool = False, title: str = "") -> None:
    """Write ``att`` as a PNG heatmap at ``path``; ``words``: merged as in
    :func:`merge_words`, else one cell per SentencePiece piece (shown without ``▁``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if words:
        att = merge_words(att)
        xs, ys = list(att.source_tokens), list(att.target_tokens)
    else:
        xs = [display_piece(p) for p in att.source_tokens]
        ys = [p if p == EOS else display_piece(p) for p in att.target_tokens]
    width = max(4.5, 0.45 * att.cols + 2.5)
    height = max(3.0, 0.4 * att.rows + 1.6)
    fig, ax = plt.subplots(figsize=(width, height), dpi=120)
    image = ax.imshow(att.matrix, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(att.cols), xs, rotation=60, ha="left", rotation_mode="anchor")
    ax.set_yticks(range(att.rows), ys)
    ax.xaxis.tick_top()
    ax.set_xlabel("source " + ("words" if words else "pieces"))
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("target " + ("words" if words else "pieces"))
    ax.set_xticks([x - 0.5 for x in range(att.cols + 1)], minor=True)
    ax.set_yticks([y - 0.5 for y in range(att.rows + 1)], minor=True)
    ax.grid(which="minor", color="white", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    bar = fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    bar.set_label("attention weight")
    if title:
        fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
