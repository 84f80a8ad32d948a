"""``nmt_client.Translator`` against a real in-process server over the tiny model."""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from nmt_api import SERVICE_NAME
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_client import (
    Attention,
    DeadlineExceeded,
    DecodeOptions,
    InvalidOptions,
    InvalidRequest,
    Result,
    Translator,
    TranslatorError,
)
from tests.service.server_helpers import LOOP_SENTENCE, TIMEOUT, stub_for, wait_until


@pytest.fixture(scope="module")
def translator(server):
    with Translator(f"127.0.0.1:{server.port}", timeout=TIMEOUT) as t:
        yield t


@pytest.fixture(scope="module")
def texts(tiny_bundle) -> list[str]:
    return list(tiny_bundle.sentences[1:4])


def _raw(server, request: pb.TranslateRequest) -> pb.TranslateResponse:
    channel, stub = stub_for(server.port)
    with channel:
        return stub.Translate(request, timeout=TIMEOUT)


def test_results_are_the_servers_reply_without_protobuf(server, translator, texts):
    results = translator.translate(texts, beam_size=3, n_best=2, return_attention=True)
    options = pb.DecodeOptions(
        strategy=pb.STRATEGY_BEAM, beam_size=3, n_best=2, return_attention=True, return_scores=True
    )
    raw = _raw(server, pb.TranslateRequest(texts=texts, options=options))
    assert [r.source for r in results] == texts
    assert all(isinstance(r, Result) and r.model == raw.model for r in results)
    for result, translation in zip(results, raw.translations, strict=True):
        assert result.source_tokens == translation.source_tokens
        assert result.text == translation.hypotheses[0].text
        assert len(result.hypotheses) == 2
        for hyp, want in zip(result.hypotheses, translation.hypotheses, strict=True):
            assert (hyp.text, hyp.tokens) == (want.text, tuple(want.tokens))
            assert hyp.score == pytest.approx(want.score) and hyp.log_prob == pytest.approx(
                want.log_prob
            )
            att = hyp.attention
            assert isinstance(att, Attention)
            assert (att.rows, att.cols) == (len(hyp.tokens) + 1, result.source_tokens)
            assert att.target_tokens == (*hyp.tokens, "</s>")
            assert att.values == pytest.approx(list(want.attention.values))
            assert all(math.isclose(sum(row), 1.0, abs_tol=1e-4) for row in att.matrix)
            assert att.weight(1, 0) == att.matrix[1][0]
        assert result.timing is not None and result.timing.total_ms > 0


def test_defaults_greedy_with_scores_without_attention(translator, texts):
    (result,) = translator.translate(texts[:1])
    assert len(result.hypotheses) == 1
    assert result.best.score is not None and result.best.attention is None
    (quiet,) = translator.translate(texts[:1], return_scores=False)
    assert quiet.best.score is None and quiet.text == result.text


def test_options_object_and_keywords_combine(translator, texts):
    options = DecodeOptions(beam_size=3, n_best=3)
    by_object = translator.translate(texts[:2], options=options)
    overridden = translator.translate(texts[:2], options=options, n_best=1)
    assert [len(r.hypotheses) for r in by_object] == [3, 3]
    assert [r.text for r in overridden] == [r.text for r in by_object]
    assert [len(r.hypotheses) for r in overridden] == [1, 1]


def test_every_decode_option_is_a_keyword(translator, texts):
    """The README's API: each DecodeOptions field is a keyword of translate()."""
    params = inspect.signature(Translator.translate).parameters
    assert {f.name for f in dataclasses.fields(DecodeOptions)} <= set(params)
    by_keyword = translator.translate(texts[:2], beam_size=5, coverage_penalty=0.2)
    by_object = translator.translate(
        texts[:2], options=DecodeOptions(beam_size=5, coverage_penalty=0.2)
    )
    assert [r.best.score for r in by_keyword] == [r.best.score for r in by_object]
    plain = translator.translate(texts[:2], beam_size=5)
    assert [r.best.score for r in by_keyword] != [r.best.score for r in plain]


