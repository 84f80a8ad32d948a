"""``nmt-eval`` against a real server and a real bundle."""

from __future__ import annotations

import builtins
import io
import socket
import sys
from pathlib import Path

import pytest

from nmt_client import DecodeOptions, Translator, evaluate
from nmt_client.progress import Progress

SAMPLE = Path(__file__).resolve().parents[2] / "models" / "sample"
SAMPLE_EN, SAMPLE_ES = SAMPLE / "sample.en", SAMPLE / "sample.es"


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


def test_bundle_and_server_agree(tiny_bundle, address, subset, tmp_path, capsys):
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


def test_input_errors(subset, tmp_path, capsys):
    src, ref = subset
    short = tmp_path / "short.es"
    short.write_text("uno\n")
    assert evaluate.main(["--src", str(src), "--ref", str(short), "--bundle", "x"]) == 2
    assert "12 source lines but 1 references" in capsys.readouterr().err
    missing = tmp_path / "missing.es"
    assert evaluate.main(["--src", str(src), "--ref", str(missing), "--bundle", "x"]) == 2
    err = capsys.readouterr().err
    assert err == f"nmt-eval: error: cannot read --ref {missing}: No such file or directory\n"


def test_server_down_is_one_line(subset, capsys):
    src, ref = subset
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        target = f"127.0.0.1:{sock.getsockname()[1]}"
    argv = ["--src", str(src), "--ref", str(ref), "--server", target, "--retries", "1"]
    assert evaluate.main(argv) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith("nmt-eval: error: UNAVAILABLE")
    assert err[0].endswith(f"is nmt-serve running on {target}?")


def test_without_sacrebleu_one_line(subset, monkeypatch, capsys):
    real_import = builtins.__import__

    def no_sacrebleu(name, *args, **kwargs):
        if name == "sacrebleu":
            raise ImportError("No module named 'sacrebleu'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_sacrebleu)
    src, ref = subset
    assert evaluate.main(["--src", str(src), "--ref", str(ref), "--server", "127.0.0.1:1"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "nmt-eval: error: nmt-eval needs sacrebleu: pip install 'rnn-nmt-serving[eval]'"
    ]


def test_empty_source_line_works_with_server_too(tiny_bundle, address, subset, tmp_path, capsys):
    src, ref = subset
    lines = src.read_text().splitlines()
    lines[3] = ""
    holes = tmp_path / "holes.en"
    holes.write_text("".join(line + "\n" for line in lines))
    args = ["--src", str(holes), "--ref", str(ref), "--limit", "10"]
    local, remote = tmp_path / "local.txt", tmp_path / "remote.txt"
    assert evaluate.main([*args, "--bundle", str(tiny_bundle.bundle_dir), "--out", str(local)]) == 0
    assert evaluate.main([*args, "--server", address, "--out", str(remote)]) == 0
    assert local.read_text() == remote.read_text()
    assert local.read_text().splitlines()[3] == ""


def test_requests_are_sized_to_the_beam(address, tiny_bundle):
    """32 sentences x beam 12 would exceed the server's 256 rows: nmt-eval sends fewer."""
    lines = list(tiny_bundle.sentences[1:41])
    with Translator(address) as translator:
        got = evaluate.translate_with_server(translator, lines, DecodeOptions(beam_size=12))
    assert len(got) == len(lines) and all(got)


def test_decoding_flags_apply_alike_with_bundle_and_server(
    tiny_bundle, address, subset, tmp_path, capsys
):
    """nmt-translate's decoding flags, here too: the in-process bundle applies them as the
    server does (same translations), and they change the translations."""
    src, ref = subset
    args = ["--src", str(src), "--ref", str(ref), "--limit", "10"]
    flags = ["--beam", "3", "--block-ngram-repeat", "1", "--length-penalty", "0.2", "--ban-unk"]
    plain, local, remote = (tmp_path / f"{n}.txt" for n in ("plain", "local", "remote"))
    bundle = ["--bundle", str(tiny_bundle.bundle_dir)]
    assert evaluate.main([*args, *bundle, "--out", str(plain)]) == 0
    assert evaluate.main([*args, *flags, *bundle, "--out", str(local)]) == 0
    assert evaluate.main([*args, *flags, "--server", address, "--out", str(remote)]) == 0
    capsys.readouterr()
    assert local.read_text() == remote.read_text() != plain.read_text()
    for line in local.read_text().splitlines():  # block 1: no token twice
        assert len(line.split()) == len(set(line.split())), line


@pytest.mark.parametrize("where", ["bundle", "server"])
def test_an_unknown_ignore_token_is_one_line_either_way(
    tiny_bundle, address, subset, where, capsys
):
    src, ref = subset
    target = (
        ["--bundle", str(tiny_bundle.bundle_dir)] if where == "bundle" else ["--server", address]
    )
    argv = ["--src", str(src), "--ref", str(ref), "--limit", "3", *target]
    argv += ["--block-ngram-repeat", "2", "--ignore-when-blocking", "zzz-not-a-token"]
    assert evaluate.main(argv) == 1
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith("nmt-eval: error: ") and "zzz-not-a-token" in err, err


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--beam", "0"], "--beam and --n-best must be >= 1"),
        (["--block-ngram-repeat", "99"], "--block-ngram-repeat 99 must be between 0 (off) and 32"),
        (["--sampling-topk", "5", "--diverse-beam-groups", "2"], "--sampling-topk draws its"),
        (["--length-penalty", "nan"], "--length-penalty nan must be a finite number >= 0"),
        (["--limit", "-1"], "--limit -1 must be >= 0 (0: all lines)"),
        (["--out", "/nonexistent/x.txt"], "--out /nonexistent/x.txt: directory /nonexistent"),
        (["--constrain"], "--constrain decodes with --glossary terms: give --glossary"),
    ],
)
def test_arguments_are_checked_before_translating(subset, extra, message, capsys):
    # Nothing listens at this address: an argument error must come first, in one line.
    src, ref = subset
    argv = ["--src", str(src), "--ref", str(ref), "--server", "127.0.0.1:1", *extra]
    assert evaluate.main(argv) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"nmt-eval: error: {message}"), err


