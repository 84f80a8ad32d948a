"""``nmt-convert opennmt-py`` on OpenNMT-py **1.x and 2.x** checkpoints against OpenNMT-py
1.2.0's and 2.3.0's own ``onmt_translate`` outputs (tests/fixtures/onmt_py1 and onmt_py2,
made by OpenNMT-py itself): the torchtext fields of the vocabulary are read into inert
stand-ins without OpenNMT-py or torchtext, and the converted bundle with that version's
decoding defaults gives OpenNMT-py's greedy translations and beam-5 n-best lists."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from export.eole_modules import EoleError
from export.onmt_py import DECODING, _legacy_vocab, load_onmt_py, read_checkpoint
from service.loop import decode
from tests.export.onmt_fixtures import convert, lines, sources, translate

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
VERSIONS = {"1.x": FIXTURES / "onmt_py1", "2.x": FIXTURES / "onmt_py2"}
FIXTURE_2X = VERSIONS["2.x"]
MODELS = [
    (version, p.name)
    for version, fixture in VERSIONS.items()
    for p in sorted(fixture.iterdir())
    if (p / "model.pt").is_file()
]


def _texts(fixture: Path, name: str, kind: str) -> list[str]:
    """``onmt_translate``'s outputs as text: 2.3.0's sentencepiece transform does not
    detokenise (it writes the pieces), so those are decoded here as 3.x would."""
    out = lines(fixture, name, kind)
    model = fixture / name / "joint_spm.model"
    if not model.is_file():
        return out
    import sentencepiece

    sp = sentencepiece.SentencePieceProcessor(model_file=str(model))
    return [sp.decode_pieces(line.split()) for line in out]


def test_the_fixtures_have_their_models():
    assert MODELS == [
        ("1.x", "brnn_lstm2_inputfeed_general"),
        ("1.x", "rnn_gru1_std_mlp_bridge"),
        ("2.x", "brnn_lstm1_dot_spm_shared"),
        ("2.x", "brnn_lstm2_inputfeed_general"),
        ("2.x", "rnn_gru1_std_mlp_bridge"),
    ]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory):
    """Each fixture model converted once per module, on first use."""
    done: dict = {}

    def get(version: str, name: str):
        if (version, name) not in done:
            out = tmp_path_factory.mktemp("onmt") / name / "1"
            done[version, name] = convert(VERSIONS[version], name, out)
        return done[version, name]

    return get


@pytest.fixture(params=MODELS, ids=[f"{v}-{n}" for v, n in MODELS])
def converted(request, bundles):
    version, name = request.param
    return version, VERSIONS[version], name, bundles(version, name)


def test_manifest_records_the_versions_decoding_defaults(converted):
    version, _, _, bundle = converted
    assert bundle.manifest["decoding"] == DECODING[version]
    assert bundle.manifest["source_model"]["origin"]["converter"] == "opennmt-py"
    assert bundle.manifest["source_model"]["origin"]["opennmt_py_options"] == version
    assert bundle.manifest["parity"]["greedy_mismatches"] == 0


def test_greedy_is_opennmt_pys(converted):
    _, fixture, name, bundle = converted
    got = [hyps[0] for hyps in translate(bundle, sources(fixture, name), 1)]
    want = _texts(fixture, name, "greedy")
    same = [g == w for g, w in zip(got, want, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]


def test_beam_is_opennmt_pys(converted):
    _, fixture, name, bundle = converted
    got = translate(bundle, sources(fixture, name), 5)
    want = _texts(fixture, name, "beam5")
    lists = [want[i : i + 5] for i in range(0, 1500, 5)]
    same = [g == w for g, w in zip(got, lists, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]


def test_beam_with_one_best_is_opennmt_pys(converted):
    """``-beam_size 5 -n_best 1`` (2.x still waits for 5 finished hypotheses before it
    ends; on these models the 1-best comes out the same under every end rule, Eole's
    included: 2026-11-26)."""
    _, fixture, name, bundle = converted
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=1)
    ids = [bundle.src_tokenizer.encode(line) for line in sources(fixture, name)]
    nbest = decode(bundle.model, ids, options=options, special=bundle.special)
    got = [bundle.tgt_tokenizer.decode(hyps[0].tokens) for hyps in nbest]
    want = _texts(fixture, name, "beam5_nbest1")
    same = [g == w for g, w in zip(got, want, strict=True)]
    assert sum(same) == 300, [i for i, s in enumerate(same) if not s][:10]


def test_eoles_end_of_search_would_not_be_opennmt_pys(converted):
    """What the ``opennmt-py-1``/``-2`` searches change: under Eole's end (the step's own
    best continuation EOS) 5-best lists differ from OpenNMT-py's: 4 and 93 of 300 for
    the 1.x models, 9, 1 and 79 for the 2.x ones (2026-11-26)."""
    _, fixture, name, bundle = converted
    eole = dataclasses.replace(bundle, decoding=dataclasses.replace(bundle.decoding, search="eole"))
    got = translate(eole, sources(fixture, name), 5)
    want = _texts(fixture, name, "beam5")
    lists = [want[i : i + 5] for i in range(0, 1500, 5)]
    assert sum(g != w for g, w in zip(got, lists, strict=True)) > 0


@pytest.mark.parametrize("name", [n for v, n in MODELS if v == "2.x"])
def test_scores_are_opennmt_pys(bundles, name):
    """``-with_score`` (2.x; 1.2.0 has no such option): each 5-best hypothesis's summed
    log-prob (no length penalty by default; a hypothesis cut at 100 tokens has no EOS
    term), within the float32 noise of another runtime."""
    fixture, bundle = FIXTURE_2X, bundles("2.x", name)
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=5)
    ids = [bundle.src_tokenizer.encode(line) for line in sources(fixture, name)]
    nbest = decode(bundle.model, ids, options=options, special=bundle.special)
    got = [h.score for hyps in nbest for h in hyps]
    want = [float(line.rsplit("\t", 1)[1]) for line in lines(fixture, name, "beam5.scores")]
    assert got == pytest.approx(want, abs=2e-4)


def _vocab(name: str = "brnn_lstm2_inputfeed_general") -> dict:
    return read_checkpoint(FIXTURE_2X / name / "model.pt")["vocab"]


def test_the_fields_become_token_lists_and_special_tokens():
    path = FIXTURE_2X / "brnn_lstm2_inputfeed_general" / "model.pt"
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


class _RunsCode:
    """What a malicious checkpoint pickles: unpickling it would call ``os.system``."""

    def __reduce__(self):
        import os

        return (os.system, ("touch /tmp/onmt-pickle-ran",))


class _PartialCall:
    """A ``functools.partial`` (allowed, as a stand-in) wrapping ``os.system``."""

    def __reduce__(self):
        import functools
        import os

        return (functools.partial, (os.system, "touch /tmp/onmt-pickle-ran"))


@pytest.mark.parametrize("payload", [_RunsCode, _PartialCall], ids=["reduce", "partial"])
def test_a_2x_checkpoint_that_pickles_code_is_refused_without_running_it(tmp_path, payload):
    import torch

    marker = Path("/tmp/onmt-pickle-ran")
    marker.unlink(missing_ok=True)
    path = tmp_path / "model.pt"
    torch.save({"model": {}, "generator": {}, "opt": {}, "vocab": {"src": payload()}}, path)
    with pytest.raises(EoleError, match="unreadable OpenNMT-py checkpoint"):
        load_onmt_py(path)
    assert not marker.exists()
