"""``python -m loadtest.concurrency`` on the committed model: every level translates every
sentence, through clients in a process of their own."""

from __future__ import annotations

import json

from loadtest import concurrency


def test_levels_translate_every_sentence(tmp_path, capsys):
    out = tmp_path / "levels.json"
    argv = ["--clients", "1,3", "--beams", "1,2", "--sentences", "5", "--json", str(out)]
    assert concurrency.main(argv) == 0
    rows = json.loads(out.read_text())
    assert [(r["strategy"], r["clients"]) for r in rows] == [
        ("greedy", 1),
        ("greedy", 3),
        ("beam2", 1),
        ("beam2", 3),
    ]
    for r in rows:
        assert r["sentences"] == 5 and r["errors"] == 0
        assert r["sentences_per_s"] > 0 and 0 < r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"]
    table = capsys.readouterr().out
    assert table.count("\n| greedy |") == 2 and table.count("\n| beam2 |") == 2
