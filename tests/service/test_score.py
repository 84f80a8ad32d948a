"""The ``Score`` RPC (forced decoding) on real in-process servers, against the PyTorch
reference's teacher forcing and against the server's own translations."""

from __future__ import annotations

import threading

import grpc
import numpy as np
import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from service.messages import to_score_options
from tests.committed import EN_ES_FP32, EN_ES_INT8, ROOT
from tests.service.server_helpers import (
    TIMEOUT,
    mixed_requests,
    one_torch_thread,
    rpc_error,
)

SENTENCES = (1, 2, 5, 6, 7, 9, 13)
TEST_SPLIT = ROOT / "models" / "pretrained" / "en-es" / "test.en"


@pytest.fixture(scope="module", params=["in-process", "engine-process"])
def server(server_factory, request):
    engine_process = "on" if request.param == "engine-process" else "off"
    return server_factory(server={"engine_process": engine_process}, max_target_length=128)


@pytest.fixture(scope="module")
def pairs(tiny_bundle):
    """Sources and references (sample.es): translations the tiny random model never
    chose, so most tokens are far outside its top-k."""
    from tests.service.server_fixtures import SAMPLE_ES

    refs = SAMPLE_ES.read_text(encoding="utf-8").splitlines()
    return [tiny_bundle.sentences[i] for i in SENTENCES], [refs[i] for i in SENTENCES]


def score(stub, texts, targets, **options) -> pb.ScoreResponse:
    request = pb.ScoreRequest(texts=texts, targets=targets, options=pb.ScoreOptions(**options))
    return stub.Score(request, timeout=TIMEOUT)


def teacher_forced(checkpoint, texts, targets, options):
    """The PyTorch reference's scores of ``targets``: its greedy search with each target
    forced whole, EOS included (models.search)."""
    import torch

    from models.search import greedy_search
    from models.translate import pad

    src_tok, tgt_tok = checkpoint.src_tokenizer, checkpoint.tgt_tokenizer
    eos = checkpoint.model.config.eos_id
    sources = [src_tok.encode(t) for t in texts]
    prefixes = [(*tgt_tok.encode(t), eos) for t in targets]
    with one_torch_thread():
        lengths = torch.tensor([len(s) for s in sources])
        return greedy_search(
            checkpoint.model, pad(sources), lengths, options=options, prefixes=prefixes
        )


def test_scores_match_pytorch_teacher_forcing(stub, pairs, tiny_checkpoint):
    texts, targets = pairs
    response = score(stub, texts, targets, length_penalty=0.6)
    defaults = to_score_options(pb.ScoreOptions(length_penalty=0.6), max_length=128)
    want = teacher_forced(tiny_checkpoint, texts, targets, defaults)
    tgt = tiny_checkpoint.tgt_tokenizer
    assert len(response.translations) == len(texts)
    for translation, target, w in zip(response.translations, targets, want, strict=True):
        (h,) = translation.hypotheses
        assert list(h.tokens) == tgt.pieces(tgt.encode(target))
        assert h.text == tgt.decode(tgt.encode(target))
        assert len(h.token_log_probs) == len(h.tokens) + 1
        assert sum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
        assert h.log_prob == pytest.approx(w.log_prob, abs=1e-4)
        assert h.score == pytest.approx(w.score, abs=1e-4)
        # references are unlikely under a random model: far below its greedy choices
        assert min(h.token_log_probs) < -3
    assert response.model == "tiny" and response.timing.total_ms > 0


def test_counted_as_score_calls(server, stub, pairs):
    texts, targets = pairs
    reg = server.registry

    def count(name: str, labels: dict) -> float:
        return reg.get_sample_value(name, labels) or 0.0

    ok = {"method": "Score", "code": "OK"}
    latency = ok | {"strategy": "forced"}
    before = count("nmt_requests_total", ok), count("nmt_request_duration_seconds_count", latency)
    score(stub, texts[:2], targets[:2])
    rpc_error(lambda: stub.Score(pb.ScoreRequest(texts=["a"], targets=[]), timeout=TIMEOUT))
    assert count("nmt_requests_total", ok) == before[0] + 1
    assert count("nmt_request_duration_seconds_count", latency) == before[1] + 1
    bad = {"method": "Score", "code": "INVALID_ARGUMENT"}
    assert count("nmt_requests_total", bad) >= 1


