"""``split_sentences`` (:mod:`service.sentences`): a text cut into its sentences, each
translated as a text of its own would be, the translations joined back with the text's
own whitespace; what does not join is refused."""

from __future__ import annotations

import json

import grpc
import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from service import sentences
from tests.service.server_helpers import TIMEOUT, rpc_error, stub_for
from tests.service.test_httpapi import post


@pytest.mark.parametrize(
    ("text", "want", "separators"),
    [
        (
            "I need to buy new shoes. She is looking for a new job. Can you help me?",
            ["I need to buy new shoes.", "She is looking for a new job.", "Can you help me?"],
            [" ", " ", ""],
        ),
        ("One sentence only.", ["One sentence only."], [""]),
        ("  no end mark  ", ["no end mark"], [""]),
        # abbreviations and initials, decimals, a lower-case word after the stop
        ("Mr. J. Smith paid 3.5 dollars, e.g. in cash. He left.",
         ["Mr. J. Smith paid 3.5 dollars, e.g. in cash.", "He left."], [" ", ""]),
        # closing quotes and brackets stay with their sentence; runs of marks
        ('"Stop!" he said. (Then he left.) Really?! Yes...',
         ['"Stop!" he said.', "(Then he left.)", "Really?!", "Yes..."], [" ", " ", " ", ""]),
        # Spanish opening marks; a line break always ends a sentence, and is kept
        ("¿Qué? ¡No!\n\nSegunda línea\nTercera.",
         ["¿Qué?", "¡No!", "Segunda línea", "Tercera."], [" ", "\n\n", "\n", ""]),
        ("A.  B.\r\nC.", ["A.  B.", "C."], ["\r\n", ""]),  # single letters: initials
        # a piece without a letter is no sentence: a list's number joins the next one,
        # a citation, an emoji or a zero-width space the one before (helper-90)
        ("1. Open it.\n2. Close it.", ["1. Open it.", "2. Close it."], ["\n", ""]),
        ("This is it. [1]", ["This is it. [1]"], [""]),
        ("It works. \U0001f642\U0001f642", ["It works. \U0001f642\U0001f642"], [""]),
        ("Hello there. \u200b", ["Hello there. \u200b"], [""]),
        ("1. 2. 3.", ["1. 2. 3."], [""]),
        # CJK full stops end a sentence with no space after them; U+2028 breaks a line
        ("這是一個句子。這是另一個。", ["這是一個句子。", "這是另一個。"], [" ", ""]),
        ("Line one\u2028Line two.", ["Line one", "Line two."], ["\u2028", ""]),
    ],
)  # fmt: skip
def test_split_finds_the_sentences_and_keeps_the_whitespace_between(text, want, separators):
    got = sentences.split(text)
    assert list(got.sentences) == want
    assert list(got.separators) == separators


def test_an_error_about_a_sentence_names_its_text():
    splits = [sentences.split("One."), sentences.split("Two. Three. Four.")]
    assert sentences.renamed("texts[0] is bad", splits) == "texts[0] is bad"
    assert sentences.renamed("texts[2] has 300 source tokens", splits) == (
        "texts[1] (its sentence 2 of 3) has 300 source tokens"
    )


@pytest.fixture(scope="module")
def server(server_factory):
    return server_factory(server={"http_port": 0})


@pytest.fixture(scope="module")
def stub(server):
    channel, grpc_stub = stub_for(server.port)
    yield grpc_stub
    channel.close()


def translate(stub, texts, **fields) -> pb.TranslateResponse:
    return stub.Translate(pb.TranslateRequest(texts=texts, **fields), timeout=TIMEOUT)


