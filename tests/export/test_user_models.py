"""A user's own trained PyTorch modules, served unchanged (``export.user``).

Six model shapes written independently of this project's ``models`` package
(``tests/export/user_models``; four are tutorials' modules as published), each trained
for a few seconds on the sample pairs:

1. ``export_modules`` passes the parity gate on all 300 sample sentences (greedy) and a
   sample of 30 (beam 5); the manifest says so.
2. Served through the real gRPC server, 16 requests at a time (so sentences are batched
   and padded), every greedy translation equals, token for token, what the user's OWN
   plain PyTorch greedy loop produces for the sentence alone: the truth from outside the
   adapter. Attention matrices are well formed and match the user's own attention.
3. ``nmt-export --from-modules MODULE:load`` works.
4. Refusals: an unknown name in the Signature; a decoder whose attention is no softmax
   (the adapter cannot mask it); a decoder that reads padding in a way no mask fixes
   (the gate fails).
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import re
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch

from export.modules import AdapterError, Signature
from export.parity import ParityError
from export.user import UserModel, export_modules
from models.words import WordTokenizer
from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.committed import EN_ES_FP32
from tests.service.server_fixtures import ServerFactory
from tests.service.server_helpers import TIMEOUT, proto_options, stub_for

ROOT = Path(__file__).resolve().parents[2]
SAMPLE_EN = ROOT / "models" / "sample" / "sample.en"
SENTENCES = [line for line in SAMPLE_EN.read_text(encoding="utf-8").splitlines() if line.strip()]
BEAM_SENTENCES = 30
PACKAGE = "tests.export.user_models"


@dataclass
class Trained:
    name: str
    module: ModuleType
    user: UserModel
    greedy: Callable[[list[int]], tuple[list[int], np.ndarray]]  # the user's own loop
    exact_lengths: bool  # the encoder takes no lengths


def _trained(name: str) -> Trained:
    module = importlib.import_module(f"{PACKAGE}.{name}")
    user = module.load()  # trains once (cached in the module)
    if name == "luong_lstm":
        model = module.trained()[0]
        greedy = lambda ids: module.translate(model, ids)  # noqa: E731
    else:
        encoder, decoder = module.trained()[:2]
        greedy = lambda ids: module.translate(encoder, decoder, ids)  # noqa: E731
    # the encoders that take no lengths read padding: encoded in equal-length groups
    exact = name in ("pytorch_tutorial", "bentrevett_time_major", "d2l_bahdanau")
    return Trained(name, module, user, greedy, exact_lengths=exact)


@pytest.fixture(
    scope="module",
    params=[
        "bahdanau_gru",
        "luong_lstm",
        "pytorch_tutorial",
        "bentrevett_time_major",
        "bentrevett_packed",
        "d2l_bahdanau",
    ],
)
def shape(request) -> Trained:
    return _trained(request.param)


@pytest.fixture(scope="module")
def own(shape: Trained) -> list[tuple[list[int], list[int], np.ndarray]]:
    """``(source ids, target ids, attention)`` of the user's own greedy loop, per sentence."""
    out = []
    for text in SENTENCES:
        src = shape.user.source.encode(text)
        tokens, attention = shape.greedy(src)
        out.append((src, tokens, attention))
    return out


@pytest.fixture(scope="module")
def bundle(shape: Trained, tmp_path_factory) -> tuple[Path, dict]:
    """``(model repository, manifest)`` of the shape exported with the full gate."""
    repo = tmp_path_factory.mktemp(f"user-{shape.name}")
    manifest = export_modules(
        shape.user,
        repo / shape.name / "1",
        parity_src=SAMPLE_EN,
        beam_sentences=BEAM_SENTENCES,
    )
    return repo, manifest


@pytest.fixture(scope="module")
def server(bundle):
    factory = ServerFactory(bundle[0])
    yield factory(max_live_rows=256)
    factory.close()


# -- 1. the gate ----------------------------------------------------------------------------


def test_the_users_model_is_trained_enough(own):
    """Greedy outputs are multi-token and varied (else parity would prove little)."""
    outputs = [tuple(tokens) for _, tokens, _ in own]
    assert all(outputs), "a sentence translates to nothing"
    assert sum(map(len, outputs)) / len(outputs) >= 3
    assert len(set(outputs)) >= 100


