"""How an Eole model turns text into tokens: whitespace, or its ``sentencepiece`` transform.

Eole applies the transforms of its config's top-level ``transforms`` list at ``eole
predict`` time too. Those that only filter or perturb training data are no-ops there;
``sentencepiece`` segments the source and joins the output's pieces back into text, and
this converter reproduces it (:class:`models.pieces.PieceTokenizer`). Every other text
transform (``onmt_tokenize``, ``bpe``, ``normalize``, ...) is refused by name.

Eole copies the SentencePiece models into the model directory when it saves, and its
``config.json`` names them ``${MODEL_PATH}/<file>``; older runs name the path they were
trained with, which may not exist on this machine (``--src-subword-model`` points at it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# Transforms that only act on training data (or filter it); everything else rewrites text.
TRAIN_ONLY_TRANSFORMS = {"filtertoolong", "filtertooshort", "switchout", "tokendrop", "tokenmask"}
SUBWORD_TRANSFORMS = {"sentencepiece"}


class EoleTextError(ValueError):
    """An Eole tokenisation this converter cannot reproduce, or a file it cannot find."""


@dataclass(frozen=True)
class SubwordModels:
    """The SentencePiece model files of each side (the same file when shared)."""

    src: Path
    tgt: Path


def check_transforms(cfg: dict) -> str | None:
    """The subword transform the model translates with (``"sentencepiece"``) or None
    (whitespace tokens); raises EoleTextError for a transform that rewrites text."""
    top = list(cfg.get("transforms") or [])
    corpus_only = {
        name
        for corpus in (cfg.get("data") or {}).values()
        for name in (corpus or {}).get("transforms") or []
    } - set(top)
    for name in top + sorted(corpus_only):
        if name in TRAIN_ONLY_TRANSFORMS:
            continue
        if name in SUBWORD_TRANSFORMS and name not in corpus_only:
            continue
        where = "data.<corpus>.transforms only" if name in corpus_only else "transforms"
        raise EoleTextError(
            f"transform {name!r} (in {where}) is not supported: it rewrites or tokenises "
            "text, and only sentencepiece (listed in the top-level transforms, as eole "
            "predict applies it) or whitespace-tokenised models can be converted"
        )
    subword = [name for name in top if name in SUBWORD_TRANSFORMS]
    if len(subword) > 1:
        raise EoleTextError(f"transforms {subword} tokenise twice; not supported")
    return subword[0] if subword else None


def subword_models(
    cfg: dict, model_dir: Path, src: Path | None = None, tgt: Path | None = None
) -> SubwordModels:
    """Find the sentencepiece transform's model files; ``src``/``tgt`` override the config.

    Eole's rule (``SentencePieceTransform.warm_up``): the target uses the source's model
    when ``share_vocab`` is set, else ``tgt_subword_model``.
    """
    opts = ((cfg.get("transforms_configs") or {}).get("sentencepiece")) or {}
    for side in ("src", "tgt"):
        vocab, threshold = opts.get(f"{side}_subword_vocab"), opts.get(f"{side}_vocab_threshold")
        if vocab and (threshold or 0) > 0:
            raise EoleTextError(
                f"{side}_subword_vocab with {side}_vocab_threshold {threshold} restricts "
                "SentencePiece's output to frequent pieces; not supported"
            )
    src_path = src or _find(opts.get("src_subword_model"), "src", model_dir)
    same_vocab = all(
        opts.get(f"src_{key}") == opts.get(f"tgt_{key}")
        for key in ("subword_vocab", "vocab_threshold")
    )
    if tgt is None and cfg.get("share_vocab") and same_vocab:
        tgt_path = src_path  # Eole loads the source model for both sides
    else:
        tgt_path = tgt or _find(opts.get("tgt_subword_model"), "tgt", model_dir)
    for side, path in (("src", src_path), ("tgt", tgt_path)):
        if not path.is_file():
            raise EoleTextError(
                f"SentencePiece model {path} not found; pass --{side}-subword-model PATH"
            )
    return SubwordModels(src_path, tgt_path)


def _find(named: str | None, side: str, model_dir: Path) -> Path:
    """The file ``transforms_configs.sentencepiece.<side>_subword_model`` names."""
    key = f"transforms_configs.sentencepiece.{side}_subword_model"
    if not named:
        raise EoleTextError(
            f"the sentencepiece transform has no {key}; pass --{side}-subword-model"
        )
    path = Path(named.replace("${MODEL_PATH}", str(model_dir)))
    if path.is_file():
        return path
    beside = model_dir / path.name  # a model directory copied from another machine
    if beside.is_file():
        return beside
    raise EoleTextError(
        f"{key} names {named}, which is not on this machine (nor is {path.name} in "
        f"{model_dir}); pass --{side}-subword-model PATH"
    )
