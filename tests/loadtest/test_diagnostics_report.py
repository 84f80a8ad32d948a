"""loadtest.diagnostics on the committed model: the report it writes, and that attention
entropy tells Spanish input from the in-domain English it was trained on."""

from __future__ import annotations

import json

from loadtest import diagnostics


def test_report_separates_another_language_by_entropy(tmp_path):
    out = tmp_path / "diag"
    assert diagnostics.main(["--sentences", "40", "--out", str(out)]) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    sets = data["sets"]
    assert set(sets) == {
        "test split (in domain)",
        "everyday English",
        "test split, words shuffled",
        "Spanish fed as English",
    }
    for figures in sets.values():
        for name in diagnostics.FIGURES:
            q = figures[name]
            assert q["p10"] <= q["median"] <= q["p90"]
    home, foreign = sets["test split (in domain)"], sets["Spanish fed as English"]
    assert foreign["entropy_mean"]["median"] > home["entropy_mean"]["p90"]
    assert foreign["unk_share"]["p90"] > home["unk_share"]["p90"] == 0
    table = out.with_suffix(".md").read_text()
    assert "| Spanish fed as English |" in table and data["command"] in table