def test_export_passes_the_gate(shape, bundle):
    _, manifest = bundle
    parity = manifest["parity"]
    assert parity["greedy_sentences"] == len(SENTENCES) == 300
    assert parity["greedy_mismatches"] == 0
    assert parity["beam_size"] == 5
    assert parity["beam_sentences"] == BEAM_SENTENCES and parity["beam_mismatches"] == 0
    assert parity["max_log_prob_diff"] <= 1e-4 and parity["max_attention_diff"] <= 1e-5
    assert parity["source"] == str(SAMPLE_EN)
    assert manifest["exact_lengths"] is shape.exact_lengths
    ids = shape.user.special_ids
    assert manifest["special_ids"] == {k: ids[k] for k in ("pad", "unk", "bos", "eos")}
    assert manifest["state_names"] == list(shape.user.signature.state_names)
    for side, tok in (("source", shape.user.source), ("target", shape.user.target)):
        assert manifest["tokenizers"][side]["kind"] == "words"
        assert manifest["tokenizers"][side]["fold_accents"] is tok.fold_accents
    described = manifest["source_model"]
    assert described["kind"] == "modules"
    assert described["decoder"].startswith(f"{PACKAGE}.{shape.name}.")


# -- 2. served == the user's own loop --------------------------------------------------------


def _decoder_rows_per_step(server) -> tuple[float, float]:
    registry = server.registry
    return (
        registry.get_sample_value("nmt_decoder_step_rows_sum") or 0.0,
        registry.get_sample_value("nmt_decoder_step_rows_count") or 0.0,
    )


def test_served_greedy_equals_the_users_own_loop(shape, server, own):
    channel, stub = stub_for(server.port)
    per_request = 3
    chunks = [
        list(range(i, min(i + per_request, len(SENTENCES))))
        for i in range(0, len(SENTENCES), per_request)
    ]

    def call(k: int):
        options = proto_options(beam=1, return_attention=k % 3 == 0)
        request = pb.TranslateRequest(texts=[SENTENCES[i] for i in chunks[k]], options=options)
        return stub.Translate(request, timeout=TIMEOUT)

    rows_before = _decoder_rows_per_step(server)
    try:
        with ThreadPoolExecutor(16) as pool:
            responses = list(pool.map(call, range(len(chunks))))
    finally:
        channel.close()
    rows_after = _decoder_rows_per_step(server)
    rows_sum, steps = rows_after[0] - rows_before[0], rows_after[1] - rows_before[1]
    assert steps > 0 and rows_sum / steps > 2, "the requests were not batched together"

    tgt: WordTokenizer = shape.user.target
    src_tok: WordTokenizer = shape.user.source
    with_attention = 0
    for k, response in enumerate(responses):
        assert len(response.translations) == len(chunks[k])
        for i, translation in zip(chunks[k], response.translations, strict=True):
            src, want, own_attention = own[i]
            hyp = translation.hypotheses[0]
            assert translation.source_tokens == len(src)
            assert list(hyp.tokens) == tgt.pieces(want), f"sentence {i}: {SENTENCES[i]!r}"
            assert hyp.text == tgt.decode(want)
            att = hyp.attention
            if k % 3:
                assert att.rows == 0
                continue
            with_attention += 1
            assert (att.rows, att.cols) == (len(want) + 1, len(src))
            matrix = np.asarray(att.values, dtype=np.float64).reshape(att.rows, att.cols)
            assert np.isfinite(matrix).all()
            np.testing.assert_allclose(matrix.sum(axis=1), 1.0, atol=1e-4)
            assert list(att.source_tokens) == src_tok.pieces(src)
            # the user's loop stops without the EOS step when it reaches the length limit
            np.testing.assert_allclose(matrix[: len(own_attention)], own_attention, atol=1e-4)
    assert with_attention >= 90


# -- 3. the CLI ------------------------------------------------------------------------------


def test_cli_from_modules(tmp_path):
    from export.cli import main

    out = tmp_path / "repo" / "tutorial" / "1"
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main([
            "--from-modules", f"{PACKAGE}.pytorch_tutorial:load",
            "--out", str(out),
            "--parity-src", str(SAMPLE_EN),
            "--beam-sentences", "5",
        ])  # fmt: skip
    assert code == 0, stderr.getvalue()
    assert "greedy identical on 300 sentences, beam 5 identical on 5" in stdout.getvalue()
    assert {"encoder.onnx", "decoder.onnx", "manifest.json"} <= {p.name for p in out.iterdir()}


# -- 4. refusals -----------------------------------------------------------------------------