def test_empty_files_are_refused(tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("")
    argv = ["--src", str(empty), "--ref", str(empty), "--server", "127.0.0.1:1"]
    assert evaluate.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"nmt-eval: error: no sentences in --src {empty}: give a non-empty file"
    ]


def test_limit_0_means_all_lines(subset, tiny_bundle, capsys):
    src, ref = subset
    argv = ["--src", str(src), "--ref", str(ref), "--bundle", str(tiny_bundle.bundle_dir)]
    assert evaluate.main([*argv, "--limit", "0"]) == 0
    assert capsys.readouterr().out.splitlines()[2].startswith("12 sentences in ")


def test_a_batch_over_the_servers_limit_asks_for_a_lower_batch_size(
    address, tmp_path, capsys, monkeypatch
):
    """From a server that does not report its limits; one that does gets requests sized
    to them (tests/nmt_client/test_cli.py)."""
    monkeypatch.setattr(Translator, "_info", lambda self, model=None: None)
    src = tmp_path / "many.en"
    src.write_text("A house.\n" * 70)
    argv = ["--src", str(src), "--ref", str(src), "--server", address, "--batch-size", "100"]
    assert evaluate.main(argv) == 1
    assert capsys.readouterr().err.splitlines() == [
        "nmt-eval: error: INVALID_ARGUMENT: 70 sentences in one request; the server's "
        "limit is 64: lower --batch-size to at most 64"
    ]


