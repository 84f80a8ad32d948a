"""The real gRPC server against the PyTorch reference: unary, streaming, batching, models."""

from __future__ import annotations

import json
import threading
import time

import numpy as np
import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from service.sessions import HOST_GREEDY_STEPS
from tests.service.server_helpers import (
    LOOP_SENTENCE,
    TIMEOUT,
    assert_same_nbest,
    domain_options,
    one_torch_thread,
    proto_options,
    reference,
    served,
    wait_until,
)

# Sentences whose hypotheses are short-ish for the tiny model (keeps the reference fast).
PARITY_SENTENCES = (1, 2, 5, 6, 7, 9, 13)


# decoder steps per call of plain greedy rows in these servers (the runtime's default)
GREEDY_STEPS = HOST_GREEDY_STEPS  # what auto runs on the CPU


@pytest.fixture(scope="module", params=[1, 2], ids=["one-engine", "two-lanes"])
def server(server_factory, request):
    """One engine, and two decode lanes (the CPU's default, --decode-lanes auto)."""
    return server_factory(
        max_live_rows=256, max_beam_size=8, max_n_best=8, decode_lanes=request.param
    )


@pytest.fixture(scope="module")
def texts(tiny_bundle):
    return [tiny_bundle.sentences[i] for i in PARITY_SENTENCES]


def translate(stub, texts, options, **kw):
    return stub.Translate(pb.TranslateRequest(texts=texts, options=options, **kw), timeout=TIMEOUT)


# -- parity with the PyTorch reference -----------------------------------------------------


def test_greedy_matches_pytorch_reference(stub, texts, tiny_checkpoint):
    options = proto_options(beam=1)
    response = translate(stub, texts, options)
    want = reference(tiny_checkpoint, texts, domain_options(options))
    assert_same_nbest(served(response), want)
    assert response.model == "tiny" and response.model_version == "1"
    src = tiny_checkpoint.src_tokenizer
    assert [t.source_tokens for t in response.translations] == [len(src.encode(t)) for t in texts]
    assert response.timing.total_ms > 0 and response.timing.decode_ms > 0


@pytest.mark.parametrize("beam", [2, 3, 5])
def test_beam_nbest_matches_pytorch_reference(stub, texts, tiny_checkpoint, beam):
    options = proto_options(beam=beam, n_best=beam, max_length=40)
    got = served(translate(stub, texts, options))
    want = reference(tiny_checkpoint, texts, domain_options(options))
    assert_same_nbest(got, want)
    assert all(len(hyps) == beam for hyps in got)
    # best first
    assert all(
        [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True) for hyps in got
    )


def test_beam_with_length_penalty_and_defaults_matches_reference(stub, texts, tiny_checkpoint):
    # STRATEGY_BEAM with beam_size 0 means beam 5; n_best 0 means 1.
    options = pb.DecodeOptions(
        strategy=pb.STRATEGY_BEAM, length_penalty=0.3, max_length=30, return_scores=True
    )
    got = served(translate(stub, texts[:3], options))
    want = reference(
        tiny_checkpoint,
        texts[:3],
        domain_options(proto_options(beam=5, length_penalty=0.3, max_length=30)),
    )
    assert_same_nbest(got, want)


def test_scores_are_zero_unless_requested(stub, texts):
    options = proto_options(beam=2, return_scores=False)
    for hyp in served(translate(stub, texts[:2], options)):
        assert hyp[0].score == 0.0 and hyp[0].log_prob == 0.0


def test_attention_matrix(stub, texts, tiny_checkpoint):
    for beam in (1, 3):
        options = proto_options(beam=beam, return_attention=True, max_length=30)
        response = translate(stub, texts[:3], options)
        want = reference(tiny_checkpoint, texts[:3], domain_options(options))
        src = tiny_checkpoint.src_tokenizer
        for text, translation, ref in zip(texts, response.translations, want, strict=False):
            hyp = translation.hypotheses[0]
            att = hyp.attention
            assert att.rows == len(hyp.tokens) + 1
            assert att.cols == translation.source_tokens == len(src.encode(text))
            assert len(att.values) == att.rows * att.cols
            matrix = np.asarray(att.values).reshape(att.rows, att.cols)
            np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-5)
            assert list(att.source_tokens) == src.pieces(src.encode(text))
            assert list(att.target_tokens) == [*hyp.tokens, "</s>"]
            np.testing.assert_allclose(matrix, ref[0].attention, atol=1e-5)


def test_no_attention_unless_requested(stub, texts):
    response = translate(stub, texts[:1], proto_options(beam=2))
    assert response.translations[0].hypotheses[0].attention.rows == 0


