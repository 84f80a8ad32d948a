"""How an Eole model turns text into tokens: whitespace, or a subword transform.

Eole applies the transforms of its config's top-level ``transforms`` list at ``eole
predict`` time too. Those that only filter or perturb training data are no-ops there; three
tokenise, and this converter reproduces them: ``sentencepiece`` (SentencePiece pieces,
:class:`models.pieces.PieceTokenizer`), ``onmt_tokenize`` (the OpenNMT Tokenizer with
its options and optional BPE or SentencePiece subwords, :class:`models.onmt.OnmtTokenizer`)
and ``bpe`` (subword-nmt BPE of word-tokenised text, optionally restricted by a subword
vocabulary and threshold, :class:`models.bpe.BpeTokenizer`). Every other text transform
(``filtertoolong`` and the like aside, which act in training only) is refused by name;
``normalize`` (Moses punctuation normalisation, :mod:`models.normalize`) is reproduced on
the source side, before whichever tokenises.

Eole copies the subword models into the model directory when it saves, and its
``config.json`` names them ``${MODEL_PATH}/<file>``; older runs name the path they were
trained with, which may not exist on this machine (``--src-subword-model`` points at it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from models.bpe import read_vocabulary
from models.normalize import Normalization
from models.tokenizer import TokenizerError

# Transforms that only act on training data (or filter it); everything else rewrites text.
TRAIN_ONLY_TRANSFORMS = {"filtertoolong", "filtertooshort", "switchout", "tokendrop", "tokenmask"}
SUBWORD_TRANSFORMS = {"sentencepiece", "onmt_tokenize", "bpe"}
# pyonmttok options that name files: the subword model comes from <side>_subword_model.
_PATH_OPTIONS = {"bpe_model_path", "sp_model_path", "vocabulary_path", "bpe_vocab_path"}


class EoleTextError(ValueError):
    """An Eole tokenisation this converter cannot reproduce, or a file it cannot find."""


@dataclass(frozen=True)
class SideText:
    """How one side is tokenised."""

    subword_type: str  # "sentencepiece", "bpe" or "none"
    model: Path | None  # the subword model file (None for "none")
    onmttok: dict[str, Any] | None  # pyonmttok options (onmt_tokenize only)
    vocabulary: tuple[str, ...] | None = None  # pieces the bpe transform may output
    # onmt_tokenize's subword vocabulary (pyonmttok vocabulary_path) and its threshold
    vocabulary_file: Path | None = None
    vocabulary_threshold: int = 0


@dataclass(frozen=True)
class EoleText:
    """The subword transform and each side's tokenisation."""

    transform: str  # "sentencepiece", "onmt_tokenize" or "bpe"
    src: SideText
    tgt: SideText


def check_transforms(cfg: dict) -> str | None:
    """The subword transform the model translates with (``"sentencepiece"``,
    ``"onmt_tokenize"`` or ``"bpe"``) or None (whitespace tokens); raises EoleTextError
    for a transform that rewrites text otherwise."""
    top = list(cfg.get("transforms") or [])
    corpus_only = {
        name
        for corpus in (cfg.get("data") or {}).values()
        for name in (corpus or {}).get("transforms") or []
    } - set(top)
    for name in top + sorted(corpus_only):
        if name in TRAIN_ONLY_TRANSFORMS:
            continue
        if name in SUBWORD_TRANSFORMS | {"normalize"} and name not in corpus_only:
            continue
        where = "data.<corpus>.transforms only" if name in corpus_only else "transforms"
        raise EoleTextError(
            f"transform {name!r} (in {where}) is not supported: it rewrites or tokenises "
            "text, and only sentencepiece, onmt_tokenize or bpe (listed in the top-level "
            "transforms, as eole predict applies them) or whitespace-tokenised models can "
            "be converted"
        )
    subword = [name for name in top if name in SUBWORD_TRANSFORMS]
    if len(subword) > 1:
        raise EoleTextError(f"transforms {subword} tokenise twice; not supported")
    if subword and "normalize" in top and top.index("normalize") > top.index(subword[0]):
        raise EoleTextError(
            f"transforms list normalize after {subword[0]}: normalize works on text and "
            "must come before the transform that tokenises it; list normalize first"
        )
    return subword[0] if subword else None


