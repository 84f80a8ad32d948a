"""Smoke test of ``python -m loadtest.bench`` on the tiny exported model: every part runs
and the JSON and markdown have the expected rows with positive numbers. No timing
thresholds: speed targets are printed by the benchmark, never asserted."""

from __future__ import annotations

import json

import pytest

from loadtest import bench, report
from loadtest.roofline import model_flops
from models.config import ModelConfig

SENTENCES = 4
CLIENTS = (1, 2)


@pytest.fixture(scope="module")
def result(tiny_bundle, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bench")
    source = tmp / "test.en"
    source.write_text("\n".join(tiny_bundle.sentences[:SENTENCES]) + "\n", encoding="utf-8")
    out = tmp / "bench-cpu"
    readme = tmp / "README.md"
    readme.write_text(f"# Title\n\n{report.README_START}\nold table\n{report.README_END}\nrest\n")
    argv = [
        "--model-repository",
        str(tiny_bundle.repo),
        "--model",
        "tiny",
        "--checkpoint",
        str(tiny_bundle.checkpoint),
        "--file",
        str(source),
        "--sentences",
        str(SENTENCES),
        "--clients",
        ",".join(map(str, CLIENTS)),
        "--beam",
        "2",
        "--threads",
        "1",
        "--peak-seconds",
        "0.01",
        "--out",
        str(out),
        "--readme",
        str(readme),
    ]
    assert bench.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    return data, out.with_suffix(".md").read_text(), readme.read_text()


def test_json_has_every_row(result):
    data, _, _ = result
    got = [(r["system"], r["strategy"], r["clients"]) for r in data["rows"]]
    want = [("pytorch-eager", s, None) for s in ("greedy", "beam2")]
    want += [("onnxruntime-sequential", s, None) for s in ("greedy", "beam2")]
    want += [("grpc-service", s, c) for s in ("greedy", "beam2") for c in CLIENTS]
    want += [("grpc-noop", "greedy", c) for c in CLIENTS]
    assert got == want
    for r in data["rows"]:
        assert r["sentences"] == SENTENCES
        for key in ("sentences_per_s", "tokens_per_s", "p50_ms", "p95_ms", "p99_ms", "speedup"):
            assert r[key] > 0, (r["system"], key)
        assert r["p50_ms"] <= r["p95_ms"] <= r["p99_ms"]
        if r["system"] == "grpc-noop":
            assert r["same_as_pytorch"] is None  # it translates nothing
        else:
            assert 0 <= r["same_as_pytorch"] <= SENTENCES
    base = {r["strategy"]: r for r in data["rows"] if r["system"] == "pytorch-eager"}
    assert all(r["speedup"] == 1.0 for r in base.values())


def test_outputs_match_pytorch_greedy(result):
    """The exported tiny model passed the greedy parity gate on these sentences, so every
    system must translate them exactly like PyTorch."""
    data, _, _ = result
    for r in data["rows"]:
        if r["strategy"] == "greedy" and r["system"] != "grpc-noop":
            assert r["same_as_pytorch"] == SENTENCES, r["system"]


def test_roofline_numbers(result, tiny_bundle):
    data, _, _ = result
    manifest = json.loads((tiny_bundle.bundle_dir / "manifest.json").read_text())
    flops = model_flops(ModelConfig.from_dict(manifest["model_config"]))
    assert data["flops"]["decoder_fixed_per_token"] == flops.decoder_fixed > 0
    assert data["flops"]["encoder_per_source_token"] == flops.encoder_per_source_token > 0
    assert data["peak"]["peak_gflops"] > 0 and data["peak"]["threads"] == 1
    assert {r["library"] for r in data["peak"]["rates"]} == {"numpy", "onnxruntime"}
    for r in data["rows"]:
        if r["system"] in ("pytorch-eager", "grpc-noop"):
            assert "achieved_gflops" not in r
            continue
        assert r["decoder_rows"] > 0 and r["decoder_calls"] > 0
        assert r["achieved_gflops"] > 0
        # pct_of_peak is rounded: a slow run on a busy machine may round it to 0.0
        assert r["pct_of_peak"] == pytest.approx(
            100 * r["achieved_gflops"] / data["peak"]["peak_gflops"], rel=0.2, abs=0.1
        )
        assert r["in_ort_gflops"] >= r["achieved_gflops"]
        assert r["cpu_ms_per_sentence"] > 0


def test_decoder_profiles(result):
    data, _, _ = result
    one, busiest = data["decoder_profiles"]
    assert one["rows"] == 1 and busiest["rows"] >= 1
    for pr in (one, busiest):
        assert pr["step_us"] > 0 and pr["kernels_us"] > 0 and pr["by_op_us"]
        assert pr["step_us_unprofiled"] > 0 and pr["threads"] == 1
        assert 0 < pr["gemm_share_pct"] <= 100 and pr["gemm_gflops"] > 0


def test_settings_and_targets(result):
    data, _, _ = result
    s = data["settings"]
    assert s["ort_intra_op_threads"] == 1 and s["torch_threads"] == 1
    assert s["service_intra_op_threads"] == 1  # --threads unless --service-threads
    assert s["sentences"] == SENTENCES and s["mean_source_tokens"] > 0
    assert s["checkpoint_is_the_bundles"] is True
    # the 32-client targets are not measured with clients 1,2; the others are
    measured = {t["target"]: t["met"] for t in data["targets"]}
    assert len(measured) == 4
    assert sum(v is None for v in measured.values()) == 2
    # throughput targets carry the no-model server's ratio; not measured at 32 clients here
    assert [("ceiling" in t) for t in data["targets"]] == [True, False, True, False]
    assert all(t.get("ceiling") is None for t in data["targets"])
    assert "grpc-noop" in data["settings"]["service"] or "child process" in s["service"]


def test_clients_run_in_a_process_of_their_own(result):
    """The client threads' CPU is the child's, measured there and reported apart."""
    data, md, _ = result
    assert "child process" in data["settings"]["service"]
    for r in data["rows"]:
        if r["system"] in ("grpc-service", "grpc-noop"):
            by = r["cpu_ms_by_thread"]
            assert by["clients"] > 0 and by["total"] > 0
    assert "| clients CPU |" in md


def test_markdown_table(result):
    data, md, _ = result
    assert "| system | strategy | clients | sentences/s |" in md
    assert "## Roofline" in md and "## Targets" in md
    table = [ln for ln in md.splitlines() if ln.startswith(("| pytorch", "| onnx", "| grpc"))]
    assert "## Where the CPU goes" in md and "## One decoder step inside ONNX Runtime" in md
    # results and CPU tables: every row; roofline table: every row but PyTorch's and
    # the no-model server's
    noop = sum(r["system"] == "grpc-noop" for r in data["rows"])
    # and the latency table: the service's rows
    service = sum(r["system"] == "grpc-service" for r in data["rows"])
    assert "## Where a request's time goes" in md
    assert len(table) == 3 * len(data["rows"]) - 2 - noop + service


def test_service_rows_split_each_requests_time(result):
    """From the timing in each reply: queue, encode and decode add up to the engine's
    total, and the rest of the client's latency is outside the engine."""
    data, _, _ = result
    for r in data["rows"]:
        if r["system"] != "grpc-service":
            continue
        parts = [r[f"server_{name}_ms"] for name in ("queue", "encode", "decode")]
        assert min(parts) >= 0 and r["server_encode_ms"] > 0 and r["server_decode_ms"] > 0
        assert r["server_total_ms"] == pytest.approx(sum(parts), abs=0.05)
        assert r["outside_engine_ms"] > 0
        assert r["server_total_ms"] + r["outside_engine_ms"] == pytest.approx(r["mean_ms"], abs=0.1)


def test_failed_calls_are_listed_under_the_table(result):
    data, md, _ = result
    assert "calls that failed" not in md  # every call of the fixture run answered
    row = next(r for r in data["rows"] if r["system"] == report.SERVICE)
    failing = dict(data, rows=[dict(row, errors=3)] + data["rows"][1:])
    shown = report.markdown(failing)
    line = next(ln for ln in shown.splitlines() if "calls that failed" in ln)
    total = row["sentences"] + 3
    assert f"{row['system']} {row['strategy']} x{row['clients']}: 3 of {total}" in line


def test_readme_table_is_written_between_the_markers(result):
    data, md, readme = result
    assert readme.startswith("# Title\n\n" + report.README_START + "\n`python -m loadtest.bench ")
    assert readme.endswith(report.README_END + "\nrest\n")
    assert "old table" not in readme
    rows = [ln for ln in readme.splitlines() if ln.startswith(("| pytorch", "| onnx", "| grpc"))]
    assert len(rows) == len(data["rows"]) and all(row in md for row in rows)
    assert "Targets:" in readme and "(not measured)" in readme


def test_readme_without_markers_is_refused(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# no markers\n")
    with pytest.raises(ValueError, match="has no .*bench:start"):
        report.update_readme(path, "table\n")
    assert path.read_text() == "# no markers\n"


def test_readme_with_markers_in_the_wrong_order_is_refused(tmp_path):
    path = tmp_path / "README.md"
    text = f"{report.README_END}\nmiddle\n{report.README_START}\n"
    path.write_text(text)
    with pytest.raises(ValueError, match="comes before"):
        report.update_readme(path, "table\n")
    assert path.read_text() == text


def row(system: str, rate: float, clients=None, **extra) -> dict:
    return (
        {"system": system, "strategy": "greedy", "clients": clients}
        | {
            "sentences_per_s": rate,
            "p50_ms": 1000 / rate,
        }
        | extra
    )


def test_median_rows_keeps_the_median_round_whole():
    rounds = [
        [row("pytorch-eager", 10.0), row("grpc-service", 90.0, 8, tag="a")],
        [row("pytorch-eager", 30.0), row("grpc-service", 70.0, 8, tag="b")],
        [row("pytorch-eager", 20.0), row("grpc-service", 80.0, 8, tag="c")],
    ]
    base, service = report.median_rows(rounds)
    assert base["sentences_per_s"] == 20.0 and base["p50_ms"] == 50.0
    assert service["tag"] == "c" and service["sentences_per_s"] == 80.0
    assert service["rounds"] == 3 and service["sentences_per_s_all"] == [90.0, 70.0, 80.0]
    assert report.median_rows(rounds[:1]) == rounds[0]


def test_median_rows_refuses_rounds_that_differ():
    with pytest.raises(ValueError, match="rounds measured different configurations"):
        report.median_rows([[row("grpc-service", 1.0, 8)], [row("grpc-service", 1.0, 32)]])


def test_rounds_must_be_positive(capsys):
    with pytest.raises(SystemExit):
        bench.parse_args(["--rounds", "0"])
    assert "--rounds must be >= 1" in capsys.readouterr().err


def test_cuda_bench_refuses_the_cpu_only_parts():
    from loadtest.bench import parse_args

    assert parse_args(["--device", "cuda"]).parts == ["torch", "onnx", "service", "noop"]
    with pytest.raises(SystemExit):
        parse_args(["--device", "cuda", "--parts", "service,peak"])


@pytest.fixture
def good_argv(tmp_path):
    """Arguments that pass every check, on a stand-in repository (no model is loaded)."""
    (tmp_path / "repo" / "tiny" / "1").mkdir(parents=True)
    (tmp_path / "repo" / "tiny" / "1" / "manifest.json").write_text("{}")
    (tmp_path / "model.pt").write_bytes(b"")
    (tmp_path / "test.en").write_text("Hello.\n\nGoodbye.\n")
    (tmp_path / "empty.txt").write_text("\n \n")
    return [
        "--model-repository",
        str(tmp_path / "repo"),
        "--model",
        "tiny",
        "--checkpoint",
        str(tmp_path / "model.pt"),
        "--file",
        str(tmp_path / "test.en"),
    ]


def test_good_arguments_pass_the_checks(good_argv, tmp_path):
    args = bench.parse_args(good_argv)
    assert args.texts == ["Hello.", "Goodbye."]
    assert args.bundle_dir == tmp_path / "repo" / "tiny" / "1"


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--file", "nope.txt"], "--file nope.txt: No such file or directory"),
        (["--file", "EMPTY"], "empty.txt has no sentences"),
        (["--clients", "abc"], "--clients 'abc': give positive integers"),
        (["--clients", "0"], "--clients '0': give positive integers"),
        (["--clients", "1,-8"], "--clients '1,-8': give positive integers"),
        (["--clients", ","], "--clients ',': give positive integers"),
        (["--beam", "0"], "--beam 0: beam_size must be >= 1"),
        (["--beam", "17"], "--beam 17: the service allows at most 16"),
        (["--model", "nope"], "--model 'nope' is not in"),
        (["--model-repository", "/nonexistent"], "model repository not found: /nonexistent"),
        (["--peak-seconds", "nan"], "--peak-seconds must be a positive number of seconds"),
        (["--peak-seconds", "-1"], "--peak-seconds must be a positive number of seconds"),
        (["--peak-seconds", "inf"], "--peak-seconds must be a positive number of seconds"),
        (["--checkpoint", "/nonexistent.pt"], "--checkpoint /nonexistent.pt not found"),
        (["--readme", "/nonexistent.md"], "--readme /nonexistent.md: No such file"),
        (["--readme", "EMPTY"], "has no bench:start ... bench:end markers"),
        (["--client-processes", "0"], "--client-processes must be >= 1, got 0"),
        (["--frontends", "0"], "--frontends must be in 1..64"),
        (["--frontends", "2", "--engine-process", "off"], "--frontends > 1 shares each model's"),
        (["--connections", "thread"], "argument --connections: invalid choice: 'thread'"),
        (["--max-inflight", "0"], "max_inflight must be >= 1, got 0"),
        (["--service-threads", "-1"], "--service-threads must be >= 0"),
        (["--decode-lanes", "-1"], "decode_lanes must be >= 0 (0: auto), got -1"),
        (["--max-queue", "0"], "max_queue must be >= 1, got 0"),
        (["--max-live-rows", "-1"], "max_live_rows must be >= 0 (0: auto), got -1"),
        (["--ab-tree", "/nonexistent"], "--ab-tree /nonexistent: not a source tree"),
        (["--repeat", "0"], "--repeat must be >= 1, got 0"),
        (["--greedy-steps", "17"], "greedy_steps must be 0..16"),
        (["--ab-flags", "'--greedy-steps 4"], "--ab-flags: No closing quotation"),
        (["--ab-flags", " "], "--ab-flags: no flags given"),
    ],
)
def test_bad_arguments_are_one_line_errors_before_any_work(
    good_argv, tmp_path, extra, message, capsys, monkeypatch
):
    monkeypatch.setattr(bench, "measure_peak", lambda *a, **k: pytest.fail("measured"))
    extra = [str(tmp_path / "empty.txt") if x == "EMPTY" else x for x in extra]
    with pytest.raises(SystemExit) as exit:
        bench.main(good_argv + extra)
    assert exit.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "\n".join(err)


