"""``python -m loadtest.constraintcost`` runs, checks its phrases and prints its table."""

from __future__ import annotations

import math

from loadtest import constraintcost
from tests.committed import EN_ES_FP32


def test_a_small_run_measures_every_kind_and_finds_the_phrases(capsys):
    result = constraintcost.measure(EN_ES_FP32, 6, 1)
    rates = result["sentences_per_second"]
    assert set(rates) == set(constraintcost.KINDS)
    assert all(math.isfinite(r) and r > 0 for r in rates.values())
    assert result["best_holds_phrase"]["beam5_constrained"] == 1.0
    assert result["best_holds_phrase"]["greedy_with_8_constrained"] == 1.0
    assert all(result["phrases"])
    table = constraintcost.report(result)
    assert "| beam5_constrained |" in table and "x |" in table


def test_bad_arguments_are_refused(capsys):
    assert constraintcost.main(["--rounds", "0"]) == 2
    assert "--sentences and --rounds must be >= 1" in capsys.readouterr().err
