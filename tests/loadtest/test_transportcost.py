"""loadtest.transportcost: a smoke run of the three no-model servers, and its arguments."""

from __future__ import annotations

import json

import pytest

from loadtest import transportcost
from loadtest.clients import echo_reply
from nmt_api.nmt.v1 import translator_pb2 as pb


def test_a_smoke_run_measures_every_server(tmp_path):
    out = tmp_path / "tc"
    assert (
        transportcost.main(
            ["--clients", "2", "--rounds", "2", "--sentences", "30", "--out", str(out)]
        )
        == 0
    )
    result = json.loads(out.with_suffix(".json").read_text())
    rows = result["summary"]
    assert [r["server"] for r in rows] == list(transportcost.SERVERS)
    for row in rows:
        assert row["errors"] == 0 and row["calls_per_s"] > 0
        assert row["cpu_ms_total"] > 0 and row["cpu_ms_loop"] > 0
    # every call of every round answered, the replies as large as real ones
    assert {r["sentences"] for r in result["runs"]} == {30}
    assert len(result["runs"]) == 2 * len(transportcost.SERVERS)
    # gRPC's poller works for gRPC calls; under HTTP it only wakes for its idle
    # servers' timers (0.0005 ms a call seen in CI, against 0.04 for a gRPC call)
    http = next(r for r in rows if r["server"] == "http")
    grpc_poller = min(r["cpu_ms_poller"] for r in rows if r["server"] != "http")
    assert grpc_poller > 0 and http["cpu_ms_poller"] < grpc_poller / 4
    assert "| 2 | grpc-stream |" in out.with_suffix(".md").read_text()


def test_the_reply_echoes_every_text():
    request = pb.TranslateRequest(texts=["a b", "c"])
    reply = echo_reply(request)
    assert [(t.hypotheses[0].text, list(t.hypotheses[0].tokens)) for t in reply.translations] == [
        ("a b", ["a", "b"]),
        ("c", ["c"]),
    ]


@pytest.mark.parametrize(
    "argv, match",
    [
        (["--clients", "0"], "--clients takes"),
        (["--clients", ""], "--clients takes"),
        (["--clients", "x"], "--clients takes comma-separated"),
        (["--rounds", "0"], "must be >= 1"),
    ],
)
def test_bad_arguments_are_one_line_errors(tmp_path, capsys, argv, match):
    with pytest.raises(SystemExit) as exit_:
        transportcost.parse_args([*argv, "--out", str(tmp_path / "x")])
    assert exit_.value.code == 2
    assert match in capsys.readouterr().err
