"""Word-level tokenizer: the tutorials' normalisation, vocabularies from files, errors."""

from __future__ import annotations

import json

import pytest

from models.tokenizer import TokenizerError, load_tokenizer
from models.words import WordTokenizer, read_vocabulary

VOCAB = ["<pad>", "<unk>", "<s>", "</s>", "the", "cat", "sat", ".", ",", "él", "el", "¿", "?"]


def tok(**options) -> WordTokenizer:
    return WordTokenizer(VOCAB, unk_id=1, **options)


def test_encode_lowercases_and_splits_punctuation():
    t = tok()
    assert t.words("The cat, sat.") == ["the", "cat", ",", "sat", "."]
    assert t.encode("The cat, sat.") == [4, 5, 8, 6, 7]
    assert t.encode("The dog") == [4, 1]  # unknown word -> unk


def test_options_change_the_words():
    assert tok(lowercase=False).encode("The cat") == [1, 5]
    assert tok(split_punctuation=False).words("the cat.") == ["the", "cat."]
    assert tok(fold_accents=True).encode("Él") == [10]
    assert tok().encode("Él") == [9]


def test_end_tokens_close_every_sentence():
    t = tok(end_tokens=["</s>"])
    assert t.encode("the cat") == [4, 5, 3]
    assert t.encode("  ") == []  # nothing to translate stays nothing
    with pytest.raises(TokenizerError, match=r"end tokens \['EOS'\] are not in the vocabulary"):
        tok(end_tokens=["EOS"])


def test_start_tokens_open_every_sentence_and_travel_in_the_options():
    t = tok(start_tokens=["<s>"], end_tokens=["</s>"])
    assert t.encode("the cat") == [2, 4, 5, 3]
    assert t.surface("The cat") == ["<s>", "the", "cat", "</s>"]
    assert t.encode(" ") == [] and t.surface(" ") == []
    assert t.options()["start_tokens"] == ["<s>"]
    assert "start_tokens" not in tok().options()  # older servers read manifests without it
    with pytest.raises(TokenizerError, match=r"start tokens \['SOS'\] are not in the vocabulary"):
        tok(start_tokens=["SOS"])


D2L_TEXTS = [
    "He's calm.",
    "Go.!",
    "e.g., `the bride's father'",
    "Va\xa0! Où\u202fes-tu ?",
    "  two  spaces , before.  ",
    "(names or topics)?",
]


def test_space_before_splits_as_d2l_preprocesses():
    """d2l's ``MTFraEng._preprocess`` + ``_tokenize`` (copied verbatim in the d2l user
    model) on tricky texts and every sample sentence of both languages."""
    from pathlib import Path

    from tests.export.user_models.d2l_bahdanau import _preprocess, _tokenize_line

    sample = Path(__file__).resolve().parents[2] / "models" / "sample"
    lines = [(sample / f"sample.{lang}").read_text().splitlines() for lang in ("en", "es")]
    texts = D2L_TEXTS + lines[0] + lines[1]
    t = WordTokenizer(["<unk>", "<eos>"], unk_id=0, split_punctuation=False, space_before=",.!?")
    for text in texts:
        assert [*t.words(text), "<eos>"] == _tokenize_line(_preprocess(text)), text
    assert t.words("He's calm.") == ["he's", "calm", "."]
    assert t.detokenize(["he's", "calm", ".", "go", "!"]) == "he's calm. go!"


def test_space_before_travels_in_the_options_and_refuses_conflicts(tmp_path):
    t = tok(split_punctuation=False, space_before=",.")
    assert t.words("The cat,sat.") == ["the", "cat", ",sat", "."]
    assert t.options()["space_before"] == ",." and "space_before" not in tok().options()
    t.save(tmp_path / "v.json")
    entry = {"kind": "words", "file": "v.json"} | t.options()
    again = load_tokenizer(entry, tmp_path, (0, 1, 2, 3))
    assert again.words("The cat,sat.") == t.words("The cat,sat.")
    with pytest.raises(TokenizerError, match="set split_punctuation=False with it"):
        tok(space_before=",.")
    with pytest.raises(TokenizerError, match="space_before takes characters"):
        tok(split_punctuation=False, space_before=", .")