# -- concurrency and step-level batching ---------------------------------------------------


def _mixed_requests(sentences):
    option_sets = [
        proto_options(beam=1, max_length=24),
        proto_options(beam=2, max_length=24),
        proto_options(beam=3, n_best=2, max_length=24),
        proto_options(beam=4, n_best=4, length_penalty=0.5, max_length=24),
        proto_options(beam=1, return_attention=True, max_length=24),
        pb.DecodeOptions(max_length=24),  # unspecified strategy: greedy
    ]
    requests = []
    for i in range(36):
        texts = [sentences[(i * 7 + j) % 40] for j in range(1 + i % 3)]
        requests.append(pb.TranslateRequest(texts=texts, options=option_sets[i % len(option_sets)]))
    return requests


def test_concurrent_clients_get_their_solo_results(server, stub, tiny_bundle):
    requests = _mixed_requests(tiny_bundle.sentences)
    reg = server.registry
    steps_before = reg.get_sample_value("nmt_decoder_step_rows_count")
    solo = [served(stub.Translate(r, timeout=TIMEOUT)) for r in requests]
    # the steps of one request at a time, counted as the concurrent ones are (the EOS
    # step included, each lane's steps)
    serial = reg.get_sample_value("nmt_decoder_step_rows_count") - steps_before
    steps_before += serial
    barrier = threading.Barrier(len(requests))
    results: list = [None] * len(requests)

    def client(i):
        barrier.wait()
        try:
            results[i] = served(stub.Translate(requests[i], timeout=TIMEOUT))
        except Exception as exc:  # noqa: BLE001 - reported below
            results[i] = exc

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(requests))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(TIMEOUT)
    errors = [r for r in results if isinstance(r, Exception)]
    assert not errors, errors[:3]
    for got, want in zip(results, solo, strict=True):
        assert_same_nbest(got, want)
        for g, w in zip(got, want, strict=True):
            for hg, hw in zip(g, w, strict=True):
                if hw.attention is not None:
                    np.testing.assert_allclose(hg.attention, hw.attention, atol=1e-5)
    # The requests really shared decoder steps: fewer steps than run one at a time.
    steps = reg.get_sample_value("nmt_decoder_step_rows_count") - steps_before
    assert steps < serial, f"concurrent requests did not share decoder steps ({steps})"


def test_an_answered_request_has_left_the_live_rows_gauge(server, stub, tiny_bundle, monkeypatch):
    """The engine takes a finished request's rows off ``nmt_live_rows`` before it
    answers: a client that has its answer never reads its rows (a gauge set after the
    answer made tests that wait for another request's rows go on too early). The gauge's
    decrease is slowed down here, so that an answer sent before it would be seen."""
    gauge = server.metrics.live_rows
    real_inc = gauge.inc

    def slow_inc(amount: float = 1.0) -> None:
        if amount < 0:
            time.sleep(0.05)
        real_inc(amount)

    monkeypatch.setattr(gauge, "inc", slow_inc)
    request = pb.TranslateRequest(
        texts=tiny_bundle.sentences[:2], options=proto_options(beam=5, max_length=12)
    )
    seen = []
    for _ in range(5):
        stub.Translate(request, timeout=TIMEOUT)
        seen.append(server.registry.get_sample_value("nmt_live_rows"))
    assert seen == [0.0] * 5


def test_short_request_overtakes_long_one(server, stub, tiny_bundle):
    """Iteration-level batching: a short request admitted while a long one is mid-decode
    finishes first instead of waiting for the long one."""
    reg = server.registry
    long_request = pb.TranslateRequest(
        texts=[tiny_bundle.sentences[LOOP_SENTENCE]] * 16,
        options=proto_options(beam=5, max_length_ratio=10.0),
    )
    short_request = pb.TranslateRequest(
        texts=[tiny_bundle.sentences[1]], options=proto_options(beam=1)
    )
    done: dict[str, float] = {}
    responses: dict[str, object] = {}

    def run(name, request):
        responses[name] = stub.Translate(request, timeout=TIMEOUT)
        done[name] = time.monotonic()

    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") == 0, timeout=5)
    long_thread = threading.Thread(target=run, args=("long", long_request))
    long_thread.start()
    assert wait_until(lambda: reg.get_sample_value("nmt_live_rows") >= 80), "long never started"
    run("short", short_request)
    assert "long" not in done, "the long request finished before the short one"
    long_thread.join(TIMEOUT)
    assert done["short"] < done["long"]
    # Premise: the long request really was long (beams loop to the length limit).
    long_tokens = len(responses["long"].translations[0].hypotheses[0].tokens)
    assert long_tokens >= 100
    short = responses["short"]
    assert short.timing.queue_ms < 1000
    assert short.timing.total_ms < responses["long"].timing.total_ms / 2