# The normalize transform's options and Eole's defaults for them (NormalizeConfig).
_NORMALIZE_OPTIONS = {
    "penn": True,
    "norm_quote_commas": True,
    "norm_numbers": True,
    "pre_replace_unicode_punct": False,
    "post_remove_control_chars": False,
}


def source_normalization(cfg: dict) -> Normalization | None:
    """The Moses punctuation normalisation ``eole predict`` applies to the source (the
    ``normalize`` transform in the top-level ``transforms``), or None; the target is not
    normalised at inference."""
    if "normalize" not in list(cfg.get("transforms") or []):
        return None
    opts = ((cfg.get("transforms_configs") or {}).get("normalize")) or {}
    return Normalization(
        lang=opts.get("src_lang") or "",
        **{key: opts.get(key, default) for key, default in _NORMALIZE_OPTIONS.items()},
    )


def eole_text(
    cfg: dict, model_dir: Path, src: Path | None = None, tgt: Path | None = None
) -> EoleText | None:
    """How the model's text is tokenised (None: whitespace); ``src``/``tgt`` override the
    subword model files the config names.

    Eole's rule (``warm_up`` of both transforms): the target uses the source's
    tokenizer when ``share_vocab`` is set and both sides restrict the vocabulary alike.
    """
    transform = check_transforms(cfg)
    if transform is None:
        if src or tgt:
            raise EoleTextError(
                "--src/--tgt-subword-model given, but the model has no sentencepiece, "
                "onmt_tokenize or bpe transform (it was trained on whitespace tokens)"
            )
        return None
    opts = ((cfg.get("transforms_configs") or {}).get(transform)) or {}
    for key in ("gpt2_pretok", "mapped_tokens"):
        if opts.get(key):
            raise EoleTextError(f"{transform} option {key} is not supported")
    if transform == "bpe":
        source, target = _bpe_sides(cfg, opts, model_dir, src, tgt)
    else:
        if transform == "sentencepiece":
            for side in ("src", "tgt"):
                if _vocabulary_option(opts, side)[1]:
                    raise EoleTextError(
                        f"{side}_subword_vocab with {side}_vocab_threshold: Eole's "
                        "sentencepiece transform calls SentencePieceProcessor.LoadVocabulary, "
                        "which the Python API of sentencepiece 0.2 does not have (eole "
                        "predict fails); not supported"
                    )
        # Eole shares the source tokenizer when share_vocab and both sides' vocabulary
        # options (as it passes them: only with a threshold above 0) are the same
        same_vocab = _vocabulary_option(opts, "src") == _vocabulary_option(opts, "tgt")
        source = _side(transform, opts, "src", model_dir, src)
        if tgt is None and cfg.get("share_vocab") and same_vocab:
            target = source  # Eole loads the source tokenizer for both sides
        else:
            target = _side(transform, opts, "tgt", model_dir, tgt)
    for side, part in (("src", source), ("tgt", target)):
        if part.model is not None and not part.model.is_file():
            raise EoleTextError(
                f"subword model {part.model} not found; pass --{side}-subword-model PATH"
            )
    return EoleText(transform, source, target)


def _bpe_sides(
    cfg: dict, opts: dict, model_dir: Path, src: Path | None, tgt: Path | None
) -> tuple[SideText, SideText]:
    """The ``bpe`` transform's sides (``warm_up`` of Eole's ``BPETransform``): BPE codes
    per side, a side's subword vocabulary as :func:`_vocabulary_option` says, and the
    source's codes for the target when ``share_vocab`` is set and both sides' loaded
    vocabularies are the same. BPE dropout (``subword_alpha``) acts in training only."""

    def vocabulary(side: str) -> tuple[str, ...] | None:
        named, threshold = _vocabulary_option(opts, side)
        if not named:
            return None
        path = _locate(named, model_dir, f"transforms_configs.bpe.{side}_subword_vocab")
        try:
            return tuple(read_vocabulary(path.read_text(encoding="utf-8"), threshold))
        except (OSError, UnicodeDecodeError, TokenizerError) as exc:
            raise EoleTextError(f"{side}_subword_vocab {path}: {exc}") from None

    src_vocab, tgt_vocab = vocabulary("src"), vocabulary("tgt")
    source = SideText("bpe", src or _find("bpe", opts, "src", model_dir), None, src_vocab)
    if tgt is None and cfg.get("share_vocab") and src_vocab == tgt_vocab:
        return source, source  # Eole segments the target with the source's model
    return source, SideText("bpe", tgt or _find("bpe", opts, "tgt", model_dir), None, tgt_vocab)


