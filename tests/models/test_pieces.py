"""models/pieces.py: SentencePiece segmentation numbered by a vocabulary of the model's own."""

from __future__ import annotations

import json
import pickle

import pytest
import sentencepiece as spm

from models.pieces import PieceTokenizer
from models.tokenizer import TokenizerError, load_tokenizer, tokenizer_files, write_tokenizer
from tests.committed import EN_ES_INT8

SPM = EN_ES_INT8 / "source.spm.model"
TEXTS = ["The cat sat on the mat.", "Do you speak English?", "I need to buy new shoes."]
SPECIALS = ["<unk>", "<blank>", "<s>", "</s>"]


def _pieces_of(texts: list[str]) -> list[str]:
    sp = spm.SentencePieceProcessor(model_file=str(SPM))
    seen: dict[str, None] = {}
    for text in texts:
        seen.update(dict.fromkeys(sp.encode(text, out_type=str)))
    return list(seen)


@pytest.fixture
def tokenizer() -> PieceTokenizer:
    # Eole's layout: specials first, then pieces in its own order (here reversed), so the
    # ids cannot be the SentencePiece model's.
    return PieceTokenizer(SPM.read_bytes(), SPECIALS + _pieces_of(TEXTS)[::-1], unk_id=0)


def test_ids_come_from_the_vocabulary(tokenizer):
    sp = spm.SentencePieceProcessor(model_file=str(SPM))
    for text in TEXTS:
        ids = tokenizer.encode(text)
        assert tokenizer.pieces(ids) == sp.encode(text, out_type=str)
        assert ids != sp.encode(text)  # not SentencePiece's numbering
        assert 0 not in ids and tokenizer.decode(ids) == text
    assert tokenizer.encode_batch(TEXTS) == [tokenizer.encode(t) for t in TEXTS]
    assert tokenizer.vocab_size == len(tokenizer.tokens)


def test_pieces_outside_the_vocabulary_are_unk(tokenizer):
    ids = tokenizer.encode("The zebra sat.")
    assert 0 in ids and ids[0] == tokenizer.ids["▁The"]
    # as in Eole: DecodePieces renders <unk> as SentencePiece's unknown surface
    assert tokenizer.decode([tokenizer.ids["▁The"], 0, tokenizer.ids["▁sat"]]) == "The ⁇  sat"
    assert tokenizer.decode([tokenizer.ids["▁cat"], 3]) == "cat"  # </s> is a control piece


def test_specials_are_what_no_text_segments_to(tokenizer):
    assert [tokenizer.is_special(i) for i in range(4)] == [True] * 4
    assert not tokenizer.is_special(tokenizer.ids["▁cat"])


def test_a_special_id_on_a_piece_is_refused(tokenizer):
    from export.modules import AdapterError
    from export.user import check_special_ids

    ids = {"pad": 1, "unk": 0, "bos": 2, "eos": 3}
    check_special_ids(tokenizer, tokenizer, ids)
    with pytest.raises(AdapterError, match="eos .* is the target word 'cat'"):
        check_special_ids(tokenizer, tokenizer, ids | {"eos": tokenizer.ids["▁cat"]})


def test_written_bundle_entry_loads_the_same(tokenizer, tmp_path):
    entry = write_tokenizer(tokenizer, tmp_path, "target")
    assert entry == {
        "kind": "pieces",
        "file": "target.vocab.json",
        "model_file": "target.spm.model",
        "unk_id": 0,
    }
    assert tokenizer_files(entry) == ["target.vocab.json", "target.spm.model"]
    again = load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
    assert isinstance(again, PieceTokenizer)
    assert again.encode_batch(TEXTS) == tokenizer.encode_batch(TEXTS)
    # the engine process receives tokenizers pickled
    assert pickle.loads(pickle.dumps(tokenizer)).encode(TEXTS[0]) == tokenizer.encode(TEXTS[0])