def test_ab_comparisons_pair_this_trees_rows_with_each_other_trees():
    def row(label, strategy, clients, rate, p50, rounds=None):
        return {
            "system": f"{report.SERVICE}@{label}",
            "strategy": strategy,
            "clients": clients,
            "sentences_per_s": rate,
            "p50_ms": p50,
            "sentences_per_s_all": rounds or [rate],
        }

    rows = [
        {"system": report.SERVICE, "strategy": "greedy", "clients": 32, "sentences_per_s": 9.0},
        row("new", "greedy", 32, 300.0, 100.0),
        row("new", "beam5", 32, 90.0, 300.0),
        row("old", "greedy", 32, 200.0, 120.0),
        row("old", "beam5", 32, 100.0, 280.0),
        row("older", "greedy", 32, 250.0, 110.0),
    ]
    ab = report.ab_comparisons(rows, ["new", "old", "older"])
    assert [(c["other"], c["strategy"], c["ratio"]) for c in ab] == [
        ("old", "greedy", 1.5),
        ("old", "beam5", 0.9),
        ("older", "greedy", 1.2),
    ]
    assert report.ab_comparisons(rows, ["new"]) == []
    # each round's own ratio: the machine ran slower in the second round, for both trees
    drift = [
        row("new", "greedy", 32, 300.0, 100.0, rounds=[400.0, 300.0, 200.0]),
        row("old", "greedy", 32, 250.0, 120.0, rounds=[320.0, 150.0, 250.0]),
        row("short", "greedy", 32, 250.0, 120.0, rounds=[320.0, 150.0]),
        row("idle", "greedy", 32, 250.0, 120.0, rounds=[320.0, 0.0, 250.0]),
    ]
    pairs = report.ab_comparisons(drift, ["new", "old", "short", "idle"])
    assert [(c["other"], c["ratio"], c["round_ratios"]) for c in pairs] == [
        ("old", 1.2, [1.25, 2.0, 0.8]),
        ("short", 1.2, []),  # not the same rounds: no pairs
        ("idle", 1.2, [1.25, 0.8]),  # a round that served nothing has no ratio
    ]
    table = report.ab_table(pairs)
    assert table[-3].endswith("| 1.200 | 0.80–2.00 |")
    assert table[-2].endswith("| 1.200 | – |") and table[-1].endswith("| 0.80–1.25 |")
    assert report.ab_table([]) == []
    # another tree whose every call failed: no ratio, the target not measured (no crash)
    dead = report.ab_comparisons(
        rows + [row("dead", "greedy", 32, 0.0, float("nan"))], ["new", "dead"]
    )
    assert [(c["ratio"], c["other"]) for c in dead] == [(None, "dead")]
    assert [t["met"] for t in report.targets(rows, dead) if "dead" in t["target"]] == [None]
    targets = report.targets(rows, ab)
    ab_targets = [t for t in targets if "the service of" in t["target"]]
    assert [(t["value"], t["met"]) for t in ab_targets] == [(1.5, True), (1.2, False)]
    # this tree with --ab-flags added: an A/B row, not a target against an earlier tree
    flagged = report.targets(rows, ab, flagged=["older"])
    assert [t["target"] for t in flagged if "the service of" in t["target"]] == [
        ab_targets[0]["target"]
    ]


