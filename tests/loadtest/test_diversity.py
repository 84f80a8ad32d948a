"""``python -m loadtest.diversity`` measures every rate, writes its files and its picture."""

from __future__ import annotations

import json
import math

import pytest

from loadtest import diversity
from tests.committed import EN_ES_FP32


def test_distinct_counts_ngrams_over_a_list():
    assert diversity.distinct(["a b c", "a b c"], 1) == 0.5
    assert diversity.distinct(["a b", "c d"], 2) == 1.0
    assert diversity.distinct(["a", ""], 2) == 0.0  # no pairs at all


def test_a_small_run_writes_every_rate(tmp_path, capsys):
    stem, svg = tmp_path / "div", tmp_path / "div.svg"
    argv = ["--bundle", str(EN_ES_FP32), "--sentences", "8", "--rates", "0,3", "--rounds", "1"]
    assert diversity.main([*argv, "--out", str(stem), "--svg", str(svg)]) == 0
    result = json.loads(stem.with_suffix(".json").read_text())
    assert [r["rate"] for r in result["rates"]] == [0.0, 3.0]
    for r in result["rates"]:
        assert len(r["example"]) == 5
        for key in ("bleu", "oracle_bleu", "distinct_1", "distinct_2", "sentences_per_second"):
            assert math.isfinite(r[key]) and r[key] > 0, key
        assert r["oracle_bleu"] >= r["bleu"]  # the best of a list holding the best
        assert 0.2 <= r["distinct_2"] <= 1.0
    assert result["rates"][0]["example"] != result["rates"][1]["example"]
    assert "| 3 |" in stem.with_suffix(".md").read_text()
    assert svg.read_text().lstrip().startswith("<?xml")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--rates", "0,x"], "give numbers"),
        (["--rates", "0,nan"], "each must be a finite number >= 0"),
        (["--rates", "-1"], "each must be a finite number >= 0"),
        (["--beam", "1"], "--beam >= 2"),
        (["--rounds", "0"], "--rounds must be >= 1"),
    ],
)
def test_bad_arguments_are_refused(argv, message, capsys):
    assert diversity.main(argv) == 2
    assert message in capsys.readouterr().err
