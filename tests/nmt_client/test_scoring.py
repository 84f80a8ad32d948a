"""``Translator.score``/``score_many`` and ``nmt-score`` against a real server: files and
stdin in, one line a pair out, the summary, and one line (no traceback) for every failure."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from nmt_client import InvalidRequest, Translator, score_request
from nmt_client import scoring as cli
from tests.service.server_fixtures import SAMPLE_ES
from tests.service.server_helpers import TIMEOUT

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def translator(address):
    with Translator(address, timeout=TIMEOUT) as t:
        yield t


@pytest.fixture(scope="module")
def pairs(tiny_bundle):
    refs = SAMPLE_ES.read_text(encoding="utf-8").splitlines()
    return [(tiny_bundle.sentences[i], refs[i]) for i in range(1, 8)]


def test_score_gives_token_log_probs_that_add_up(translator, pairs):
    results = translator.score([s for s, _ in pairs], [t for _, t in pairs])
    assert [r.source for r in results] == [s for s, _ in pairs]
    for r in results:
        (h,) = r.hypotheses
        assert len(h.token_log_probs) == len(h.tokens) + 1
        assert math.fsum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
        assert h.score is not None and h.attention is None
    # the length penalty changes the score, never the log-prob
    flat = translator.score([pairs[0][0]], [pairs[0][1]], length_penalty=0.0)[0].best
    assert flat.score == pytest.approx(flat.log_prob, abs=1e-5)
    assert flat.log_prob == pytest.approx(results[0].best.log_prob, abs=1e-6)
    with_attention = translator.score([pairs[0][0]], [pairs[0][1]], return_attention=True)
    attention = with_attention[0].best.attention
    assert attention is not None and attention.rows == len(with_attention[0].best.tokens) + 1


def test_score_many_keeps_the_order(translator, pairs):
    one = [translator.score([s], [t])[0].best.log_prob for s, t in pairs]
    many = [r.best.log_prob for r in translator.score_many(pairs, batch_size=2, concurrency=3)]
    assert many == pytest.approx(one, abs=1e-5)


def test_requests_the_client_refuses_before_sending(translator):
    with pytest.raises(ValueError, match="2 targets for 1 texts"):
        score_request(["a"], ["b", "c"])
    with pytest.raises(TypeError, match="not one string"):
        translator.score("a house", ["una casa"])
    with pytest.raises(InvalidRequest, match=r"targets\[0\] has \d+ target tokens"):
        translator.score(["a house"], ["casa " * 300])


def _write(tmp_path: Path, pairs) -> tuple[Path, Path]:
    src, tgt = tmp_path / "src.txt", tmp_path / "tgt.txt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    tgt.write_text("".join(t + "\n" for _, t in pairs), encoding="utf-8")
    return src, tgt


def test_files_in_one_line_a_pair_out(translator, address, pairs, tmp_path, capsys):
    src, tgt = _write(tmp_path, [*pairs[:3], ("   ", "ignored"), *pairs[3:]])
    assert cli.main(["--server", address, "--src", str(src), "--tgt", str(tgt)]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert len(lines) == len(pairs) + 1 and lines[3] == ""  # a blank source: a blank line
    want = translator.score([s for s, _ in pairs], [t for _, t in pairs])
    got = [float(x) for x in lines[:3] + lines[4:]]
    assert got == pytest.approx([r.best.log_prob for r in want], abs=1e-5)
    tokens = sum(len(r.best.tokens) + 1 for r in want)
    total = sum(r.best.log_prob for r in want)
    assert err.startswith(f"nmt-score: {len(pairs)} pairs, {tokens} target tokens")
    assert f"perplexity {math.exp(-total / tokens):.3f}" in err


def test_normalized_tokens_and_json(translator, address, pairs, tmp_path, capsys):
    src, tgt = _write(tmp_path, pairs[:2])
    argv = ["--server", address, "--src", str(src), "--tgt", str(tgt), "--length-penalty", "1"]
    best = translator.score([pairs[0][0]], [pairs[0][1]], length_penalty=1.0)[0].best
    assert cli.main([*argv, "--normalize", "--tokens"]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    score, tokens = first.split("\t")
    assert float(score) == pytest.approx(best.score, abs=1e-5)
    named = tokens.split(" ")
    assert [t.rsplit("=", 1)[0] for t in named] == [*best.tokens, "</s>"]
    assert [float(t.rsplit("=", 1)[1]) for t in named] == pytest.approx(
        best.token_log_probs, abs=1e-4
    )
    assert cli.main([*argv, "--json"]) == 0
    record = json.loads(capsys.readouterr().out.splitlines()[0])
    assert record["tokens"] == list(best.tokens)
    assert record["token_log_probs"] == pytest.approx(list(best.token_log_probs))


def test_tab_separated_stdin_through_the_installed_command(address, pairs):
    done = subprocess.run(
        [sys.executable, "-m", "nmt_client.scoring", "--server", address],
        input="".join(f"{s}\t{t}\n" for s, t in pairs[:3]),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    assert all(float(x) < 0 for x in done.stdout.splitlines())
    assert done.stderr.startswith("nmt-score: 3 pairs")


@pytest.mark.parametrize(
    ("setup", "argv", "message"),
    [
        (None, ["--src", "nowhere.txt"], "--src and --tgt go together"),
        ("uneven", [], "2 source lines but 1 target lines"),
        ("latin1", [], "line 1 is not valid UTF-8"),
        (None, ["--src", "missing.txt", "--tgt", "missing.txt"], "cannot read missing.txt"),
        (None, ["--batch-size", "0"], "--batch-size and --concurrency must be >= 1"),
    ],
)
def test_bad_input_is_one_line(address, tmp_path, capsys, setup, argv, message):
    if setup == "uneven":
        (tmp_path / "s").write_text("a\nb\n")
        (tmp_path / "t").write_text("x\n")
        argv = ["--src", str(tmp_path / "s"), "--tgt", str(tmp_path / "t")]
    elif setup == "latin1":
        (tmp_path / "s").write_bytes("caf\xe9\n".encode("latin-1"))
        (tmp_path / "t").write_text("x\n")
        argv = ["--src", str(tmp_path / "s"), "--tgt", str(tmp_path / "t")]
    assert cli.main(["--server", address, *argv]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and message in err, err


def test_blank_stdin_lines_stay_and_errors_name_the_stdin_line(address, pairs):
    lines = [f"{pairs[0][0]}\t{pairs[0][1]}", "", "  ", f"{pairs[1][0]}\t{pairs[1][1]}"]
    done = subprocess.run(
        [sys.executable, "-m", "nmt_client.scoring", "--server", address, "--json"],
        input="".join(line + "\n" for line in lines),
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout.splitlines()
    assert len(out) == 4 and out[1:3] == ["null", "null"]
    assert all(json.loads(x)["log_prob"] < 0 for x in (out[0], out[3]))
    bad = [*lines, f"{pairs[2][0]}\t{'casa ' * 300}"]
    done = subprocess.run(
        [sys.executable, "-m", "nmt_client.scoring", "--server", address],
        input="".join(line + "\n" for line in bad),
        capture_output=True, text=True, timeout=120, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("nmt-score: error: INVALID_ARGUMENT: line 5: the target has ")


def test_the_summary_survives_a_huge_perplexity(capsys):
    from nmt_client.results import Hypothesis, Result

    result = Result("a", (Hypothesis("b", ("b",), -2e4, -2e4, token_log_probs=(-1e4, -1e4)),))
    cli._summary([result], 0.1)
    assert "perplexity inf" in capsys.readouterr().err


def test_stdin_without_a_tab_is_one_line(address):
    done = subprocess.run(
        [sys.executable, "-m", "nmt_client.scoring", "--server", address],
        input="a house with no target\n",
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "nmt-score: error: stdin line 1 has no tab: send source<TAB>target, or use --src/--tgt"
    ]


def test_a_refused_pair_names_its_line(address, pairs, tmp_path, capsys):
    src, tgt = _write(tmp_path, [*pairs[:3], (pairs[3][0], "casa " * 300)])
    argv = ["--server", address, "--src", str(src), "--tgt", str(tgt), "--batch-size", "2"]
    assert cli.main(argv) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("nmt-score: error: INVALID_ARGUMENT: line 4: the target has ")
    assert len(err.splitlines()) == 1


def test_a_bundle_in_this_process_scores_as_the_server(
    address, tiny_bundle, pairs, tmp_path, capsys
):
    """``--bundle``: no server, the same numbers and the same refusals (named by line)."""
    src, tgt = _write(tmp_path, [*pairs[:2], ("", ""), *pairs[2:]])
    files = ["--src", str(src), "--tgt", str(tgt), "--tokens", "--batch-size", "3"]
    assert cli.main(["--server", address, *files]) == 0
    served = capsys.readouterr().out.splitlines()
    assert cli.main(["--bundle", str(tiny_bundle.bundle_dir), *files]) == 0
    local = capsys.readouterr().out.splitlines()
    assert len(local) == len(served) == len(pairs) + 1 and local[2] == served[2] == ""
    for a, b in zip(local, served, strict=True):
        if a:
            assert float(a.split("\t")[0]) == pytest.approx(float(b.split("\t")[0]), abs=1e-4)
            assert [t.rsplit("=", 1)[0] for t in a.split("\t")[1].split()] == [
                t.rsplit("=", 1)[0] for t in b.split("\t")[1].split()
            ]
    src, tgt = _write(tmp_path, [*pairs[:4], (pairs[4][0], "casa " * 300)])
    files = ["--src", str(src), "--tgt", str(tgt), "--batch-size", "2"]
    assert cli.main(["--bundle", str(tiny_bundle.bundle_dir), *files]) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(
        "nmt-score: error: INVALID_ARGUMENT: line 5: the target has "
    )
    assert cli.main(["--bundle", str(tmp_path / "nowhere"), *files]) == 1
    err = capsys.readouterr().err
    assert err.startswith("nmt-score: error: BundleError: bundle directory not found")
    assert len(err.splitlines()) == 1


def test_asked_for_token_scores_stay_a_tuple_when_empty():
    """A hypothesis of no tokens stopped at a length limit without an EOS has none: ()
    when they were asked for (a column in nmt-translate's lines), None when not."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from nmt_client.cli import token_scores_text
    from nmt_client.results import Hypothesis

    msg = pb.Hypothesis(text="")
    asked = Hypothesis.from_proto(msg, scores=True, token_scores=True)
    assert asked.token_log_probs == () and token_scores_text(asked) == ""
    assert Hypothesis.from_proto(msg, scores=True).token_log_probs is None
    some = Hypothesis.from_proto(
        pb.Hypothesis(tokens=["a"], token_log_probs=[-1.0, -0.5]), scores=True
    )
    assert (
        some.token_log_probs == (-1.0, -0.5) and token_scores_text(some) == "a=-1.0000 </s>=-0.5000"
    )


def test_alignment_from_the_server_and_from_a_bundle(
    translator, address, tiny_bundle, pairs, tmp_path, capsys
):
    """``--alignment``: the target's hard alignment to its source, as Score gives it;
    ``--bundle`` aligns the same in this process."""
    src, tgt = _write(tmp_path, pairs[:4])
    files = ["--src", str(src), "--tgt", str(tgt), "--alignment"]
    want = translator.score(
        [s for s, _ in pairs[:4]], [t for _, t in pairs[:4]], return_alignment=True
    )
    assert cli.main(["--server", address, *files]) == 0
    served = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[1] for line in served] == [r.best.pharaoh() for r in want]
    assert all(r.best.alignment and r.source_pieces for r in want)
    assert cli.main(["--bundle", str(tiny_bundle.bundle_dir), *files]) == 0
    local = capsys.readouterr().out.splitlines()
    assert [line.split("\t")[1] for line in local] == [line.split("\t")[1] for line in served]
    assert cli.main(["--bundle", str(tiny_bundle.bundle_dir), *files, "--json"]) == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    for record, r in zip(records, want, strict=True):
        assert record["alignment"] == list(r.best.alignment)
        assert record["source_pieces"] == list(r.source_pieces)
    assert cli.main(["--server", address, "--src", str(src), "--tgt", str(tgt), "--json"]) == 0
    assert "alignment" not in json.loads(capsys.readouterr().out.splitlines()[0])