def _torch_and_service_run(tiny_bundle, tmp_path, name: str, *flags: str):
    """The bench's torch and service parts on the test sentences, 2 clients, beams 1 and
    2, one ORT thread, with ``flags``: ``(result JSON, OUT path)``."""
    source = tmp_path / "test.en"
    source.write_text("\n".join(tiny_bundle.sentences[:SENTENCES]) + "\n", encoding="utf-8")
    out = tmp_path / name
    argv = [
        "--model-repository", str(tiny_bundle.repo), "--model", "tiny",
        "--checkpoint", str(tiny_bundle.checkpoint), "--file", str(source),
        "--sentences", str(SENTENCES), "--clients", "2", "--beam", "2", "--threads", "1",
        "--parts", "torch,service", "--out", str(out), *flags,
    ]  # fmt: skip
    assert bench.main(argv) == 0
    return json.loads(out.with_suffix(".json").read_text()), out


def test_ab_tree_serves_both_trees_side_by_side(tiny_bundle, tmp_path):
    """``--ab-tree`` on this very checkout: two nmt-serve subprocesses of the same code,
    labelled apart, each translating every sentence like the in-process service."""
    from loadtest.machine import ROOT

    flags = ("--ab-tree", str(ROOT), "--client-processes", "2")
    data, out = _torch_and_service_run(tiny_bundle, tmp_path, "ab", *flags)
    labels = [t["commit"] for t in data["settings"]["ab_trees"]]
    assert len(labels) == 2 and labels[0] != labels[1] and labels[0].endswith("#0")
    rows = {(r["system"], r["strategy"]): r for r in data["rows"]}
    for label in labels:
        for strategy in ("greedy", "beam2"):
            r = rows[(f"{report.SERVICE}@{label}", strategy)]
            assert r["sentences"] == SENTENCES and r["errors"] == 0
            assert r["client_processes"] == 2
            assert r["same_as_pytorch"] == rows[(report.SERVICE, strategy)]["same_as_pytorch"]
    assert [(c["strategy"], c["other"]) for c in data["ab"]] == [
        ("greedy", labels[1]),
        ("beam2", labels[1]),
    ]
    assert all(c["ratio"] > 0 for c in data["ab"])
    markdown = out.with_suffix(".md").read_text()
    assert "## A/B: this tree's service against another's" in markdown
    assert markdown.count(f"| {labels[0]} |") == 2
    # The figure beside them, linked atop the report: both trees' services and PyTorch.
    assert markdown.startswith(f"![sentences/s against clients]({out.name}.svg)")
    svg = out.with_suffix(".svg").read_text()
    for shown in (f"service @ {labels[0]}, in-process", f"service @ {labels[1]}, nmt-serve"):
        assert shown in svg, shown
    assert "PyTorch eager, one sentence at a time" in svg


