"""export/eole_text.py: which Eole transforms convert, and where their SentencePiece models are."""

from __future__ import annotations

from pathlib import Path

import pytest

from export.eole_text import EoleTextError, check_transforms, subword_models


@pytest.mark.parametrize(
    ("cfg", "subword"),
    [
        ({}, None),
        ({"transforms": ["filtertoolong"]}, None),
        ({"transforms": ["sentencepiece", "filtertoolong"]}, "sentencepiece"),
        (
            {"transforms": ["sentencepiece"], "data": {"c": {"transforms": ["sentencepiece"]}}},
            "sentencepiece",
        ),
    ],
)
def test_transforms_that_convert(cfg, subword):
    assert check_transforms(cfg) == subword


@pytest.mark.parametrize(
    ("cfg", "message"),
    [
        ({"transforms": ["onmt_tokenize"]}, r"'onmt_tokenize' \(in transforms\) is not supported"),
        ({"transforms": ["sentencepiece", "bpe"]}, "'bpe'"),
        (
            {"data": {"c": {"transforms": ["sentencepiece"]}}},
            r"'sentencepiece' \(in data.<corpus>.transforms only\)",
        ),
    ],
)
def test_transforms_that_rewrite_text_are_refused(cfg, message):
    with pytest.raises(EoleTextError, match=message):
        check_transforms(cfg)


def _cfg(src: str | None, tgt: str | None = None, **top) -> dict:
    opts = {k: v for k, v in (("src_subword_model", src), ("tgt_subword_model", tgt)) if v}
    return {"transforms": ["sentencepiece"], "transforms_configs": {"sentencepiece": opts}} | top


def test_models_are_found_as_eole_saved_them(tmp_path: Path):
    (tmp_path / "en.model").write_bytes(b"x")
    (tmp_path / "es.model").write_bytes(b"y")
    found = subword_models(_cfg("${MODEL_PATH}/en.model", "${MODEL_PATH}/es.model"), tmp_path)
    assert (found.src, found.tgt) == (tmp_path / "en.model", tmp_path / "es.model")
    # a path from the training machine: the file of that name beside the model
    moved = _cfg("/elsewhere/run/en.model", "/elsewhere/run/es.model")
    assert subword_models(moved, tmp_path).tgt == tmp_path / "es.model"
    # share_vocab: Eole loads the source model for both sides
    shared = subword_models(
        _cfg("${MODEL_PATH}/en.model", "/x/es.model", share_vocab=True), tmp_path
    )
    assert shared.tgt == tmp_path / "en.model"
    # the flags win over the config
    given = subword_models(moved, tmp_path, tgt=tmp_path / "en.model")
    assert given.tgt == tmp_path / "en.model"


@pytest.mark.parametrize(
    ("cfg", "kwargs", "message"),
    [
        (
            _cfg("/gone/en.model", "${MODEL_PATH}/es.model"),
            {},
            "names /gone/en.model, which is not",
        ),
        (_cfg(None), {}, "has no transforms_configs.sentencepiece.src_subword_model"),
        (_cfg("${MODEL_PATH}/es.model"), {}, "tgt_subword_model; pass --tgt-subword-model"),
        (
            _cfg("${MODEL_PATH}/es.model", "${MODEL_PATH}/es.model"),
            {"src": Path("/nope.model")},
            r"SentencePiece model /nope.model not found; pass --src-subword-model",
        ),
    ],
)
def test_missing_models_name_the_flag(tmp_path: Path, cfg, kwargs, message):
    (tmp_path / "es.model").write_bytes(b"y")
    with pytest.raises(EoleTextError, match=message):
        subword_models(cfg, tmp_path, **kwargs)


def test_vocabulary_restriction_is_refused(tmp_path: Path):
    cfg = _cfg("${MODEL_PATH}/es.model")
    cfg["transforms_configs"]["sentencepiece"] |= {
        "src_subword_vocab": "counts.txt",
        "src_vocab_threshold": 5,
    }
    with pytest.raises(EoleTextError, match="src_subword_vocab with src_vocab_threshold 5"):
        subword_models(cfg, tmp_path)
