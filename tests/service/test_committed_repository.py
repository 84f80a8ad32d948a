"""The committed ``model_repository/``, served as ``nmt-serve`` serves it by default: both
demo models load side by side, ListModels shows both, ``model`` picks one, and each
answers like its own PyTorch checkpoint (greedy and beam, through a real gRPC server)."""

from __future__ import annotations

from pathlib import Path

import pytest

from models.checkpoint import load_checkpoint
from models.options import DecodeOptions
from models.translate import translate_texts
from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.committed import EN_ES_INT8_VERSION
from tests.service.server_fixtures import ServerFactory
from tests.service.server_helpers import TIMEOUT, proto_options, stub_for

ROOT = Path(__file__).resolve().parents[2]
PRETRAINED = ROOT / "models" / "pretrained"
MODELS = {  # name: (served version on CPU, precision, architecture)
    "en-es": (EN_ES_INT8_VERSION, "int8", ("gru", "additive", "bahdanau")),
    "en-es-luong": ("2", "fp32", ("lstm", "general", "luong")),
}
TEXTS = ["She is looking for a new job.", "I need to buy new shoes.", "Today is Monday."]


@pytest.fixture(scope="module")
def stub():
    factory = ServerFactory(ROOT / "model_repository")
    server = factory()
    channel, stub = stub_for(server.port)
    yield stub
    channel.close()
    factory.close()


def test_list_models_shows_both_demo_models(stub):
    models = {m.name: m for m in stub.ListModels(pb.ListModelsRequest(), timeout=TIMEOUT).models}
    assert set(models) == set(MODELS)
    assert models["en-es"].is_default and not models["en-es-luong"].is_default
    for name, (version, precision, _) in MODELS.items():
        assert (models[name].version, models[name].precision) == (version, precision), name


@pytest.mark.parametrize("beam", [1, 5], ids=["greedy", "beam5"])
def test_the_luong_model_answers_like_its_checkpoint(stub, beam):
    """fp32 bundle: token-identical to the PyTorch reference decoders."""
    ckpt = load_checkpoint(PRETRAINED / "en-es-luong" / "model.pt")
    cfg = ckpt.config
    assert (cfg.rnn_type, cfg.attention, cfg.placement) == MODELS["en-es-luong"][2]
    assert cfg.bidirectional and cfg.input_feed
    expected = translate_texts(
        ckpt.model, ckpt.src_tokenizer, ckpt.tgt_tokenizer, TEXTS,
        options=DecodeOptions(beam_size=beam),
    )  # fmt: skip
    request = pb.TranslateRequest(texts=TEXTS, model="en-es-luong", options=proto_options(beam))
    reply = stub.Translate(request, timeout=TIMEOUT)
    assert reply.model == "en-es-luong" and reply.model_version == "2"
    assert [t.hypotheses[0].text for t in reply.translations] == expected


def test_the_default_model_is_the_gru_demo(stub):
    reply = stub.Translate(pb.TranslateRequest(texts=TEXTS[:1]), timeout=TIMEOUT)
    assert (reply.model, reply.model_version) == ("en-es", EN_ES_INT8_VERSION)
    assert reply.translations[0].hypotheses[0].text == "Está buscando un trabajo nuevo."
