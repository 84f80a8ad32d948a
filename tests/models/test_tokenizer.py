"""SentencePiece tokenizers with the project's fixed special ids."""

from __future__ import annotations

import pickle

import pytest
import sentencepiece as spm

from models.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID
from models.tokenizer import Tokenizer, TokenizerError, read_lines, train_sentencepiece


def test_trained_model_has_fixed_special_ids(spm_paths, tokenizers) -> None:
    en_path, es_path = spm_paths
    assert en_path.name == "spm.en.model" and en_path.is_file()
    assert es_path.name == "spm.es.model" and es_path.is_file()
    for tok in tokenizers:
        assert tok.vocab_size == 200
        assert (PAD_ID, UNK_ID, BOS_ID, EOS_ID) == (0, 1, 2, 3)
        assert tok.pieces([0, 1, 2, 3]) == ["<pad>", "<unk>", "<s>", "</s>"]
        assert tok._sp.pad_id() == 0 and tok._sp.eos_id() == 3


def test_encode_decode_round_trip_is_exact(tokenizers, sample_lines) -> None:
    en_tok, es_tok = tokenizers
    en, es = sample_lines
    for tok, lines in ((en_tok, en[:40]), (es_tok, es[:40])):
        ids = tok.encode_batch(lines)
        assert [tok.decode(row) for row in ids] == lines
        for line, row in zip(lines[:5], ids[:5], strict=True):
            assert tok.encode(line) == row
            assert row and min(row) > EOS_ID  # no specials inside ordinary text
            assert all(0 <= i < tok.vocab_size for i in row)


def test_unknown_characters_map_to_unk(tokenizers) -> None:
    en_tok, _ = tokenizers
    assert UNK_ID in en_tok.encode("\u4e2d\u6587")


def test_save_and_pickle_round_trip(tokenizers, tmp_path) -> None:
    en_tok, _ = tokenizers
    path = tmp_path / "copy.model"
    en_tok.save(path)
    again = Tokenizer.from_file(path)
    text = "A database containing an ordered array of items"
    assert again.encode(text) == en_tok.encode(text)
    clone = pickle.loads(pickle.dumps(en_tok))
    assert clone.model_proto == en_tok.model_proto
    assert clone.encode(text) == en_tok.encode(text)


def test_other_special_ids_are_rejected(tmp_path, sample_lines) -> None:
    en, _ = sample_lines
    prefix = tmp_path / "default_ids"
    spm.SentencePieceTrainer.train(  # SentencePiece defaults: unk=0, bos=1, eos=2, no pad
        sentence_iterator=iter(en), model_prefix=str(prefix), vocab_size=120, minloglevel=2
    )
    model_path = prefix.with_suffix(".model")
    with pytest.raises(TokenizerError, match=r"special ids .* are \(-1, 0, 1, 2\)"):
        Tokenizer.from_file(model_path)
    with pytest.raises(TokenizerError, match="nmt-data spm"):
        Tokenizer(model_path.read_bytes())


def test_missing_and_garbage_models_raise(tmp_path) -> None:
    with pytest.raises(TokenizerError, match="tokenizer model not found"):
        Tokenizer.from_file(tmp_path / "nope.model")
    junk = tmp_path / "junk.model"
    junk.write_bytes(b"this is not a protobuf at all \x00\xff")
    with pytest.raises(TokenizerError, match="not a SentencePiece model"):
        Tokenizer.from_file(junk)
    assert issubclass(TokenizerError, ValueError)


def test_read_lines_keeps_empty_lines(tmp_path) -> None:
    path = tmp_path / "x.txt"
    path.write_text("one\n\nthree  \n", encoding="utf-8")
    assert read_lines(path) == ["one", "", "three  "]


def test_train_sentencepiece_returns_model_path(tmp_path, sample_lines) -> None:
    en, _ = sample_lines
    path = train_sentencepiece(en, tmp_path / "sub" / "tiny", vocab_size=100)
    assert path == tmp_path / "sub" / "tiny.model"
    assert path.is_file()
    assert Tokenizer.from_file(path).vocab_size == 100
    assert (tmp_path / "sub" / "tiny.vocab").is_file()
