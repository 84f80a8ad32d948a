"""The token-banning options on the wire (``ban_unk``, ``block_ngram_repeat``,
``ignore_when_blocking``) and ``min_length``: a real server against the PyTorch
reference (:mod:`models.search`, which applies the same :class:`ScoringRules`), and the
precise errors for options it cannot take."""

from __future__ import annotations

import dataclasses
import re
from typing import get_args

import grpc
import pytest

from models.options import LENGTH_PENALTY_FORMS as SCORER_FORMS
from models.options import DecodeOptions
from nmt_api import LENGTH_PENALTY_FORMS
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_client.options import PenaltyForm
from service.errors import InvalidRequest
from service.messages import to_options
from tests.service.server_helpers import (
    TIMEOUT,
    assert_same_nbest,
    domain_options,
    proto_options,
    reference,
    rpc_error,
    served,
)

# 0 (LOOP_SENTENCE) runs to the length limit, repeating itself: blocking changes it
SENTENCES = (0, 1, 2, 5, 6, 7, 9, 13)


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(max_live_rows=256, max_beam_size=8, max_n_best=8)


@pytest.fixture(scope="module")
def texts(tiny_bundle):
    return [tiny_bundle.sentences[i] for i in SENTENCES]


def translate(stub, texts, options):
    return stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)


@pytest.mark.parametrize(
    ("beam", "fields"),
    [
        (1, {"block_ngram_repeat": 1}),
        (1, {"block_ngram_repeat": 1, "ban_unk": True, "min_length": 3}),
        (4, {"block_ngram_repeat": 2}),
        (4, {"block_ngram_repeat": 1, "ban_unk": True}),
    ],
)
def test_served_as_the_reference_bans(stub, texts, tiny_checkpoint, beam, fields):
    options = proto_options(beam=beam, n_best=beam, **fields)
    got = served(translate(stub, texts, options))
    want_options = dataclasses.replace(domain_options(options), **fields)
    assert_same_nbest(got, reference(tiny_checkpoint, texts, want_options))
    plain = served(translate(stub, texts, proto_options(beam=beam, n_best=beam)))
    assert got != plain  # the tiny model repeats itself: blocking changes something
    n = fields["block_ngram_repeat"]
    for hyps in got:
        for h in hyps:
            grams = [h.pieces[i : i + n] for i in range(len(h.pieces) - n + 1)]
            assert len(set(grams)) == len(grams), h.pieces


def test_ignore_when_blocking_names_target_tokens(stub, texts, tiny_checkpoint, tiny_bundle):
    plain = served(translate(stub, texts, proto_options(block_ngram_repeat=1)))
    # the token an unblocked translation repeats most, exempted: it may repeat again
    counts: dict[str, int] = {}
    for hyps in served(translate(stub, texts, proto_options())):
        for piece in set(hyps[0].pieces):
            counts[piece] = max(counts.get(piece, 0), hyps[0].pieces.count(piece))
    token = max(counts, key=counts.get)
    assert counts[token] > 1
    options = proto_options(block_ngram_repeat=1, ignore_when_blocking=[token])
    got = served(translate(stub, texts, options))
    tgt = tiny_checkpoint.tgt_tokenizer
    token_id = tgt.pieces(range(tgt.vocab_size)).index(token)
    want_options = DecodeOptions(block_ngram_repeat=1, ignore_when_blocking=(token_id,))
    assert_same_nbest(got, reference(tiny_checkpoint, texts, want_options))
    assert got != plain
    assert any(h[0].pieces.count(token) > 1 for h in got)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"block_ngram_repeat": 33}, "block_ngram_repeat must be between 0 .off. and 32"),
        (
            {"block_ngram_repeat": 2, "ignore_when_blocking": ["no-such-token"]},
            "ignore_when_blocking: 'no-such-token' not in the model's target vocabulary",
        ),
    ],
)
def test_bad_ban_options_are_invalid_argument(stub, texts, fields, message):
    msg = pb.DecodeOptions(**fields)
    err = rpc_error(lambda: translate(stub, texts[:1], msg))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert re.search(message, err.details()), err.details()


