"""``nmt-convert eole MODEL_DIR --out model_repository/<name>/<version>``.

Converters in CTranslate2's shape: load the checkpoint, refuse (by name) every option
the bundle cannot express, then write the bundle through the same gate as every other
way in (:func:`export.user.export_modules`). Eole's modules are rebuilt from its weights
in :mod:`export.eole_modules`; this module declares how they are called.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

import torch
from torch import Tensor, nn

from export.cli import add_bundle_arguments, bundle_options, check_bundle_arguments, run_export
from export.eole_text import SideText
from export.modules import Signature
from export.user import UserModel, export_modules
from models.commands import show_defaults
from models.onmt import OnmtTokenizer
from models.pieces import PieceTokenizer
from models.tokenizer import TokenizerError
from models.words import WordTokenizer

# ``eole predict``'s defaults (Eole 0.6.4, eole/config/inference.py): at most
# min(250, 2 x source + 5) target tokens, a hypothesis reaching that many ends without
# EOS (our limit counts the EOS, hence 251 and + 6), no minimum length, and its beam
# search with the "avg" length penalty (alpha 1, BOS counted): see service.decoding.EoleBeam.
EOLE_DECODING = {
    "max_length": 251,
    "max_length_ratio": 2.0,
    "max_length_offset": 6,
    "min_length": 0,
    "length_penalty": 1.0,
    "search": "eole",
}


class EoleStep(nn.Module):
    """Eole's decoder step with its target position carried as decoder state.

    Eole's embeddings add a sinusoidal position encoding on the target side too, so a
    step needs its position; the bundle contract has no step input, so the position
    rides along as a ``(rows, 1)`` state that starts at 0 (the BOS input) and is
    gathered with the rest of the state when beams reorder.
    """

    def __init__(self, decoder: nn.Module) -> None:
        super().__init__()
        self.decoder = decoder

    def forward(self, token, hidden, memory, mask, feed, position: Tensor):
        step = position[:, 0].to(torch.long)
        log_probs, hidden, attention, feed = self.decoder(token, hidden, memory, mask, feed, step)
        return log_probs, hidden, attention, feed, position + 1


def eole_user_model(
    path: Path,
    *,
    lowercase: bool,
    split_punctuation: bool,
    fold_accents: bool,
    src_subword_model: Path | None = None,
    tgt_subword_model: Path | None = None,
) -> UserModel:
    """Load and validate an Eole model directory; its modules with their declaration."""
    from export.eole_modules import EoleError, load_eole
    from export.writer import ExportError

    try:
        m = load_eole(Path(path), src_subword_model, tgt_subword_model)
    except EoleError as exc:
        raise ExportError(str(exc)) from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # malformed files
        raise ExportError(
            f"{path} is not a readable Eole model ({type(exc).__name__}: {exc}); "
            "give the directory eole train wrote"
        ) from None
    if m.src_pad_id != m.pad_id:
        raise ExportError(
            f"source pad id {m.src_pad_id} differs from the target's {m.pad_id} "
            "(separate vocabularies with different special layouts are not supported)"
        )
    text = dict(lowercase=lowercase, split_punctuation=split_punctuation, fold_accents=fold_accents)
    if m.text is not None:
        given = [f"--{k.replace('_', '-')}" for k, v in text.items() if v]
        if given:
            raise ExportError(
                f"{' '.join(given)}: this model's {m.text.transform} transform tokenises the "
                "text itself, as eole predict does; drop the option"
            )
        try:
            source = _subword_tokenizer(m.text.src, m.src_vocab, m.src_unk_id)
            target = _subword_tokenizer(m.text.tgt, m.tgt_vocab, m.unk_id)
        except TokenizerError as exc:
            raise ExportError(f"{m.text.transform}: {exc}") from None
    else:
        source = WordTokenizer(m.src_vocab, unk_id=m.src_unk_id, **text)
        target = WordTokenizer(m.tgt_vocab, unk_id=m.unk_id, **text)
    signature = Signature(
        encoder_args=("src", "lengths"),
        encoder_returns=("memory", "hidden"),
        rnn=m.rnn_type,
        decoder_args=("token", "hidden", "memory", "mask", "feed", "position"),
        token_shape="B",
        decoder_returns=("log_probs", "hidden", "attention", "feed", "position"),
        extra_state={"feed": m.hidden_size, "position": 1},
    )
    return UserModel(
        m.encoder,
        EoleStep(m.decoder),
        source,
        target,
        {"pad": m.pad_id, "unk": m.unk_id, "bos": m.bos_id, "eos": m.eos_id},
        signature,
        origin={"converter": "eole", "path": str(path), **m.options},
        decoding=EOLE_DECODING,
    )


def _subword_tokenizer(side: SideText, vocab: list[str], unk_id: int):
    """The tokenizer that reproduces one side of Eole's subword transform."""
    if side.onmttok is None:  # the sentencepiece transform
        return PieceTokenizer(side.model.read_bytes(), vocab, unk_id=unk_id)
    return OnmtTokenizer(
        vocab,
        unk_id=unk_id,
        options=side.onmttok,
        subword_type=side.subword_type,
        model_file=side.model,
    )


