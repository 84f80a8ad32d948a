"""The WordNet + Apertium corpus builder (``nmt-data``)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from models import corpus
from models.corpus import (
    CorpusError,
    check_tools,
    clean_pairs,
    normalize,
    sentence_case,
    split_gloss,
    split_pairs,
    wordnet_sentences,
    write_split,
)

needs_apertium = pytest.mark.skipif(
    shutil.which("apertium") is None, reason="apertium is not installed"
)

HEADER = (
    "  1 This software and database is being provided to you, the LICENSEE, by  \n"
    "  2 Princeton University under the following license. | By obtaining, using  \n"
    "  3   \n"
)
FAKE_WORDNET = {
    "data.noun": HEADER
    + "00001740 03 n 01 entity 0 003 ~ 00001930 n 0000 | that which is perceived or known "
    "or inferred to have its own distinct existence (living or nonliving)  \n"
    '09917593 18 n 02 child 0 kid 0 | a young person of either sex; "she writes books for '
    'children"; "they\'re just kids"  \n',
    "data.verb": HEADER
    + "00001740 29 v 04 breathe 0 take_a_breath 0 | draw air into, and expel out of, the "
    'lungs; "I can breathe better when the air is clean"; "The patient is respiring"  \n',
    "data.adj": HEADER + "00001740 00 a 01 able 0 | (usually) large  \n"
    "00002098 00 a 01 young 0 | a young person of either sex  \n",
    "data.adv": HEADER
    + '00001740 02 r 01 a_cappella 0 000 | without musical accompaniment; "they performed a '
    'cappella"  \n',
}


@pytest.fixture
def wordnet_dir(tmp_path):
    root = tmp_path / "wordnet"
    root.mkdir()
    for name, text in FAKE_WORDNET.items():
        (root / name).write_text(text, encoding="utf-8")
    return root


def test_split_gloss_real_gloss() -> None:
    gloss = (
        'a young person of either sex; "she writes books for children"; '
        '"they\'re just kids"; "`tiddler\' is a British term for youngsters"  \n'
    )
    assert list(split_gloss(gloss)) == [
        "a young person of either sex",
        "she writes books for children",
        "they're just kids",
        "`tiddler' is a British term for youngsters",
    ]


def test_split_gloss_keeps_semicolons_inside_quotes() -> None:
    gloss = 'of the  period;  "in 200 CE; not  later";;  '
    assert list(split_gloss(gloss)) == ["of the period", "in 200 CE; not later"]


def test_normalize_and_sentence_case() -> None:
    assert normalize("  a \t b\n c  ") == "a b c"
    assert sentence_case("they're here") == "They're here"
    assert sentence_case("") == ""
    assert sentence_case("Already") == "Already"


def test_wordnet_sentences_from_fake_dir(wordnet_dir) -> None:
    assert wordnet_sentences(wordnet_dir) == [
        "That which is perceived or known or inferred to have its own distinct existence "
        "(living or nonliving)",
        "A young person of either sex",
        "She writes books for children",
        "They're just kids",
        "Draw air into, and expel out of, the lungs",
        "I can breathe better when the air is clean",
        "The patient is respiring",
        "Without musical accompaniment",
        "They performed a cappella",
    ]
    assert wordnet_sentences(wordnet_dir, min_words=4, max_words=4) == [
        "The patient is respiring",
        "They performed a cappella",
    ]


def test_check_tools_reports_missing_wordnet(tmp_path) -> None:
    with pytest.raises(CorpusError, match=r"WordNet data not found in .*apt-get install -y"):
        check_tools(tmp_path)


def test_clean_pairs_drops_marked_and_empty_and_dedupes() -> None:
    src = [
        "The dog is big.",
        "A  green  tree",
        "Unknown word here",
        "Generation error",
        "Transfer error",
        "The dog is big.",
        "Empty target",
        "",
        "Star * in source",
    ]
    tgt = [
        "El perro es grande.",
        "Un árbol  verde",
        "*Unknown palabra aquí",
        "#Generación error",
        "Error @de transferencia",
        "El perro es enorme.",
        "   ",
        "Vacío",
        "Estrella",
    ]
    assert clean_pairs(src, tgt) == [
        ("The dog is big.", "El perro es grande."),
        ("A green tree", "Un árbol verde"),
    ]
    with pytest.raises(ValueError):
        clean_pairs(["a", "b"], ["x"])


def test_split_pairs_deterministic_and_disjoint() -> None:
    pairs = [(f"sentence {i}", f"frase {i}") for i in range(30)]
    splits = split_pairs(pairs, valid=5, test=4)
    assert {k: len(v) for k, v in splits.items()} == {"test": 4, "valid": 5, "train": 21}
    seen = [p for part in splits.values() for p in part]
    assert len(seen) == len(set(seen)) == 30 and set(seen) == set(pairs)
    assert split_pairs(list(reversed(pairs)), valid=5, test=4) == splits
    assert split_pairs(pairs, valid=5, test=4, seed=7) != splits
    assert splits["train"] != sorted(splits["train"])  # shuffled, not just cut


def test_split_pairs_too_small() -> None:
    pairs = [(f"s{i}", f"t{i}") for i in range(10)]
    with pytest.raises(CorpusError, match=r"only 10 pairs; need more than valid \+ test = 10"):
        split_pairs(pairs, valid=5, test=5)
    assert len(split_pairs(pairs, valid=5, test=4)["train"]) == 1


def test_write_split_files(tmp_path) -> None:
    write_split(tmp_path / "out", {"train": [("a b", "c d")], "valid": [("e", "f"), ("g", "h")]})
    assert (tmp_path / "out" / "train.en").read_text(encoding="utf-8") == "a b\n"
    assert (tmp_path / "out" / "train.es").read_text(encoding="utf-8") == "c d\n"
    assert (tmp_path / "out" / "valid.es").read_text(encoding="utf-8") == "f\nh\n"


def test_apertium_realigns_when_paragraphs_merge(monkeypatch) -> None:
    """When Apertium joins paragraphs, the lines are re-translated in halves; a single
    line that still cannot be aligned becomes an empty translation."""
    calls = []

    def fake_run(cmd, *, input, capture_output, text, check):  # noqa: A002
        paras = input.rstrip("\n").split("\n\n")
        calls.append(paras)
        if "bad" in paras:
            out = " ".join(p.upper() for p in paras) + "\n" if len(paras) > 1 else "X\n\nY\n"
        else:
            out = "\n\n".join(p.upper() for p in paras) + "\n"
        return subprocess.CompletedProcess(cmd, 0, stdout=out, stderr="")

    monkeypatch.setattr(corpus.subprocess, "run", fake_run)
    assert corpus._apertium(["one", "bad", "three", "four"]) == ["ONE", "", "THREE", "FOUR"]
    assert calls[0] == ["one", "bad", "three", "four"]
    assert ["bad"] in calls


@needs_apertium
def test_apertium_translates_line_for_line(monkeypatch, wordnet_dir) -> None:
    check_tools(wordnet_dir)
    lines = [
        "The dog is big.",
        "She writes books for children",
        "A small red house near the river",
        "Without musical accompaniment",
        "I can breathe better when the air is clean",
    ]
    spanish = corpus._apertium(lines)
    assert len(spanish) == len(lines)
    assert spanish[0] == "El perro es grande."
    assert all(s and s == normalize(s) for s in spanish)
    monkeypatch.setattr(corpus, "CHUNK_LINES", 2)
    assert corpus.translate(lines, workers=2, progress=False) == spanish


def test_cli_spm_without_corpus(tmp_path, capsys) -> None:
    assert corpus.main(["spm", "--data", str(tmp_path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("nmt-data: error: ")
    assert "train.en not found; run `nmt-data build` first" in lines[0]


def test_cli_spm_trains_tokenizers(tmp_path, sample_lines, capsys) -> None:
    en, es = sample_lines
    (tmp_path / "train.en").write_text("\n".join(en) + "\n", encoding="utf-8")
    (tmp_path / "train.es").write_text("\n".join(es) + "\n", encoding="utf-8")
    assert corpus.main(["spm", "--data", str(tmp_path), "--vocab-size", "120"]) == 0
    assert (tmp_path / "spm.en.model").is_file() and (tmp_path / "spm.es.model").is_file()
    assert capsys.readouterr().err == ""


def test_cli_requires_a_command() -> None:
    with pytest.raises(SystemExit) as info:
        corpus.main([])
    assert info.value.code == 2