def test_min_length_on_the_wire(stub, texts, tiny_checkpoint):
    options = proto_options(beam=1, min_length=6)
    got = served(translate(stub, texts, options))
    want = reference(tiny_checkpoint, texts, DecodeOptions(min_length=6))
    assert_same_nbest(got, want)
    assert all(len(h[0].pieces) >= 6 for h in got)


def test_every_optional_field_but_the_seed_and_the_diverse_ones_falls_back_to_the_model():
    """A seed is drawn per request; a diversity rate or group strength is a request's alone
    (a model default would refuse every greedy request), and unset is off / 0.5."""
    from service.messages import MODEL_DEFAULTED

    fields = pb.DecodeOptions.DESCRIPTOR.fields_by_name
    optional = {n for n, f in fields.items() if f.has_presence}
    assert {*MODEL_DEFAULTED, "seed", "diversity_rate", "diverse_beam_strength"} == optional
    model = DecodeOptions(beam_size=4, diversity_rate=0.5)
    got = to_options(pb.DecodeOptions(), default_max_length=256, defaults=model)
    assert got.diversity_rate == 0
    msg = pb.DecodeOptions(beam_size=4, diversity_rate=1.5)
    assert to_options(msg, default_max_length=256).diversity_rate == 1.5
    msg = pb.DecodeOptions(beam_size=4, diverse_beam_groups=2)
    got = to_options(msg, default_max_length=256)
    assert (got.diverse_beam_groups, got.diverse_beam_strength) == (2, 0.5)
    msg.diverse_beam_strength = 2.0
    assert to_options(msg, default_max_length=256).diverse_beam_strength == 2.0


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"sampling_temperature": 0.5}, "sampling_temperature applies to random sampling only"),
        ({"sampling_topp": 0.9, "beam_size": 5}, "sampling_topp applies to random sampling"),
        ({"sampling_topk": 1, "sampling_temperature": 2.0}, "set sampling_topk > 1"),  # greedy
        ({"beam_size": 4, "diverse_beam_strength": 2.0}, "set diverse_beam_groups > 1"),
        ({"ignore_when_blocking": ["."]}, "applies to n-gram blocking only: set block_ngram"),
    ],
)
def test_an_option_the_decoding_would_ignore_is_refused(fields, match):
    with pytest.raises(InvalidRequest, match=match):
        to_options(pb.DecodeOptions(**fields), default_max_length=256, target_index={".": 4})


def test_a_models_own_beam_leaves_sampling_and_groups_their_own():
    model = DecodeOptions(beam_size=4, n_best=4)
    sampled = to_options(pb.DecodeOptions(sampling_topk=10), default_max_length=256, defaults=model)
    assert (sampled.beam_size, sampled.n_best, sampled.sampling) == (1, 1, True)
    grouped = to_options(
        pb.DecodeOptions(diverse_beam_groups=3, beam_size=6), default_max_length=256, defaults=model
    )
    assert (grouped.beam_size, grouped.diverse_beam_groups) == (6, 3)
    plain = to_options(pb.DecodeOptions(), default_max_length=256, defaults=model)
    assert (plain.beam_size, plain.n_best) == (4, 4)


def test_what_makes_an_option_apply_may_come_from_the_model():
    # n-gram blocking on by the model's default: its exceptions apply
    model = DecodeOptions(block_ngram_repeat=2)
    msg = pb.DecodeOptions(ignore_when_blocking=["."])
    got = to_options(msg, default_max_length=256, defaults=model, target_index={".": 4})
    assert got.ignore_when_blocking == (4,)
    # a model's sampling temperature is no request's: greedy requests still pass
    plain = to_options(pb.DecodeOptions(), default_max_length=256, defaults=DecodeOptions(
        sampling_temperature=0.5))  # fmt: skip
    assert not plain.sampling
    sampled = pb.DecodeOptions(sampling_topk=10, sampling_temperature=0.5, sampling_topp=0.9)
    sampled.seed = 3
    assert to_options(sampled, default_max_length=256).sampling_topp == pytest.approx(0.9)