def test_ab_flags_serve_this_tree_again_with_the_flags_added(tiny_bundle, tmp_path):
    """``--ab-flags``: this tree as an nmt-serve subprocess with and without the flags,
    in the same rounds, labelled apart; the flags reach the server (a source limit of two
    tokens refuses every longer sentence there, and only there)."""
    flags = ("--ab-flags", "--max-source-tokens 2", "--parts", "service")
    source = tmp_path / "test.en"
    source.write_text("\n".join(tiny_bundle.sentences[:SENTENCES]) + "\n", encoding="utf-8")
    out = tmp_path / "flags"
    argv = [
        "--model-repository", str(tiny_bundle.repo), "--model", "tiny", "--file", str(source),
        "--sentences", str(SENTENCES), "--clients", "2", "--beam", "2", "--threads", "1",
        "--out", str(out), *flags,
    ]  # fmt: skip
    assert bench.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    trees = data["settings"]["ab_trees"]
    assert [t["flags"] for t in trees] == [[], ["--max-source-tokens", "2"]]
    plain, limited = (t["commit"] for t in trees)
    assert limited == f"{plain} --max-source-tokens 2"
    rows = {(r["system"], r["strategy"]): r for r in data["rows"]}
    for strategy in ("greedy", "beam2"):
        assert rows[(f"{report.SERVICE}@{plain}", strategy)]["errors"] == 0
        assert rows[(f"{report.SERVICE}@{limited}", strategy)]["errors"] > 0
    assert {c["other"] for c in data["ab"]} == {limited}