def test_decode_glues_punctuation_back():
    t = tok()
    assert t.decode([4, 5, 8, 6, 7]) == "the cat, sat."
    assert t.decode([11, 4, 5, 12]) == "¿the cat?"
    assert tok(split_punctuation=False).decode([4, 7]) == "the ."
    assert t.pieces([4, 7]) == ["the", "."]


@pytest.mark.parametrize("suffix", [".txt", ".json", ".map.json"])
def test_vocabulary_files(tmp_path, suffix):
    path = tmp_path / f"vocab{suffix}"
    if suffix == ".txt":
        path.write_text("\n".join(VOCAB) + "\n", encoding="utf-8")
    elif suffix == ".json":
        path.write_text(json.dumps(VOCAB), encoding="utf-8")
    else:
        path.write_text(json.dumps({t: i for i, t in enumerate(VOCAB)}), encoding="utf-8")
    assert read_vocabulary(path) == VOCAB


def test_save_and_load_through_the_manifest_entry(tmp_path):
    t = tok(fold_accents=True)
    t.save(tmp_path / "source.vocab.json")
    entry = {"kind": "words", "file": "source.vocab.json"} | t.options()
    again = load_tokenizer(entry, tmp_path, (0, 1, 2, 3))
    assert again.tokens == VOCAB and again.options() == t.options()
    assert again.encode("Él sat.") == t.encode("Él sat.")


def test_bad_vocabularies(tmp_path):
    with pytest.raises(TokenizerError, match="vocabulary file not found"):
        read_vocabulary(tmp_path / "missing.txt")
    gaps = tmp_path / "gaps.json"
    gaps.write_text(json.dumps({"a": 0, "b": 2}))
    with pytest.raises(TokenizerError, match=r"token ids must be 0\.\.1"):
        read_vocabulary(gaps)
    with pytest.raises(TokenizerError, match="has spaces"):
        WordTokenizer(["a", "b c"], unk_id=0)
    with pytest.raises(TokenizerError, match=r"entry 2 \('a'\) repeats entry 0"):
        WordTokenizer(["a", "b", "a"], unk_id=0)
    bom = tmp_path / "bom.txt"
    bom.write_text("<pad>\nx\n", encoding="utf-8-sig")
    assert read_vocabulary(bom) == ["<pad>", "x"]
    with pytest.raises(TokenizerError, match="unk id 5 is outside"):
        WordTokenizer(["a"], unk_id=5)
    with pytest.raises(
        TokenizerError,
        match="unknown tokenizer kind 'wordpiece'; known: sentencepiece, words, pieces, onmt, bpe",
    ):
        load_tokenizer({"kind": "wordpiece", "file": "x"}, tmp_path, (0, 1, 2, 3))


def _tensorflow_tutorial_preprocess(w: str) -> str:
    """TensorFlow's tutorial ``preprocess_sentence`` (its ``unicode_to_ascii`` inlined),
    the reference the Keras converter's source tokenizer reproduces."""
    import re
    import unicodedata

    w = w.lower().strip()
    w = "".join(c for c in unicodedata.normalize("NFD", w) if unicodedata.category(c) != "Mn")
    w = re.sub(r"([?.!,¿])", r" \1 ", w)
    w = re.sub(r'[" "]+', " ", w)
    w = re.sub(r"[^a-zA-Z?.!,¿]+", " ", w)
    return "<start> " + w.strip() + " <end>"


KERAS_TEXTS = [
    "¿Dónde está el tren?", "He's calm, isn't he?!", '"Quoted"  text\twith\ttabs',
    "Numbers 42 and 3.14 vanish", "Straße ñandú façade", "Ellipsis... and ¡exclamation!",
    "a-b_c (d) [e] {f}", "   ", "Ωμέγα only",
]  # fmt: skip


