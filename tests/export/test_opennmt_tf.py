"""OpenNMT-tf 2.x RNN models, as ``tests/fixtures/opennmt_tf`` holds them (trained, decoded
and scored by OpenNMT-tf 2.32 on TensorFlow 2.13 itself; no tensorflow import here): the
model directory and its configuration -> bundle -> the service's decode loop and its gRPC
server, against ``onmt-main infer`` (greedy with attention, beam n-best lists with and
without a length penalty, a length limit) and ``onmt-main score``."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

from export.convert import main
from export.opennmt_tf_files import (
    MAX_DECODING_LENGTH,
    OpenNMTTFError,
    catalog_model,
    read_description,
)
from service.bundle import load_bundle
from service.loop import decode
from service.sessions import RuntimeConfig
from tests.export.helpers import served_with_attention

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "opennmt_tf"
# what OpenNMT-tf writes into the model directory for onmt-main --model_type NAME
CATALOG_DESCRIPTION = (
    'from opennmt import models\nmodel = lambda: models.get_model_from_catalog("%s")\n'
)
MODELS = ["small", "medium"]  # NMTSmallV1's shape; NMTMediumV1's, bidirectional, with tanh
# GRU cells (Luong, no tanh); BahdanauAttention (LSTM, tanh): a user's models of those parts
VARIANTS = ["gru", "bahdanau"]


def _argv(model: Path, out: Path, *configs: Path) -> list[str]:
    configs = configs or (model / "config.yml",)
    return ["opennmt-tf", str(model), "--config", *map(str, configs), "--out", str(out)]


@pytest.fixture(scope="module")
def bundles(tmp_path_factory) -> dict:
    """Each fixture model converted once: name -> (name, bundle, bundle directory)."""
    cache: dict = {}

    def get(name: str):
        if name not in cache:
            out = tmp_path_factory.mktemp(f"onmt-tf-{name}") / "m" / "1"
            assert main([*_argv(FIXTURE / name, out), "--parity-limit", "20",
                         "--beam-sentences", "10"]) == 0  # fmt: skip
            bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
            cache[name] = (name, bundle, out)
        return cache[name]

    return get


@pytest.fixture(params=MODELS + VARIANTS)
def converted(request, bundles):
    """Every fixture model: greedy, beam 5 3-best and references scored by OpenNMT-tf."""
    return bundles(request.param)


@pytest.fixture(params=MODELS)
def converted_full(request, bundles):
    """The two models with OpenNMT-tf's outputs for every option tested."""
    return bundles(request.param)


def _sources(bundle, n: int | None = None) -> list[list[int]]:
    lines = (FIXTURE / "inputs.en").read_text(encoding="utf-8").splitlines()[:n]
    return [bundle.src_tokenizer.encode(line) for line in lines]


