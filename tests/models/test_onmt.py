"""models/onmt.py: the OpenNMT Tokenizer over a vocabulary of the model's own."""

from __future__ import annotations

import pyonmttok
import pytest

from models.onmt import OnmtTokenizer
from models.tokenizer import TokenizerError, load_tokenizer, tokenizer_files, write_tokenizer
from tests.committed import EN_ES_INT8

SPM = EN_ES_INT8 / "source.spm.model"
TEXTS = ["Hello, world! The cat-sat.", "Do you speak English?", "It costs 3.50 euros."]
SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]
AGGRESSIVE = {"mode": "aggressive", "joiner_annotate": True, "segment_numbers": True}


def _vocab(options: dict, texts=TEXTS, **subword) -> list[str]:
    tok = pyonmttok.Tokenizer(**options, **subword)
    seen: dict[str, None] = {}
    for text in texts:
        seen.update(dict.fromkeys(tok(text)))
    return SPECIALS + list(seen)[::-1]  # not the order the tokens come in


def test_aggressive_joiners_round_trip():
    tok = OnmtTokenizer(_vocab(AGGRESSIVE), unk_id=0, options=AGGRESSIVE)
    ids = tok.encode(TEXTS[0])
    assert tok.pieces(ids) == ["Hello", "￭,", "world", "￭!", "The", "cat", "￭-￭", "sat", "￭."]
    for text in TEXTS:
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode_batch(TEXTS) == [tok.encode(t) for t in TEXTS]
    assert tok.encode("Hello zebra")[1] == 0  # a token the vocabulary lacks is unk


def test_sentencepiece_subwords_and_byte_fallback(tmp_path):
    options = {"mode": "none", "sp_nbest_size": 1, "sp_alpha": 0}
    vocab = _vocab(options, sp_model_path=str(SPM))
    tok = OnmtTokenizer(
        vocab + ["<0xE2>", "<0x82>", "<0xAC>"],
        unk_id=0,
        options=options,
        subword_type="sentencepiece",
        model_file=SPM,
    )
    for text in TEXTS:
        assert tok.decode(tok.encode(text)) == text
    # as Eole's detokenize: byte pieces become the character they spell
    euro = [tok.ids[p] for p in ("<0xE2>", "<0x82>", "<0xAC>")]
    assert tok.decode([tok.ids["▁It"], *euro]) == "It€"
    assert tok.decode([tok.ids["▁It"], euro[0]]) == "It\N{REPLACEMENT CHARACTER}"
    # OpenNMT-py 3.5's transform does not: the pieces stay as they are
    raw = OnmtTokenizer(
        tok.tokens,
        unk_id=0,
        options=options,
        subword_type="sentencepiece",
        model_file=SPM,
        decode_bytes=False,
    )
    assert raw.decode([tok.ids["▁It"], *euro]) == "It<0xE2><0x82><0xAC>"


def test_written_bundle_entry_loads_the_same(tmp_path):
    options = {"mode": "none", "sp_nbest_size": 1, "sp_alpha": 0}
    vocab = _vocab(options, sp_model_path=str(SPM))
    tok = OnmtTokenizer(
        vocab, unk_id=0, options=options, subword_type="sentencepiece", model_file=SPM
    )
    entry = write_tokenizer(tok, tmp_path, "target")
    assert entry == {
        "kind": "onmt",
        "file": "target.vocab.json",
        "model_file": "target.spm.model",
        "unk_id": 0,
        "subword_type": "sentencepiece",
        "onmttok": options,
        "decode_bytes": True,
    }
    assert tokenizer_files(entry) == ["target.vocab.json", "target.spm.model"]
    again = load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
    assert again.model_file == tmp_path / "target.spm.model"
    assert again.encode_batch(TEXTS) == tok.encode_batch(TEXTS)
    plain = OnmtTokenizer(_vocab(AGGRESSIVE), unk_id=0, options=AGGRESSIVE)
    assert tokenizer_files(write_tokenizer(plain, tmp_path, "source")) == ["source.vocab.json"]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"options": {"joiner_annotate": True}}, "lack a mode"),
        ({"options": {"mode": "none", "sp_model_path": "/x"}}, r"name files \(sp_model_path\)"),
        ({"options": {"mode": "none"}, "subword_type": "wordpiece"}, "subword type 'wordpiece'"),
        ({"options": {"mode": "none"}, "subword_type": "bpe"}, "with model file None"),
        (
            {"options": {"mode": "none"}, "subword_type": "bpe", "model_file": "/nope.codes"},
            "bpe model not found: /nope.codes",
        ),
        ({"options": {"mode": "sideways"}}, "pyonmttok refuses options"),
        ({"options": {"mode": "none"}, "unk_id": 9}, "unk id 9 is outside the vocabulary of 4"),
    ],
)
def test_bad_tokenizers_are_refused(kwargs, message):
    kwargs = {"unk_id": 0} | kwargs
    with pytest.raises(TokenizerError, match=message):
        OnmtTokenizer(SPECIALS, **kwargs)


def test_bad_entries_are_refused(tmp_path):
    tok = OnmtTokenizer(_vocab(AGGRESSIVE), unk_id=0, options=AGGRESSIVE)
    entry = write_tokenizer(tok, tmp_path, "source")
    with pytest.raises(TokenizerError, match="unreadable onmt tokenizer entry"):
        load_tokenizer({k: v for k, v in entry.items() if k != "onmttok"}, tmp_path, (1, 0, 2, 3))
    with pytest.raises(TokenizerError, match="needs a token list, onmttok options, unk_id"):
        load_tokenizer(entry | {"onmttok": "aggressive"}, tmp_path, (1, 0, 2, 3))


def test_without_pyonmttok_the_error_says_what_to_install(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "pyonmttok", None)  # import now raises ImportError
    with pytest.raises(TokenizerError, match="the OpenNMT Tokenizer: pip install pyonmttok"):
        OnmtTokenizer(SPECIALS, unk_id=0, options=AGGRESSIVE)