def test_translate_one_and_many(translator, tiny_bundle):
    lines = list(tiny_bundle.sentences[1:12])
    each = [translator.translate_one(line).text for line in lines]
    many = list(translator.translate_many(iter(lines), batch_size=3, concurrency=2))
    assert [r.source for r in many] == lines
    assert [r.text for r in many] == each


def test_request_id_goes_both_ways(translator, texts):
    (result,) = translator.translate(texts[:1], request_id="client-chosen-42")
    assert result.request_id == "client-chosen-42"
    (other,) = translator.translate(texts[:1])
    assert other.request_id and other.request_id != "client-chosen-42"


def test_server_errors_are_translator_errors_with_the_servers_message(translator):
    with pytest.raises(InvalidRequest) as info:
        translator.translate(["   "], request_id="bad-one")
    exc = info.value
    assert exc.code == grpc.StatusCode.INVALID_ARGUMENT
    assert exc.details == "texts[0] is empty or whitespace only: send non-empty text"
    assert str(exc) == f"INVALID_ARGUMENT: {exc.details}"
    assert exc.attempts == 1  # never retried
    assert exc.request_id == "bad-one"
    with pytest.raises(InvalidRequest, match="unknown model 'nope'"):
        translator.translate(["A house."], model="nope")


def test_mistakes_are_caught_before_sending(translator):
    with pytest.raises(InvalidOptions, match="not one string") as caught:
        translator.translate("A whole sentence sent letter by letter")
    # as the server's refusals: a TranslatorError, INVALID_ARGUMENT, never sent
    assert isinstance(caught.value, InvalidRequest) and isinstance(caught.value, TypeError)
    assert caught.value.code == grpc.StatusCode.INVALID_ARGUMENT and caught.value.attempts == 0
    with pytest.raises(InvalidOptions, match="n_best 3 needs beam_size 3") as caught:
        translator.translate(["A house."], beam_size=2, n_best=3)
    assert isinstance(caught.value, ValueError)
    for bad in ({"beam_size": -1}, {"beam_size": True}, {"n_best": 1.5}):
        with pytest.raises(InvalidOptions, match="must be an integer >= 1"):
            translator.translate(["A house."], **bad)
    with pytest.raises(InvalidOptions, match="length_penalty must be a finite number"):
        translator.translate(["A house."], length_penalty=-1)
    with pytest.raises(InvalidOptions, match="strategy must be 'greedy', 'beam'"):
        translator.translate(["A house."], strategy="sampling")
    # 0 is the server's default, as the proto reads it
    (zero,) = translator.translate(["A house."], beam_size=0, n_best=0, max_length=0)
    (unset,) = translator.translate(["A house."])
    assert zero.hypotheses == unset.hypotheses
    with pytest.raises(TypeError, match="unknown decode options: beam"):
        list(translator.stream("A house.", beam=3))
    assert translator.translate([]) == []


def test_upper_limits_are_the_servers_to_check(translator):
    with pytest.raises(InvalidRequest, match="beam"):
        translator.translate(["A house."], beam_size=1000)


def test_stream_yields_prefixes_then_the_whole_result(translator, texts):
    updates = list(translator.stream(texts[0], beam_size=2, return_attention=True))
    *partial, final = updates
    assert final.final and not any(u.final for u in partial)
    assert final.result is not None and final.result.source == texts[0]
    assert final.text == final.result.text
    (unary,) = translator.translate(texts[:1], beam_size=2, return_attention=True)
    assert final.result.hypotheses == unary.hypotheses
    shown = ""
    for u in updates[:-1]:
        assert u.text == shown + u.delta
        shown = u.text
    assert (final.result.model, final.result.model_version) == ("tiny", "1")


def test_finish_reasons_and_a_refusal_named_across_batches(translator, texts):
    (cut,) = translator.translate(texts[:1], max_length=3)
    assert cut.best.finish_reason == "length" and len(cut.best.tokens) == 2
    (whole,) = translator.translate(texts[1:2])
    assert whole.best.finish_reason == "eos"
    (scored,) = translator.score(texts[:1], [whole.text])
    assert scored.best.finish_reason is None
    # the 7th text of the input, in the second request of three: texts[6], not texts[2]
    many = [*texts, *texts, "house " * 300, *texts[:2]]
    refused = r"^INVALID_ARGUMENT: texts\[6\] has 1800 source"
    with pytest.raises(InvalidRequest, match=refused) as caught:
        list(translator.translate_many(many, batch_size=4))
    assert caught.value.details.startswith("texts[6] has")
    with pytest.raises(InvalidOptions, match=r"texts\[5\] is int, not str"):
        list(translator.translate_many([*texts, *texts[:2], 7], batch_size=2))