def test_split_off_and_keep_split_as_tensorflows_tutorial_preprocesses():
    from pathlib import Path

    from export.keras import LETTERS, SPLIT_OFF

    sample = Path(__file__).resolve().parents[2] / "models" / "sample"
    texts = KERAS_TEXTS + (sample / "sample.en").read_text().splitlines()
    words = sorted({w for t in texts for w in _tensorflow_tutorial_preprocess(t).split()})
    t = WordTokenizer(
        ["<pad>", *words, "<unk>"], unk_id=len(words) + 1, fold_accents=True,
        split_punctuation=False, split_off=SPLIT_OFF, keep=LETTERS + SPLIT_OFF,
        start_tokens=["<start>"], end_tokens=["<end>"],
    )  # fmt: skip
    for text in texts:
        want = _tensorflow_tutorial_preprocess(text).split()
        got = t.surface(text)
        assert got == (want if len(want) > 2 else []), text  # nothing to translate: nothing
        assert t.pieces(t.encode(text)) == got
    assert t.detokenize(["¿", "donde", "esta", "el", "tren", "?"]) == "¿donde esta el tren?"


def test_unknown_words_dropped_and_sources_padded_travel_in_the_options(tmp_path):
    t = tok(unknown="drop", pad_to=6, pad_token="<pad>", end_tokens=["</s>"])
    assert t.encode("The dog sat") == [4, 6, 3, 0, 0, 0]  # "dog" left out, then padded
    assert t.surface("The dog sat") == ["the", "sat", "</s>", "<pad>", "<pad>", "<pad>"]
    assert t.encode("the cat sat . the cat sat .") == [4, 5, 6, 7, 4, 5, 6, 7, 3]  # not cut
    # unknown words alone: the markers alone, as texts_to_sequences gives them (the
    # model translates that); no word at all: nothing to translate
    assert t.encode("dog") == [3, 0, 0, 0, 0, 0] and t.surface("dog") == ["</s>"] + ["<pad>"] * 5
    assert t.encode("") == [] == t.surface(" ")
    assert "pad_to" not in tok().options() and "unknown" not in tok().options()
    t.save(tmp_path / "v.json")
    entry = {"kind": "words", "file": "v.json"} | t.options()
    again = load_tokenizer(entry, tmp_path, (0, 1, 2, 3))
    assert again.encode("The dog sat") == t.encode("The dog sat")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"split_off": "?", "split_punctuation": True}, "set split_punctuation=False with it"),
        ({"split_off": "? ", "split_punctuation": False}, "split_off takes characters"),
        ({"keep": "a b", "split_punctuation": False}, "keep takes characters"),
        ({"unknown": "skip"}, "unknown must be 'unk' or 'drop'"),
        ({"pad_to": -1}, "pad_to must be a number of tokens >= 0"),
        ({"pad_to": True, "pad_token": "<pad>"}, "pad_to must be a number of tokens"),
        ({"pad_to": 8}, "pad_to needs a pad_token in the vocabulary"),
        ({"pad_to": 8, "pad_token": "PAD"}, "pad_to needs a pad_token in the vocabulary"),
        ({"unicode_form": "NFX"}, "unicode_form must be NFC, NFD, NFKC or NFKD"),
        ({"keep": "ab", "keep_only": "ab", "split_punctuation": False}, "give one"),
    ],
)
def test_bad_keras_options_are_refused(options, message):
    with pytest.raises(TokenizerError, match=message):
        tok(**options)


def test_keep_only_deletes_as_tensorflows_newer_tutorial_standardizes():
    """``tf_lower_and_split_punct``: NFKD, lower-case, every character but `` a-z.?!,¿``
    deleted (not spaced: "don't" is "dont", a tab joins its words), ``.?!,¿`` split off."""
    t = WordTokenizer(
        ["<pad>", "[UNK]", "[START]", "[END]"], unk_id=1, unicode_form="NFKD",
        split_punctuation=False, keep_only=" abcdefghijklmnopqrstuvwxyz.?!,¿",
        split_off=".?!,¿", start_tokens=["[START]"], end_tokens=["[END]"],
    )  # fmt: skip
    assert t.surface("¿Dónde está? Don't\tgo, ﬁne 42!") == [
        "[START]", "¿", "donde", "esta", "?", "dontgo", ",", "fine", "!", "[END]"
    ]  # fmt: skip
    assert t.options()["unicode_form"] == "NFKD" and "keep" not in t.options()
