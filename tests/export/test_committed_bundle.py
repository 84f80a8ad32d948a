"""The committed ``model_repository/en-es`` bundles: intact, gated, exported from the
committed checkpoint, and served without torch exactly like PyTorch (fp32)."""

from __future__ import annotations

import pytest

from models.checkpoint import load_checkpoint
from models.options import DecodeOptions
from models.translate import DEMO_CHECKPOINT, translate_ids
from service.bundle import read_manifest, sha256_file
from tests.committed import EN_ES_FP32, EN_ES_INT8
from tests.export.helpers import serve_without_torch

FP32, INT8 = EN_ES_FP32, EN_ES_INT8
TEXTS = ["The cat sat on the mat.", "Where is the train station?", "a small house"]


@pytest.mark.parametrize("bundle", [FP32, INT8], ids=["fp32", "int8"])
def test_manifest_hashes_and_fp32_parity_figures(bundle):
    """Both manifests carry the gate the fp32 graphs passed before any quantization
    (the int8 variant's own gate is its BLEU delta, below)."""
    manifest = read_manifest(bundle)  # verifies every file's sha256
    assert manifest["checkpoint"]["sha256"] == sha256_file(DEMO_CHECKPOINT)
    parity = manifest["parity"]
    assert parity["greedy_mismatches"] == 0 and parity["greedy_sentences"] == 2000
    assert parity["beam_mismatches"] == 0 and parity["beam_sentences"] >= 200
    assert parity["max_log_prob_diff"] <= 1e-4
    assert parity["max_attention_diff"] <= 1e-5


def test_int8_variant_holds_bleu():
    manifest = read_manifest(INT8, verify=False)
    assert manifest["precision"] == "int8"
    assert manifest["variant"]["bleu_delta"] >= -1.0
    assert read_manifest(FP32, verify=False)["precision"] == "fp32"


def test_fp32_bundle_serves_without_torch_like_pytorch():
    got = serve_without_torch(FP32, TEXTS)
    assert got["loaded"] == []
    demo = load_checkpoint(DEMO_CHECKPOINT)
    ref = translate_ids(demo.model, got["ids"], options=DecodeOptions(beam_size=3, n_best=3))
    assert got["tokens"] == [[list(h.tokens) for h in hyps] for hyps in ref]
    for scores, hyps in zip(got["scores"], ref, strict=True):
        assert scores == pytest.approx([h.score for h in hyps], abs=1e-4)


def test_int8_bundle_serves_without_torch():
    got = serve_without_torch(INT8, TEXTS)
    assert got["loaded"] == []
    assert "gato" in got["text"][0] and "estación" in got["text"][1], got["text"]
