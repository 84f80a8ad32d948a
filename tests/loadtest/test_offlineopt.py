"""``python -m loadtest.offlineopt``: a smoke run on the committed bundle, so it cannot rot."""

from __future__ import annotations

from loadtest import offlineopt
from tests.committed import EN_ES_INT8


def test_offline_optimization_smoke(capsys):
    bundle = EN_ES_INT8
    argv = ["--bundle", str(bundle), "--rounds", "2", "--steps", "3", "--threads", "1"]
    assert offlineopt.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[1:3] == ["| decoder graph | metric | median | rounds |", "|---|---|---|---|"]
    rows = [line.split(" | ") for line in lines[3:]]
    cases = {(r[0].strip("| "), r[1]) for r in rows}
    assert cases == {
        (graph, metric)
        for graph in ("optimized at load", "saved")
        for metric in ("build ms", "step 1 rows µs", "step 32 rows µs")
    }
    for r in rows:
        assert float(r[2]) > 0 and len(r[3].split(", ")) == 2


def test_offline_optimization_missing_bundle(tmp_path, capsys):
    assert offlineopt.main(["--bundle", str(tmp_path)]) == 2
    assert capsys.readouterr().err == f"offlineopt: error: no decoder.onnx in {tmp_path}\n"