@pytest.mark.parametrize("where", ["server", "bundle"])
def test_a_sentence_too_long_is_named_by_its_src_line(
    address, tiny_bundle, tmp_path, capsys, where
):
    """The bundle path refuses what the server refuses (its default limits), in the same
    words."""
    lines = [*tiny_bundle.sentences[1:6], "", "house " * 300, "A dog."]
    src = tmp_path / "long.en"
    src.write_text("".join(line + "\n" for line in lines))
    target = (
        ["--server", address] if where == "server" else ["--bundle", str(tiny_bundle.bundle_dir)]
    )
    argv = ["--src", str(src), "--ref", str(src), *target, "--batch-size", "4"]
    assert evaluate.main(argv) == 1
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith("nmt-eval: error: INVALID_ARGUMENT: --src line 7 has "), err
    assert "texts[" not in err and "source tokens" in err


def test_a_bundle_refuses_in_the_servers_words(address, tiny_bundle, tmp_path, capsys):
    src = tmp_path / "a.en"
    src.write_text("A house.\n")
    errors = []
    for target in (["--server", address], ["--bundle", str(tiny_bundle.bundle_dir)]):
        argv = ["--src", str(src), "--ref", str(src), *target, "--beam", "17"]
        assert evaluate.main(argv) == 1
        errors.append(capsys.readouterr().err)
    assert errors[0] == errors[1]
    assert errors[0].startswith("nmt-eval: error: INVALID_ARGUMENT: beam_size 17 ")


def test_a_file_not_utf8_is_one_line_naming_the_line(subset, tmp_path, capsys):
    src, _ = subset
    latin1 = tmp_path / "latin1.es"
    latin1.write_bytes(b"uno\n" * 3 + b"a\xf1o\n" + b"dos\n" * 8)
    argv = ["--src", str(src), "--ref", str(latin1), "--server", "127.0.0.1:1"]
    assert evaluate.main(argv) == 2
    assert capsys.readouterr().err.splitlines() == [
        f"nmt-eval: error: --ref {latin1}: line 4 is not valid UTF-8: convert the file to UTF-8"
    ]


def test_progress_line_on_a_terminal_only():
    times = iter([0.0, 0.1, 0.5, 1.0, 2.0])
    out = io.StringIO()
    progress = Progress(4, out, enabled=True, clock=lambda: next(times), prog="nmt-eval")
    progress.advance()  # 0.1 s after the start: under the interval, not shown
    assert out.getvalue() == ""
    progress.advance()
    progress.advance(2)  # the last one is always shown
    progress.close()
    lines = out.getvalue().split("\r")[1:]
    assert lines[0].startswith("nmt-eval: 2/4 sentences (50%), 4.0 sentences/s, about 0 s")
    assert lines[1].startswith("nmt-eval: 4/4 sentences (100%), 4.0 sentences/s")
    assert out.getvalue().endswith("\n")
    quiet = io.StringIO()
    silent = Progress(3, quiet, prog="nmt-eval")  # a StringIO is no terminal: off by default
    silent.advance(3)
    silent.close()
    assert quiet.getvalue() == ""


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_reaches_every_sentence_with_the_bundle(tiny_bundle, subset, monkeypatch, capsys):
    src, ref = subset
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stderr", terminal)
    argv = ["--src", str(src), "--ref", str(ref), "--bundle", str(tiny_bundle.bundle_dir)]
    assert evaluate.main([*argv, "--batch-size", "5"]) == 0
    shown = terminal.getvalue()
    assert "nmt-eval: 12/12 sentences (100%)" in shown and shown.endswith("\n")
    _ = capsys.readouterr()


def test_seeded_sampling_is_the_same_with_bundle_and_server(
    tiny_bundle, address, subset, tmp_path, capsys
):
    """A seeded draw depends on a sentence's index in its request: the bundle decodes in
    the requests nmt-eval would send."""
    src, ref = subset
    args = ["--src", str(src), "--ref", str(ref), "--sampling-topk", "20", "--seed", "3"]
    args += ["--batch-size", "5"]
    local, remote = tmp_path / "local.txt", tmp_path / "remote.txt"
    assert evaluate.main([*args, "--bundle", str(tiny_bundle.bundle_dir), "--out", str(local)]) == 0
    assert evaluate.main([*args, "--server", address, "--out", str(remote)]) == 0
    capsys.readouterr()
    assert local.read_text() == remote.read_text()


