"""``python -m loadtest.httpbench``: HTTP and gRPC side by side on the committed model, and
the closed loop's HTTP client."""

from __future__ import annotations

import json

import pytest

from loadtest import httpbench
from loadtest.concurrency import HttpFailed, HttpTranslate, closed_loop
from nmt_client import DecodeOptions


def test_a_run_measures_both_transports_on_the_same_sentences(tmp_path, capsys):
    out = tmp_path / "http"
    argv = ["--clients", "1,2", "--beams", "1", "--rounds", "2", "--sentences", "6"]
    assert httpbench.main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.with_suffix(".json").read_text())
    # 2 rounds x 2 levels x 2 transports, the order swapped in the second round
    assert len(result["runs"]) == 8
    assert [r["transport"] for r in result["runs"][:2]] == ["grpc", "http"]
    assert [r["transport"] for r in result["runs"][4:6]] == ["http", "grpc"]
    for row in result["summary"]:
        assert row["same_best"] == row["sentences"] == 6
        assert row["grpc_errors"] == row["http_errors"] == 0
        assert row["http_sentences_per_s"] > 0 and row["grpc_server_cpu_ms"] > 0
    assert out.with_suffix(".md").read_text() in capsys.readouterr().out


def test_summary_takes_medians_and_counts_equal_translations():
    def run(transport, rate, p50, cpu, round_):
        return {
            "strategy": "greedy", "clients": 8, "transport": transport, "round": round_,
            "sentences_per_s": rate, "p50_ms": p50, "server_cpu_ms_per_sentence": cpu,
            "errors": 0, "client_cpu_s": cpu / 100, "sentences": 10,
        }  # fmt: skip

    runs = [
        run("grpc", 100.0, 5.0, 2.0, 0), run("grpc", 120.0, 4.0, 1.0, 1),
        run("grpc", 110.0, 6.0, 3.0, 2), run("http", 90.0, 7.0, 2.5, 0),
        run("http", 99.0, 5.0, 2.0, 1), run("http", 80.0, 6.0, 3.5, 2),
    ]  # fmt: skip
    texts = {("greedy", 8, "grpc"): ["a", "b", ""], ("greedy", 8, "http"): ["a", "c", ""]}
    (row,) = httpbench.summarize(runs, texts)
    assert (row["grpc_sentences_per_s"], row["http_sentences_per_s"]) == (110.0, 90.0)
    assert row["http_over_grpc"] == pytest.approx(90 / 110, abs=1e-3)
    assert (row["grpc_p50_ms"], row["http_server_cpu_ms"]) == (5.0, 2.5)
    assert row["grpc_client_cpu_ms"] == pytest.approx(2.0)  # median of 2, 1, 3 ms
    assert (row["same_best"], row["sentences"]) == (1, 3)  # a failed sentence is no match


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        (["--clients", "0"], ">= 1"),
        (["--beams", "x"], "comma-separated integers"),
        (["--rounds", "0"], ">= 1"),
        (["--file", "/nonexistent"], "--file /nonexistent"),
    ],
)
def test_bad_arguments_are_one_line_errors(argv, match, capsys):
    with pytest.raises(SystemExit) as exc:
        httpbench.parse_args([*argv, "--out", "/tmp/x"])
    assert exc.value.code == 2
    assert match in capsys.readouterr().err


def test_http_client_of_the_closed_loop(server_factory, tiny_bundle):
    server = server_factory(server={"http_port": 0})
    target = f"http://127.0.0.1:{server.http_port}"
    sentences = list(tiny_bundle.sentences[:5])
    texts: list[str | None] = [None] * len(sentences)
    loop = closed_loop(target, sentences, 2, DecodeOptions(beam_size=2), outputs=texts)
    assert loop.errors == 0 and len(loop.latencies) == 5 and loop.tokens > 5
    grpc_texts: list[str | None] = [None] * len(sentences)
    closed_loop(
        f"127.0.0.1:{server.port}", sentences, 2, DecodeOptions(beam_size=2), outputs=grpc_texts
    )
    assert texts == grpc_texts
    assert set(loop.server_ms) == {"queue", "encode", "decode", "total"}
    # a refused request is an error of the loop, not a crash
    with (
        HttpTranslate(target, DecodeOptions(beam_size=99)) as client,
        pytest.raises(HttpFailed, match="HTTP 400"),
    ):
        client.translate(["Hello."], options=DecodeOptions(beam_size=99))
    # it sends the options it was made with, and says so rather than send others
    with (
        HttpTranslate(target, DecodeOptions(beam_size=2)) as client,
        pytest.raises(ValueError, match="the options it was made with"),
    ):
        client.translate(["Hello."], options=DecodeOptions(beam_size=3))
