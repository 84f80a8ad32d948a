"""``nmt-convert opennmt-py`` on OpenNMT-py **2.x** checkpoints against OpenNMT-py 2.3.0's
own ``onmt_translate`` outputs (tests/fixtures/onmt_py2, made by OpenNMT-py itself): the
torchtext fields of the vocabulary are read into inert stand-ins without OpenNMT-py or
torchtext, and the converted bundle with 2.x's decoding defaults gives OpenNMT-py's greedy
translations and beam-5 n-best lists."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from export.eole_modules import EoleError
from export.onmt_py import ONMT2_DECODING, _legacy_vocab, load_onmt_py, read_checkpoint
from service.loop import decode
from tests.export.onmt_fixtures import convert, lines, sources, translate

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "onmt_py2"
MODELS = sorted(p.name for p in FIXTURE.iterdir() if (p / "model.pt").is_file())


def _texts(name: str, kind: str) -> list[str]:
    """``onmt_translate``'s outputs as text: 2.3.0's sentencepiece transform does not
    detokenise (it writes the pieces), so those are decoded here as 3.x would."""
    out = lines(FIXTURE, name, kind)
    model = FIXTURE / name / "joint_spm.model"
    if not model.is_file():
        return out
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(model))
    return [sp.decode_pieces(line.split()) for line in out]


def test_the_fixture_has_its_models():
    assert MODELS == [
        "brnn_lstm1_dot_spm_shared",
        "brnn_lstm2_inputfeed_general",
        "rnn_gru1_std_mlp_bridge",
    ]


@pytest.fixture(scope="module", params=MODELS)
def converted(request, tmp_path_factory):
    name = request.param
    return name, convert(FIXTURE, name, tmp_path_factory.mktemp("onmt2") / name / "1")


def test_manifest_records_the_2x_decoding_defaults(converted):
    _, bundle = converted
    assert bundle.manifest["decoding"] == ONMT2_DECODING
    assert bundle.manifest["source_model"]["origin"]["converter"] == "opennmt-py"
    assert bundle.manifest["source_model"]["origin"]["opennmt_py_options"] == "2.x"
    assert bundle.manifest["parity"]["greedy_mismatches"] == 0


def test_greedy_is_opennmt_pys(converted):
    name, bundle = converted
    got = [hyps[0] for hyps in translate(bundle, sources(FIXTURE, name), 1)]
    want = _texts(name, "greedy")
    same = [g == w for g, w in zip(got, want, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]


def test_beam_is_opennmt_pys(converted):
    name, bundle = converted
    got = translate(bundle, sources(FIXTURE, name), 5)
    want = _texts(name, "beam5")
    lists = [want[i : i + 5] for i in range(0, 1500, 5)]
    same = [g == w for g, w in zip(got, lists, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]


def test_beam_with_one_best_is_opennmt_pys(converted):
    """``-beam_size 5 -n_best 1`` (2.x still waits for 5 finished hypotheses before it
    ends; on these models the 1-best comes out the same under every end rule, Eole's
    included: 2026-11-26)."""
    name, bundle = converted
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=1)
    ids = [bundle.src_tokenizer.encode(line) for line in sources(FIXTURE, name)]
    nbest = decode(bundle.model, ids, options=options, special=bundle.special)
    got = [bundle.tgt_tokenizer.decode(hyps[0].tokens) for hyps in nbest]
    want = _texts(name, "beam5_nbest1")
    same = [g == w for g, w in zip(got, want, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]


def test_eoles_end_of_search_would_not_be_opennmt_py_2s(converted):
    """What the ``opennmt-py-2`` search changes: under Eole's end (the step's own best
    continuation EOS, n_best finished) 1, 79 and 9 of the three models' 300 5-best lists
    differ from 2.3.0's (brnn_lstm2, rnn_gru1, the sentencepiece model; 2026-11-26)."""
    name, bundle = converted
    eole = dataclasses.replace(bundle, decoding=dataclasses.replace(bundle.decoding, search="eole"))
    got = translate(eole, sources(FIXTURE, name), 5)
    want = _texts(name, "beam5")
    lists = [want[i : i + 5] for i in range(0, 1500, 5)]
    assert sum(g != w for g, w in zip(got, lists, strict=True)) > 0


def test_scores_are_opennmt_pys(converted):
    """``-with_score``: each 5-best hypothesis's summed log-prob (2.x has no length
    penalty by default; a hypothesis cut at 100 tokens has no EOS term), within the
    float32 noise of another runtime."""
    name, bundle = converted
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=5)
    ids = [bundle.src_tokenizer.encode(line) for line in sources(FIXTURE, name)]
    nbest = decode(bundle.model, ids, options=options, special=bundle.special)
    got = [h.score for hyps in nbest for h in hyps]
    want = [float(line.rsplit("\t", 1)[1]) for line in lines(FIXTURE, name, "beam5.scores")]
    assert got == pytest.approx(want, abs=2e-4)


def _vocab(name: str = "brnn_lstm2_inputfeed_general") -> dict:
    return read_checkpoint(FIXTURE / name / "model.pt")["vocab"]


def test_the_fields_become_token_lists_and_special_tokens():
    path = FIXTURE / "brnn_lstm2_inputfeed_general" / "model.pt"
    vocab = _legacy_vocab(path, _vocab())
    assert vocab["src"][:2] == ["<unk>", "<blank>"] and vocab["tgt"][:4] == [
        "<unk>",
        "<blank>",
        "<s>",
        "</s>",
    ]
    assert vocab["decoder_start_token"] == "<s>"
    assert vocab["specials"] == {"pad_token": "<blank>", "unk_token": "<unk>", "eos_token": "</s>"}
    m = load_onmt_py(path)
    assert (m.pad_id, m.unk_id, m.bos_id, m.eos_id) == (1, 0, 2, 3)
    assert m.options["opennmt_py_options"] == "2.x"


def _src_field(voc: dict):
    return voc["src"].fields[0][1]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda v: v["src"].fields.append(("src_feat_0", _src_field(v))), "src features \\(1"),
        (lambda v: setattr(_src_field(v), "lower", True), "lowercases its input \\(lower\\)"),
        (lambda v: setattr(_src_field(v), "pad_token", "<pad>"), "different pad_tokens"),
        (lambda v: delattr(_src_field(v).vocab, "itos"), "no token list \\(vocab.itos\\)"),
        (lambda v: v.update(tgt=["<unk>"]), "tgt vocabulary is not an OpenNMT-py 2.x field"),
    ],
    ids=["features", "lower", "specials", "no-itos", "not-a-field"],
)
def test_fields_it_cannot_serve_are_refused_by_name(change, message):
    voc = _vocab()
    change(voc)
    with pytest.raises(EoleError, match=message):
        _legacy_vocab(Path("model.pt"), voc)