@pytest.mark.parametrize("bundle", [EN_ES_FP32, EN_ES_INT8], ids=["fp32", "int8"])
@pytest.mark.parametrize("search", ["standard", "eole"])
def test_a_translation_scores_as_it_was_found(bundle, search):
    """On the committed demo model: each greedy and beam translation, forced whole, gets
    the very log-prob and score its search gave it (a sum of the same numbers), and each
    token the log-prob the search kept for it (``return_token_scores``)."""
    from models.options import DecodeOptions
    from service.bundle import load_bundle
    from service.loop import decode
    from service.sessions import RuntimeConfig

    model = load_bundle(bundle, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    texts = TEST_SPLIT.read_text(encoding="utf-8").splitlines()[0:3000:150]
    sources = [model.src_tokenizer.encode(t)[: model.max_source_tokens] for t in texts]
    eos = model.special.eos
    scoring = to_score_options(
        pb.ScoreOptions(), max_length=256, defaults=DecodeOptions(search=search)
    )
    for options in (
        DecodeOptions(search=search, return_token_scores=True),
        DecodeOptions(beam_size=4, n_best=2, search=search, return_token_scores=True),
    ):
        found = decode(model.model, sources, options=options, special=model.special)
        for rank in range(options.n_best):
            targets = [(*hyps[rank].tokens, eos) for hyps in found]
            scored = decode(
                model.model, sources, options=scoring, special=model.special, prefixes=targets
            )
            for (got,), hyps in zip(scored, found, strict=True):
                want = hyps[rank]
                assert got.tokens == want.tokens
                assert got.log_prob == pytest.approx(want.log_prob, abs=1e-5)
                assert got.score == pytest.approx(want.score, abs=1e-5)
                # the search's own token log-probs (return_token_scores) are Score's
                if len(want.token_log_probs) == len(want.tokens) + 1:
                    assert want.token_log_probs == pytest.approx(got.token_log_probs, abs=1e-5)


def test_attention_and_diagnostics_on_request(stub, pairs):
    texts, targets = pairs
    plain = score(stub, texts[:2], targets[:2])
    assert not plain.translations[0].hypotheses[0].HasField("attention")
    full = score(stub, texts[:2], targets[:2], return_attention=True, return_diagnostics=True)
    for a, b in zip(plain.translations, full.translations, strict=True):
        (h,), (g,) = a.hypotheses, b.hypotheses
        assert list(g.token_log_probs) == pytest.approx(list(h.token_log_probs), abs=1e-6)
        assert g.attention.rows == len(g.tokens) + 1
        assert g.attention.cols == b.source_tokens
        rows = np.array(g.attention.values).reshape(g.attention.rows, g.attention.cols)
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-5)
        assert g.attention.target_tokens[-1] == "</s>"
        assert g.diagnostics.HasField("entropy_mean")


def test_an_empty_target_scores_eos_alone(stub, pairs):
    texts, _ = pairs
    (translation,) = score(stub, texts[:1], [""]).translations
    (h,) = translation.hypotheses
    assert list(h.tokens) == [] and h.text == ""
    assert len(h.token_log_probs) == 1 and h.log_prob == pytest.approx(h.token_log_probs[0])