def _glossary(src: Path, ref: Path, path: Path, n: int = 10) -> Path:
    """One entry per sentence: its longest source word -> its reference's longest word."""
    import re

    def longest(text: str) -> str:
        return max(re.findall(r"\w+", text), key=len)

    pairs = zip(src.read_text().splitlines()[:n], ref.read_text().splitlines()[:n], strict=True)
    path.write_text("".join(f"{longest(s)}\t{longest(r)}\n" for s, r in pairs))
    return path


def _usage_line(out: str) -> str:
    (line,) = [x for x in out.splitlines() if x.startswith("term usage: ")]
    return line


def test_glossary_terms_are_constrained_alike_by_bundle_and_server(
    tiny_bundle, address, subset, tmp_path, capsys
):
    src, ref = subset
    glossary = _glossary(src, ref, tmp_path / "terms.tsv")
    args = ["--src", str(src), "--ref", str(ref), "--limit", "10", "--glossary", str(glossary)]
    args += ["--beam", "4", "--constrain"]
    outs, usage = [], []
    for where in (["--bundle", str(tiny_bundle.bundle_dir)], ["--server", address]):
        out = tmp_path / f"{where[0][2:]}.txt"
        assert evaluate.main([*args, *where, "--out", str(out)]) == 0
        usage.append(_usage_line(capsys.readouterr().out))
        outs.append(out.read_text().splitlines())
    assert outs[0] == outs[1]  # the bundle decodes constraints as the server does
    assert usage[0] == usage[1] and usage[0].endswith("; constrained)")
    # the tiny model glues pieces together: its terms are there, not always as whole words
    terms = [line.split("\t")[1] for line in glossary.read_text().splitlines()]
    assert all(term in out for term, out in zip(terms, outs[0], strict=True))


def test_term_usage_of_the_committed_model(subset, tmp_path, capsys):
    import re

    from tests.committed import EN_ES_FP32

    src, ref = subset
    glossary = _glossary(src, ref, tmp_path / "terms.tsv")
    args = ["--src", str(src), "--ref", str(ref), "--limit", "10", "--glossary", str(glossary)]
    args += ["--beam", "4", "--bundle", str(EN_ES_FP32)]
    assert evaluate.main(args) == 0
    plain = _usage_line(capsys.readouterr().out)
    assert evaluate.main([*args, "--constrain"]) == 0
    constrained = _usage_line(capsys.readouterr().out)
    assert constrained == "term usage: 10 of 10 glossary terms (100.0 %; constrained)"
    held = re.fullmatch(
        r"term usage: (\d+) of 10 glossary terms \(\d+\.\d %; not constrained\)", plain
    )
    assert held is not None and int(held.group(1)) < 10, plain


def test_a_bad_glossary_is_one_line(subset, tmp_path, capsys):
    src, ref = subset
    bad = tmp_path / "bad.tsv"
    bad.write_text("one column only\n")
    argv = ["--src", str(src), "--ref", str(ref), "--server", "127.0.0.1:1", "--glossary", str(bad)]
    assert evaluate.main(argv) == 2
    (err,) = capsys.readouterr().err.splitlines()
    assert err.startswith(f"nmt-eval: error: {bad}:1: expected 'source term<TAB>target term'")


def test_progress_of_a_stream_of_unknown_length():
    """nmt-translate reading a file into a file: how many so far and how fast."""
    times = iter([0.0, 0.5, 1.0])
    out = io.StringIO()
    progress = Progress(None, out, enabled=True, clock=lambda: next(times), prog="nmt-translate")
    progress.advance(10)
    progress.advance(10)
    progress.close()
    assert out.getvalue().split("\r")[1:] == [
        "nmt-translate: 10 sentences, 20.0 sentences/s\x1b[K",
        "nmt-translate: 20 sentences, 20.0 sentences/s\x1b[K\n",
    ]
