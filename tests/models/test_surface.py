"""Every bundle tokenizer kind's ``surface`` (source tokens as written, one per id) and
``detokenize`` (text of token strings, some copied from a source): what ``replace_unk``
renders with (service.alignment.replace_unknowns)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from models.bpe import BpeTokenizer
from models.onmt import OnmtTokenizer
from models.options import DecodeOptions, Hypothesis
from models.pieces import PieceTokenizer
from models.tokenizer import Tokenizer
from models.words import WordTokenizer
from service.alignment import replace_unknowns
from tests.committed import EN_ES_INT8

ROOT = Path(__file__).resolve().parents[2]
SPM = EN_ES_INT8 / "target.spm.model"
EOLE = ROOT / "tests" / "fixtures" / "eole"
TEXTS = [
    "The cat sat on the mat.",
    "Zyxwq met Qorvath in Paris, didn't she?",
    "Emoji 😀 and 漢字 are new here.",
]


def _words():
    vocab = ["<unk>", "<blank>", "<s>", "</s>", "the", "cat", "sat", "on", "mat", ".", ",", "?"]
    return WordTokenizer(vocab, unk_id=0)


def _pieces():
    vocab = json.loads((EOLE / "brnn_lstm1_spm_shared" / "vocab.json").read_text())["tgt"]
    proto = (EOLE / "brnn_lstm1_spm_shared" / "joint_spm.model").read_bytes()
    return PieceTokenizer(proto, [v[0] if isinstance(v, list) else v for v in vocab], unk_id=0)


def _onmt():
    fixture = EOLE / "rnn_gru1_onmt_bpe"
    vocab = json.loads((fixture / "vocab.json").read_text())["tgt"]
    return OnmtTokenizer(
        [v[0] if isinstance(v, list) else v for v in vocab],
        unk_id=0,
        options={"mode": "aggressive", "joiner_annotate": True, "segment_numbers": True},
        subword_type="bpe",
        model_file=fixture / "joint_bpe.codes",
    )


def _bpe():
    fixture = EOLE / "rnn_gru1_subword_nmt"
    vocab = json.loads((fixture / "vocab.json").read_text())["tgt"]
    return BpeTokenizer(
        [v[0] if isinstance(v, list) else v for v in vocab],
        unk_id=0,
        codes_file=fixture / "joint_subword_nmt.codes",
    )


KINDS = {
    "sentencepiece": lambda: Tokenizer.from_file(SPM),
    "words": _words,
    "pieces": _pieces,
    "onmt": _onmt,
    "bpe": _bpe,
}


@pytest.mark.parametrize("kind", KINDS)
def test_surface_is_one_token_per_id_and_detokenize_is_decode(kind):
    tok = KINDS[kind]()
    for text in TEXTS:
        ids = tok.encode(text)
        surface = tok.surface(text)
        assert len(surface) == len(ids) > 0
        unk = getattr(tok, "unk_id", 1)  # the sentencepiece kind's unk is its model's, 1
        pieces = tok.pieces(ids)
        # a known token is spelt as the vocabulary spells it; an unknown one as written
        assert all(s == p for s, p, i in zip(surface, pieces, ids, strict=True) if i != unk)
        assert all(s != "<unk>" for s in surface)
        assert tok.detokenize(pieces) == tok.decode(ids)
    assert any(unk in tok.encode(t) for t in TEXTS)  # the texts have unknown tokens


@pytest.mark.parametrize("kind", KINDS)
def test_a_copied_source_token_reads_as_written(kind):
    tok = KINDS[kind]()
    text = "Zyxwq 😀"
    target = tok.pieces(tok.encode("the cat"))
    for token in tok.surface(text):
        out = tok.detokenize([*target, token])
        assert token.replace("\u2581", "").replace("\uffed", "").replace("@@", "") in out, (
            token,
            out,
        )


def test_replace_unknowns_takes_the_most_attended_source_token():
    attention = np.array(
        [[0.1, 0.8, 0.1], [0.3, 0.3, 0.4], [0.5, 0.5, 0.0], [0.2, 0.2, 0.6]], dtype=np.float32
    )
    hyp = Hypothesis(tokens=(1, 7, 1), score=0.0, log_prob=0.0, attention=attention)
    got = replace_unknowns(["<unk>", "casa", "<unk>"], hyp, ["Zyx", "Qor", "."], unk_id=1)
    assert got == ["Qor", "casa", "Zyx"]  # a tie (0.5, 0.5): the first
    with pytest.raises(ValueError, match="needs the hypothesis's attention"):
        replace_unknowns(["<unk>"], Hypothesis((1,), 0.0, 0.0), ["x"], unk_id=1)


def test_replace_unknowns_never_copies_a_marker():
    """``<sos>`` and ``<eos>`` (bentrevett's sources) are never copied: the real word with
    the most attention is, the first of a tie; a source of markers alone keeps the unk."""
    tok = WordTokenizer(
        ["<unk>", "<sos>", "<eos>"], unk_id=0, start_tokens=["<sos>"], end_tokens=["<eos>"]
    )
    source = tok.surface("Zyx Qor")
    assert source == ["<sos>", "zyx", "qor", "<eos>"]
    attention = np.array(
        [[0.1, 0.2, 0.3, 0.4], [0.7, 0.1, 0.1, 0.1], [0.2, 0.4, 0.1, 0.3], [0.0, 0.0, 0.0, 1.0]],
        dtype=np.float32,
    )
    hyp = Hypothesis(tokens=(1, 1, 1), score=0.0, log_prob=0.0, attention=attention)
    got = replace_unknowns(["<unk>"] * 3, hyp, source, unk_id=1, marks=(1, 1))
    assert got == ["qor", "zyx", "zyx"]  # <eos> most, <sos> most (a tie after it), a word
    # the PyTorch tutorial's sources end in EOS alone; without marks it would be copied
    tutorial = Hypothesis((1,), 0.0, 0.0, attention=np.array([[0.3, 0.7], [0.0, 1.0]]))
    assert replace_unknowns(["<unk>"], tutorial, ["Zyx", "EOS"], 1, marks=(0, 1)) == ["Zyx"]
    assert replace_unknowns(["<unk>"], tutorial, ["Zyx", "EOS"], 1) == ["EOS"]
    only_marks = Hypothesis((1,), 0.0, 0.0, attention=np.array([[0.5, 0.5], [0.5, 0.5]]))
    got = replace_unknowns(["<unk>"], only_marks, ["<sos>", "<eos>"], 1, marks=(1, 1))
    assert got == ["<unk>"]


def test_replace_unknowns_never_copies_the_padding_after_the_end_marker():
    """TensorFlow's tutorial models read their sources padded to a fixed width and attend
    to the padding: neither ``<end>`` nor a ``<pad>`` is copied, a word is."""
    tok = WordTokenizer(
        ["<pad>", "<start>", "<end>", "<unk>"], unk_id=3, split_punctuation=False,
        start_tokens=["<start>"], end_tokens=["<end>"], pad_to=6, pad_token="<pad>",
    )  # fmt: skip
    source = tok.surface("Zyx Qor")
    assert source == ["<start>", "zyx", "qor", "<end>", "<pad>", "<pad>"]
    attention = np.array([[0.0, 0.1, 0.2, 0.3, 0.3, 0.1], [0.0, 0.3, 0.0, 0.0, 0.0, 0.7]])
    hyp = Hypothesis(tokens=(3,), score=0.0, log_prob=0.0, attention=attention)
    assert replace_unknowns(["<unk>"], hyp, source, 3, marks=(1, 1), pad="<pad>") == ["qor"]
    assert replace_unknowns(["<unk>"], hyp, source, 3, marks=(1, 1)) == ["<end>"]  # no pad


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("normalized", [False, True], ids=["plain", "normalized"])
def test_the_source_unk_id_is_the_id_of_unknown_text(kind, normalized):
    """:func:`models.tokenizer.unk_id_of` reads every kind's own unk id (the vocabularies'
    0, the SentencePiece model's 1), behind a NormalizingTokenizer too."""
    from models.normalize import Normalization, NormalizingTokenizer
    from models.tokenizer import unk_id_of

    tok = KINDS[kind]()
    if normalized:
        tok = NormalizingTokenizer(tok, Normalization(lang="en"))
    unk = unk_id_of(tok)
    assert unk == (1 if kind == "sentencepiece" else 0)
    assert tok.pieces([unk]) == ["<unk>"]
    assert any(unk in tok.encode(t) for t in TEXTS)


def test_the_loop_keeps_the_attention_replace_unk_reads():
    from service.loop import decode
    from tests.service.test_decoding import SPECIAL, FakeStepModel, copy_table

    (hyps,) = decode(
        FakeStepModel(copy_table),
        [[4, 5]],
        options=DecodeOptions(replace_unk=True),
        special=SPECIAL,
    )
    assert hyps[0].attention is not None and hyps[0].attention.shape == (3, 2)


@pytest.mark.parametrize(
    ("pieces", "text"),
    [
        (["▁la", "▁casa", "▁de"], "la casa de"),  # all known: SentencePiece's own
        (["▁la", "▁casa", "▁Zyxwq", "rt", "▁de"], "la casa Zyxwqrt de"),
        (["▁Zyx", "▁de"], "Zyx de"),
        (["😀", "▁de"], "😀 de"),
        (["▁la", "😀"], "la😀"),
    ],
)
def test_foreign_pieces_keep_their_word_boundaries(pieces, text):
    assert KINDS["sentencepiece"]().detokenize(pieces) == text