def _predictions(path: Path) -> list[tuple[float, str, np.ndarray | None]]:
    """``onmt-main infer`` with ``with_scores``: ``score ||| text [||| alignments]``, the
    alignments one row a target token, rows separated by `` ; `` (over the batch's
    padded source width)."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        score, text, *rest = line.split(" ||| ")
        align = None
        if rest:
            align = np.array([[float(x) for x in r.split()] for r in rest[0].split(" ; ")])
        out.append((float(score), text, align))
    return out


def _text(bundle, tokens) -> str:
    return " ".join(bundle.tgt_tokenizer.tokens[t] for t in tokens)


def test_greedy_is_onmt_mains_with_its_scores_and_attention(converted):
    """All 330 inputs (trained on, new, with unknown words): OpenNMT-tf's greedy tokens,
    its score (the sum of the log-probs, ``</s>``'s included) and its soft alignments."""
    name, bundle, _ = converted
    want = _predictions(FIXTURE / name / "pred_greedy.txt")
    sources = _sources(bundle)
    assert sum(bundle.source_unk_id in s for s in sources) >= 10
    options = dataclasses.replace(bundle.decoding, return_attention=True)
    got = decode(bundle.model, sources, options=options, special=bundle.special)
    assert [_text(bundle, h.tokens) for (h,) in got] == [w[1] for w in want]
    assert len(want) == 330
    # float32 sums: relative to the score (a looping sentence sums 250 log-probs)
    gaps = [abs(h.log_prob - w[0]) / max(1.0, abs(w[0])) for (h,), w in zip(got, want, strict=True)]
    assert max(gaps) < 1e-4
    for ((h,), (_, _, align)), src in zip(zip(got, want, strict=True), sources, strict=True):
        # one row a token: OpenNMT-tf drops its last step's (</s>'s; at the length limit,
        # the last token's), the bundle keeps one for each step and its EOS
        limit = len(h.tokens) == MAX_DECODING_LENGTH
        assert h.attention.shape == (len(h.tokens) + 1, len(src))
        assert align.shape[0] == len(h.tokens) - limit
        assert np.abs(h.attention[: align.shape[0]] - align[:, : len(src)]).max() < 1e-4


def test_beam_n_best_lists_are_onmt_mains_in_its_order(converted):
    """Beam 5, 3-best: the same three hypotheses in the same order with the same printed
    scores, including where OpenNMT-tf's beam gives a finished hypothesis another's score
    when it changes place (the lists it then prints out of score order are among them)."""
    _check_beam(*converted[:2], "pred_beam5_nbest3.txt", 0.0)


def test_a_config_with_a_beam_makes_it_the_bundles_default(tmp_path, capsys):
    """The config onmt-main infer ran with (beam_width 5, n_best 3; auto_config's 4 the
    same way): the bundle loads, and a request that asks for no decoding of its own gets
    OpenNMT-tf's beam and n-best lists; one that asks for greedy gets greedy. A config
    that samples converts too, its sampling a request's to ask for (a note says so)."""
    from nmt_api.nmt.v1 import translator_pb2 as pb
    from service.messages import to_options

    small = FIXTURE / "small"
    out = tmp_path / "m" / "1"
    argv = _argv(small, out, small / "config.yml", FIXTURE / "infer_beam5.yml")
    assert main([*argv, "--parity-limit", "10", "--beam-sentences", "5"]) == 0
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    asked = to_options(pb.DecodeOptions(), default_max_length=256, defaults=bundle.decoding)
    assert (asked.beam_size, asked.n_best, asked.search) == (5, 3, "opennmt-tf")
    beam = to_options(
        pb.DecodeOptions(strategy=pb.STRATEGY_BEAM), default_max_length=256,
        defaults=bundle.decoding,
    )  # fmt: skip
    assert (beam.beam_size, beam.n_best) == (5, 3)
    other = to_options(
        pb.DecodeOptions(beam_size=2), default_max_length=256, defaults=bundle.decoding
    )
    assert (other.beam_size, other.n_best) == (2, 1)
    greedy = to_options(
        pb.DecodeOptions(strategy=pb.STRATEGY_GREEDY), default_max_length=256,
        defaults=bundle.decoding,
    )  # fmt: skip
    assert (greedy.beam_size, greedy.n_best) == (1, 1)
    _check_beam("small", dataclasses.replace(bundle, decoding=asked), "pred_beam5_nbest3.txt", 0.0)
    capsys.readouterr()
    sampled = tmp_path / "sample.yml"
    sampled.write_text("params: {sampling_topk: 5, sampling_temperature: 0.5}\n")
    out2 = tmp_path / "m" / "2"
    argv = _argv(small, out2, small / "config.yml", sampled)
    assert main([*argv, "--parity-limit", "5", "--beam-sentences", "2"]) == 0
    assert "decodes with sampling_topk 5, sampling_temperature 0.5: not a default" in (
        capsys.readouterr().err
    )
    assert not load_bundle(out2, RuntimeConfig(providers=("cpu",))).decoding.sampling


def test_beam_with_a_length_penalty_is_onmt_mains(converted_full):
    _check_beam(*converted_full[:2], "pred_beam5_lp06_nbest3_first50.txt", 0.6)


def _check_beam(name: str, bundle, predictions: str, length_penalty: float) -> None:
    want = _predictions(FIXTURE / name / predictions)
    n = len(want) // 3
    options = dataclasses.replace(
        bundle.decoding, beam_size=5, n_best=3, length_penalty=length_penalty
    )
    got = decode(bundle.model, _sources(bundle, n), options=options, special=bundle.special)
    texts = [[_text(bundle, h.tokens) for h in hyps] for hyps in got]
    assert texts == [[w[1] for w in want[3 * i : 3 * i + 3]] for i in range(n)]
    scores = np.array([h.score for hyps in got for h in hyps])
    wanted = np.array([w[0] for w in want])
    assert (np.abs(scores - wanted) / np.maximum(1.0, np.abs(wanted))).max() < 1e-4
    # the lists OpenNMT-tf prints out of score order: its beam's stale scores at work
    assert length_penalty or any(want[3 * i][0] < want[3 * i + 1][0] for i in range(n)), (
        "the fixture no longer shows OpenNMT-tf's stale beam scores"
    )


def test_its_length_limit_stops_without_the_end_token(converted_full, tmp_path):
    """``maximum_decoding_length: 5`` from a second --config file: five tokens, no </s>."""
    name, _, _ = converted_full
    out = tmp_path / "m" / "1"
    configs = (FIXTURE / name / "config.yml", FIXTURE / "infer_greedy_maxlen5.yml")
    assert main([*_argv(FIXTURE / name, out, *configs), "--parity-limit", "5"]) == 0
    bundle = load_bundle(out, RuntimeConfig(providers=("cpu",), intra_op_threads=1))
    want = _predictions(FIXTURE / name / "pred_greedy_maxlen5_first20.txt")
    got = decode(bundle.model, _sources(bundle, len(want)), special=bundle.special,
                 options=bundle.decoding)  # fmt: skip
    assert [_text(bundle, h.tokens) for (h,) in got] == [w[1] for w in want]
    assert max(len(h.tokens) for (h,) in got) == 5
    assert max(abs(h.log_prob - w[0]) for (h,), w in zip(got, want, strict=True)) < 1e-4


def test_references_score_as_onmt_main_scores_them(converted):
    _check_score(*converted[:2], "score_train20.txt", None, 0)


@pytest.mark.parametrize(
    ("scored", "targets", "first"),
    [("score_greedy_301_320.txt", "greedy_hyp_301_320.txt", 300),
     ("score_greedy_321_330.txt", "greedy_hyp_321_330.txt", 320)],
)  # fmt: skip
def test_its_own_outputs_score_as_onmt_main_scores_them(converted_full, scored, targets, first):
    _check_score(*converted_full[:2], scored, targets, first)


def _check_score(name: str, bundle, scored: str, targets: str | None, first: int) -> None:
    """``onmt-main score``: each target's negative log-likelihood (``</s>`` included) and
    its tokens' (``</s>`` not listed), against the bundle's forced decoding (the ``Score``
    path)."""
    lines = _predictions(FIXTURE / name / scored)
    sources = _sources(bundle, first + len(lines))[first:]
    forced = [tuple(bundle.tgt_tokenizer.encode(text)) + (bundle.special.eos,)
              for _, text, _ in lines]  # fmt: skip
    options = dataclasses.replace(bundle.decoding, return_token_scores=True, max_length=512)
    got = decode(bundle.model, sources, options=options, special=bundle.special, prefixes=forced)
    for ((h,), (nll, text, token_nll)), f in zip(zip(got, lines, strict=True), forced, strict=True):
        assert h.tokens == f[:-1]
        assert abs(-h.log_prob - nll) < 1e-4, text
        # the total counts </s>, the listed tokens do not
        assert np.abs(-np.array(h.token_log_probs[:-1]) - token_nll.ravel()).max() < 1e-4
    if targets:  # the model's own greedy outputs: as scored as they were found
        assert [t for _, t, _ in lines] == (FIXTURE / name / targets).read_text().splitlines()


def test_served_with_its_attention(converted_full, tmp_path):
    name, _, out = converted_full
    repo = tmp_path / "repo"
    shutil.copytree(out, repo / name / "1")
    texts = (FIXTURE / "inputs.en").read_text(encoding="utf-8").splitlines()[:5]
    want = _predictions(FIXTURE / name / "pred_greedy.txt")[:5]
    served = served_with_attention(repo, texts)
    for ((hyp, att), (_, text, align)), src in zip(
        zip(served, want, strict=True), texts, strict=True
    ):
        assert hyp.text == text
        assert list(hyp.attention.source_tokens) == src.split()
        assert np.abs(att[:-1] - align[:, : len(src.split())]).max() < 1e-4


def test_the_definition_is_read_not_run(tmp_path):
    """model_description.py as OpenNMT-tf writes it for a catalog model, and a user's file
    with what the weights cannot say (the attention layer's activation, the bridge)."""
    catalog = tmp_path / "model_description.py"
    catalog.write_text(CATALOG_DESCRIPTION % "NMTMediumV1")
    assert read_description(catalog) == catalog_model("NMTMediumV1")
    assert not catalog_model("NMTBigV1").tanh and catalog_model("LuongAttention").tanh
    assert read_description(FIXTURE / "small" / "model.py").tanh is False
    medium = read_description(FIXTURE / "medium" / "model.py")
    assert (medium.tanh, medium.bridge, medium.reducer) == (True, "copy", "concat")
    code = (FIXTURE / "small" / "model.py").read_text()
    trap = tmp_path / "trap.py"
    trap.write_text(code.replace("def model():", "raise SystemExit('ran')\ndef model():"))
    assert read_description(trap).tanh is False  # parsed, never executed


DESC = "model_description.py"


def _copy(model: str, tmp_path: Path) -> Path:
    target = tmp_path / model
    shutil.copytree(FIXTURE / model, target)
    return target


def _edit(name: str, old: str, new: str):
    def edit(model: Path) -> None:
        path = model / name
        text = path.read_text()
        assert old in text, (name, old)
        path.write_text(text.replace(old, new))

    return edit


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (_edit(DESC, "tfa.seq2seq.LuongAttention", "tfa.seq2seq.BahdanauAttention"),
         "names bahdanau attention but the weights are Luong attention's"),
        (_edit(DESC, "residual_connections=False", "residual_connections=True"),
         "residual_connections=True is not supported"),
        (_edit(DESC, "attention_layer_activation=None",
               "attention_layer_activation=tf.nn.relu"), "only tanh or None"),
        (_edit(DESC, "opennmt.layers.CopyBridge", "opennmt.layers.DenseBridge"),
         "bridge_class=opennmt.layers.DenseBridge is not supported"),
        (lambda m: (m / DESC).write_text(CATALOG_DESCRIPTION % "Transformer"),
         "not one of OpenNMT-tf's RNN models"),
        (lambda m: (m / DESC).unlink(), "give --model-type NAME"),
        (_edit("config.yml", "target_vocabulary: tgt.vocab", "target_vocabulary: src.vocab"),
         "is it this model's target vocabulary?"),
        (_edit("config.yml", "target_vocabulary: tgt.vocab", "target_vocabulary: nowhere.vocab"),
         "data/target_vocabulary 'nowhere.vocab' not found"),
        (_edit("config.yml", "beam_width: 1", "beam_width: 1\n  coverage_penalty: 0.2"),
         "params/coverage_penalty"),
        (_edit("config.yml", "data:\n", "data:\n  source_sequence_controls: {end: true}\n"),
         "data/source_sequence_controls"),
        (_edit("config.yml", "data:\n",
               "data:\n  source_tokenization: {type: SentencePieceTokenizer}\n"),
         "type SentencePieceTokenizer is not supported"),
        (lambda m: (m / "tgt.vocab").write_text((m / "tgt.vocab").read_text() + "de\n"),
         "lists 'de' twice"),
        (_edit(DESC, "residual_connections=False,\n        ),\n    )",
               "residual_connections=False,\n        ),\n"
               "        share_embeddings=opennmt.models.EmbeddingsSharingLevel.TARGET,\n    )"),
         "share_embeddings=opennmt.models.EmbeddingsSharingLevel.TARGET is not supported"),
    ],
    ids=["bahdanau", "residual", "relu", "dense-bridge", "transformer", "no-description",
         "other-vocabulary", "missing-vocabulary", "coverage", "source-controls",
         "tokenizer", "duplicate-token", "shared-embeddings"],
)  # fmt: skip
def test_what_it_cannot_reproduce_is_refused_in_one_line(tmp_path, capsys, edit, message):
    model = _copy("small", tmp_path)
    edit(model)
    assert main(_argv(model, tmp_path / "o" / "1")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_weights_of_another_model_are_refused_by_name(tmp_path):
    """Another model's checkpoint (the newer Keras tutorial's) under this converter."""
    from export.opennmt_tf import read_weights

    keras = FIXTURE.parent / "keras" / "text_tutorial" / "weights"
    with pytest.raises(OpenNMTTFError, match="not an OpenNMT-tf RNN sequence-to-sequence model"):
        read_weights(keras)


def test_a_target_prefix_under_its_beam_search(converted_full):
    """A forced prefix, then OpenNMT-tf's beam: every hypothesis continues the prefix, and
    each one's log-prob is what forcing its whole target gives (the beam's places start
    from the prefix's log-prob and length)."""
    _, bundle, _ = converted_full
    sources = _sources(bundle, 12)
    greedy = decode(bundle.model, sources, options=bundle.decoding, special=bundle.special)
    prefixes = [h.tokens[:2] for (h,) in greedy]
    options = dataclasses.replace(bundle.decoding, beam_size=4, n_best=3)
    got = decode(bundle.model, sources, options=options, special=bundle.special, prefixes=prefixes)
    hyps = [(i, h) for i, found in enumerate(got) for h in found]
    assert all(h.tokens[:2] == prefixes[i] for i, h in hyps) and len(hyps) == 36
    eos = bundle.special.eos
    forced = decode(bundle.model, [sources[i] for i, _ in hyps], special=bundle.special,
                    options=dataclasses.replace(bundle.decoding, max_length=512),
                    prefixes=[(*h.tokens, eos) for _, h in hyps])  # fmt: skip
    gaps = [abs(f.log_prob - h.log_prob) for (f,), (_, h) in zip(forced, hyps, strict=True)]
    assert max(gaps) < 1e-4
    # the scores count the prefix: each its own log-prob, but where a finished hypothesis
    # changed places (OpenNMT-tf's stale score)
    assert sum(abs(h.score - h.log_prob) < 1e-4 for _, h in hyps) >= 0.8 * len(hyps)


def test_probing_a_step_changes_nothing_in_its_beam(converted_full):
    """What the engine runs after a failed decoder step to find the sentence at fault
    (``DecodeLoop.probe``, selecting without taking) must leave OpenNMT-tf's beam places as
    they were: its search keeps them in what it takes, not in what it selects."""
    from service.decoding import make_search
    from service.loop import DecodeLoop

    _, bundle, _ = converted_full
    sources = _sources(bundle, 12)
    options = dataclasses.replace(bundle.decoding, beam_size=5, n_best=3)

    def run(probes: set[int]) -> dict:
        loop = DecodeLoop(bundle.model, bundle.special)
        searches = [make_search(len(x), options, bundle.special, (), i)
                    for i, x in enumerate(sources)]  # fmt: skip
        loop.add(sources, searches, list(range(len(sources))))
        out, step = {}, 0
        while loop.active:
            if step in probes:
                loop.probe(list(loop.active))
            for handle, search in loop.step():
                out[handle] = [(h.tokens, h.score) for h in search.results()]
            step += 1
        return out

    clean = run(set())
    assert len(clean) == 12
    assert run({2, 5, 7}) == clean


def test_decoding_defaults_are_what_onmt_main_runs_with(tmp_path):
    """``infer/n_best`` sets ``num_hypotheses``; ``auto_config: true`` in a file acts as
    the flag (beam width 4), the flag given wins; top-k 0 or less samples the whole
    distribution; an impossible combination is refused as OpenNMT-tf refuses it."""
    from export.opennmt_tf_files import decoding_defaults, read_config

    config = FIXTURE / "small" / "config.yml"

    def decoding(*extra: str, auto: bool | None = None) -> dict:
        paths = [config]
        for i, text in enumerate(extra):
            paths.append(tmp_path / f"extra{i}.yml")
            paths[-1].write_text(text)
        return decoding_defaults(read_config(paths, auto)["params"], 1241)

    beam = decoding((FIXTURE / "infer_beam5.yml").read_text())
    assert (beam["beam_size"], beam["n_best"], beam["search"]) == (5, 3, "opennmt-tf")
    auto = "params: {beam_width: null}\n"  # the fixture's config sets beam_width 1
    assert decoding("auto_config: true\n" + auto.replace("null", "4"))["beam_size"] == 4
    assert "beam_size" not in decoding(auto.replace("null", "1"), auto=True)
    from export.opennmt_tf_files import request_options

    def asked(text: str) -> dict:
        (tmp_path / "asked.yml").write_text(text)
        return request_options(read_config([config, tmp_path / "asked.yml"], None)["params"], 1241)

    assert asked("params: {sampling_topk: -1}\n")["sampling_topk"] == 1241
    assert asked("params: {sampling_topk: 5, sampling_temperature: 0.5}\n") == {
        "sampling_topk": 5,
        "sampling_temperature": 0.5,
    }
    assert "sampling_topk" not in decoding("params: {sampling_topk: 5}\n")
    assert decoding("params: {maximum_decoding_length: 5}\n")["max_length"] == 6
    for bad, message in [
        ("params: {beam_width: 2}\ninfer: {n_best: 3}\n", "more than beam_width 2"),
        ("params: {beam_width: 2, sampling_topk: 5}\n", "a sampled beam"),
        ("params: {maximum_decoding_length: null}\n", "expected a number, got None"),
        ("params: [1]\n", "params must be a mapping"),
    ]:
        with pytest.raises(OpenNMTTFError, match=message):
            decoding(bad)
    with pytest.raises(OpenNMTTFError, match="Is a directory"):
        read_config([tmp_path], None)


def test_tokenization_configurations_as_make_tokenizer_reads_them(tmp_path):
    from export.opennmt_tf_files import Files, onmt_tokenizer
    from models.onmt import OnmtTokenizer
    from models.words import WordTokenizer

    tokens = ["<blank>", "<s>", "</s>", "a", "b", "<unk>"]
    files = Files([tmp_path / "c.yml"], tmp_path)
    assert isinstance(onmt_tokenizer(tokens, {}, files, "source"), WordTokenizer)  # empty: spaces
    assert isinstance(onmt_tokenizer(tokens, None, files, "source"), WordTokenizer)
    inline = '{"mode": "aggressive", "joiner_annotate": true}'  # a JSON string
    tokenizer = onmt_tokenizer(tokens, inline, files, "source")
    assert isinstance(tokenizer, OnmtTokenizer) and tokenizer.options_["mode"] == "aggressive"
    (tmp_path / "tok.yml").write_text("type: OpenNMTTokenizer\nparams: {mode: space}\n")
    assert onmt_tokenizer(tokens, "tok.yml", files, "target").options_ == {"mode": "space"}
    with pytest.raises(OpenNMTTFError, match="case_feature"):
        onmt_tokenizer(tokens, {"mode": "aggressive", "case_feature": True}, files, "source")
    with pytest.raises(OpenNMTTFError, match="neither a file nor JSON"):
        onmt_tokenizer(tokens, "nowhere.yml", files, "source")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("AttentionalRNNDecoder(2, 48, CopyBridge)\nRNNEncoder(2, 48)", "3 positional arguments"),
        ("AttentionalRNNDecoder(2, 48, **kw)\nRNNEncoder(2, 48)", "AttentionalRNNDecoder(**kw)"),
        ("model = lambda: onmt.models.TransformerBase()", "give --model-type NAME"),
    ],
)
def test_a_definition_it_cannot_read_is_refused(tmp_path, text, message):
    path = tmp_path / "model_description.py"
    path.write_text(text)
    with pytest.raises(OpenNMTTFError, match=re.escape(message)):
        read_description(path)


def test_a_definition_read_for_its_defaults(tmp_path):
    path = tmp_path / "model_description.py"
    path.write_text("model = lambda: onmt.models.NMTBigV1()\n")
    assert read_description(path) == catalog_model("NMTBigV1")
    path.write_text("RNNEncoder(2, 48, cell_class=None)\n"
                    "AttentionalRNNDecoder(2, 48, bridge_class=None)\n")  # fmt: skip
    assert read_description(path).bridge == "zero"


def test_a_coverage_penalty_is_refused_for_its_beam():
    from models.options import DecodeOptions, DecodeOptionsError

    with pytest.raises(DecodeOptionsError, match="coverage_penalty does not apply"):
        DecodeOptions(beam_size=4, search="opennmt-tf", coverage_penalty=0.2)
    assert DecodeOptions(beam_size=1, search="opennmt-tf", coverage_penalty=0.2).beam_size == 1