def test_stream_closed_early_cancels_the_call(server, translator, tiny_bundle):
    reg = server.registry
    labels = {"method": "TranslateStream", "code": "CANCELLED"}
    before = reg.get_sample_value("nmt_requests_total", labels) or 0.0
    # greedy streams every step; min_length keeps it decoding to the server's largest
    # limit (512 steps), so that it is still decoding when the close arrives on a loaded
    # machine (greedy alone ends this sentence after about 10 steps)
    stream = translator.stream(
        tiny_bundle.sentences[LOOP_SENTENCE],
        max_length_ratio=100.0,
        min_length=511,
        max_length=512,
    )
    assert not next(stream).final
    stream.close()
    assert wait_until(lambda: reg.get_sample_value("nmt_requests_total", labels) == before + 1)
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0)


def test_list_models_and_health(translator):
    (model,) = translator.list_models()
    assert model.name == "tiny" and model.is_default and model.version == "1"
    assert model.execution_provider == "CPUExecutionProvider"
    assert model.max_source_tokens > 0 and model.parameters > 0
    assert model.config["encoder_hidden"] == 16
    assert "parity" in model.summary and "decoding" in model.summary
    assert model.limits is not None and model.limits.max_beam_size >= 1
    assert model.limits.sentences_per_request(5) == min(
        model.limits.max_sentences, model.limits.max_live_rows // 5
    )
    assert translator.limits() == model.limits == translator.limits("tiny")
    assert translator.limits("no-such-model") is None
    assert translator.health() == "SERVING"
    assert translator.health(SERVICE_NAME) == "SERVING"
    with pytest.raises(TranslatorError, match="no health for service 'foo': ask for ''") as e:
        translator.health("foo")
    assert e.value.code == grpc.StatusCode.NOT_FOUND
    translator.wait_ready(timeout=5)


def test_health_of_a_server_not_warmed_up(server_factory):
    server = server_factory(warm=False)
    with Translator(f"127.0.0.1:{server.port}", timeout=5) as t:
        assert t.health(SERVICE_NAME) == "NOT_SERVING"
        with pytest.raises(TranslatorError) as info:
            t.wait_ready(timeout=0.3)
        assert info.value.code == grpc.StatusCode.DEADLINE_EXCEEDED
        assert "still NOT_SERVING" in str(info.value)


class _StallingHealth(health_pb2_grpc.HealthServicer):
    """Answers NOT_SERVING once, then takes longer than any check may wait."""

    def __init__(self) -> None:
        self.calls = 0

    def Check(self, request, context):  # noqa: N802
        self.calls += 1
        if self.calls > 1:
            time.sleep(1.0)
        return health_pb2.HealthCheckResponse(status=health_pb2.HealthCheckResponse.NOT_SERVING)