@pytest.mark.parametrize("beam", [1, 3])
def test_each_sentence_is_translated_as_alone_and_joined(stub, tiny_bundle, beam):
    a, b, c = tiny_bundle.sentences[:3]
    options = pb.DecodeOptions(beam_size=beam, return_scores=True)
    alone = translate(stub, [a, b, c], options=options).translations
    text = f"{a.rstrip('.')}. {b.rstrip('.')}.\n\n{c}"
    reply = translate(stub, [text, c], options=options, split_sentences=True)
    joined, single = reply.translations
    want = [alone[0].hypotheses[0], alone[1].hypotheses[0], alone[2].hypotheses[0]]
    assert len(joined.hypotheses) == 1
    got = joined.hypotheses[0]
    parts = [
        translate(stub, [s], options=options).translations[0].hypotheses[0]
        for s in sentences.split(text).sentences
    ]
    assert got.text == f"{parts[0].text} {parts[1].text}\n\n{parts[2].text}"
    assert list(got.tokens) == [t for p in parts for t in p.tokens]
    assert got.log_prob == pytest.approx(sum(p.log_prob for p in parts), abs=1e-4)
    assert got.score == pytest.approx(sum(p.score for p in parts), abs=1e-4)
    assert joined.source_tokens == sum(
        translate(stub, [s]).translations[0].source_tokens for s in sentences.split(text).sentences
    )
    # a text of one sentence: the same answer as without splitting
    assert single.hypotheses[0] == want[2]


def test_seeded_draws_of_a_text_do_not_depend_on_how_the_others_split(stub, tiny_bundle):
    """A text's first sentence draws what the text unsplit draws: keyed by its text's
    index, not by how many sentences the texts before it were cut into (helper-90)."""
    a, b, c = (s.rstrip(".") + "." for s in tiny_bundle.sentences[:3])
    drawn = pb.DecodeOptions(sampling_topk=50, sampling_temperature=2.0, seed=11)
    split = translate(stub, [f"{a} {b}", c], options=drawn, split_sentences=True)
    unsplit = translate(stub, ["x", c], options=drawn)
    assert split.translations[1].hypotheses[0].text == unsplit.translations[1].hypotheses[0].text
    alone = translate(stub, [a, "x"], options=drawn).translations[0].hypotheses[0].text
    assert split.translations[0].hypotheses[0].text.startswith(alone + " ")


@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"options": pb.DecodeOptions(beam_size=2, n_best=2)}, "n_best 2"),
        ({"options": pb.DecodeOptions(return_attention=True)}, "return_attention"),
        ({"options": pb.DecodeOptions(return_alignment=True)}, "return_alignment"),
        ({"options": pb.DecodeOptions(return_token_scores=True)}, "return_token_scores"),
        ({"options": pb.DecodeOptions(return_diagnostics=True)}, "return_diagnostics"),
        ({"target_prefix": ["la"]}, "target_prefix"),
    ],
)
def test_what_cannot_be_joined_is_refused(stub, tiny_bundle, fields, named):
    text = " ".join(tiny_bundle.sentences[:2])
    err = rpc_error(lambda: translate(stub, [text], split_sentences=True, **fields))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert f"split_sentences joins one translation per sentence: {named}" in err.details()


def test_the_sentences_count_against_the_request_limit(stub):
    text = " ".join(["Go home."] * 40)
    err = rpc_error(lambda: translate(stub, [text, text], split_sentences=True))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "the texts hold 80 sentences; the limit is 64 a request" in err.details()
    err = rpc_error(lambda: translate(stub, [text + " " + text], split_sentences=True))
    assert err.details().endswith("texts[0] holds 80 sentences; the limit is 64 a request: "
                                  "send it in parts")  # fmt: skip


def test_a_sentence_too_long_is_named_by_its_text(stub):
    text = "Go home. Then " + "word " * 200 + "end."
    err = rpc_error(lambda: translate(stub, ["Hi.", text], split_sentences=True))
    assert err.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.details().startswith("texts[1] (its sentence 2 of 2) has ")


def test_the_http_api_splits_too(server, stub, tiny_bundle):
    text = " ".join(tiny_bundle.sentences[:2])
    want = translate(stub, [text], split_sentences=True).translations[0].hypotheses[0].text
    status, _, body = post(server, "/v1/translate", {"texts": [text], "split_sentences": True})
    assert status == 200
    assert json.loads(body)["translations"][0]["hypotheses"][0]["text"] == want