def _service_run(tiny_bundle, tmp_path, name: str, copies: int, clients: int, *flags: str):
    """The bench's service part alone on ``copies`` times the test sentences, beams 1 and
    2, one ORT thread, with ``flags``: ``(settings, service rows)``."""
    source = tmp_path / "test.en"
    texts = tiny_bundle.sentences[:SENTENCES] * copies
    source.write_text("\n".join(texts) + "\n", encoding="utf-8")
    out = tmp_path / name
    argv = [
        "--model-repository", str(tiny_bundle.repo), "--model", "tiny",
        "--file", str(source), "--sentences", str(len(texts)), "--clients", str(clients),
        "--beam", "2", "--threads", "1", "--parts", "service", "--out", str(out), *flags,
    ]  # fmt: skip
    assert bench.main(argv) == 0
    data = json.loads(out.with_suffix(".json").read_text())
    return data["settings"], [r for r in data["rows"] if r["system"] == report.SERVICE]


def test_repeat_sends_the_test_set_several_times_to_the_service_only(tiny_bundle, tmp_path):
    """``--repeat 3``: PyTorch translates the sentences once, the service levels get them
    three times over, and every one of the service's answers is compared with PyTorch's."""
    data, out = _torch_and_service_run(tiny_bundle, tmp_path, "bench-repeat", "--repeat", "3")
    assert data["settings"]["repeat"] == 3 and data["settings"]["sentences"] == SENTENCES
    by_system = {(r["system"], r["strategy"]): r for r in data["rows"]}
    assert by_system[(report.BASELINE, "greedy")]["sentences"] == SENTENCES
    service = by_system[(report.SERVICE, "greedy")]
    assert service["sentences"] == 3 * SENTENCES and service["errors"] == 0
    assert service["same_as_pytorch"] == 3 * SENTENCES
    assert "(sent 3 times over to the service levels)" in out.with_suffix(".md").read_text()


