"""The response cache (``--response-cache``, service/cache.py): a sentence seen before is
answered with exactly what decoding it gives, without decoding it; what may not be
cached is decoded every time."""

from __future__ import annotations

import grpc
import pytest

from models.options import DecodeOptions
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.cache import ResponseCache, cacheable
from tests.service.server_helpers import TIMEOUT, stub_for


def test_the_least_recently_used_sentence_goes_first():
    seen: list[tuple[bool, int]] = []
    cache = ResponseCache(2, lambda hit, n: seen.append((hit, n)))
    options = DecodeOptions()
    a, b, c = ((1,), options), ((2,), options), ((3,), options)
    cache.put(a, ["A"])
    cache.put(b, ["B"])
    assert cache.get(a) == ["A"]  # a is now the most recent: b goes next
    cache.put(c, ["C"])
    assert (cache.get(a), cache.get(b), cache.get(c)) == (["A"], None, ["C"])
    assert cache.get(((1,), DecodeOptions(beam_size=5))) is None  # other options: other key
    assert len(cache) == 2
    cache.count(3, 1)
    assert seen == [(True, 3), (False, 1)]
    with pytest.raises(ValueError, match="at least 1 sentence"):
        ResponseCache(0)


@pytest.mark.parametrize(
    ("options", "kwargs", "expected"),
    [
        (DecodeOptions(beam_size=5, n_best=3, return_attention=True), {}, True),
        (DecodeOptions(sampling_topk=5, seed=3), {}, False),
        (DecodeOptions(replace_unk=True, return_attention=True), {}, False),
        (DecodeOptions(), {"streamed": True}, False),
        (DecodeOptions(), {"prefixes": [(), (4,)]}, False),
        (DecodeOptions(), {"constraints": [None, object()]}, False),
    ],
)
def test_what_may_be_cached(options, kwargs, expected):
    given = {"streamed": False, "prefixes": [(), ()], "constraints": [None, None]} | kwargs
    assert cacheable(options, **given) is expected


@pytest.fixture(scope="module")
def cached(server_factory):
    server = server_factory(response_cache=100)
    channel, stub = stub_for(server.port)
    yield server, stub
    channel.close()


@pytest.fixture(scope="module")
def plain(server_factory):
    server = server_factory()
    channel, stub = stub_for(server.port)
    yield server, stub
    channel.close()


def _sample(registry, result: str) -> float:
    value = registry.get_sample_value("nmt_response_cache_sentences_total", {"result": result})
    return value or 0.0


def _translate(stub, texts, **options) -> pb.TranslateResponse:
    request = pb.TranslateRequest(texts=texts, options=pb.DecodeOptions(**options))
    return stub.Translate(request, timeout=TIMEOUT)


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"beam_size": 4, "n_best": 3, "return_scores": True, "return_attention": True},
        {"beam_size": 3, "return_alignment": True, "return_token_scores": True},
    ],
    ids=["greedy", "beam-attention", "beam-alignment"],
)
def test_a_repeat_is_answered_as_decoding_answers_it(cached, plain, tiny_bundle, options):
    server, stub = cached
    _, reference = plain
    texts = list(tiny_bundle.sentences[:4])
    want = _translate(reference, texts, **options).translations
    hits = _sample(server.registry, "hit")
    first = _translate(stub, texts[:2], **options).translations  # two decoded, kept
    assert _sample(server.registry, "hit") == hits
    again = _translate(stub, texts, **options)  # two found, two decoded
    assert _sample(server.registry, "hit") == hits + 2
    assert list(first) == list(want[:2])
    assert list(again.translations) == list(want)
    whole = _translate(stub, texts, **options)  # all four found: no decoding at all
    assert _sample(server.registry, "hit") == hits + 6
    assert list(whole.translations) == list(want)
    assert whole.timing.decode_ms == 0.0 and whole.timing.encode_ms == 0.0


def test_sampling_is_decoded_every_time(cached, tiny_bundle):
    server, stub = cached
    texts = list(tiny_bundle.sentences[5:7])
    misses = _sample(server.registry, "miss")
    hits = _sample(server.registry, "hit")
    first = _translate(stub, texts, sampling_topk=50)
    second = _translate(stub, texts, sampling_topk=50)  # no seed: other draws
    assert [t.hypotheses[0].text for t in first.translations] != [
        t.hypotheses[0].text for t in second.translations
    ]
    assert (_sample(server.registry, "hit"), _sample(server.registry, "miss")) == (hits, misses)


def test_a_refused_request_leaves_nothing_behind(cached, tiny_bundle):
    server, stub = cached
    with pytest.raises(grpc.RpcError) as err:
        _translate(stub, [tiny_bundle.sentences[0], ""])
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    cache = server.engines["tiny"].response_cache
    assert cache is not None and len(cache) <= cache.size


def test_the_flag_is_checked():
    from service.limits import EngineConfig

    with pytest.raises(ValueError, match="response_cache must be 0 .off. to 1,000,000"):
        EngineConfig(response_cache=-1)
    assert EngineConfig().response_cache == 0


def test_the_cache_works_in_front_of_an_engine_process(server_factory, plain, tiny_bundle):
    """With --engine-process the front end keeps the cache; the engine process never sees
    a sentence found there."""
    server = server_factory(response_cache=10, server={"engine_process": "on"})
    _, reference = plain
    texts = list(tiny_bundle.sentences[:3])
    want = _translate(reference, texts, beam_size=2).translations
    channel, stub = stub_for(server.port)
    with channel:
        assert list(_translate(stub, texts, beam_size=2).translations) == list(want)
        again = _translate(stub, texts, beam_size=2)
    assert list(again.translations) == list(want) and again.timing.decode_ms == 0.0
    assert _sample(server.registry, "hit") == 3 and _sample(server.registry, "miss") == 3
