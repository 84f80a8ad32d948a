"""export/eole_text.py: which Eole transforms convert, and where their SentencePiece models are."""

from __future__ import annotations

from pathlib import Path

import pytest

from export.eole_text import EoleTextError, check_transforms, eole_text


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
        ({"transforms": ["inlinetags"]}, r"'inlinetags' \(in transforms\) is not supported"),
        (
            {"transforms": ["sentencepiece", "normalize"]},
            "transforms list normalize after sentencepiece: .* list normalize first",
        ),
        ({"data": {"c": {"transforms": ["normalize"]}}}, r"'normalize' \(in data"),
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
    found = eole_text(_cfg("${MODEL_PATH}/en.model", "${MODEL_PATH}/es.model"), tmp_path)
    assert (found.src.model, found.tgt.model) == (tmp_path / "en.model", tmp_path / "es.model")
    # a path from the training machine: the file of that name beside the model
    moved = _cfg("/elsewhere/run/en.model", "/elsewhere/run/es.model")
    assert eole_text(moved, tmp_path).tgt.model == tmp_path / "es.model"
    # share_vocab: Eole loads the source model for both sides
    shared = eole_text(_cfg("${MODEL_PATH}/en.model", "/x/es.model", share_vocab=True), tmp_path)
    assert shared.tgt.model == tmp_path / "en.model"
    # the flags win over the config
    given = eole_text(moved, tmp_path, tgt=tmp_path / "en.model")
    assert given.tgt.model == tmp_path / "en.model"


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
            r"subword model /nope.model not found; pass --src-subword-model",
        ),
    ],
)
def test_missing_models_name_the_flag(tmp_path: Path, cfg, kwargs, message):
    (tmp_path / "es.model").write_bytes(b"y")
    with pytest.raises(EoleTextError, match=message):
        eole_text(cfg, tmp_path, **kwargs)


def test_sentencepiece_vocabulary_restriction_is_refused(tmp_path: Path):
    """Eole's sentencepiece transform cannot load one (no LoadVocabulary in sentencepiece
    0.2's Python API); a threshold of 0 is no restriction, as in Eole."""
    cfg = _cfg("${MODEL_PATH}/es.model", "${MODEL_PATH}/es.model")
    cfg["transforms_configs"]["sentencepiece"] |= {
        "src_subword_vocab": "counts.txt",
        "src_vocab_threshold": 5,
    }
    with pytest.raises(
        EoleTextError, match="src_subword_vocab with src_vocab_threshold: .*LoadVoc"
    ):
        eole_text(cfg, tmp_path)
    cfg["transforms_configs"]["sentencepiece"]["src_vocab_threshold"] = 0
    (tmp_path / "es.model").write_bytes(b"y")
    assert eole_text(cfg, tmp_path).src.vocabulary_file is None


def _onmt(**opts) -> dict:
    return {"transforms": ["onmt_tokenize"], "transforms_configs": {"onmt_tokenize": opts}}


def test_onmt_tokenize_sides(tmp_path: Path):
    (tmp_path / "codes").write_text("#version: 0.2\n")
    (tmp_path / "sp.model").write_bytes(b"x")
    text = eole_text(
        _onmt(
            src_subword_type="bpe",
            src_subword_model="${MODEL_PATH}/codes",
            src_onmttok_kwargs={"mode": "aggressive", "joiner_annotate": True},
            tgt_subword_type="sentencepiece",
            tgt_subword_model="${MODEL_PATH}/sp.model",
        ),
        tmp_path,
    )
    assert text.transform == "onmt_tokenize"
    # Eole's own keyword arguments for each subword type (nbest 1, alpha 0 by default)
    assert text.src.onmttok == {"mode": "aggressive", "joiner_annotate": True, "bpe_dropout": 0}
    assert text.tgt.onmttok == {"mode": "none", "sp_nbest_size": 1, "sp_alpha": 0}
    assert (text.src.subword_type, text.src.model) == ("bpe", tmp_path / "codes")
    plain = eole_text(_onmt(src_onmttok_kwargs={"mode": "conservative"}), tmp_path)
    assert (plain.src.subword_type, plain.src.model, plain.tgt.onmttok) == (
        "none",
        None,
        {"mode": "none"},
    )


@pytest.mark.parametrize(
    ("opts", "message"),
    [
        (
            {"src_subword_type": "bpe", "src_subword_model": "/c", "src_subword_alpha": 0.1},
            "src_subword_alpha 0.1: eole predict would sample",
        ),
        (
            {
                "tgt_subword_type": "sentencepiece",
                "tgt_subword_model": "/s",
                "tgt_subword_nbest": -1,
            },
            "tgt_subword_nbest -1 / tgt_subword_alpha 0: eole predict would sample",
        ),
        (
            {"src_onmttok_kwargs": {"mode": "none", "bpe_model_path": "/c"}},
            r"src_onmttok_kwargs names files \(bpe_model_path\)",
        ),
        ({"gpt2_pretok": True}, "onmt_tokenize option gpt2_pretok is not supported"),
        ({"mapped_tokens": [["a", "b"]]}, "option mapped_tokens is not supported"),
        ({"src_subword_type": "wordpiece"}, "src_subword_type 'wordpiece' is not supported"),
    ],
)
def test_onmt_tokenize_options_refused(tmp_path: Path, opts, message):
    with pytest.raises(EoleTextError, match=message):
        eole_text(_onmt(**opts), tmp_path)
    with pytest.raises(EoleTextError, match="but src_subword_type is none"):
        eole_text(_onmt(), tmp_path, src=tmp_path / "x")