def test_repeated_answers_are_each_compared_with_pytorchs():
    def rows(service_texts):
        return [
            {"system": report.BASELINE, "strategy": "greedy", "sentences_per_s": 10.0}
            | {"p50_ms": 5.0, "texts": ["a", "b"]},
            {"system": report.SERVICE, "strategy": "greedy", "sentences_per_s": 40.0}
            | {"p50_ms": 2.0, "texts": service_texts},
        ]

    repeated = rows(["a", "b", "a", "x"])  # the second round's "b" came back changed
    report.add_ratios(repeated)
    assert repeated[1]["same_as_pytorch"] == 3 and repeated[1]["speedup"] == 4.0
    with pytest.raises(ValueError, match="3 translations are no whole number of rounds"):
        report.add_ratios(rows(["a", "b", "a"]))


def test_engine_process_rows_read_the_childs_counters_and_cpu(tiny_bundle, tmp_path):
    """``--engine-process on``: the decoder counters and the scheduler's and encoder's CPU
    come from the engine's child process (the gRPC process has neither thread). Sixteen
    clients, so that sentences arrive while others decode and go to the encoder thread
    (with nothing decoding the scheduler encodes them itself)."""
    settings, rows = _service_run(
        tiny_bundle, tmp_path, "bench-engine-process", 8, 16, "--engine-process", "on"
    )
    assert "--engine-process on" in settings["service"]
    assert {r["strategy"] for r in rows} == {"greedy", "beam2"}
    for r in rows:
        assert r["engine_process"] is True and r["errors"] == 0
        assert r["decoder_rows"] > 0 and r["decoder_calls"] > 0
        by = r["cpu_ms_by_thread"]
        assert by["scheduler"] > 0 and by["total"] > by["scheduler"]
    # the encoder thread's CPU, read in the child too (beam rows decode long enough that
    # sentences arrive meanwhile; the tiny model's greedy rows are often done by then)
    assert sum(r["cpu_ms_by_thread"]["encoder"] for r in rows) > 0


