"""Random sampling on the wire (``sampling_topk``, ``sampling_temperature``, ``seed``):
a real server, reproducible by seed, streamed as decoded, refused with beam search."""

from __future__ import annotations

import grpc
import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from service.messages import to_options
from tests.service.server_helpers import TIMEOUT, proto_options, rpc_error, stub_for


@pytest.fixture(scope="module")
def stub(server_factory):
    channel, stub = stub_for(server_factory(max_live_rows=256).port)
    yield stub
    channel.close()


@pytest.fixture(scope="module")
def texts(tiny_bundle):
    return list(tiny_bundle.sentences[:12])


def hypotheses(stub, texts, options) -> list[tuple[str, float]]:
    reply = stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)
    return [(t.hypotheses[0].text, t.hypotheses[0].log_prob) for t in reply.translations]


def test_a_seed_fixes_the_draws_and_an_unset_one_does_not(stub, texts):
    seeded = proto_options(sampling_topk=50, seed=7)
    first = hypotheses(stub, texts, seeded)
    assert hypotheses(stub, texts, seeded) == first
    # the same sentence first in another request: its index, not its batch mates, fixes it
    assert hypotheses(stub, texts[:1] + texts[6:], seeded)[0] == first[0]
    assert hypotheses(stub, texts, proto_options(sampling_topk=50, seed=8)) != first
    unseeded = proto_options(sampling_topk=50)
    assert hypotheses(stub, texts, unseeded) != hypotheses(stub, texts, unseeded)
    greedy = hypotheses(stub, texts, proto_options())
    assert first != greedy
    assert hypotheses(stub, texts, proto_options(sampling_topk=1, seed=7)) == greedy


def test_n_best_samples_are_drawn_each_on_its_own(stub, texts):
    """n_best 4 with sampling: four samples a sentence (beam_size unset: as many as
    n_best), best score first, the first of them what one sample draws; beam_size 4 with
    n_best unset: the best of four."""
    drawn = {"sampling_topk": 50, "sampling_temperature": 2.0, "seed": 7}
    request = pb.TranslateRequest(texts=texts, options=pb.DecodeOptions(n_best=4, **drawn))
    reply = stub.Translate(request, timeout=TIMEOUT)
    assert stub.Translate(request, timeout=TIMEOUT).translations == reply.translations
    one = hypotheses(stub, texts, pb.DecodeOptions(**drawn))
    for translation, (text, log_prob) in zip(reply.translations, one, strict=True):
        hyps = translation.hypotheses
        assert len(hyps) == 4
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert (text, log_prob) in [(h.text, h.log_prob) for h in hyps]
    assert any(len({h.text for h in t.hypotheses}) > 1 for t in reply.translations)
    best = stub.Translate(
        pb.TranslateRequest(texts=texts, options=pb.DecodeOptions(beam_size=4, **drawn)),
        timeout=TIMEOUT,
    )
    assert [[h.text for h in t.hypotheses] for t in best.translations] == [
        [t.hypotheses[0].text] for t in reply.translations
    ]


def test_a_stream_draws_what_translate_draws(stub, texts):
    options = proto_options(sampling_topk=20, sampling_temperature=1.5, sampling_topp=0.9, seed=3)
    (want,) = hypotheses(stub, texts[:1], options)
    request = pb.TranslateStreamRequest(text=texts[0], options=options)
    final = list(stub.TranslateStream(request, timeout=TIMEOUT))[-1]
    assert final.final and final.text == want[0]


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"sampling_topk": 10, "beam_size": 4, "diversity_rate": 1.0}, "samples independently"),
        ({"sampling_topk": 10, "n_best": 3, "beam_size": 2}, "n_best must be between 1 and"),
        ({"sampling_topk": 10, "sampling_temperature": 0.0}, "sampling_temperature must be in"),
        ({"sampling_topk": 10, "sampling_temperature": 1e9}, "sampling_temperature must be in"),
        ({"sampling_topk": 10, "sampling_topp": 2.0}, "sampling_topp must be in (0, 1]"),
    ],
)
def test_bad_sampling_options_are_invalid_argument(stub, texts, fields, message):
    msg = pb.DecodeOptions(**fields)
    err = rpc_error(lambda: stub.Translate(pb.TranslateRequest(texts=texts[:1], options=msg)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert message in err.details()


@pytest.mark.parametrize("strategy", [pb.STRATEGY_UNSPECIFIED, pb.STRATEGY_BEAM])
def test_sampling_draws_n_best_samples_when_the_beam_is_unset(strategy):
    """Whatever the strategy says (STRATEGY_BEAM gave the default beam of 5, which the
    client library's batch sizing did not expect: helper-90)."""
    for n_best, samples in ((0, 1), (3, 3)):
        msg = pb.DecodeOptions(sampling_topk=5, n_best=n_best, strategy=strategy)
        assert to_options(msg, default_max_length=256).beam_size == samples


def test_an_unset_seed_is_drawn_per_request():
    a = to_options(pb.DecodeOptions(sampling_topk=5), default_max_length=256).seed
    b = to_options(pb.DecodeOptions(sampling_topk=5), default_max_length=256).seed
    assert a != b and 0 <= a < 2**64
    assert to_options(pb.DecodeOptions(seed=0), default_max_length=256).seed == 0
    assert to_options(pb.DecodeOptions(), default_max_length=256).seed == 0  # no sampling


def test_sampled_requests_have_their_own_latency_label():
    from models.options import DecodeOptions
    from service.messages import strategy_label

    labels = [
        strategy_label(o)
        for o in (DecodeOptions(), DecodeOptions(beam_size=3), DecodeOptions(sampling_topk=9))
    ]
    assert labels == ["greedy", "beam", "sampling"]


def test_sampling_topk_over_the_servers_limit_is_refused(stub, texts):
    err = rpc_error(
        lambda: stub.Translate(
            pb.TranslateRequest(texts=texts[:1], options=pb.DecodeOptions(sampling_topk=101))
        )
    )
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "sampling_topk 101 > max 100: use sampling_topk <= 100" in err.details()
