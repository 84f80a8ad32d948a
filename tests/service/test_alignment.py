"""Hard alignments (``return_alignment``): the argmax of each target step's attention over
the source's own tokens, as :mod:`service.alignment` reads it, on the wire (gRPC and
HTTP/JSON; Translate, TranslateStream and Score) and in the Python client. fairseq's own
``--print-alignment hard`` output is the outside truth in tests/export/test_fairseq.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
from google.protobuf import json_format

from models.options import Hypothesis
from nmt_api.nmt.v1 import translator_pb2 as pb
from nmt_client.results import Hypothesis as ClientHypothesis
from service.alignment import hard_alignment, replace_unknowns, source_span
from service.front import EngineFront
from service.messages import to_options, to_score_options, to_translation
from tests.service.server_helpers import TIMEOUT, proto_options
from tests.service.test_front import MARKER_HYP, TEXT, AnsweringFront, word_bundle
from tests.service.test_httpapi import post


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(server={"http_port": 0}, max_beam_size=8, max_n_best=8)


@pytest.fixture(scope="module")
def texts(tiny_bundle):
    return list(tiny_bundle.sentences[:6])


def matrix(h: pb.Hypothesis) -> np.ndarray:
    return np.asarray(h.attention.values, dtype=np.float32).reshape(
        h.attention.rows, h.attention.cols
    )


def test_the_span_leaves_out_markers_and_padding():
    assert source_span(["a", "b", "c"]) == (0, 3)
    assert source_span(["<s>", "a", "b", "</s>"], (1, 1)) == (1, 3)
    assert source_span(["<s>", "a", "</s>", "<pad>", "<pad>"], (1, 1), "<pad>") == (1, 2)
    first, end = source_span(["<s>", "</s>"], (1, 1))
    assert first >= end  # no token of its own


def test_the_alignment_is_the_first_argmax_in_the_span():
    attention = np.array(
        [[0.9, 0.05, 0.05, 0.0], [0.1, 0.2, 0.2, 0.5], [0.0, 0.1, 0.6, 0.3]], dtype=np.float32
    )
    # the marker's weight never counts; a tie goes to the first
    assert hard_alignment(attention, (1, 3), 3) == [0, 0, 1]
    assert hard_alignment(attention, (0, 4), 2) == [0, 3]  # only the first `steps` rows
    assert hard_alignment(attention, (2, 2), 3) == []  # an empty span: nothing to align to
    assert hard_alignment(attention, (0, 4), 0) == []


def test_replace_unk_copies_the_aligned_source_token():
    hyp = Hypothesis(
        tokens=(1, 4, 1),
        score=0.0,
        log_prob=0.0,
        attention=np.array([[0.2, 0.7, 0.1], [0.9, 0.0, 0.1], [0.1, 0.3, 0.6], [0, 0, 1.0]]),
    )
    got = replace_unknowns(["<unk>", "casa", "<unk>"], hyp, ["Zyx", "Qor", "EOS"], 1, (0, 1))
    assert got == ["Qor", "casa", "Qor"]  # the last step's most attended is EOS: not copied


def test_a_message_carries_the_alignment_and_the_pieces_it_indexes():
    """Markers around the source (``<sos> hello zyx world <eos>``) are neither indexed nor
    listed; a step whose attention peaks on a marker aligns to its best real token."""
    front: EngineFront = AnsweringFront(word_bundle(), [MARKER_HYP])
    _, (result,) = front.translate([TEXT], to_options(pb.DecodeOptions(), default_max_length=9))
    msg = to_translation(result, scores=False, attention=False, alignment=True)
    # as the model read them: a word its vocabulary lacks is its unknown token
    assert list(msg.source_pieces) == ["hello", "<unk>", "world"]
    assert msg.source_tokens == 5  # the markers still count here, as before
    assert list(msg.hypotheses[0].alignment) == [0, 1, 0]  # rows 0 and 2 peak on <sos>
    plain = to_translation(result, scores=False, attention=False)
    assert not plain.source_pieces and not plain.hypotheses[0].alignment


def test_asking_for_alignments_keeps_the_attention_without_sending_it():
    assert to_options(
        pb.DecodeOptions(return_alignment=True), default_max_length=9
    ).return_attention
    assert to_score_options(pb.ScoreOptions(return_alignment=True), max_length=9).return_attention
    assert not to_options(pb.DecodeOptions(), default_max_length=9).return_attention


@pytest.mark.parametrize(("beam", "n_best"), [(1, 1), (4, 3)])
def test_translate_aligns_every_hypothesis_to_its_attention(server, stub, texts, beam, n_best):
    marks = server.engines["tiny"].bundle.source_marks
    options = proto_options(beam=beam, n_best=n_best, return_alignment=True)
    options.return_attention = True
    reply = stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)
    aligned = 0
    for t in reply.translations:
        labels = list(t.hypotheses[0].attention.source_tokens)
        first, end = marks[0], len(labels) - marks[1]
        assert list(t.source_pieces) == labels[first:end] and t.source_pieces
        assert len(t.hypotheses) == n_best
        for h in t.hypotheses:
            assert len(h.alignment) == len(h.tokens)
            want = matrix(h)[: len(h.tokens), first:end].argmax(axis=1)
            assert list(h.alignment) == want.tolist()
            aligned += len(h.alignment)
    assert aligned > 0
    # without the option: no alignment, no pieces, and the same translations
    options.return_alignment = False
    plain = stub.Translate(pb.TranslateRequest(texts=texts, options=options), timeout=TIMEOUT)
    for got, was in zip(plain.translations, reply.translations, strict=True):
        assert not got.source_pieces and not any(h.alignment for h in got.hypotheses)
        assert [h.tokens for h in got.hypotheses] == [h.tokens for h in was.hypotheses]


def test_an_alignment_alone_sends_no_attention(stub, texts):
    options = proto_options(return_alignment=True)
    reply = stub.Translate(pb.TranslateRequest(texts=texts[:2], options=options), timeout=TIMEOUT)
    h = reply.translations[0].hypotheses[0]
    assert h.alignment and not h.HasField("attention")


def test_score_aligns_the_given_target(server, stub, texts, tiny_bundle):
    marks = server.engines["tiny"].bundle.source_marks
    targets = list(tiny_bundle.sentences[6 : 6 + len(texts)])  # any text will do
    options = pb.ScoreOptions(return_alignment=True, return_attention=True)
    scored = stub.Score(
        pb.ScoreRequest(texts=texts, targets=targets, options=options), timeout=TIMEOUT
    )
    for t in scored.translations:
        (h,) = t.hypotheses
        first, end = marks[0], h.attention.cols - marks[1]
        assert list(t.source_pieces) == list(h.attention.source_tokens)[first:end]
        want = matrix(h)[: len(h.tokens), first:end].argmax(axis=1)
        assert list(h.alignment) == want.tolist() and len(h.alignment) == len(h.tokens) > 0


def test_a_streams_final_message_carries_the_alignment(stub, texts):
    request = pb.TranslateStreamRequest(
        text=texts[1], options=proto_options(beam=3, n_best=2, return_alignment=True)
    )
    final = list(stub.TranslateStream(request, timeout=TIMEOUT))[-1]
    assert final.final and final.translation.source_pieces
    for h in final.translation.hypotheses:
        assert len(h.alignment) == len(h.tokens)
        assert max(h.alignment) < len(final.translation.source_pieces)


def test_the_http_api_sends_it_as_proto3_json(server, stub, texts):
    # requests may spell fields either way; answers use the proto's names
    body = {"texts": texts[:2], "options": {"returnAlignment": True, "beam_size": 2}}
    status, _, data = post(server, "/v1/translate", body)
    assert status == 200
    answer = json.loads(data)
    grpc_reply = stub.Translate(
        pb.TranslateRequest(texts=texts[:2], options=proto_options(beam=2, return_alignment=True)),
        timeout=TIMEOUT,
    )
    for got, want in zip(answer["translations"], grpc_reply.translations, strict=True):
        assert got["source_pieces"] == list(want.source_pieces)
        assert got["hypotheses"][0]["alignment"] == list(want.hypotheses[0].alignment)
    json_format.ParseDict(answer, pb.TranslateResponse())  # nothing the proto lacks


def test_the_client_reads_it_and_writes_pharaoh():
    msg = pb.Hypothesis(text="la casa", tokens=["la", "casa"], alignment=[1, 0])
    hyp = ClientHypothesis.from_proto(msg, scores=False, alignment=True)
    assert hyp.alignment == (1, 0) and hyp.pharaoh() == "1-0 0-1"
    empty = ClientHypothesis.from_proto(pb.Hypothesis(), scores=False, alignment=True)
    assert empty.alignment == () and empty.pharaoh() == ""
    unasked = ClientHypothesis.from_proto(msg.__class__(text="x"), scores=False)
    with pytest.raises(ValueError, match="translate with return_alignment=True"):
        unasked.pharaoh()
