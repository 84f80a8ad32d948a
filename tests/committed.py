"""The committed demo bundles, named once: a retrained demo changes the two numbers here
and nothing else in the tests."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REPOSITORY = ROOT / "model_repository"
# model_repository/en-es: the fp32 export of models/pretrained/en-es/model.pt (the version
# a GPU server picks) and its int8 variant (the version a CPU server picks).
EN_ES_FP32_VERSION, EN_ES_INT8_VERSION = "7", "8"
EN_ES_FP32 = REPOSITORY / "en-es" / EN_ES_FP32_VERSION
EN_ES_INT8 = REPOSITORY / "en-es" / EN_ES_INT8_VERSION