def test_frontends_rows_count_every_front_ends_cpu(tiny_bundle, tmp_path):
    """``--frontends 2 --connections client``: the service runs two gRPC processes on one
    engine process, each client has a connection of its own, and the CPU of the further
    front end is counted in the row's total."""
    flags = ("--frontends", "2", "--connections", "client", "--service-threads", "0")
    settings, rows = _service_run(tiny_bundle, tmp_path, "bench-frontends", 8, 16, *flags)
    assert "(client connections)" in settings["service"]
    assert "--frontends 2" in settings["service"]
    assert settings["service_intra_op_threads"] == 0
    assert {r["strategy"] for r in rows} == {"greedy", "beam2"}
    for r in rows:
        assert r["frontends"] == 2 and r["engine_process"] is True and r["errors"] == 0
        by = r["cpu_ms_by_thread"]
        assert by["frontends"] > 0
        assert by["total"] >= by["frontends"] + by["scheduler"]


def test_the_services_limits_reach_the_server(tiny_bundle, tmp_path):
    """``--max-inflight 1`` with 4 closed-loop clients: the server refuses calls (the
    report lists them); the limits are in the settings."""
    flags = ("--max-inflight", "1", "--max-queue", "64", "--decode-lanes", "2")
    flags += ("--max-live-rows", "48")
    settings, rows = _service_run(tiny_bundle, tmp_path, "bench-limits", 4, 4, *flags)
    limits = "--max-inflight 1, --max-queue 64, --decode-lanes 2, --max-live-rows 48"
    assert limits in settings["service"]
    assert rows and all(r["errors"] > 0 and r["decode_lanes"] == 2 for r in rows)


def test_cuda_graph_and_encoder_thread_flags_reach_the_server(tiny_bundle, tmp_path):
    """``--cuda-graphs on --encoder-thread off`` (with IO binding on a CPU, the fixed
    buffers without capture): the settings record them and the in-process engine runs
    with no encoder thread (the steps on the fixed buffers: tests/service/test_cudagraphs.py)."""
    flags = ("--io-binding", "on", "--cuda-graphs", "on", "--encoder-thread", "off")
    settings, rows = _service_run(tiny_bundle, tmp_path, "bench-graphs", 4, 8, *flags)
    assert (settings["cuda_graphs"], settings["encoder_thread"]) == ("on", "off")
    assert rows and all(r["errors"] == 0 and r["decoder_calls"] > 0 for r in rows)
    assert all("encoder" not in r["cpu_ms_by_thread"] for r in rows)  # no such thread
    assert all(r["cpu_ms_by_thread"]["scheduler"] > 0 for r in rows)
