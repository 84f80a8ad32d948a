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


def test_a_level_dealt_out_over_client_processes_keeps_every_sentence_in_order():
    from loadtest.clients import ClientProcess, start_noop_server
    from nmt_client import DecodeOptions

    server, target = start_noop_server()
    sentences = [f"sentence number {i}" for i in range(23)]
    try:
        with ClientProcess(3) as clients:
            for n, shares in ((5, 3), (2, 2), (1, 1)):
                level, texts = clients.run_level(target, sentences, n, DecodeOptions())
                # the no-model server answers each sentence with itself
                assert texts == sentences
                assert level["clients"] == n and level["client_processes"] == shares
                assert level["sentences"] == 23 and level["errors"] == 0
                assert level["client_cpu_s"] > 0 and level["sentences_per_s"] > 0
    finally:
        server.stop(0)


def test_a_level_spans_its_loops_from_first_start_to_last_end():
    from nmt_client import DecodeOptions

    loops = [
        concurrency.LoopResult([0.1, 0.3], tokens=6, start=10.0, end=12.0),
        concurrency.LoopResult([0.2], tokens=4, errors=1, start=11.0, end=14.0),
    ]
    level = concurrency.summarize(3, DecodeOptions(beam_size=4), loops)
    assert (level["seconds"], level["sentences"], level["errors"]) == (4.0, 3, 1)
    assert (level["sentences_per_s"], level["tokens_per_s"]) == (0.75, 2.5)
    assert (level["strategy"], level["p50_ms"]) == ("beam4", 200.0)


def test_server_times_are_means_over_every_loops_requests():
    def loop(latencies, **ms):
        return concurrency.LoopResult(latencies, server_ms=ms, start=0.0, end=1.0)

    loops = [
        loop([0.010, 0.020], queue=2.0, encode=4.0, decode=10.0, total=16.0),
        loop([0.030], queue=1.0, encode=2.0, decode=5.0, total=8.0),
    ]
    got = concurrency.server_times(loops, 3, 0.020)
    assert got == {
        "server_queue_ms": 1.0, "server_encode_ms": 2.0, "server_decode_ms": 5.0,
        "server_total_ms": 8.0, "outside_engine_ms": 12.0,  # mean latency 20 ms
    }  # fmt: skip
    # a loop whose replies carried no timing, or no answers at all: nothing claimed
    assert concurrency.server_times([*loops, concurrency.LoopResult([0.5])], 4, 0.14) == {}
    assert concurrency.server_times([], 0, None) == {}


def test_client_processes_must_be_positive():
    import pytest

    from loadtest.clients import ClientProcess

    with pytest.raises(ValueError, match="client processes must be >= 1, got 0"):
        ClientProcess(0)
    with pytest.raises(SystemExit):
        concurrency.main(["--client-processes", "0"])


def test_a_client_process_that_dies_fails_the_level_instead_of_hanging_it():
    import pytest

    from loadtest.clients import ClientProcess
    from nmt_client import DecodeOptions

    with ClientProcess(2) as clients:
        victim, _ = clients._children[1]
        victim.kill()
        victim.join()
        with pytest.raises(RuntimeError, match=r"a client process died \(exit code -9\)"):
            clients.run_level("127.0.0.1:1", ["a", "b"], 2, DecodeOptions())