def test_wait_ready_reports_the_last_answer_when_a_check_runs_out_of_time():
    """A last check cut short by the time left does not hide the server's answers before
    it (a loaded machine made the check of the test above time out now and then)."""
    server = grpc.server(ThreadPoolExecutor(max_workers=2))
    health = _StallingHealth()
    health_pb2_grpc.add_HealthServicer_to_server(health, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        with (
            Translator(f"127.0.0.1:{port}", timeout=5) as t,
            pytest.raises(DeadlineExceeded, match="still NOT_SERVING after 0.5 s"),
        ):
            t.wait_ready(timeout=0.5)
    finally:
        server.stop(0)
    assert health.calls >= 2


def test_a_closed_translator_refuses_calls(server):
    t = Translator(f"127.0.0.1:{server.port}")
    t.close()
    t.close()
    with pytest.raises(ValueError, match="closed"):
        t.translate(["A house."])


def test_decode_options_round_trip_through_the_proto():
    options = DecodeOptions(
        beam_size=4,
        n_best=2,
        length_penalty=0.5,
        max_length=40,
        max_length_ratio=1.5,
        return_attention=True,
        return_scores=False,
        coverage_penalty=0.25,
    )
    msg = options.to_proto()
    assert msg.HasField("coverage_penalty") and msg.coverage_penalty == 0.25
    # no strategy named: beam_size says, or, unset too, the model's own beam
    assert msg.strategy == pb.STRATEGY_UNSPECIFIED and msg.beam_size == 4 and msg.n_best == 2
    assert msg.HasField("length_penalty") and msg.length_penalty == 0.5
    assert DecodeOptions.from_proto(msg) == options
    named = dataclasses.replace(options, strategy="beam")
    assert DecodeOptions.from_proto(named.to_proto()) == named
    plain = DecodeOptions().to_proto()
    assert plain.strategy == pb.STRATEGY_UNSPECIFIED and plain.beam_size == 0
    assert DecodeOptions(strategy="greedy").to_proto().strategy == pb.STRATEGY_GREEDY
    assert not plain.HasField("length_penalty") and not plain.HasField("max_length_ratio")
    assert not plain.HasField("coverage_penalty")
    with pytest.raises(ValueError, match="coverage_penalty must be a finite number >= 0"):
        DecodeOptions(coverage_penalty=-0.1)
    assert DecodeOptions(strategy="beam").to_proto().beam_size == 0  # the server's default
    with pytest.raises(ValueError, match="strategy 'greedy' with beam_size 3"):
        DecodeOptions(strategy="greedy", beam_size=3)
    with pytest.raises(ValueError, match="diversity_rate must be a finite number >= 0"):
        DecodeOptions(beam_size=4, diversity_rate=float("nan"))
    with pytest.raises(ValueError, match="diversity_rate 0.5 ranks a beam's continuations"):
        DecodeOptions(diversity_rate=0.5, beam_size=1)
    # without a beam the model's own decides: the server checks it
    assert DecodeOptions(diversity_rate=0.5).to_proto().diversity_rate == 0.5
    # the server's default beam (5) ranks them
    assert DecodeOptions(strategy="beam", diversity_rate=0.5).to_proto().diversity_rate == 0.5
    gnmt = DecodeOptions(length_penalty_form="gnmt")
    assert gnmt.to_proto().length_penalty_form == pb.LENGTH_PENALTY_GNMT
    assert DecodeOptions.from_proto(gnmt.to_proto()) == gnmt
    assert DecodeOptions().to_proto().length_penalty_form == pb.LENGTH_PENALTY_FORM_UNSPECIFIED
    with pytest.raises(ValueError, match="must be one of 'average', 'gnmt' or None, got 'wu'"):
        DecodeOptions(length_penalty_form="wu")  # type: ignore[arg-type]


def test_every_optional_proto_field_round_trips_through_none():
    """``_OPTIONAL`` is the proto's ``optional`` fields, each a field of the options:
    unset there is None here, both ways."""
    from nmt_client import options

    fields = pb.DecodeOptions.DESCRIPTOR.fields_by_name
    assert set(options._OPTIONAL) == {n for n, f in fields.items() if f.has_presence}
    # (to_proto always names the strategy it resolves to)
    plain = DecodeOptions(strategy="greedy")
    assert DecodeOptions.from_proto(plain.to_proto()) == plain
    assert not any(plain.to_proto().HasField(name) for name in options._OPTIONAL)
    given = DecodeOptions(
        strategy="beam", beam_size=4, length_penalty=0.5, max_length_ratio=1.5,
        coverage_penalty=0.25, min_length=0, ban_unk=False, block_ngram_repeat=2,
        sampling_temperature=0.75, sampling_topp=0.5, seed=0, diversity_rate=0.5,
        diverse_beam_strength=0.25,
    )  # fmt: skip
    msg = given.to_proto()
    assert all(msg.HasField(name) for name in options._OPTIONAL)
    assert DecodeOptions.from_proto(msg) == given


@pytest.mark.parametrize("linger", [None, 0.05])
def test_translate_many_reads_only_as_far_as_needed_and_lets_go(translator, texts, linger):
    """Stopping early leaves the input read at most a few batches ahead and no reader
    thread behind (helper-86: 21 of 1,000 items pulled, the reader blocked for ever)."""
    import threading

    pulled = []

    def source():
        for i in range(1000):
            pulled.append(i)
            yield texts[i % len(texts)]

    results = translator.translate_many(source(), batch_size=4, concurrency=1, linger=linger)
    next(results)
    results.close()
    assert len(pulled) <= 4 + 4 + 2
    assert wait_until(lambda: not any(t.name == "nmt-read" for t in threading.enumerate()))


@pytest.mark.parametrize("linger", [None, 0.05])
def test_an_input_that_fails_gets_the_answers_before_it_first(translator, texts, linger):
    def source():
        yield from texts
        raise ValueError("line 4 cannot be read")

    got = []
    with pytest.raises(ValueError, match="line 4 cannot be read"):
        for result in translator.translate_many(source(), batch_size=2, linger=linger):
            got.append(result.text)
    assert got == [r.text for r in translator.translate(texts)]


def test_linger_waits_for_the_next_item_not_the_batchs_first(translator, texts, monkeypatch):
    """Items coming 20 ms apart join one batch under a 100 ms linger (the linger counted
    from the batch's first item sent them in pieces)."""
    import time as clock

    sizes = []
    real = Translator.translate

    def counted(self, batch, **kwargs):
        sizes.append(len(batch))
        return real(self, batch, **kwargs)

    monkeypatch.setattr(Translator, "translate", counted)

    def source():
        for i in range(12):
            clock.sleep(0.02)
            yield texts[i % len(texts)]

    assert len(list(translator.translate_many(source(), batch_size=32, linger=0.1))) == 12
    assert sizes == [12]


@pytest.mark.parametrize("seconds", [float("nan"), float("inf"), -1.0, 0, "5", True])
def test_a_timeout_that_is_no_number_of_seconds_is_refused_before_any_call(server, seconds):
    """NaN, -1 and inf made gRPC fail the call at once with DEADLINE_EXCEEDED (telling the
    user to allow a longer timeout); a wait for readiness with NaN never ended."""
    with pytest.raises(InvalidOptions, match="timeout must be a finite number of seconds"):
        Translator(f"127.0.0.1:{server.port}", timeout=seconds)
    with Translator(f"127.0.0.1:{server.port}") as t:
        with pytest.raises(InvalidOptions, match=r"timeout must be .* > 0, got"):
            t.translate(["Hi."], timeout=seconds)
        with pytest.raises(InvalidOptions, match=r"timeout must be .* > 0, got"):
            t.health(timeout=seconds)
        if seconds != 0:
            with pytest.raises(InvalidOptions, match=r"timeout must be .* >= 0, got"):
                t.wait_ready(timeout=seconds)


def test_translate_many_halves_a_batch_whose_sentences_are_too_many(server_factory):
    """With split_sentences the server counts sentences, the client texts: a batch over
    the limit is halved until it fits, and one text over it alone is refused on its own
    (skip_refused skips it) (helper-90: 40 three-sentence texts failed at batch 32)."""
    server = server_factory(max_sentences_per_request=4)
    texts = ["Go home. Stop now.", "Hi. Bye.", "Yes. No.", "One. Two. Three. Four. Five.",
             "Come here. Go there."]  # fmt: skip
    with Translator(f"127.0.0.1:{server.port}") as t:
        want = [t.translate([text], split_sentences=True)[0].text for text in texts[:3]]
        got = list(t.translate_many(texts[:3], batch_size=3, split_sentences=True))
        assert [r.text for r in got] == want
        with pytest.raises(InvalidRequest, match=r"texts\[3\] holds 5 sentences; the limit"):
            list(t.translate_many(texts, batch_size=5, split_sentences=True))
        skipped = list(
            t.translate_many(texts, batch_size=5, split_sentences=True, skip_refused=True)
        )
    assert [r.error is not None for r in skipped] == [False, False, False, True, False]
    assert [r.text for r in skipped[:3]] == want