def test_a_score_does_not_depend_on_what_else_is_decoded(server, stub, pairs, tiny_bundle):
    texts, targets = pairs
    alone = [score(stub, [t], [g]).translations[0] for t, g in zip(texts, targets, strict=True)]
    together = score(stub, texts, targets).translations
    # and beside translations in flight
    stop = threading.Event()
    errors: list[BaseException] = []

    def traffic() -> None:
        requests = mixed_requests(tiny_bundle.sentences, 12)
        while not stop.is_set():
            for r in requests:
                try:
                    stub.Translate(r, timeout=TIMEOUT)
                except grpc.RpcError as exc:  # reported below
                    errors.append(exc)

    threads = [threading.Thread(target=traffic) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        busy = [score(stub, texts, targets).translations for _ in range(3)]
    finally:
        stop.set()
        for t in threads:
            t.join(TIMEOUT)
    assert not errors, errors[:2]
    for run in (together, *busy):
        for got, want in zip(run, alone, strict=True):
            (g,), (w,) = got.hypotheses, want.hypotheses
            assert list(g.tokens) == list(w.tokens)
            assert list(g.token_log_probs) == pytest.approx(list(w.token_log_probs), abs=1e-5)


@pytest.mark.parametrize(
    ("texts", "targets", "match"),
    [
        (["a house"], [], r"0 targets for 1 texts: send exactly one target per text"),
        (["a house", "a dog"], ["una casa"], r"1 targets for 2 texts"),
        ([], [], r"no texts given"),
        (
            ["a house"],
            ["casa " * 80],
            r"targets\[0\] has \d+ target tokens; at most 127 before EOS",
        ),
        (["a house"], ["x" * 9000], r"targets\[0\] has 9000 characters"),
    ],
)
def test_impossible_requests_are_invalid(stub, texts, targets, match):
    error = rpc_error(lambda: stub.Score(pb.ScoreRequest(texts=texts, targets=targets)))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error.details() and __import__("re").search(match, error.details()), error.details()


def test_unknown_model_and_bad_penalty_are_invalid(stub):
    request = pb.ScoreRequest(texts=["a"], targets=["b"], model="nope")
    error = rpc_error(lambda: stub.Score(request))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT and "unknown model" in error.details()
    request = pb.ScoreRequest(
        texts=["a"], targets=["b"], options=pb.ScoreOptions(length_penalty=float("nan"))
    )
    error = rpc_error(lambda: stub.Score(request))
    assert error.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "length_penalty must be in [0, 5]" in error.details()


def test_translate_token_scores_are_what_score_gives(stub, pairs):
    """``return_token_scores``: each hypothesis's token log-probs (greedy and beam n-best),
    adding up to its log-prob, equal to what Score gives the same tokens."""
    texts, _ = pairs
    for beam in (1, 3):
        options = pb.DecodeOptions(
            beam_size=beam, n_best=beam, max_length=30, return_token_scores=True, return_scores=True
        )
        reply = stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)
        plain = stub.Translate(
            pb.TranslateRequest(
                texts=texts, options=pb.DecodeOptions(beam_size=beam, n_best=beam, max_length=30)
            ),
            timeout=TIMEOUT,
        )
        for t, p in zip(reply.translations, plain.translations, strict=True):
            assert [h.tokens for h in t.hypotheses] == [h.tokens for h in p.hypotheses]
            assert not any(h.token_log_probs for h in p.hypotheses)
            for h in t.hypotheses:
                assert sum(h.token_log_probs) == pytest.approx(h.log_prob, abs=1e-4)
    # the best greedy hypotheses that ended with EOS, scored as Score scores them
    options = pb.DecodeOptions(max_length=30, return_token_scores=True)
    reply = stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)
    ended = [
        (text, h) for text, t in zip(texts, reply.translations, strict=True)
        for h in t.hypotheses[:1] if len(h.token_log_probs) == len(h.tokens) + 1
    ]  # fmt: skip
    assert ended
    for text, h in ended:
        # the translation's own tokens, forced (its text could split otherwise)
        (got,) = score(stub, [text], [h.text]).translations
        if list(got.hypotheses[0].tokens) == list(h.tokens):
            assert list(got.hypotheses[0].token_log_probs) == pytest.approx(
                list(h.token_log_probs), abs=1e-5
            )