def convert_eole(
    path: Path | str,
    out: Path | str,
    *,
    lowercase: bool = False,
    split_punctuation: bool = False,
    fold_accents: bool = False,
    src_subword_model: Path | str | None = None,
    tgt_subword_model: Path | str | None = None,
    **options,
) -> dict:
    """Convert an Eole RNN model directory into a bundle in ``out``; returns the manifest.

    A model trained with Eole's ``sentencepiece`` or ``onmt_tokenize`` transform serves
    raw text: the bundle keeps its subword models (found in the model directory, or given
    as ``src_subword_model``/``tgt_subword_model``). A model trained on text already
    tokenised takes ``lowercase`` / ``split_punctuation`` / ``fold_accents`` to reproduce
    the preprocessing you applied (none: plain whitespace tokens). ``options``: those of
    :func:`export.user.export_modules`.
    """
    user = eole_user_model(
        Path(path),
        lowercase=lowercase,
        split_punctuation=split_punctuation,
        fold_accents=fold_accents,
        src_subword_model=Path(src_subword_model) if src_subword_model else None,
        tgt_subword_model=Path(tgt_subword_model) if tgt_subword_model else None,
    )
    return export_modules(user, out, **options)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nmt-convert",
        description="Convert a model trained elsewhere into a bundle nmt-serve loads.",
    )
    sub = parser.add_subparsers(dest="framework", required=True, metavar="FRAMEWORK")
    eole = sub.add_parser(
        "eole",
        help="an Eole (or OpenNMT-py successor) RNN model directory",
        description="Convert an Eole 0.6 RNN model directory (config.json, "
        "model.00.safetensors, vocab.json): rnn/brnn encoders, LSTM/GRU, any layer count, "
        "StdRNN and InputFeed decoders, dot/general/mlp attention, bridge; whitespace "
        "tokens or the sentencepiece / onmt_tokenize transforms. Other options are refused "
        "by name.",
    )
    eole.add_argument("model", type=Path, help="the model directory Eole wrote")
    spm = eole.add_argument_group(
        "sentencepiece / onmt_tokenize transforms (models whose config lists one; the "
        "subword models are found in the model directory by default)"
    )
    spm.add_argument(
        "--src-subword-model",
        type=Path,
        metavar="PATH",
        help="the source subword model (SentencePiece model or BPE codes), when the one "
        "the config names is elsewhere",
    )
    spm.add_argument(
        "--tgt-subword-model",
        type=Path,
        metavar="PATH",
        help="the target subword model, when the one the config names is elsewhere",
    )
    text = eole.add_argument_group("preprocessing a whitespace-tokenised model was trained with")
    text.add_argument("--lowercase", action="store_true", help="lower-case the input")
    text.add_argument(
        "--split-punctuation",
        action="store_true",
        help="split punctuation off words (and glue it back on output)",
    )
    text.add_argument("--fold-accents", action="store_true", help="strip accents (é -> e)")
    add_bundle_arguments(eole)
    args = show_defaults(parser).parse_args(argv)
    problem = check_bundle_arguments(args)
    if problem:
        print(f"nmt-convert: error: {problem}", file=sys.stderr)
        return 2
    options = bundle_options(args)

    def export() -> dict:
        return convert_eole(
            args.model,
            args.out,
            lowercase=args.lowercase,
            split_punctuation=args.split_punctuation,
            fold_accents=args.fold_accents,
            src_subword_model=args.src_subword_model,
            tgt_subword_model=args.tgt_subword_model,
            **options,
        )

    return run_export("nmt-convert", export, args.out)


if __name__ == "__main__":
    sys.exit(main())