def _vocabulary_option(opts: dict, side: str) -> tuple[str, int]:
    """(``<side>_subword_vocab``, ``<side>_vocab_threshold``) as Eole applies them: only
    a named file with a threshold above 0 restricts; ("", 0) otherwise."""
    named = opts.get(f"{side}_subword_vocab") or ""
    threshold = opts.get(f"{side}_vocab_threshold") or 0
    return (named, threshold) if named and threshold > 0 else ("", 0)


def _side(transform: str, opts: dict, side: str, model_dir: Path, given: Path | None) -> SideText:
    if transform == "sentencepiece":
        return SideText("sentencepiece", given or _find(transform, opts, side, model_dir), None)
    kind = opts.get(f"{side}_subword_type") or "none"
    if kind not in ("none", "bpe", "sentencepiece"):
        raise EoleTextError(f"{side}_subword_type {kind!r} is not supported")
    onmttok = dict(opts.get(f"{side}_onmttok_kwargs") or {"mode": "none"})
    paths = sorted(set(onmttok) & _PATH_OPTIONS)
    if paths:
        raise EoleTextError(
            f"{side}_onmttok_kwargs names files ({', '.join(paths)}); give the subword "
            f"model as {side}_subword_model"
        )
    nbest, alpha = opts.get(f"{side}_subword_nbest", 1), opts.get(f"{side}_subword_alpha", 0)
    if kind == "bpe":
        onmttok["bpe_dropout"] = alpha
    elif kind == "sentencepiece":
        onmttok |= {"sp_nbest_size": nbest, "sp_alpha": alpha}
    sampling = (kind == "bpe" and alpha) or (kind == "sentencepiece" and nbest not in (0, 1))
    if sampling:
        raise EoleTextError(
            f"{side}_subword_nbest {nbest} / {side}_subword_alpha {alpha}: eole predict "
            "would sample subwords at random (onmt_tokenize regularises at inference too); "
            "not supported"
        )
    named, threshold = _vocabulary_option(opts, side)
    vocabulary = (
        _locate(named, model_dir, f"transforms_configs.{transform}.{side}_subword_vocab")
        if named
        else None
    )
    if kind == "none":
        if given:
            raise EoleTextError(f"--{side}-subword-model given, but {side}_subword_type is none")
        return SideText("none", None, onmttok, None, vocabulary, threshold)
    model = given or _find(transform, opts, side, model_dir)
    return SideText(kind, model, onmttok, None, vocabulary, threshold)


def _find(transform: str, opts: dict, side: str, model_dir: Path) -> Path:
    """The file ``transforms_configs.<transform>.<side>_subword_model`` names."""
    key = f"transforms_configs.{transform}.{side}_subword_model"
    named = opts.get(f"{side}_subword_model")
    if not named:
        raise EoleTextError(f"the {transform} transform has no {key}; pass --{side}-subword-model")
    return _locate(named, model_dir, key, f"--{side}-subword-model")


def _locate(named: str, model_dir: Path, key: str, flag: str | None = None) -> Path:
    """The file a config option names: as named (``${MODEL_PATH}`` expanded), else a file
    of that name in the model directory; ``flag``: the option that gives it instead."""
    path = Path(named.replace("${MODEL_PATH}", str(model_dir)))
    if path.is_file():
        return path
    beside = model_dir / path.name  # a model directory copied from another machine
    if beside.is_file():
        return beside
    how = f"pass {flag} PATH" if flag else f"copy it into {model_dir}"
    raise EoleTextError(
        f"{key} names {named}, which is not on this machine (nor is {path.name} in "
        f"{model_dir}); {how}"
    )
