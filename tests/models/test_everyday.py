"""The everyday test set (models/everyday/) and its evaluation script (models/everyday.py)."""

from __future__ import annotations

import json
import shutil

import pytest

from models import everyday
from models.corpus import exclusion_key

SET = everyday.TEST_SETS["everyday"]
README_SENTENCES = (
    "The cat sat on the mat.",
    "A small dog barked at the man.",
    "He walked to the old house.",
    "My sister lives in a big city.",
    "Do you speak English?",
    "I enjoy reading books.",
)
needs_apertium = pytest.mark.skipif(shutil.which("apertium") is None, reason="no apertium")


def test_everyday_set_is_aligned_and_unique() -> None:
    src, ref = everyday.read_set(SET)
    assert 160 <= len(src) == len(ref) <= 200
    assert all(s.strip() == s and s for s in src + ref)
    assert len({exclusion_key(s) for s in src}) == len(src)
    assert all(len(s.split()) <= 12 for s in src)
    for sentence in README_SENTENCES:
        assert sentence in src
    # The references are Spanish: accents or Spanish punctuation are common.
    assert sum(any(c in r for c in "áéíóúñ¿¡") for r in ref) > len(ref) // 3


def test_everyday_set_has_a_card() -> None:
    card = (SET.parent / "README.md").read_text(encoding="utf-8")
    for needed in ("never", "Apache-2.0", "tú", "| everyday | beam5 |"):
        assert needed in card, needed


@needs_apertium
def test_references_are_not_apertium_output() -> None:
    src, ref = everyday.read_set(SET)
    apertium = everyday.apertium_translate(src)
    assert len(apertium) == len(src) and not any("*" in t for t in apertium)
    assert sum(a == r for a, r in zip(apertium, ref, strict=True)) < len(ref) // 4


def test_score_and_read_set_errors(tmp_path) -> None:
    perfect = everyday.score(["El gato duerme."], ["El gato duerme."])
    assert (perfect["bleu"], perfect["chrf"]) == (100.0, 100.0)
    assert perfect["bleu_signature"].startswith("nrefs:1")
    (tmp_path / "x.en").write_text("a\nb\n")
    (tmp_path / "x.es").write_text("a\n")
    with pytest.raises(ValueError, match="has 2 lines but"):
        everyday.read_set(tmp_path / "x")


def test_evaluate_ratios_translations_and_table(tmp_path) -> None:
    (tmp_path / "t.en").write_text("The cat sleeps.\nThe dog eats.\n", encoding="utf-8")
    (tmp_path / "t.es").write_text("El gato duerme.\nEl perro come.\n", encoding="utf-8")
    systems = {
        "greedy": lambda lines: ["El gato duerme.", "Un perro come."],
        "apertium": lambda lines: ["El gato duerme.", "El perro come."],
    }
    results = everyday.evaluate({"t": tmp_path / "t"}, systems)
    entry = results["t"]
    assert entry["sentences"] == 2
    assert entry["systems"]["apertium"]["bleu"] == 100.0
    assert 0 < entry["systems"]["greedy"]["bleu"] < 100
    assert entry["bleu_vs_apertium"] == {
        "greedy": round(entry["systems"]["greedy"]["bleu"] / 100, 3)
    }
    assert entry["translations"][1] == {
        "en": "The dog eats.",
        "ref": "El perro come.",
        "greedy": "Un perro come.",
        "apertium": "El perro come.",
    }
    table = everyday.table(results).splitlines()
    assert table[0].startswith("| set | system | BLEU |")
    assert table[2].startswith("| t | greedy | ") and table[3].endswith("| 100.00 | 100.00 | - |")


def test_cli_rejects_unknown_names(capsys) -> None:
    with pytest.raises(SystemExit):
        everyday.main(["--systems", "greedy,nope"])
    assert "unknown set or system: nope" in capsys.readouterr().err


@needs_apertium
def test_cli_everyday_greedy_and_apertium(tmp_path, capsys) -> None:
    out = tmp_path / "results" / "r.json"
    argv = ["--sets", "everyday", "--systems", "greedy,apertium", "--threads", "1"]
    assert everyday.main([*argv, "--out", str(out)]) == 0
    record = json.loads(out.read_text(encoding="utf-8"))
    assert record["command"].startswith("python3 -m models.everyday --sets everyday")
    assert record["checkpoint"] == "models/pretrained/en-es/model.pt"
    entry = record["sets"]["everyday"]
    assert entry["sentences"] == len(entry["translations"])
    assert set(entry["systems"]) == {"greedy", "apertium"}
    assert all(system["bleu"] > 5 for system in entry["systems"].values())
    assert "| everyday | apertium |" in capsys.readouterr().out
