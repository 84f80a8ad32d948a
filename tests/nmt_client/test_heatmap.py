"""Heatmap labels and the merging of SentencePiece pieces into words."""

from __future__ import annotations

import pytest

from nmt_client import Attention
from nmt_client.heatmap import display_piece, merge_words, plot_attention, word_spans

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _attention() -> Attention:
    # source "▁walk ed ▁home ." (2 words: "walked", "home."),
    # target "▁A n du vo ▁a </s>" (3 words: "Anduvo", "a", "</s>")
    source = ("▁walk", "ed", "▁home", ".")
    target = ("▁A", "n", "du", "vo", "▁a", "</s>")
    rows = [
        [0.5, 0.3, 0.1, 0.1],
        [0.2, 0.6, 0.2, 0.0],
        [0.4, 0.4, 0.1, 0.1],
        [0.1, 0.1, 0.4, 0.4],
        [0.0, 0.0, 0.5, 0.5],
        [0.25, 0.25, 0.25, 0.25],
    ]
    return Attention(6, 4, tuple(v for r in rows for v in r), source, target)


def test_pieces_are_shown_without_the_word_marker():
    assert display_piece("▁house") == "house"
    assert display_piece("ed") == "ed"
    assert display_piece("▁") == "▁"  # a bare marker stays visible
    assert display_piece("</s>") == "</s>"


def test_word_spans():
    assert word_spans(("▁walk", "ed", "▁home", ".")) == [(0, 2, "walked"), (2, 4, "home.")]
    # a first piece without the marker starts a word; </s> is a word of its own
    assert word_spans(("ed", "▁a", "</s>")) == [(0, 1, "ed"), (1, 2, "a"), (2, 3, "</s>")]
    assert word_spans(("▁", "ab", "</s>", "x")) == [(0, 2, "ab"), (2, 3, "</s>"), (3, 4, "x")]


def test_merge_sums_source_pieces_and_averages_target_pieces():
    words = merge_words(_attention())
    assert (words.rows, words.cols) == (3, 2)
    assert words.source_tokens == ("walked", "home.")
    assert words.target_tokens == ("Anduvo", "a", "</s>")
    m = words.matrix
    # "Anduvo" = mean of 4 rows, each summed over "walk"+"ed" and "home"+"."
    assert m[0] == pytest.approx([(0.8 + 0.8 + 0.8 + 0.2) / 4, (0.2 + 0.2 + 0.2 + 0.8) / 4])
    assert m[1] == pytest.approx([0.0, 1.0])
    assert m[2] == pytest.approx([0.5, 0.5])
    assert all(sum(row) == pytest.approx(1.0) for row in m)  # still distributions


def test_plots_with_and_without_words(tmp_path):
    pytest.importorskip("matplotlib")
    pieces, words = tmp_path / "pieces.png", tmp_path / "words.png"
    plot_attention(_attention(), pieces, title="walked home.\nAnduvo a")
    plot_attention(_attention(), words, words=True)
    assert pieces.read_bytes()[:8] == PNG_MAGIC and words.read_bytes()[:8] == PNG_MAGIC


def test_attention_checks_its_shape():
    with pytest.raises(ValueError, match="5 values for a 2x3 matrix"):
        Attention(2, 3, (0.0,) * 5, ("a", "b", "c"), ("x", "y"))
    with pytest.raises(ValueError, match="labels"):
        Attention(1, 2, (0.5, 0.5), ("a",), ("x",))
