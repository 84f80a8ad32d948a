"""A bundle loads and decodes without torch or the onnx package, exactly like PyTorch;
:func:`service.bundle.load_bundle` refuses broken bundles with a clear BundleError."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from export import spec
from models.checkpoint import load_checkpoint
from models.options import DecodeOptions
from models.translate import translate_ids
from service.bundle import BundleError, load_bundle, read_manifest
from service.sessions import RuntimeConfig
from tests.export.helpers import serve_without_torch

TEXTS = ["the house is small", "where is the station?", "good morning"]
CPU = RuntimeConfig(providers=("cpu",), intra_op_threads=1)


def test_bundle_serves_without_torch(bundle_dir, checkpoint):
    got = serve_without_torch(bundle_dir, TEXTS)
    assert got["loaded"] == []

    ckpt = load_checkpoint(checkpoint)
    ids = ckpt.src_tokenizer.encode_batch(TEXTS)
    assert got["ids"] == ids
    ref = translate_ids(ckpt.model, ids, options=DecodeOptions(beam_size=3, n_best=3))
    assert got["tokens"] == [[list(h.tokens) for h in hyps] for hyps in ref]
    for scores, hyps in zip(got["scores"], ref, strict=True):
        assert scores == pytest.approx([h.score for h in hyps], abs=1e-5)
    assert got["text"] == [ckpt.tgt_tokenizer.decode(hyps[0].tokens) for hyps in ref]


def test_load_bundle_in_process(bundle_dir, checkpoint):
    bundle = load_bundle(bundle_dir, CPU)
    cfg = load_checkpoint(checkpoint).config
    for name in ("src_vocab_size", "tgt_vocab_size", "pad_id", "unk_id", "bos_id", "eos_id"):
        assert getattr(bundle.config, name) == getattr(cfg, name)
    assert bundle.config.state_names == cfg.state_names
    assert bundle.config.exact_lengths is False
    assert bundle.max_source_tokens == 128
    assert bundle.special.pad == 0 and bundle.special.bos == 2 and bundle.special.eos == 3
    assert bundle.model.provider == "CPUExecutionProvider"
    assert bundle.src_tokenizer.vocab_size == cfg.src_vocab_size
    assert bundle.manifest == read_manifest(bundle_dir)


# -- broken bundles -----------------------------------------------------------------


@pytest.fixture
def copy(bundle_dir, tmp_path) -> Path:
    dst = tmp_path / "bundle"
    shutil.copytree(bundle_dir, dst)
    return dst


def edit_manifest(bundle: Path, **changes) -> None:
    path = bundle / spec.MANIFEST_FILE
    manifest = json.loads(path.read_text())
    manifest.update(changes)
    path.write_text(json.dumps(manifest))


def test_missing_directory(tmp_path):
    with pytest.raises(BundleError, match="bundle directory not found"):
        load_bundle(tmp_path / "absent", CPU)


def test_missing_manifest(copy):
    (copy / spec.MANIFEST_FILE).unlink()
    with pytest.raises(BundleError, match="has no manifest.json; export one with nmt-export"):
        load_bundle(copy, CPU)


def test_manifest_not_json(copy):
    (copy / spec.MANIFEST_FILE).write_text("{not json")
    with pytest.raises(BundleError, match="is not valid JSON"):
        load_bundle(copy, CPU)


def test_file_that_does_not_match_its_sha256(copy):
    with open(copy / spec.TGT_SPM_FILE, "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(BundleError, match=r"target\.spm\.model does not match its sha256"):
        load_bundle(copy, CPU)
    read_manifest(copy, verify=False)  # only the hash check complains


def test_file_listed_but_missing(copy):
    (copy / spec.DECODER_FILE).unlink()
    with pytest.raises(BundleError, match=r"decoder\.onnx listed in the manifest is missing"):
        load_bundle(copy, CPU)


def test_wrong_format(copy):
    edit_manifest(copy, format="rnn-nmt-bundle/0")
    with pytest.raises(BundleError, match=r"format 'rnn-nmt-bundle/0' is not 'rnn-nmt-bundle/1'"):
        load_bundle(copy, CPU)


def test_wrong_opset(copy):
    edit_manifest(copy, opset=spec.OPSET + 1)
    with pytest.raises(BundleError, match=f"this service needs {spec.OPSET}"):
        load_bundle(copy, CPU)


def test_missing_special_ids(copy):
    manifest = json.loads((copy / spec.MANIFEST_FILE).read_text())
    del manifest["special_ids"]
    (copy / spec.MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="manifest lacks 'special_ids'"):
        load_bundle(copy, CPU)


def test_special_ids_outside_the_vocabulary(copy):
    edit_manifest(copy, special_ids={"pad": 0, "unk": 1, "bos": 2, "eos": 100})
    with pytest.raises(BundleError, match="must lie in the target vocabulary"):
        load_bundle(copy, CPU)


def test_a_pad_or_unk_id_outside_the_vocabularies(copy):
    """The pad id must be a source id; the unk id (the target's: a source vocabulary maps
    unknown words to its own) must lie in one of the vocabularies."""
    manifest = json.loads((copy / spec.MANIFEST_FILE).read_text())
    n_src, n_tgt = manifest["src_vocab_size"], manifest["tgt_vocab_size"]
    edit_manifest(copy, special_ids={"pad": 0, "unk": max(n_src, n_tgt), "bos": 2, "eos": 3})
    with pytest.raises(BundleError, match="unk id .* lies outside both vocabularies"):
        load_bundle(copy, CPU)
    edit_manifest(copy, src_vocab_size=4, special_ids={"pad": 5, "unk": 1, "bos": 2, "eos": 3})
    with pytest.raises(BundleError, match="pad id must lie in the source vocabulary"):
        load_bundle(copy, CPU)


def test_graphs_that_do_not_match_the_state_names(copy):
    """A manifest claiming one state tensor for LSTM/Luong graphs (hidden, cell, feed)."""
    edit_manifest(copy, state_names=["hidden"])
    with pytest.raises(BundleError, match="does not have the graph inputs/outputs"):
        load_bundle(copy, CPU)


def test_graphs_that_do_not_match_the_manifest(copy):
    manifest = json.loads((copy / spec.MANIFEST_FILE).read_text())
    graphs = manifest["graphs"]
    graphs["decoder"]["outputs"] = graphs["decoder"]["outputs"][:-1]
    edit_manifest(copy, graphs=graphs)
    with pytest.raises(BundleError, match="decoder.onnx's outputs are not those the manifest"):
        load_bundle(copy, CPU)


@pytest.mark.parametrize("value", [0, -3, "128", 1.5])
def test_bad_max_source_tokens(copy, value):
    edit_manifest(copy, max_source_tokens=value)
    with pytest.raises(BundleError, match="max_source_tokens must be a positive integer"):
        load_bundle(copy, CPU)


def test_corrupt_tokenizer_with_matching_hash(copy):
    (copy / spec.SRC_SPM_FILE).write_bytes(b"not a sentencepiece model")
    manifest = json.loads((copy / spec.MANIFEST_FILE).read_text())
    files = manifest["files"] | {
        spec.SRC_SPM_FILE: hashlib.sha256(b"not a sentencepiece model").hexdigest()
    }
    edit_manifest(copy, files=files)
    with pytest.raises(BundleError, match="not a SentencePiece model"):
        load_bundle(copy, CPU)


@pytest.mark.parametrize(
    ("decoding", "message"),
    [
        ({"search": "nematus"}, "search must be one of"),
        ({"beam": 5}, "cannot set 'beam'"),
        ({"sampling_topk": 5}, "cannot set 'sampling_topk'"),
        ({"max_length": 5.5}, "max_length must be int"),
        ({"min_length": True}, "min_length must be int"),
        ({"ban_unk": 1}, "ban_unk must be bool"),
        ({"block_ngram_repeat": True}, "block_ngram_repeat must be int"),
        ({"block_ngram_repeat": 40}, "block_ngram_repeat must be between 0"),
        ({"ignore_when_blocking": [5]}, "cannot set 'ignore_when_blocking'"),
    ],
)
def test_bad_decoding_defaults(copy, decoding, message):
    edit_manifest(copy, decoding=decoding)
    with pytest.raises(BundleError, match=message):
        load_bundle(copy, CPU)


def test_decoding_defaults_may_ban_tokens(copy):
    edit_manifest(copy, decoding={"ban_unk": True, "block_ngram_repeat": 3})
    decoding = load_bundle(copy, CPU).decoding
    assert (decoding.ban_unk, decoding.block_ngram_repeat) == (True, 3)


@pytest.mark.parametrize("files", [None, {}, {"source.spm.model": "0" * 64}])
def test_manifest_must_list_the_graphs(copy, files):
    manifest = json.loads((copy / spec.MANIFEST_FILE).read_text())
    if files is None:
        del manifest["files"]
    else:
        manifest["files"] = files
    (copy / spec.MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match="the manifest's 'files' must list every file"):
        load_bundle(copy, CPU)


def test_a_graph_ort_cannot_load_is_one_line(copy):
    """Corrupt bytes whose sha256 was updated too: one line naming the file, no traceback."""
    bad = b"\x08\x07not an onnx graph"
    (copy / spec.DECODER_FILE).write_bytes(bad)
    manifest = json.loads((copy / spec.MANIFEST_FILE).read_text())
    manifest["files"][spec.DECODER_FILE] = hashlib.sha256(bad).hexdigest()
    (copy / spec.MANIFEST_FILE).write_text(json.dumps(manifest))
    with pytest.raises(BundleError, match=r"ONNX Runtime cannot load decoder\.onnx: ") as info:
        load_bundle(copy, CPU)
    assert "\n" not in str(info.value)
