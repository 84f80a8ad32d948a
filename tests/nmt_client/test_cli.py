"""``nmt-translate`` against a real server: arguments, stdin, --list-models, --stream,
heatmaps, and one line (no traceback) for every failure."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nmt_client import Translator, cli
from tests.service.server_helpers import TIMEOUT

ROOT = Path(__file__).resolve().parents[2]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def translator(address):
    with Translator(address, timeout=TIMEOUT) as t:
        yield t


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_scores_and_heatmap(translator, address, tmp_path, capsys):
    png = tmp_path / "a.png"
    text = "The visiting team swept the series"
    argv = ["--server", address, text, "--attention-png", str(png), "--beam", "2", "--scores"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    best = translator.translate_one(text, beam_size=2).best
    assert out.splitlines() == [f"{best.text}\t{best.score:.4f}"]
    assert png.read_bytes()[:8] == PNG_MAGIC
    assert f"attention heatmap: {png}" in err


def test_heatmap_of_words(address, tmp_path, capsys):
    pieces, words = tmp_path / "pieces.png", tmp_path / "words.png"
    text = "The visiting team swept the series"
    assert cli.main(["--server", address, text, "--attention-png", str(pieces)]) == 0
    assert cli.main(["--server", address, text, "--attention-png", str(words), "--words"]) == 0
    capsys.readouterr()
    assert pieces.read_bytes()[:8] == PNG_MAGIC and words.read_bytes()[:8] == PNG_MAGIC
    assert pieces.read_bytes() != words.read_bytes()


def test_n_best(translator, address, capsys):
    text = "A public utility that provides gas"
    argv = ["--server", address, text, "Another one", "--beam", "3", "--n-best", "3"]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 6
    assert [line.split("\t")[0] for line in lines] == ["1", "2", "3"] * 2
    hyps = translator.translate_one(text, beam_size=3, n_best=3).hypotheses
    assert [line.split("\t", 1)[1] for line in lines[:3]] == [h.text for h in hyps]


def test_stdin_one_line_each_blank_lines_kept(
    translator, address, tiny_bundle, monkeypatch, capsys
):
    lines = list(tiny_bundle.sentences[1:8])
    lines.insert(2, "")
    lines.insert(5, "   ")
    lines.append("")
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(line + "\n" for line in lines)))
    assert cli.main(["--server", address, "--batch-size", "2"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(lines)
    want = {r.source: r.text for r in translator.translate([x for x in lines if x.strip()])}
    assert out == [want[line] if line.strip() else "" for line in lines]


def test_stdin_through_the_installed_command(address, tiny_bundle):
    """The console script itself, in a subprocess: stdin in, one line out each."""
    lines = list(tiny_bundle.sentences[1:4])
    done = subprocess.run(
        [sys.executable, "-m", "nmt_client.cli", "--server", address],
        input="".join(line + "\n" for line in lines),
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3 and done.stderr == ""


def test_list_models(address, capsys):
    assert cli.main(["--server", address, "--list-models"]) == 0
    assert capsys.readouterr().out.splitlines() == ["tiny\t1\tfp32\tCPUExecutionProvider\tdefault"]


def test_stream_prints_the_best_translation(translator, address, capsys):
    text = "The visiting team swept the series"
    assert cli.main(["--server", address, "--stream", "--scores", text]) == 0
    best = translator.translate_one(text).best
    assert capsys.readouterr().out == f"{best.text}\t{best.score:.4f}\n"


def test_server_errors_are_one_line(address, capsys):
    assert cli.main(["--server", address, "--model", "nope", "A house."]) == 1
    captured = capsys.readouterr()
    want = "INVALID_ARGUMENT: unknown model 'nope'; loaded models: tiny"
    assert captured.out == "" and captured.err.splitlines() == [f"nmt-translate: error: {want}"]


def test_a_blank_sentence_is_a_blank_line(address, capsys):
    assert cli.main(["--server", address, "A house.", "   ", "A dog."]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and lines[0] and lines[1] == "" and lines[2]


def test_server_not_running_is_one_line_with_a_hint():
    """The installed entry point in a subprocess: exit 1, nothing on stdout, one line on
    stderr asking whether nmt-serve runs there, no traceback."""
    target = f"127.0.0.1:{closed_port()}"
    done = subprocess.run(
        [sys.executable, "-m", "nmt_client.cli", "--server", target, "--retries", "1", "hello"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env=os.environ | {"PYTHONWARNINGS": "ignore"},
    )
    assert done.returncode == 1
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        f"nmt-translate: error: UNAVAILABLE: cannot connect to {target} (Connection refused); "
        f"is nmt-serve running on {target}?"
    ]


def test_rejects_bad_beam(capsys):
    assert cli.main(["--beam", "0", "hello"]) == 2
    assert "--beam and --n-best must be >= 1" in capsys.readouterr().err


def test_n_best_needs_a_beam(address, capsys):
    assert cli.main(["--n-best", "3", "--beam", "2", "hello"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == ["nmt-translate: error: --n-best 3 needs --beam 3 or more"]
    # without --beam the beam is the model's own (greedy here): the server says so
    assert cli.main(["--server", address, "--n-best", "3", "hello"]) == 1
    assert "INVALID_ARGUMENT: n_best must be between 1 and beam_size (1), got 3" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--timeout", "0"], "--timeout 0.0 must be a finite positive number of seconds"),
        (["--timeout", "-1"], "--timeout -1.0 must be a finite positive number of seconds"),
        (["--timeout", "inf"], "--timeout inf must be a finite positive number of seconds"),
        (["--timeout", "nan"], "--timeout nan must be a finite positive number of seconds"),
        (["--wait-ready", "nan"], "--wait-ready nan must be between 0 and 3600"),
        (["--retries", "-1"], "--retries -1 must be >= 0"),
        (["--attention-png", "/nonexistent/dir/a.png"], "directory /nonexistent/dir does not"),
        (["--words"], "--words goes with --attention-png"),
        (["--stream", "another sentence"], "--stream translates one sentence"),
        (["--batch-size", "0"], "--batch-size must be >= 1"),
        (["--length-penalty", "nan"], "--length-penalty nan must be a finite number >= 0"),
        (["--length-penalty", "inf"], "--length-penalty inf must be a finite number >= 0"),
        (["--length-penalty", "-1"], "--length-penalty -1.0 must be a finite number >= 0"),
        (["--max-length", "-5"], "--max-length -5 must be >= 1 (or 0: the server's default)"),
        (["--list-models", "Hello"], "--list-models lists every model and translates nothing"),
        (["--min-length", "-1"], "--min-length -1 must be >= 0"),
        (["--coverage-penalty", "-0.2"], "--coverage-penalty -0.2 must be a finite number >= 0"),
        (["--coverage-penalty", "nan"], "--coverage-penalty nan must be a finite number >= 0"),
        (["--sampling-topk", "-1"], "--sampling-topk -1 must be >= 0 (0 or 1: no sampling)"),
        (["--sampling-topk", "5", "--diversity-rate", "1"], "draws its samples independently"),
        (["--sampling-temperature", "0"], "--sampling-temperature 0.0 must be a finite number"),
        (["--sampling-temperature", "0.5"], "--sampling-temperature goes with --sampling-topk"),
        (["--sampling-topp", "0.9", "--beam", "4"], "--sampling-topp goes with --sampling-topk"),
        (["--beam", "4", "--diverse-beam-strength", "1"], "goes with --diverse-beam-groups N"),
        (["--stream", "two", "three"], "give exactly one (got 3)"),
        (["--split-sentences", "--n-best", "2", "--beam", "2"], "one translation per sentence"),
        (["--split-sentences", "--token-scores", "--alignment"], "drop --token-scores, --align"),
        (["--split-sentences", "--prefix", "La"], "--split-sentences joins one translation"),
        (["--stream", "--n-best", "2", "--beam", "2"], "--stream sends the best hypothesis"),
        (["--attention-png", "/tmp"], "--attention-png /tmp is a directory: give a file name"),
        (["--attention-png", "a.txt"], "the heatmap is a PNG: give a path ending in .png"),
        (["--sampling-temperature", "nan"], "--sampling-temperature nan must be a finite"),
        (["--seed", "-1"], "--seed -1 must be in [0, 2^64)"),
        (["--sampling-topp", "0"], "--sampling-topp 0.0 must be in (0, 1]"),
        (["--diversity-rate", "-1", "--beam", "4"], "--diversity-rate -1.0 must be a finite"),
        (["--diversity-rate", "nan", "--beam", "4"], "--diversity-rate nan must be a finite"),
        (["--diversity-rate", "0.5", "--beam", "1"], "--diversity-rate ranks a beam's"),
        (["--stream", "--replace-unk"], "--replace-unk needs the finished translation's attention"),
        (["--block-ngram-repeat", "33"], "--block-ngram-repeat 33 must be between 0 (off) and 32"),
        (["--block-ngram-repeat", "-2"], "--block-ngram-repeat -2 must be between 0 (off) and 32"),
        (["--ignore-when-blocking", "."], "--ignore-when-blocking goes with --block-ngram-repeat"),
        (
            ["--block-ngram-repeat", "2", "--ignore-when-blocking", ""],
            "--ignore-when-blocking needs a token, not an empty string",
        ),
        (["--list-models", "--model", "nope"], "--list-models lists every model and translates"),
    ],
)
def test_arguments_are_checked_before_sending(argv, message, capsys):
    # Nothing listens at this address: an argument error must come first, in one line.
    assert cli.main(["--server", "127.0.0.1:1", "hello", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert captured.err.startswith("nmt-translate: error: ") and message in captured.err


def test_attention_png_without_matplotlib(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(cli, "have_matplotlib", lambda: False)
    argv = ["--server", "127.0.0.1:1", "hello", "--attention-png", str(tmp_path / "a.png")]
    assert cli.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        "nmt-translate: error: --attention-png needs matplotlib: pip install 'rnn-nmt-serving[viz]'"
    ]


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    for shown in (
        "(default: 127.0.0.1:50051)",
        "(default: 30.0)",
        "beam size, 1: greedy (default: the model's own",
        "sum over its pieces",
        "mean of its pieces' rows",
        "none: read stdin",
    ):
        assert shown in out


def test_prefix_forces_the_start_of_each_translation(translator, address, capsys):
    texts = ["A house.", "The visiting team swept the series"]
    prefix = "la casa"
    assert cli.main(["--server", address, "--prefix", prefix, *texts]) == 0
    expected = translator.translate(texts, target_prefix=[prefix] * 2)
    assert capsys.readouterr().out.splitlines() == [r.best.text for r in expected]
    assert cli.main(["--server", address, "--stream", "--prefix", prefix, texts[0]]) == 0
    assert capsys.readouterr().out == f"{expected[0].best.text}\n"


def test_prefix_needs_sentences_on_the_command_line(address, capsys, monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.StringIO("A house.\n"))
    assert cli.main(["--server", address, "--prefix", "la"]) == 2
    assert "--prefix goes with sentences on the command line" in capsys.readouterr().err


def test_constraints_reach_the_server(translator, address, capsys):
    texts = ["A house.", "The visiting team swept the series"]
    argv = ["--server", address, "--beam", "4", "--constraint", "casa", "--constraint", "perro"]
    assert cli.main([*argv, *texts]) == 0
    expected = translator.translate(texts, beam_size=4, constraints=[["casa", "perro"]] * 2)
    plain = translator.translate(texts, beam_size=4)
    assert capsys.readouterr().out.splitlines() == [r.best.text for r in expected]
    assert [r.best.text for r in expected] != [r.best.text for r in plain]
    assert cli.main([*argv, "--ordered-constraints", "--stream", texts[0]]) == 0
    ordered = translator.translate(
        texts[:1], beam_size=4, constraints=[["casa", "perro"]], ordered_constraints=True
    )
    assert capsys.readouterr().out == f"{ordered[0].best.text}\n"


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--constraint", "la"], "--constraint goes with sentences on the command line"),
        (["--constraint", "la", "--prefix", "el", "A house."], "do not go with --prefix"),
        (["--ordered-constraints", "A house."], "orders --constraint or --glossary phrases"),
    ],
)
def test_constraint_flags_are_checked(address, capsys, monkeypatch, argv, message):
    monkeypatch.setattr(sys, "stdin", io.StringIO("A house.\n"))
    assert cli.main(["--server", address, *argv]) == 2
    assert message in capsys.readouterr().err


def test_a_glossary_constrains_the_lines_whose_source_holds_a_term(
    translator, address, capsys, monkeypatch, tmp_path
):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("# source<TAB>target\nhouse\tcasa\nvisiting team\tequipo\n")
    lines = ["A House.", "The weather is nice.", "The visiting team swept the series"]
    monkeypatch.setattr(sys, "stdin", io.StringIO("\n".join(lines) + "\n"))
    assert cli.main(["--server", address, "--beam", "4", "--glossary", str(glossary)]) == 0
    got = capsys.readouterr().out.splitlines()
    want = translator.translate(lines, beam_size=4, constraints=[["casa"], [], ["equipo"]])
    assert got == [r.best.text for r in want]
    # a line without a source term translates as it would without the glossary
    assert got[1] == translator.translate(lines[1:2], beam_size=4)[0].best.text


def test_a_bad_glossary_is_a_one_line_error(address, capsys, tmp_path):
    glossary = tmp_path / "terms.tsv"
    glossary.write_text("house\tcasa\nno tab here\n")
    assert cli.main(["--server", address, "--glossary", str(glossary), "A house."]) == 2
    err = capsys.readouterr().err
    assert f"{glossary}:2: expected 'source term<TAB>target term'" in err
    assert len(err.strip().splitlines()) == 1


def test_diagnostics_are_printed_per_hypothesis(address, capsys):
    assert cli.main(["--server", address, "--diagnostics", "A house."]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    text, diag = line.split("\t")
    assert text and diag.startswith("entropy=") and " deficit=" in diag and " unk=" in diag


def test_stream_prints_diagnostics_after_the_score(translator, address, capsys):
    text = "The visiting team swept the series"
    assert cli.main(["--server", address, "--stream", "--scores", "--diagnostics", text]) == 0
    best = translator.translate_one(text).best
    streamed, score, diag = capsys.readouterr().out.rstrip("\n").split("\t")
    assert (streamed, score) == (best.text, f"{best.score:.4f}")
    assert diag.startswith("entropy=") and " deficit=" in diag and " unk=" in diag


def test_max_length_0_is_the_servers_default(address, capsys):
    assert cli.main(["--server", address, "A house.", "--max-length", "0"]) == 0
    zero = capsys.readouterr().out
    assert cli.main(["--server", address, "A house."]) == 0
    assert zero == capsys.readouterr().out and zero.strip()


def test_stdin_not_utf8_is_one_line_naming_the_line(address, translator, monkeypatch, capsys):
    """The lines before it are translated first (they used to be lost with it)."""
    raw = io.BytesIO(b"A house.\n\xff\xfe bad\n")
    stdin = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape")
    monkeypatch.setattr(sys, "stdin", stdin)
    assert cli.main(["--server", address]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [translator.translate_one("A house.").text]
    assert captured.err.splitlines() == [
        "nmt-translate: error: stdin line 2 is not valid UTF-8: convert the input to UTF-8 "
        "(e.g. iconv -f LATIN1 -t UTF-8)"
    ]


def test_batches_are_sized_to_the_servers_limits(address, monkeypatch, capsys):
    """--batch-size 100 against --max-sentences 64, and a beam of 10 against 256 rows
    (25 sentences a request): the requests are sized to what ListModels says."""
    monkeypatch.setattr(sys, "stdin", io.StringIO("A house.\n" * 70))
    assert cli.main(["--server", address, "--batch-size", "100"]) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 70 and not out.err
    monkeypatch.setattr(sys, "stdin", io.StringIO("A house.\n" * 40))
    assert cli.main(["--server", address, "--beam", "10"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 40
    with Translator(address) as translator:
        limits = translator.limits()
        assert limits is not None and limits.sentences_per_request(10) == 25
        assert (limits.max_sentences, limits.max_live_rows) == (64, 256)
        results = list(translator.translate_many(["A house."] * 30, beam_size=16))
        assert len(results) == 30


def test_a_batch_over_the_servers_limit_asks_for_a_lower_batch_size(address, monkeypatch, capsys):
    """A server that does not report its limits (older than ModelInfo.limits)."""
    monkeypatch.setattr(Translator, "_info", lambda self, model=None: None)
    monkeypatch.setattr(sys, "stdin", io.StringIO("A house.\n" * 70))
    assert cli.main(["--server", address, "--batch-size", "100"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "nmt-translate: error: INVALID_ARGUMENT: 70 sentences in one request; the server's "
        "limit is 64: lower --batch-size to at most 64"
    ]


def test_a_sentence_too_long_is_named_by_its_input_line(address, tiny_bundle, monkeypatch, capsys):
    lines = [*tiny_bundle.sentences[1:6], "", "house " * 300, "A dog."]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(line + "\n" for line in lines)))
    assert cli.main(["--server", address, "--batch-size", "4"]) == 1
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith("nmt-translate: error: INVALID_ARGUMENT: stdin line 7 has "), err
    assert "texts[" not in err


def test_banning_flags_reach_the_server(address, tiny_bundle, capsys):
    # sample line 0 runs to the length limit on the tiny model, repeating itself
    text = tiny_bundle.sentences[0]
    with Translator(address) as translator:
        plain = translator.translate_one(text).best
        blocked = translator.translate_one(text, block_ngram_repeat=1, min_length=2).best
    assert len(set(plain.tokens)) < len(plain.tokens)  # repeats without blocking
    assert len(set(blocked.tokens)) == len(blocked.tokens)
    argv = ["--server", address, text, "--block-ngram-repeat", "1", "--min-length", "2"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == blocked.text + "\n"


def test_an_unknown_ignored_token_is_one_line(address, capsys):
    argv = ["--server", address, "A house.", "--block-ngram-repeat", "2"]
    assert cli.main([*argv, "--ignore-when-blocking", "no-such-token"]) == 1
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1
    assert "'no-such-token' not in the model's target vocabulary" in captured.err


def test_coverage_penalty_flag_reaches_the_server(address, tiny_bundle, capsys):
    texts = tiny_bundle.sentences[:12]
    with Translator(address) as translator:
        plain = [translator.translate_one(t, beam_size=4).best for t in texts]
        covered = [
            translator.translate_one(t, beam_size=4, coverage_penalty=1.0).best for t in texts
        ]
    assert [h.text for h in plain] != [h.text for h in covered]  # the penalty moved some
    i = next(i for i, (p, c) in enumerate(zip(plain, covered, strict=True)) if p.text != c.text)
    argv = ["--server", address, texts[i], "--beam", "4", "--coverage-penalty", "1.0"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out == covered[i].text + "\n"


def test_sampling_flags_reach_the_server(address, tiny_bundle, capsys):
    text = tiny_bundle.sentences[3]
    with Translator(address) as translator:
        want = translator.translate_one(text, sampling_topk=40, seed=9).best.text
    argv = ["--server", address, text, "--sampling-topk", "40", "--seed", "9"]
    assert cli.main(argv) == 0 and cli.main(argv) == 0
    assert capsys.readouterr().out == f"{want}\n{want}\n"


def test_token_scores(translator, address, capsys):
    text = "The visiting team swept the series"
    assert cli.main(["--server", address, "--token-scores", "--scores", "--beam", "2", text]) == 0
    line = capsys.readouterr().out.splitlines()[0]
    translation, score, tokens = line.split("\t")
    best = translator.translate_one(text, beam_size=2, return_token_scores=True).best
    assert translation == best.text and float(score) == pytest.approx(best.score, abs=1e-4)
    named = [t.rsplit("=", 1) for t in tokens.split(" ")]
    assert [t for t, _ in named] == [*best.tokens, "</s>"][: len(best.token_log_probs)]
    assert sum(float(v) for _, v in named) == pytest.approx(best.log_prob, abs=1e-3)
    assert cli.main(["--server", address, "--token-scores", "--stream", text]) == 0
    streamed = capsys.readouterr().out.strip().split("\t")
    greedy = translator.translate_one(text, return_token_scores=True).best
    assert streamed[-1] == cli.token_scores_text(greedy)


def test_alignment(translator, address, capsys):
    text = "The visiting team swept the series"
    argv = ["--server", address, "--alignment", "--beam", "2", "--n-best", "2", text]
    assert cli.main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    results = translator.translate_one(text, beam_size=2, n_best=2, return_alignment=True)
    assert results.source_pieces and len(lines) == 2
    for line, hyp in zip(lines, results.hypotheses, strict=True):
        rank, translation, pairs = line.split("\t")
        assert translation == hyp.text and pairs == hyp.pharaoh()
        assert [int(p.split("-")[1]) for p in pairs.split(" ")] == list(range(len(hyp.tokens)))
        assert all(int(p.split("-")[0]) < len(results.source_pieces) for p in pairs.split(" "))
    assert cli.main(["--server", address, "--alignment", "--stream", text]) == 0
    streamed = capsys.readouterr().out.strip().split("\t")
    assert streamed[-1] == translator.translate_one(text, return_alignment=True).best.pharaoh()


def test_json_lines_carry_whole_results(translator, address, tiny_bundle, monkeypatch, capsys):
    lines = [tiny_bundle.sentences[1], "", tiny_bundle.sentences[2]]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{x}\n" for x in lines)))
    argv = ["--server", address, "--json", "--beam", "3", "--n-best", "2"]
    assert cli.main([*argv, "--token-scores", "--alignment", "--max-length", "4"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert len(out) == 3 and out[1] is None  # a blank line stays a line: null
    for got, text in ((out[0], lines[0]), (out[2], lines[2])):
        want = translator.translate_one(
            text, beam_size=3, n_best=2, max_length=4, return_token_scores=True,
            return_alignment=True,
        )  # fmt: skip
        assert got["source"] == text and got["source_pieces"] == list(want.source_pieces)
        assert len(got["hypotheses"]) == 2
        for h, w in zip(got["hypotheses"], want.hypotheses, strict=True):
            assert (h["text"], h["tokens"], h["alignment"]) == (
                w.text,
                list(w.tokens),
                list(w.alignment),
            )
            assert h["score"] == pytest.approx(w.score) and h["log_prob"] == pytest.approx(
                w.log_prob
            )
            assert (
                h["finish_reason"] == w.finish_reason == ("length" if len(w.tokens) == 3 else "eos")
            )
            assert h["token_log_probs"] == pytest.approx(list(w.token_log_probs))
    assert cli.main(["--server", address, "--json", "--stream", "Hi."]) == 2
    assert "--json prints whole results: drop --stream" in capsys.readouterr().err


@pytest.mark.parametrize("json_out", [False, True])
def test_skip_refused_leaves_a_refused_line_blank_and_goes_on(
    translator, address, tiny_bundle, monkeypatch, capsys, json_out
):
    good = [tiny_bundle.sentences[i] for i in (1, 2, 3, 4, 5)]
    lines = [good[0], "house " * 300, good[1], "", good[2], "house " * 200, *good[3:]]
    monkeypatch.setattr(sys, "stdin", io.StringIO("".join(f"{x}\n" for x in lines)))
    argv = ["--server", address, "--skip-refused", "--batch-size", "3"]
    assert cli.main([*argv, "--json"] if json_out else argv) == 1
    out, err = capsys.readouterr()
    want = [r.text for r in translator.translate_many(good)]
    if json_out:
        got = [json.loads(x) for x in out.splitlines()]
        assert [g["hypotheses"][0]["text"] for g in got if g and "hypotheses" in g] == want
        assert got[3] is None
        assert got[1] == {
            "source": lines[1],
            "error": "the text has 1800 source tokens; the limit is 128: split the sentence",
        }
    else:
        assert out.splitlines() == [want[0], "", want[1], "", want[2], "", *want[3:]]
    assert err.splitlines() == [
        "nmt-translate: stdin line 2 left blank: the text has 1800 source tokens; the limit "
        "is 128: split the sentence",
        "nmt-translate: stdin line 6 left blank: the text has 1200 source tokens; the limit "
        "is 128: split the sentence",
        "nmt-translate: 2 sentence(s) refused and left blank",
    ]
    # a refusal of the request as a whole is not a sentence's: it still stops
    monkeypatch.setattr(sys, "stdin", io.StringIO("Hello.\n"))
    assert cli.main([*argv, "--beam", "99"]) == 1
    assert "beam_size 99" in capsys.readouterr().err


def test_wait_ready_waits_for_a_server_then_translates(address, capsys):
    assert cli.main(["--server", address, "--wait-ready", "5", "Hello."]) == 0
    assert capsys.readouterr().out.strip()
    start = time.monotonic()
    # nothing listens there: the wait ends at its limit with the connection's error
    assert cli.main(["--server", "127.0.0.1:1", "--wait-ready", "0.6", "Hello."]) == 1
    assert 0.5 < time.monotonic() - start < 10
    assert "cannot connect to 127.0.0.1:1" in capsys.readouterr().err
    assert cli.main(["--server", address, "--wait-ready", "-1", "Hello."]) == 2
    assert "--wait-ready -1.0 must be between 0 and 3600" in capsys.readouterr().err


def _ask_through_a_pipe(address: str, answers: dict[str, str]) -> None:
    """nmt-translate as a co-process: each line written, its answer read before the next
    is written (``answers``: line -> what must come back), then the end of input."""
    import select
    import subprocess
    from pathlib import Path

    script = Path(sys.executable).parent / "nmt-translate"
    proc = subprocess.Popen(
        [str(script), "--server", address],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        for line, answer in answers.items():
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            ready, _, _ = select.select([proc.stdout], [], [], 30)
            assert ready, f"no answer to {line!r} until more input comes"
            assert proc.stdout.readline() == answer + "\n"
        proc.stdin.close()
        assert proc.wait(30) == 0 and proc.stdout.read() == ""
    finally:
        proc.kill()


def test_a_program_waiting_for_each_answer_gets_it_through_a_pipe(address, tiny_bundle):
    """Reading a pipe, a partial batch goes once no line has come for a moment: a program
    that writes a line and waits for its translation before the next (a co-process)
    gets it, where it used to wait for --batch-size lines or the end of input."""
    with Translator(address) as translator:
        texts = tiny_bundle.sentences[1:4]
        _ask_through_a_pipe(address, {t: translator.translate_one(t).text for t in texts})


def test_translations_cut_at_the_length_limit_are_named(address, tiny_bundle, capsys):
    texts = [tiny_bundle.sentences[i] for i in (1, 2)]
    assert cli.main(["--server", address, *texts]) == 0
    assert "length limit" not in capsys.readouterr().err  # ended by the model
    assert cli.main(["--server", address, "--max-length", "3", *texts]) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 2
    assert err.splitlines() == [
        "nmt-translate: 2 translation(s) reached the length limit and may be cut short "
        "(sentence 1, 2): allow more with --max-length or --max-length-ratio"
    ]


def test_a_blank_line_through_a_pipe_is_answered_at_once(address, tiny_bundle):
    """A program that writes a blank line and waits gets its blank answer (it came only
    with the next line's translation, helper-86)."""
    with Translator(address) as translator:
        first, last = tiny_bundle.sentences[1], tiny_bundle.sentences[2]
        answers = {first: translator.translate_one(first).text, "": ""}
        answers[last] = translator.translate_one(last).text
    _ask_through_a_pipe(address, answers)


def test_split_sentences_translates_each_sentence_and_joins_them(address, capsys):
    """A paragraph given as one text: each of its sentences translated as it is alone."""
    assert cli.main(["--server", address, "Good morning.", "Thank you."]) == 0
    alone = capsys.readouterr().out.splitlines()
    argv = ["--server", address, "--split-sentences", "Good morning. Thank you.", "Hi."]
    assert cli.main(argv) == 0
    joined, single = capsys.readouterr().out.splitlines()
    assert joined == " ".join(alone)
    assert cli.main(["--server", address, "Hi."]) == 0
    assert capsys.readouterr().out.strip() == single