def test_a_signature_naming_an_unknown_return_is_refused():
    with pytest.raises(AdapterError, match=r"decoder_returns names \['attn'\] unknown"):
        Signature(decoder_returns=("logits", "hidden", "attn"))
    with pytest.raises(AdapterError, match=r"encoder_returns names \['outputs'\] unknown"):
        Signature(encoder_returns=("outputs", "hidden"))


def test_sequence_first_modules_without_time_major_are_refused_with_the_fix(tmp_path):
    """bentrevett's sequence-first encoder fed ``(B,S)`` reads B as time: its memory has
    the expected shape by accident, its hidden does not, and the error names the flag."""
    bentrevett = importlib.import_module(f"{PACKAGE}.bentrevett_time_major")
    user = bentrevett.load()
    batch_first = Signature(token_shape="B", hidden_layout="flat")
    wrong = UserModel(user.encoder, user.decoder, user.source, user.target, user.special_ids,
                      batch_first)  # fmt: skip
    with pytest.raises(AdapterError, match=r"Signature\(time_major=True\)"):
        export_modules(wrong, tmp_path / "m" / "1", parity_src=SAMPLE_EN, beam_sentences=1)
    assert not (tmp_path / "m" / "1").exists()
    with pytest.raises(AdapterError, match="time_major must be True, False or a tuple"):
        Signature(time_major="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        # its `attention` is the AdditiveAttention module, not the weights
        ({"attention_from": "attention"}, "decoder's 'attention' is AdditiveAttention, not the"),
        ({"attention_from": "missing"}, "decoder's 'missing' is NoneType"),
        # the state list has three entries
        ({"decoder_returns": ("logits", ("_", "hidden"))}, r"returned 3 values but Signature"),
        ({"decoder_returns": (("logits",), ("_", "hidden", "_"))}, "returned a Tensor where"),
        # every tensor sequence-first: d2l's encoder transposes (S,B) back to (B,S)
        ({"time_major": True}, r"expected \(src_len, batch, D\)"),
    ],
)
def test_a_d2l_model_declared_wrong_is_refused_with_the_fix(tmp_path, change, message):
    d2l = importlib.import_module(f"{PACKAGE}.d2l_bahdanau")
    user = d2l.load()
    wrong = replace(user, signature=replace(user.signature, **change))
    with pytest.raises(AdapterError, match=message):
        export_modules(wrong, tmp_path / "m" / "1", parity_src=SAMPLE_EN, beam_sentences=1)
    assert not (tmp_path / "m" / "1").exists()


def test_an_encoder_packing_sorted_batches_needs_sorted_lengths(tmp_path):
    packed = importlib.import_module(f"{PACKAGE}.bentrevett_packed")
    user = packed.load()
    unsorted = replace(user, signature=replace(user.signature, sorted_lengths=False))
    with pytest.raises(
        AdapterError, match=r"enforce_sorted=True: declare Signature\(sorted_lengths"
    ):
        export_modules(unsorted, tmp_path / "m" / "1", parity_src=SAMPLE_EN, beam_sentences=1)
    assert not (tmp_path / "m" / "1").exists()
    with pytest.raises(AdapterError, match="sorted_lengths is set but 'lengths' is not in"):
        Signature(sorted_lengths=True)