# -- streaming -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        proto_options(beam=1),
        proto_options(beam=3, max_length=40),
        proto_options(beam=5, max_length=60),
    ],
    ids=["greedy", "beam3", "beam5"],
)
@pytest.mark.parametrize("sentence", [LOOP_SENTENCE, 1, 6])
def test_stream_matches_unary(stub, tiny_bundle, options, sentence):
    text = tiny_bundle.sentences[sentence]
    unary = translate(stub, [text], options)
    messages = list(
        stub.TranslateStream(pb.TranslateStreamRequest(text=text, options=options), timeout=TIMEOUT)
    )
    final = messages[-1]
    assert final.final and not any(m.final for m in messages[:-1])
    best = unary.translations[0].hypotheses[0]
    assert final.text == best.text
    assert final.translation == unary.translations[0]
    assert final.timing.total_ms > 0
    previous = ""
    for m in messages:
        assert m.text.startswith(previous), (previous, m.text)
        assert best.text.startswith(m.text)
        previous = m.text
    assert "".join(m.delta for m in messages) == best.text
    if options.beam_size == 1 and len(best.tokens) > 2 * GREEDY_STEPS:
        # every call of GREEDY_STEPS steps that leaves the sentence unfinished sends a message
        assert len(messages) > 2, "greedy output was not streamed step by step"


def test_stream_greedy_emits_every_new_prefix(stub, tiny_bundle, tiny_checkpoint):
    """Greedy streams the decoded text after every decoder call that changes it: every
    step, or every GREEDY_STEPS steps (--greedy-steps) while the sentence goes on."""
    from models.translate import translate_ids

    text = tiny_bundle.sentences[LOOP_SENTENCE]
    options = proto_options(beam=1, max_length=30)
    messages = list(
        stub.TranslateStream(pb.TranslateStreamRequest(text=text, options=options), timeout=TIMEOUT)
    )
    src, tgt = tiny_checkpoint.src_tokenizer, tiny_checkpoint.tgt_tokenizer
    with one_torch_thread():
        [[hyp]] = translate_ids(
            tiny_checkpoint.model, [src.encode(text)], options=domain_options(options)
        )
    assert len(hyp.tokens) >= 5
    expected: list[str] = []
    for k in range(GREEDY_STEPS, len(hyp.tokens) + 1, GREEDY_STEPS):
        prefix = tgt.decode(hyp.tokens[:k])
        if prefix != (expected[-1] if expected else ""):
            expected.append(prefix)
    assert [m.text for m in messages[:-1]] == expected
    assert messages[-1].text == tgt.decode(hyp.tokens)


# -- models ----------------------------------------------------------------------------------


def test_finish_reason_says_whether_the_length_limit_ended_it(stub, tiny_bundle):
    """LENGTH where the hypothesis holds as many tokens as the length limit leaves before
    its forced EOS, EOS where the model ended it earlier; none in a Score."""
    texts = tiny_bundle.sentences[:8]
    seen = set()
    for options in (pb.DecodeOptions(), pb.DecodeOptions(beam_size=5, n_best=5)):
        for t in translate(stub, texts, options).translations:
            limit = min(256, 2 * t.source_tokens + 10)  # max_length, max_length_ratio's
            for h in t.hypotheses:
                reason = h.finish_reason
                assert reason == (
                    pb.FINISH_REASON_LENGTH if len(h.tokens) == limit - 1 else pb.FINISH_REASON_EOS
                ), (len(h.tokens), limit)
                seen.add(reason)
    assert seen == {pb.FINISH_REASON_EOS, pb.FINISH_REASON_LENGTH}  # (beam 5 loops on line 0)
    short = translate(stub, texts, pb.DecodeOptions(max_length=3)).translations
    assert all(h.finish_reason == pb.FINISH_REASON_LENGTH for t in short for h in t.hypotheses)
    assert all(len(t.hypotheses[0].tokens) == 2 for t in short)
    (final,) = [
        m
        for m in stub.TranslateStream(
            pb.TranslateStreamRequest(text=texts[1], options=pb.DecodeOptions(max_length=3)),
            timeout=TIMEOUT,
        )
        if m.final
    ]
    assert final.translation.hypotheses[0].finish_reason == pb.FINISH_REASON_LENGTH
    scored = stub.Score(pb.ScoreRequest(texts=texts[:1], targets=["a"]), timeout=TIMEOUT)
    assert scored.translations[0].hypotheses[0].finish_reason == pb.FINISH_REASON_UNSPECIFIED