def test_end_tokens_close_every_sentence_through_the_manifest_and_pickling(tokenizer, tmp_path):
    """Joey NMT appends ``</s>`` to its sources."""
    joey = PieceTokenizer(SPM.read_bytes(), tokenizer.tokens, unk_id=0, end_tokens=["</s>"])
    text = TEXTS[0]
    assert joey.encode(text) == [*tokenizer.encode(text), 3]
    assert joey.surface(text) == [*tokenizer.surface(text), "</s>"]
    assert joey.decode(joey.encode(text)) == text  # </s> is a control piece
    assert joey.encode("  ") == [] and joey.encode_batch([text, ""]) == [joey.encode(text), []]
    entry = write_tokenizer(joey, tmp_path, "source")
    assert entry["end_tokens"] == ["</s>"] and "end_tokens" not in tokenizer.options()
    again = load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
    assert again.encode(text) == joey.encode(text)
    assert pickle.loads(pickle.dumps(joey)).encode(text) == joey.encode(text)
    with pytest.raises(TokenizerError, match="end_tokens is a list, strip a bool"):
        load_tokenizer(entry | {"end_tokens": "</s>"}, tmp_path, (1, 0, 2, 3))
    with pytest.raises(TokenizerError, match=r"end tokens \['EOS'\] are not in the vocabulary"):
        PieceTokenizer(SPM.read_bytes(), tokenizer.tokens, unk_id=0, end_tokens=["EOS"])


def test_strip_drops_the_space_a_final_lone_piece_leaves(tokenizer, tmp_path):
    """Joey NMT strips its detokenised text: a hypothesis ending in a lone ``▁``."""
    tokens = [*tokenizer.tokens, "▁"] if "▁" not in tokenizer.ids else tokenizer.tokens
    plain = PieceTokenizer(SPM.read_bytes(), tokens, unk_id=0)
    joey = PieceTokenizer(SPM.read_bytes(), tokens, unk_id=0, strip=True)
    ids = [*plain.encode("The cat"), plain.ids["▁"]]
    assert plain.decode(ids) == "The cat " and joey.decode(ids) == "The cat"
    assert joey.detokenize(joey.pieces(ids)) == "The cat"
    entry = write_tokenizer(joey, tmp_path, "target")
    assert entry["strip"] is True and "strip" not in plain.options()
    assert load_tokenizer(entry, tmp_path, (1, 0, 2, 3)).decode(ids) == "The cat"
    assert pickle.loads(pickle.dumps(joey)).decode(ids) == "The cat"


@pytest.mark.parametrize(
    ("tokens", "unk_id", "message"),
    [
        (SPECIALS + ["▁a", "▁b", "▁a"], 0, r"entry 6 \('▁a'\) repeats entry 4"),
        (SPECIALS + [""], 0, "entry 4 .* is not a piece"),
        (SPECIALS + [7], 0, "entry 4 .* is not a piece"),
        (SPECIALS, 4, "unk id 4 is outside the vocabulary of 4"),
    ],
)
def test_bad_vocabularies_are_refused(tokens, unk_id, message):
    with pytest.raises(TokenizerError, match=message):
        PieceTokenizer(SPM.read_bytes(), tokens, unk_id=unk_id)


def test_bad_files_are_refused(tmp_path, tokenizer):
    with pytest.raises(TokenizerError, match="not a SentencePiece model"):
        PieceTokenizer(b"not a model", SPECIALS, unk_id=0)
    entry = write_tokenizer(tokenizer, tmp_path, "source")
    with pytest.raises(TokenizerError, match="needs model_file and an integer unk_id"):
        load_tokenizer({**entry, "unk_id": "0"}, tmp_path, (1, 0, 2, 3))
    with pytest.raises(TokenizerError, match="needs model_file"):
        load_tokenizer(
            {k: v for k, v in entry.items() if k != "model_file"}, tmp_path, (1, 0, 2, 3)
        )
    (tmp_path / "source.vocab.json").write_text(json.dumps({"<unk>": 0}))
    with pytest.raises(TokenizerError, match="is not a JSON list of pieces"):
        load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
    (tmp_path / "source.vocab.json").write_text("[")
    with pytest.raises(TokenizerError, match="is not a JSON list of pieces"):
        load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
    (tmp_path / "source.spm.model").unlink()
    with pytest.raises(TokenizerError, match="SentencePiece model not found"):
        load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
    with pytest.raises(TokenizerError, match="vocabulary file not found"):
        PieceTokenizer.from_files(SPM, tmp_path / "missing.json", unk_id=0)
