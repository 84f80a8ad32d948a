"""models.normalize against Eole 0.6.4's own normalize transform (its outputs in
tests/fixtures/eole/normalize/cases.json, made by make_normalize.sh there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from models.normalize import Normalization, NormalizingTokenizer
from models.tokenizer import load_tokenizer, write_tokenizer
from models.words import WordTokenizer

HERE = Path(__file__).resolve().parents[1] / "fixtures" / "eole" / "normalize"
INPUTS = json.loads((HERE / "inputs.json").read_text(encoding="utf-8"))
RUNS = json.loads((HERE / "cases.json").read_text(encoding="utf-8"))["runs"]


@pytest.mark.parametrize(
    "run", RUNS, ids=lambda r: "-".join(f"{k}={v}" for k, v in r["options"].items())
)
def test_normalization_is_eoles(run):
    normalize = Normalization(**run["options"])
    got = [normalize(text) for text in INPUTS]
    differ = [(t, g, w) for t, g, w in zip(INPUTS, got, run["outputs"], strict=True) if g != w]
    assert differ == []


def test_every_option_changes_some_of_eoles_outputs():
    """Each option, turned from its default, changes some fixture outputs (else the
    comparison above would not cover it)."""

    def outputs(**options):
        full = dict(RUNS[0]["options"]) | options
        return next(r["outputs"] for r in RUNS if r["options"] == full)

    assert outputs(lang="en", penn=False) != outputs(lang="en")
    assert outputs(lang="es", norm_quote_commas=False) != outputs(lang="es")
    assert outputs(lang="de", norm_numbers=False) != outputs(lang="de")
    assert outputs(lang="en", pre_replace_unicode_punct=True) != outputs(lang="en")
    assert outputs(lang="en", post_remove_control_chars=True) != outputs(lang="en")
    assert len({tuple(outputs(lang=lang)) for lang in ("", "en", "es", "de", "fr", "cs")}) >= 4


def test_normalizing_tokenizer_round_trip(tmp_path):
    vocab = ["<unk>", "<blank>", "<s>", "</s>", "he", "said", '"', "hello", ",", "..."]
    inner = WordTokenizer(vocab, unk_id=0, lowercase=True, split_punctuation=True)
    tok = NormalizingTokenizer(inner, Normalization(lang="en"))
    text = "He said “hello”…"
    assert Normalization(lang="en")(text) == 'He said "hello..."'
    assert tok.encode(text) == inner.encode('He said "hello..."') != inner.encode(text)
    assert tok.surface(text) == inner.surface('He said "hello..."')
    assert tok.vocab_size == inner.vocab_size and tok.pieces([4]) == ["he"]
    entry = write_tokenizer(tok, tmp_path, "source")
    assert entry["normalize"]["lang"] == "en" and entry["kind"] == "words"
    back = load_tokenizer(json.loads(json.dumps(entry)), tmp_path, (1, 0, 2, 3))
    assert isinstance(back, NormalizingTokenizer) and back.encode(text) == tok.encode(text)
    target = load_tokenizer(write_tokenizer(inner, tmp_path, "target"), tmp_path, (1, 0, 2, 3))
    assert not isinstance(target, NormalizingTokenizer)


def test_control_characters_go_and_newer_characters_stay():
    """``post_remove_control_chars``: format and control characters removed; an emoji
    assigned after Python 3.11's Unicode tables (U+1FAE8, Unicode 15) kept, as Eole's
    regex module keeps it."""
    normalize = Normalization(lang="en", post_remove_control_chars=True)
    assert (
        normalize("I am \U0001fae8 shaking\u200b \U0001fa77\x07")
        == "I am \U0001fae8 shaking \U0001fa77"
    )


def test_bad_normalize_options_in_a_manifest_are_a_tokenizer_error(tmp_path):
    from models.tokenizer import TokenizerError

    inner = WordTokenizer(["<unk>", "a"], unk_id=0)
    entry = write_tokenizer(inner, tmp_path, "source") | {"normalize": {"lang": "en", "pen": 1}}
    with pytest.raises(TokenizerError, match="bad normalize options .*'pen'"):
        load_tokenizer(entry, tmp_path, (1, 0, 2, 3))