def test_a_packing_encoder_gets_sorted_batches_and_each_sentence_encodes_as_alone():
    """An unsorted batch, padded wider than its longest sentence: memory, mask and state
    come back in the batch's order, each row what the sentence gives alone."""
    packed = importlib.import_module(f"{PACKAGE}.bentrevett_packed")
    model = packed.load().adapted()
    sentences = [SENTENCES[i] for i in (3, 0, 7, 1)]
    ids = [packed.load().source.encode(t) for t in sentences]
    assert len({len(x) for x in ids}) > 1 and sorted(map(len, ids)) != list(map(len, ids))
    width = max(map(len, ids)) + 2  # padding past the longest
    src = torch.tensor([x + [packed.PAD] * (width - len(x)) for x in ids])
    lengths = torch.tensor([len(x) for x in ids])
    with torch.no_grad():
        batch = model.encode(src, lengths)
        for row, x in enumerate(ids):
            alone = model.encode(torch.tensor([x]), torch.tensor([len(x)]))
            n = len(x)
            torch.testing.assert_close(batch.memory[row, :n], alone.memory[0], atol=1e-5, rtol=0)
            assert not batch.memory[row, n:].any()
            assert batch.mask[row].tolist() == [True] * n + [False] * (width - n)
            torch.testing.assert_close(batch.state[0][row], alone.state[0][0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("marks", [{"start_tokens": ["<sos>"]}, {"end_tokens": ["<eos>"]}])
def test_start_or_end_tokens_on_the_target_side_are_refused(marks):
    shape = importlib.import_module(f"{PACKAGE}.bentrevett_time_major")
    user = shape.load()
    target = WordTokenizer(user.target.tokens, unk_id=shape.UNK, **marks)
    token = next(iter(marks.values()))[0]
    with pytest.raises(AdapterError, match=rf"target tokenizer adds \['{token}'\].*source"):
        replace(user, target=target).adapted()
    assert user.adapted() is not None  # the source side may have them (this one does)


def test_a_batch_first_encoder_declared_time_major_is_refused_with_the_fix(tmp_path):
    tutorial = importlib.import_module(f"{PACKAGE}.pytorch_tutorial")
    user = tutorial.load()
    declared = replace(user.signature, time_major=True)
    wrong = replace(user, signature=declared)
    with pytest.raises(AdapterError, match=r"no batch_first\), as Signature\(time_major=True\)"):
        export_modules(wrong, tmp_path / "m" / "1", parity_src=SAMPLE_EN, beam_sentences=1)
    assert not (tmp_path / "m" / "1").exists()


def _tutorial_with(decoder_class, attention_class=None) -> UserModel:
    """The trained tutorial model with its decoder replaced by ``decoder_class`` (same
    weights)."""
    tutorial = importlib.import_module(f"{PACKAGE}.pytorch_tutorial")
    user = tutorial.load()
    decoder = decoder_class(tutorial.HIDDEN, user.target.vocab_size)
    if attention_class is not None:
        decoder.attention = attention_class(tutorial.HIDDEN)
    decoder.load_state_dict(user.decoder.state_dict())
    return UserModel(
        user.encoder, decoder.eval(), user.source, user.target, user.special_ids, user.signature
    )


def test_attention_without_a_softmax_is_refused(tmp_path):
    tutorial = importlib.import_module(f"{PACKAGE}.pytorch_tutorial")

    class ExpAttention(tutorial.BahdanauAttention):
        """Normalises by hand: nothing the adapter can put the mask into."""

        def forward(self, query, keys):
            scores = self.Va(torch.tanh(self.Wa(query) + self.Ua(keys)))
            scores = scores.squeeze(2).unsqueeze(1)
            e = torch.exp(scores - scores.max(dim=-1, keepdim=True).values)
            weights = e / e.sum(dim=-1, keepdim=True)
            return torch.bmm(weights, keys), weights

    user = _tutorial_with(tutorial.AttnDecoderRNN, ExpAttention)
    out = tmp_path / "repo" / "m" / "1"
    with pytest.raises(AdapterError, match="no softmax over the source positions"):
        export_modules(user, out, parity_src=SAMPLE_EN, parity_limit=20, beam_sentences=2)
    assert not out.exists()


def test_a_decoder_reading_padding_fails_the_gate(tmp_path):
    tutorial = importlib.import_module(f"{PACKAGE}.pytorch_tutorial")

    class MeanDecoder(tutorial.AttnDecoderRNN):
        """Adds the mean of all encoder outputs, padding included, to its input."""

        def forward_step(self, input, hidden, encoder_outputs):
            embedded = self.dropout(self.embedding(input))
            embedded = embedded + encoder_outputs.mean(dim=1, keepdim=True)
            query = hidden.permute(1, 0, 2)
            context, attn_weights = self.attention(query, encoder_outputs)
            output, hidden = self.gru(torch.cat((embedded, context), dim=2), hidden)
            return self.out(output), hidden, attn_weights

    user = _tutorial_with(MeanDecoder)
    out = tmp_path / "repo" / "m" / "1"
    with pytest.raises(ParityError, match="greedy output differs on"):
        export_modules(user, out, parity_src=SAMPLE_EN, parity_limit=60, beam_sentences=2)
    assert not out.exists()


def test_int8_variant_of_a_users_model(tmp_path):
    """``precision="int8"`` works for your modules too (paths given as strings)."""
    from service.bundle import load_bundle

    tutorial = importlib.import_module(f"{PACKAGE}.pytorch_tutorial")
    sample = ROOT / "models" / "sample"
    manifest = export_modules(
        tutorial.load(),
        str(tmp_path / "m" / "2"),
        parity_src=str(sample / "sample.en"),
        parity_ref=str(sample / "sample.es"),
        parity_limit=60,
        beam_sentences=5,
        precision="int8",
    )
    assert manifest["variant"]["precision"] == "int8"
    assert manifest["variant"]["sentences"] == 60
    bundle = load_bundle(tmp_path / "m" / "2")
    assert bundle.model.exact_lengths and bundle.manifest["precision"] == "int8"


# ---------------------------------------------------------------- special ids that are words

_SPECIALS = {"pad": 0, "unk": 1, "bos": 2, "eos": 3}


def _words(*tokens: str, unk_id: int = 1, **options):
    from models.words import WordTokenizer

    return WordTokenizer([*tokens, "casa", "perro", "the", "dog"], unk_id=unk_id, **options)


@pytest.mark.parametrize(
    ("source", "target", "ids", "message"),
    [
        # the PyTorch tutorial's Lang: SOS 0, EOS 1, words from 2; pad and unk put on words
        (("SOS", "EOS"), ("SOS", "EOS"), {"bos": 0, "eos": 1, "pad": 2, "unk": 3},
         "pad 2 is the target word 'casa', which would never be produced"),
        (("<pad>", "<unk>", "<s>", "</s>"), ("<pad>", "<unk>", "<s>", "</s>"),
         _SPECIALS | {"eos": 5}, "eos 5 is the target word 'perro', which would end every"),
        # the source vocabulary's own unk (what unknown source words become) on a word
        (("<pad>", "<unk>", "<s>", "</s>"), ("<pad>", "<unk>", "<s>", "</s>"),
         _SPECIALS | {"unk": 6}, "unk 6 is the source word 'the', which would stand for every"),
    ],
)  # fmt: skip
def test_special_ids_on_words_are_refused(source, target, ids, message):
    from export.user import check_special_ids

    with pytest.raises(AdapterError, match=message):
        check_special_ids(_words(*source, unk_id=ids["unk"]), _words(*target), ids)


def test_a_source_vocabulary_with_its_own_unk_id_passes():
    """d2l's vocabularies are sorted, so the specials sit at different ids on the two
    sides: the source's unk is its tokenizer's, whatever id the target's unk has (here a
    source word)."""
    from export.user import check_special_ids

    source = _words("<pad>", "<s>", "</s>", "<unk>", unk_id=3)
    target = _words("<pad>", "<unk>", "<s>", "</s>")
    assert source.pieces([6]) == ["the"]  # the target's unk id is a source word
    check_special_ids(source, target, _SPECIALS | {"unk": 6})


def test_special_ids_on_words_are_refused_behind_a_normalizing_tokenizer():
    """The source tokenizer of a model with Eole's normalize transform is wrapped; the
    check reads the vocabulary inside."""
    from export.user import check_special_ids
    from models.normalize import Normalization, NormalizingTokenizer
    from models.pieces import PieceTokenizer

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "eole" / "brnn_lstm1_spm_shared"
    vocab = [
        v[0] if isinstance(v, list) else v
        for v in json.loads((fixture / "vocab.json").read_text())["src"]
    ]
    word = vocab.index("▁the")
    pieces = PieceTokenizer((fixture / "joint_spm.model").read_bytes(), vocab, unk_id=word)
    source = NormalizingTokenizer(pieces, Normalization(lang="en"))
    with pytest.raises(AdapterError, match=f"unk {word} is the source word 'the'"):
        check_special_ids(source, pieces, {"pad": 1, "unk": word, "bos": 2, "eos": 3})


@pytest.mark.parametrize(
    "markers",
    [
        ("<pad>", "<unk>", "<s>", "</s>"),
        ("PAD", "UNK", "SOS", "EOS"),
        ("[PAD]", "[UNK]", "[CLS]", "[SEP]"),
    ],
)
@pytest.mark.parametrize("lowercase", [True, False])
def test_marker_tokens_pass(markers, lowercase):
    from export.user import check_special_ids

    vocab = _words(*markers, lowercase=lowercase)
    check_special_ids(vocab, vocab, _SPECIALS)


def test_sentencepiece_pad_on_a_piece_is_refused():
    from export.user import check_special_ids
    from models.tokenizer import Tokenizer

    proto = (EN_ES_FP32 / "target.spm.model").read_bytes()
    spm = Tokenizer(proto, special_ids=None)
    check_special_ids(spm, spm, _SPECIALS)  # the project's own: control pieces
    piece = spm.decode([40])
    with pytest.raises(AdapterError, match=re.escape(f"pad 40 is the target word {piece!r}")):
        check_special_ids(spm, spm, _SPECIALS | {"pad": 40})
