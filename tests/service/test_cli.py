"""``nmt-translate`` and ``nmt-eval`` against a real server and a real bundle."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import grpc
import pytest

from service import client, evaluate
from tests.service.server_helpers import (
    TIMEOUT,
    blocked_encoder,
    proto_options,
    stub_for,
    wait_until,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
SAMPLE = Path(__file__).resolve().parents[2] / "models" / "sample"
SAMPLE_EN, SAMPLE_ES = SAMPLE / "sample.en", SAMPLE / "sample.es"


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory()


@pytest.fixture(scope="module")
def address(server) -> str:
    return f"127.0.0.1:{server.port}"


def _unary(server, text, **options):
    from service.proto.nmt.v1 import translator_pb2 as pb

    channel, stub = stub_for(server.port)
    try:
        request = pb.TranslateRequest(texts=[text], options=proto_options(**options))
        return stub.Translate(request, timeout=TIMEOUT).translations[0]
    finally:
        channel.close()


def test_translate_cli_with_scores_and_heatmap(server, address, tmp_path, capsys):
    png = tmp_path / "a.png"
    text = "The visiting team swept the series"
    code = client.main(
        ["--server", address, text, "--attention-png", str(png), "--beam", "2", "--scores"]
    )
    out, err = capsys.readouterr()
    assert code == 0
    best = _unary(server, text, beam=2).hypotheses[0]
    assert out.splitlines() == [f"{best.text}\t{best.score:.4f}"]
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert f"attention heatmap: {png}" in err


def test_translate_cli_n_best(server, address, capsys):
    text = "A public utility that provides gas"
    argv = ["--server", address, text, "Another one", "--beam", "3", "--n-best", "3"]
    assert client.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    assert [line.split("\t")[0] for line in lines] == ["1", "2", "3"] * 2
    hyps = _unary(server, text, beam=3, n_best=3).hypotheses
    assert [line.split("\t", 1)[1] for line in lines[:3]] == [h.text for h in hyps]


def test_translate_cli_reports_server_errors(address, capsys):
    assert client.main(["--server", address, "   "]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    want = "INVALID_ARGUMENT: texts[0] is empty or whitespace only: send non-empty text"
    assert err == [f"nmt-translate: error: {want}"]


def test_translate_cli_closed_port(capsys):
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = client.main(["--server", f"127.0.0.1:{port}", "hello", "--timeout", "5"])
    captured = capsys.readouterr()
    assert code == 1
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("nmt-translate: error: UNAVAILABLE")


def test_translate_cli_rejects_bad_beam(capsys):
    assert client.main(["--beam", "0", "hello"]) == 2
    assert "--beam and --n-best must be >= 1" in capsys.readouterr().err


def test_translate_cli_n_best_needs_a_beam(capsys):
    assert client.main(["--n-best", "3", "hello"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["nmt-translate: error: --n-best 3 needs --beam 3 or more"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--timeout", "0"], "--timeout 0.0 must be a positive number of seconds"),
        (["--timeout", "-1"], "--timeout -1.0 must be a positive number of seconds"),
        (["--attention-png", "/nonexistent/dir/a.png"], "directory /nonexistent/dir does not"),
    ],
)
def test_translate_cli_checks_arguments_before_sending(argv, message, capsys):
    # Nothing listens at this address: an argument error must come first, in one line.
    assert client.main(["--server", "127.0.0.1:1", "hello", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith("nmt-translate: error: ") and message in captured.err


def test_translate_cli_attention_png_without_matplotlib(monkeypatch, tmp_path, capsys):
    real = client.importlib.util.find_spec
    monkeypatch.setattr(
        client.importlib.util,
        "find_spec",
        lambda name, *a: None if name == "matplotlib" else real(name, *a),
    )
    argv = ["--server", "127.0.0.1:1", "hello", "--attention-png", str(tmp_path / "a.png")]
    assert client.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        "nmt-translate: error: --attention-png needs matplotlib: pip install 'rnn-nmt-serving[viz]'"
    ]


@pytest.fixture(scope="module")
def subset(tmp_path_factory):
    root = tmp_path_factory.mktemp("eval")
    src, ref = root / "src.en", root / "ref.es"
    src.write_text("".join(SAMPLE_EN.read_text().splitlines(keepends=True)[:12]))
    ref.write_text("".join(SAMPLE_ES.read_text().splitlines(keepends=True)[:12]))
    return src, ref


def _eval_lines(out: str) -> tuple[str, str]:
    lines = out.splitlines()
    assert len(lines) == 3
    assert lines[0].startswith("BLEU = ")
    assert "chrF" in lines[1]
    assert lines[2].startswith("10 sentences in ")
    return lines[0], lines[1]


def test_eval_cli_bundle_and_server_agree(tiny_bundle, address, subset, tmp_path, capsys):
    src, ref = subset
    local, remote = tmp_path / "local.txt", tmp_path / "remote.txt"
    args = ["--src", str(src), "--ref", str(ref), "--limit", "10"]
    assert evaluate.main([*args, "--bundle", str(tiny_bundle.bundle_dir), "--out", str(local)]) == 0
    bundle_scores = _eval_lines(capsys.readouterr().out)
    assert evaluate.main([*args, "--server", address, "--out", str(remote)]) == 0
    server_scores = _eval_lines(capsys.readouterr().out)
    assert len(local.read_text().splitlines()) == 10
    assert local.read_text() == remote.read_text()
    assert bundle_scores == server_scores


def test_eval_cli_input_errors(subset, tmp_path, capsys):
    src, ref = subset
    short = tmp_path / "short.es"
    short.write_text("uno\n")
    assert evaluate.main(["--src", str(src), "--ref", str(short), "--bundle", "x"]) == 2
    assert "12 source lines but 1 references" in capsys.readouterr().err
    missing = tmp_path / "missing.es"
    assert evaluate.main(["--src", str(src), "--ref", str(missing), "--bundle", "x"]) == 2
    err = capsys.readouterr().err
    assert err == f"nmt-eval: error: cannot read --ref {missing}: No such file or directory\n"


def _eval_against_closed_port(subset, capsys) -> tuple[int, list[str]]:
    src, ref = subset
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    code = evaluate.main(["--src", str(src), "--ref", str(ref), "--server", f"127.0.0.1:{port}"])
    return code, capsys.readouterr().err.strip().splitlines()


def test_eval_cli_server_down(subset, capsys):
    code, err = _eval_against_closed_port(subset, capsys)
    assert code == 1
    assert err[0].startswith("nmt-eval: error: ")
    assert "UNAVAILABLE" in "\n".join(err)


def test_eval_cli_server_down_is_one_line(subset, capsys):
    code, err = _eval_against_closed_port(subset, capsys)
    assert len(err) == 1, err


def test_eval_cli_empty_source_line_works_with_server_too(
    tiny_bundle, address, subset, tmp_path, capsys
):
    src, ref = subset
    lines = src.read_text().splitlines()
    lines[3] = ""
    holes = tmp_path / "holes.en"
    holes.write_text("".join(line + "\n" for line in lines))
    args = ["--src", str(holes), "--ref", str(ref), "--limit", "10"]
    assert evaluate.main([*args, "--bundle", str(tiny_bundle.bundle_dir)]) == 0
    capsys.readouterr()
    assert evaluate.main([*args, "--server", address]) == 0


def test_eval_with_server_waits_out_a_full_queue(server_factory, tiny_bundle, monkeypatch):
    """nmt-eval keeps several requests in flight; a server whose queue is full answers
    RESOURCE_EXHAUSTED and nmt-eval retries instead of failing."""
    server = server_factory(max_queue=1)
    reg, model = server.registry, server.engines["tiny"].bundle.model
    lines = tiny_bundle.sentences[1:13]
    want = evaluate.translate_with_bundle(tiny_bundle.bundle_dir, lines, 1)
    rejected = {"reason": "queue_full"}
    _, release = blocked_encoder(monkeypatch, model)

    def release_once_rejected() -> None:
        wait_until(lambda: (reg.get_sample_value("nmt_rejected_requests_total", rejected) or 0) > 0)
        release.set()

    releaser = threading.Thread(target=release_once_rejected)
    releaser.start()
    try:
        got = evaluate.translate_with_server(f"127.0.0.1:{server.port}", lines, 1, batch=1)
    finally:
        release.set()
        releaser.join()
    assert reg.get_sample_value("nmt_rejected_requests_total", rejected) > 0
    assert got == want


def test_eval_with_server_sizes_requests_to_the_beam(address, tiny_bundle):
    """32 sentences x beam 12 would exceed the server's 256 rows: nmt-eval sends fewer."""
    lines = tiny_bundle.sentences[1:41]
    got = evaluate.translate_with_server(address, lines, 12)
    assert len(got) == len(lines) and all(got)


class _RpcError(grpc.RpcError):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


def test_eval_retries_only_the_servers_own_overload():
    # gRPC's own RESOURCE_EXHAUSTED for an oversized message never succeeds on retry.
    busy = "request queue is full (128 waiting); retry with backoff"
    assert evaluate._overloaded(_RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, busy))
    too_big = "Received message larger than max (5200005 vs. 4194304)"
    assert not evaluate._overloaded(_RpcError(grpc.StatusCode.RESOURCE_EXHAUSTED, too_big))
    assert not evaluate._overloaded(_RpcError(grpc.StatusCode.UNAVAILABLE, busy))