def test_finish_reason_length_means_a_longer_limit_decodes_further(stub, tiny_bundle):
    """Told by behaviour, not the rule: greedy under max_length 6 against 60. A
    hypothesis marked EOS decodes the same under the longer limit (the model ended it);
    one marked LENGTH goes on past its 5 tokens, which start the longer one's."""
    texts = list(tiny_bundle.sentences[:12])
    short = translate(stub, texts, pb.DecodeOptions(max_length=6)).translations
    long = translate(stub, texts, pb.DecodeOptions(max_length=60)).translations
    reasons = set()
    for s, w in zip(short, long, strict=True):
        cut, whole = s.hypotheses[0], w.hypotheses[0]
        reasons.add(cut.finish_reason)
        if cut.finish_reason == pb.FINISH_REASON_EOS:
            assert list(whole.tokens) == list(cut.tokens)
        else:
            assert cut.finish_reason == pb.FINISH_REASON_LENGTH and len(cut.tokens) == 5
            assert len(whole.tokens) > 5 and list(whole.tokens[:5]) == list(cut.tokens)
    assert reasons == {pb.FINISH_REASON_EOS, pb.FINISH_REASON_LENGTH}


def test_a_streams_final_message_names_the_model(stub, tiny_bundle):
    messages = list(
        stub.TranslateStream(
            pb.TranslateStreamRequest(text=tiny_bundle.sentences[1]), timeout=TIMEOUT
        )
    )
    assert (messages[-1].model, messages[-1].model_version) == ("tiny", "1")
    assert all(not m.model for m in messages[:-1])


def test_list_models(server, stub, tiny_bundle):
    response = stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT)
    assert [m.name for m in response.models] == ["tiny"]
    model = response.models[0]
    assert model.execution_provider == "CPUExecutionProvider"
    assert model.is_default
    assert model.version == "1"
    assert model.precision == "fp32"
    config = json.loads(model.config_json)
    assert config["embed_dim"] == 16 and config["decoder_hidden"] == 32
    assert model.src_vocab_size == config["src_vocab_size"] == 120
    assert model.tgt_vocab_size == config["tgt_vocab_size"] == 120
    assert model.parameters > 0
    assert model.max_source_tokens == server.config.engine.max_source_tokens
    summary = json.loads(model.manifest_summary_json)
    assert summary["parity"]["greedy_mismatches"] == 0
    manifest = json.loads((tiny_bundle.bundle_dir / "manifest.json").read_text())
    assert summary["decoding"] == manifest.get("decoding", {})
    # the exporting machine's paths go by their file names: any client may ask
    assert "/" in json.dumps([manifest.get("source_model"), manifest.get("parity")])
    for part in ("source_model", "parity", "checkpoint", "tokenizers"):
        assert "/" not in json.dumps(summary[part]), (part, summary[part])
    engine, rpc = server.config.engine, server.config.rpc
    assert model.limits == pb.RequestLimits(
        max_sentences=engine.max_sentences_per_request,
        max_live_rows=256,
        max_beam_size=8,
        max_n_best=8,
        max_target_length=engine.max_target_length,
        max_sampling_topk=engine.max_sampling_topk,
        max_message_bytes=rpc.max_message_bytes,
    )
    assert summary["checkpoint"]["note"] == "tiny random test model"


def test_model_by_name(stub, texts):
    default = translate(stub, texts[:1], proto_options())
    named = translate(stub, texts[:1], proto_options(), model="tiny")
    assert named.translations == default.translations


@pytest.mark.parametrize(
    ("options", "sentences", "off_loop"),
    [
        (proto_options(), 1, False),
        (proto_options(beam=4, n_best=4), 1, False),
        (proto_options(), 5, True),
        (proto_options(beam=4, n_best=2), 3, True),
        (proto_options(return_attention=True), 1, True),
    ],
    ids=["greedy", "nbest-4", "5-sentences", "3x2-hypotheses", "attention"],
)
def test_small_replies_are_built_on_the_event_loop(
    server, stub, texts, options, sentences, off_loop
):
    """Up to INLINE_REPLY_HYPOTHESES hypotheses without attention: built on the loop;
    more, or attention maps: on a reply thread. The answer is the same either way."""
    pool = server.servicer.replies.pool
    submitted = []
    submit = pool.submit

    def counting(fn, *args, **kwargs):
        submitted.append(fn)
        return submit(fn, *args, **kwargs)

    pool.submit = counting
    try:
        reply = translate(stub, texts[:sentences], options)
    finally:
        del pool.submit
    assert len(reply.translations) == sentences
    assert bool(submitted) is off_loop