def test_the_length_penalty_form_is_the_requests_else_the_models():
    model = DecodeOptions(length_penalty_form="gnmt")
    got = to_options(pb.DecodeOptions(), default_max_length=256, defaults=model)
    assert got.length_penalty_form == "gnmt"
    msg = pb.DecodeOptions(length_penalty_form=pb.LENGTH_PENALTY_AVERAGE)
    assert to_options(msg, default_max_length=256, defaults=model).length_penalty_form == "average"
    assert to_options(pb.DecodeOptions(), default_max_length=256).length_penalty_form == ""
    with pytest.raises(
        InvalidRequest,
        match=r"unknown length_penalty_form 7: use LENGTH_PENALTY_AVERAGE \(1\), "
        r"LENGTH_PENALTY_GNMT \(2\) or leave it unset",
    ):
        to_options(pb.DecodeOptions(length_penalty_form=7), default_max_length=256)


def test_the_wire_names_of_the_length_penalty_forms_are_the_scorers():
    # nmt_api's names for the proto's values are the forms the scorer knows, all of them
    assert sorted(LENGTH_PENALTY_FORMS) == sorted(f for f in SCORER_FORMS if f)
    assert sorted(get_args(PenaltyForm)) == sorted(LENGTH_PENALTY_FORMS)  # the client's type
    for name, number in LENGTH_PENALTY_FORMS.items():
        msg = pb.DecodeOptions(length_penalty_form=number)
        assert to_options(msg, default_max_length=256).length_penalty_form == name


def test_options_fall_back_to_the_models_defaults():
    model = DecodeOptions(ban_unk=True, block_ngram_repeat=3, min_length=0)
    got = to_options(pb.DecodeOptions(), default_max_length=256, defaults=model)
    assert (got.ban_unk, got.block_ngram_repeat, got.min_length) == (True, 3, 0)
    msg = pb.DecodeOptions(ban_unk=False, block_ngram_repeat=0, min_length=2)
    got = to_options(msg, default_max_length=256, defaults=model)
    assert (got.ban_unk, got.block_ngram_repeat, got.min_length) == (False, 0, 2)
    plain = to_options(pb.DecodeOptions(), default_max_length=256)
    assert (plain.ban_unk, plain.block_ngram_repeat, plain.ignore_when_blocking) == (False, 0, ())


def test_ignore_when_blocking_lists_are_bounded():
    msg = pb.DecodeOptions(block_ngram_repeat=2, ignore_when_blocking=["."] * 1025)
    with pytest.raises(InvalidRequest, match="lists 1025 tokens: give at most 1024"):
        to_options(msg, default_max_length=256, target_index={".": 5})
    msg = pb.DecodeOptions(block_ngram_repeat=2, ignore_when_blocking=[".", ".", ","])
    got = to_options(msg, default_max_length=256, target_index={".": 5, ",": 4})
    assert got.ignore_when_blocking == (4, 5)


def test_replace_unk_is_refused_on_streams(stub, texts):
    request = pb.TranslateStreamRequest(text=texts[0], options=pb.DecodeOptions(replace_unk=True))
    err = rpc_error(lambda: list(stub.TranslateStream(request, timeout=TIMEOUT)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "replace_unk is for Translate" in err.details()


def test_replace_unk_keeps_the_attention_without_sending_it():
    got = to_options(pb.DecodeOptions(replace_unk=True), default_max_length=256)
    assert got.replace_unk and got.return_attention  # the loop keeps what it reads


@pytest.mark.parametrize(
    ("fields", "limit"),
    [
        ({"min_length": 1000}, "the length limit, "),
        ({"min_length": 300, "max_length": 20}, "limit, 20 target tokens with EOS"),
        ({"max_length": 1}, "min_length 1 leaves no room"),  # the default min_length, 1
    ],
)
def test_a_min_length_the_limit_leaves_no_room_for_is_refused(stub, texts, fields, limit):
    """It was served padded to the limit with whatever the model ranked next, or empty at
    max_length 1 (helper-80's audit); fairseq refuses --min-len over its max_len too."""
    err = rpc_error(lambda: translate(stub, texts[:1], proto_options(**fields)))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("texts[0]: min_length ") and limit in err.details()
    assert "lower min_length below" in err.details()
    assert translate(stub, texts[:1], proto_options(min_length=3)).translations
