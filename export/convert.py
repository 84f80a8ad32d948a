"""``nmt-convert eole MODEL_DIR --out model_repository/<name>/<version>``,
``nmt-convert opennmt-py model_step_N.pt --out ...``, ``nmt-convert joeynmt
MODEL_DIR/config.yaml --out ...`` (:mod:`export.joeynmt`), ``nmt-convert fairseq
checkpoint_best.pt --out ...`` (:mod:`export.fairseq`) and ``nmt-convert marian
model.npz --out ...`` (:mod:`export.marian`; Nematus-format models too, also as
``nmt-convert nematus``: :mod:`export.nematus`).

Converters in CTranslate2's shape: load the checkpoint, refuse (by name) every option
the bundle cannot express, then write the bundle through the same gate as every other
way in (:func:`export.user.export_modules`). Eole's modules are rebuilt from its weights
in :mod:`export.eole_modules` (OpenNMT-py's, which Eole forked, too: :mod:`export.onmt_py`
renames them); this module declares how they are called and tokenised.
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
from export.signature import Signature
from export.user import UserModel, export_modules
from models.bpe import BpeTokenizer
from models.commands import show_defaults
from models.normalize import NormalizingTokenizer
from models.onmt import OnmtTokenizer
from models.pieces import PieceTokenizer
from models.tokenizer import TokenizerError
from models.words import WordTokenizer

# ``eole predict``'s defaults (Eole 0.6.4, eole/config/inference.py): at most
# min(250, 2 x source + 5) target tokens, a hypothesis reaching that many ends without
# EOS (our limit counts the EOS, hence 251 and + 6), no minimum length, and its beam
# search with the "avg" length penalty (alpha 1, BOS counted): see service.strategies.EoleBeam.
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
    gathered with the rest of the state when beams reorder. OpenNMT-py's RNN decoders
    embed every step at position 0 (``advance=False``).
    """

    def __init__(self, decoder: nn.Module, advance: bool = True) -> None:
        super().__init__()
        self.decoder = decoder
        self.advance = advance

    def forward(self, token, hidden, memory, mask, feed, position: Tensor):
        step = position[:, 0].to(torch.long)
        log_probs, hidden, attention, feed = self.decoder(token, hidden, memory, mask, feed, step)
        return log_probs, hidden, attention, feed, position + 1 if self.advance else position


def eole_user_model(
    path: Path,
    *,
    lowercase: bool,
    split_punctuation: bool,
    fold_accents: bool,
    src_subword_model: Path | None = None,
    tgt_subword_model: Path | None = None,
    framework: str = "eole",
) -> UserModel:
    """Load and validate an Eole model directory (``framework="eole"``) or an OpenNMT-py
    1.x-3.x checkpoint (``"opennmt-py"``); its modules with their declaration."""
    from export.eole_modules import EoleError
    from export.eole_reader import load_eole
    from export.onmt_py import DECODING, load_onmt_py
    from export.writer import ExportError

    load, name, wrote = {
        "eole": (load_eole, "Eole", "the directory eole train wrote"),
        "opennmt-py": (load_onmt_py, "OpenNMT-py", "the model_step_N.pt onmt_train wrote"),
    }[framework]
    try:
        m = load(Path(path), src_subword_model, tgt_subword_model)
    except EoleError as exc:
        raise ExportError(str(exc)) from None
    except (KeyError, TypeError, AttributeError, ValueError) as exc:  # malformed files
        raise ExportError(
            f"{path} is not a readable {name} model ({type(exc).__name__}: {exc}); give {wrote}"
        ) from None
    # the decoding defaults of what the model came from (each OpenNMT-py version's own)
    decoding = (
        DECODING[m.options["opennmt_py_options"]] if framework == "opennmt-py" else EOLE_DECODING
    )
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
                "text itself, as it did in training; drop the option"
            )
        try:
            source = _subword_tokenizer(
                m.text.transform, m.text.src, m.src_vocab, m.src_unk_id, m.decode_bytes
            )
            target = _subword_tokenizer(
                m.text.transform, m.text.tgt, m.tgt_vocab, m.unk_id, m.decode_bytes
            )
        except TokenizerError as exc:
            raise ExportError(f"{m.text.transform}: {exc}") from None
    else:
        source = WordTokenizer(m.src_vocab, unk_id=m.src_unk_id, **text)
        target = WordTokenizer(m.tgt_vocab, unk_id=m.unk_id, **text)
    if m.normalize is not None:  # eole predict normalises the source before tokenising
        source = NormalizingTokenizer(source, m.normalize)
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
        EoleStep(m.decoder, advance=m.decoder_positions),
        source,
        target,
        {"pad": m.pad_id, "unk": m.unk_id, "bos": m.bos_id, "eos": m.eos_id},
        signature,
        origin={"converter": framework, "path": str(path), **m.options},
        decoding=decoding,
    )


def _subword_tokenizer(
    transform: str, side: SideText, vocab: list[str], unk_id: int, decode_bytes: bool
):
    """The tokenizer that reproduces one side of the subword ``transform``
    (``decode_bytes``: onmt_tokenize's byte-fallback pieces become text, as Eole's do and
    OpenNMT-py's not)."""
    if transform == "sentencepiece":
        return PieceTokenizer(side.model.read_bytes(), vocab, unk_id=unk_id)
    if transform == "bpe":
        return BpeTokenizer(vocab, unk_id=unk_id, codes_file=side.model, vocabulary=side.vocabulary)
    return OnmtTokenizer(
        vocab,
        unk_id=unk_id,
        options=side.onmttok,
        subword_type=side.subword_type,
        model_file=side.model,
        decode_bytes=decode_bytes,
        vocabulary_file=side.vocabulary_file,
        vocabulary_threshold=side.vocabulary_threshold,
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
    framework: str = "eole",
    **options,
) -> dict:
    """Convert an Eole RNN model directory (or, ``framework="opennmt-py"``, an OpenNMT-py
    1.x-3.x checkpoint) into a bundle in ``out``; returns the manifest.

    A model trained with the ``sentencepiece`` or ``onmt_tokenize`` transform serves raw
    text: the bundle keeps its subword models (found where the options name them or
    beside the model, or given as ``src_subword_model``/``tgt_subword_model``). A model
    trained on text already tokenised takes ``lowercase`` / ``split_punctuation`` /
    ``fold_accents`` to reproduce the preprocessing you applied (none: plain whitespace
    tokens). ``options``: those of :func:`export.user.export_modules`.
    """
    user = eole_user_model(
        Path(path),
        lowercase=lowercase,
        split_punctuation=split_punctuation,
        fold_accents=fold_accents,
        src_subword_model=Path(src_subword_model) if src_subword_model else None,
        tgt_subword_model=Path(tgt_subword_model) if tgt_subword_model else None,
        framework=framework,
    )
    return export_modules(user, out, **options)


def convert_joeynmt(
    config: Path | str, out: Path | str, *, checkpoint: Path | str | None = None, **options
) -> dict:
    """Convert a Joey NMT 2.x RNN model (its ``config.yaml``; the checkpoint beside it, or
    ``checkpoint``) into a bundle in ``out``; returns the manifest. ``options``: those of
    :func:`export.user.export_modules`."""
    from export.joeynmt import joey_user_model

    user = joey_user_model(Path(config), Path(checkpoint) if checkpoint else None)
    return export_modules(user, out, **options)


def convert_fairseq(
    checkpoint: Path | str,
    out: Path | str,
    *,
    data: Path | str | None = None,
    source_lang: str | None = None,
    target_lang: str | None = None,
    bpe: str | None = None,
    bpe_model: Path | str | None = None,
    generation: dict | None = None,
    **options,
) -> dict:
    """Convert a fairseq LSTM checkpoint into a bundle in ``out``; returns the manifest.
    Arguments: those of :func:`export.fairseq.fairseq_user_model`; ``options``: those of
    :func:`export.user.export_modules`."""
    from export.fairseq import fairseq_user_model

    user = fairseq_user_model(
        Path(checkpoint),
        data=Path(data) if data else None,
        source_lang=source_lang,
        target_lang=target_lang,
        bpe=bpe,
        bpe_model=Path(bpe_model) if bpe_model else None,
        generation=generation,
    )
    return export_modules(user, out, **options)


def convert_marian(
    model: Path | str,
    out: Path | str,
    *,
    vocabs: list[Path | str] | None = None,
    decoder: dict | None = None,
    bpe: dict | None = None,
    **options,
) -> dict:
    """Convert a Marian s2s ``model.npz`` into a bundle in ``out``; returns the manifest.
    Arguments: those of :func:`export.marian.marian_user_model`; ``options``: those of
    :func:`export.user.export_modules`."""
    from export.marian import marian_user_model

    user = marian_user_model(
        Path(model),
        vocabs=[Path(v) for v in vocabs] if vocabs else None,
        options=decoder,
        **(bpe or {}),
    )
    return export_modules(user, out, **options)


def _marian_parser(sub) -> None:
    from export.marian import DECODER

    parser = sub.add_parser(
        "marian",
        aliases=["nematus"],
        help="a Marian RNN model (--type s2s, amun or nematus model.npz + its vocabularies) "
        "or a Nematus one (its model.npz, model.npz.json and dictionaries)",
        description="Convert a Marian RNN model (--type s2s; read without Marian): "
        "bidirectional or bi-unidirectional GRU/LSTM encoder of any depth, the conditional "
        "decoder with additive attention, deep transition cells, skip connections, layer "
        "normalisation, tied embeddings; .yml/.json vocabularies (whitespace tokens) or "
        ".spm (raw text). Nematus-format models as Marian reads them (--type amun, --type "
        "nematus, and the model.npz Nematus writes: options read off its weights, "
        "model.npz.json checked, its JSON dictionaries). Decodes as marian-decoder does "
        "(its shrinking beam, length normalisation and length limit). Other options are "
        "refused by name.",
    )
    parser.add_argument(
        "model", type=Path, help="the model.npz Marian's trainer (or Nematus) wrote"
    )
    parser.add_argument(
        "-v",
        "--vocabs",
        type=Path,
        nargs=2,
        metavar=("SRC", "TGT"),
        help="the source and target vocabularies (default: those the model was trained "
        "with, as recorded or beside the model)",
    )
    text = parser.add_argument_group(
        "text (default: tokens in, tokens out, as Marian takes them)",
        "a model trained on subword-nmt BPE (Nematus's WMT systems): the bundle takes the "
        "text before BPE and undoes '@@ ' on the way out",
    )
    text.add_argument("--bpe-codes", type=Path, metavar="FILE", help="subword-nmt codes")
    text.add_argument(
        "--bpe-vocabulary", type=Path, metavar="FILE", help="apply-bpe's --vocabulary"
    )
    text.add_argument(
        "--bpe-vocabulary-threshold",
        type=int,
        metavar="N",
        help="apply-bpe's --vocabulary-threshold",
    )
    dec = parser.add_argument_group(
        "decoding defaults the bundle serves with (marian-decoder's flags; default: the "
        "model's model.npz.decoder.yml, else Marian's)"
    )
    dec.add_argument(
        "-n", "--normalize", type=float, help=f"length normalisation ({DECODER['normalize']})"
    )
    dec.add_argument(
        "--max-length-factor",
        type=float,
        help=f"target tokens per source token ({DECODER['max-length-factor']:g})",
    )
    dec.add_argument(
        "--word-penalty", type=float, help=f"word penalty ({DECODER['word-penalty']:g} only)"
    )
    dec.add_argument("--allow-unk", action="store_true", default=None, help="let <unk> be produced")
    dec.add_argument(
        "--allow-special",
        action="store_true",
        default=None,
        help="let the byte pieces of control characters (<0x00> ... <0x1F>) be produced",
    )
    add_bundle_arguments(parser)


def _fairseq_parser(sub) -> None:
    from export.fairseq import GENERATION

    parser = sub.add_parser(
        "fairseq",
        help="a fairseq LSTM checkpoint (checkpoint_best.pt + dict.SRC.txt, dict.TGT.txt)",
        description="Convert a fairseq LSTM translation model (--arch lstm, "
        "lstm_wiseman_iwslt_de_en, lstm_luong_wmt_en_de; read without fairseq and without "
        "running pickled code): uni- or bidirectional encoder, any layer count, attention, "
        "shared or separate embeddings; whitespace tokens, or --bpe subword_nmt / "
        "sentencepiece as fairseq-interactive takes them. Decodes as fairseq-interactive "
        "does (its beam search, length rule and normalised scores). Other options are "
        "refused by name.",
    )
    parser.add_argument("checkpoint", type=Path, help="the checkpoint fairseq-train wrote")
    parser.add_argument(
        "--data",
        type=Path,
        metavar="DIR",
        help="the directory with dict.SRC.txt and dict.TGT.txt (fairseq-preprocess's "
        "--destdir; default: the checkpoint's directory)",
    )
    parser.add_argument("-s", "--source-lang", metavar="SRC", help="source language")
    parser.add_argument("-t", "--target-lang", metavar="TGT", help="target language")
    text = parser.add_argument_group("subwords (as given to fairseq-interactive)")
    text.add_argument("--bpe", choices=("subword_nmt", "sentencepiece"), help="the BPE")
    text.add_argument("--bpe-codes", type=Path, metavar="PATH", help="subword_nmt's codes")
    text.add_argument(
        "--sentencepiece-model", type=Path, metavar="PATH", help="sentencepiece's .model"
    )
    gen = parser.add_argument_group(
        "generation defaults the bundle serves with (fairseq-interactive's flags)"
    )
    gen.add_argument("--lenpen", type=float, help=f"length penalty ({GENERATION['lenpen']})")
    gen.add_argument(
        "--max-len-a", type=float, help=f"a in a*x+b target tokens ({GENERATION['max_len_a']})"
    )
    gen.add_argument(
        "--max-len-b", type=int, help=f"b in a*x+b target tokens ({GENERATION['max_len_b']})"
    )
    gen.add_argument("--min-len", type=int, help=f"fewest target tokens ({GENERATION['min_len']})")
    add_bundle_arguments(parser)


_SUPPORTED = (
    "rnn/brnn encoders, LSTM/GRU, any layer count, StdRNN and InputFeed decoders, "
    "dot/general/mlp attention, bridge; whitespace tokens or the sentencepiece / "
    "onmt_tokenize / bpe transforms. Other options are refused by name."
)


def _framework_parser(sub, name: str, what: str, description: str, model_help: str):
    parser = sub.add_parser(name, help=what, description=description + _SUPPORTED)
    parser.add_argument("model", type=Path, help=model_help)
    spm = parser.add_argument_group(
        "sentencepiece / onmt_tokenize / bpe transforms (models trained with one; the subword "
        "models are found where the options name them, or beside the model)"
    )
    spm.add_argument(
        "--src-subword-model",
        type=Path,
        metavar="PATH",
        help="the source subword model (SentencePiece model or BPE codes), when the one "
        "the options name is elsewhere",
    )
    spm.add_argument(
        "--tgt-subword-model",
        type=Path,
        metavar="PATH",
        help="the target subword model, when the one the options name is elsewhere",
    )
    text = parser.add_argument_group("preprocessing a whitespace-tokenised model was trained with")
    text.add_argument("--lowercase", action="store_true", help="lower-case the input")
    text.add_argument(
        "--split-punctuation",
        action="store_true",
        help="split punctuation off words (and glue it back on output)",
    )
    text.add_argument("--fold-accents", action="store_true", help="strip accents (é -> e)")
    add_bundle_arguments(parser)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="nmt-convert",
        description="Convert a model trained elsewhere into a bundle nmt-serve loads.",
    )
    sub = parser.add_subparsers(dest="framework", required=True, metavar="FRAMEWORK")
    _framework_parser(
        sub,
        "eole",
        "an Eole (OpenNMT-py's successor) RNN model directory",
        "Convert an Eole 0.6 RNN model directory (config.json, model.00.safetensors, vocab.json): ",
        "the model directory Eole wrote",
    )
    _framework_parser(
        sub,
        "opennmt-py",
        "an OpenNMT-py 1.x, 2.x or 3.x RNN checkpoint (.pt)",
        "Convert an OpenNMT-py 1.x-3.x RNN checkpoint (model_step_N.pt; read without "
        "OpenNMT-py and without running pickled code): ",
        "the checkpoint onmt_train wrote",
    )
    joey = sub.add_parser(
        "joeynmt",
        help="a Joey NMT 2.x RNN model (config.yaml + checkpoint)",
        description="Convert a Joey NMT 2.x RNN model (read without Joey NMT and without "
        "running pickled code): recurrent GRU/LSTM encoder (bidirectional) and decoder, "
        "bahdanau/luong attention, input feeding or not, bridge/last/zero initial state; "
        "word level, or bpe level through SentencePiece or subword-nmt. Other options are "
        "refused by name.",
    )
    joey.add_argument("config", type=Path, help="the config.yaml in the model directory")
    joey.add_argument(
        "--checkpoint",
        type=Path,
        metavar="PATH",
        help="the checkpoint to convert (default: best.ckpt beside the config)",
    )
    add_bundle_arguments(joey)
    _fairseq_parser(sub)
    _marian_parser(sub)
    args = show_defaults(parser).parse_args(argv)
    problem = check_bundle_arguments(args)
    if problem:
        print(f"nmt-convert: error: {problem}", file=sys.stderr)
        return 2
    options = bundle_options(args)

    def export() -> dict:
        if args.framework == "joeynmt":
            return convert_joeynmt(args.config, args.out, checkpoint=args.checkpoint, **options)
        if args.framework in ("marian", "nematus"):
            names = ("normalize", "max_length_factor", "word_penalty", "allow_unk",
                     "allow_special")  # fmt: skip
            return convert_marian(
                args.model,
                args.out,
                vocabs=args.vocabs,
                decoder={n.replace("_", "-"): getattr(args, n) for n in names},
                bpe={
                    "bpe_codes": args.bpe_codes,
                    "bpe_vocabulary": args.bpe_vocabulary,
                    "bpe_threshold": args.bpe_vocabulary_threshold,
                },  # fmt: skip
                **options,
            )
        if args.framework == "fairseq":
            return convert_fairseq(
                args.checkpoint,
                args.out,
                data=args.data,
                source_lang=args.source_lang,
                target_lang=args.target_lang,
                bpe=args.bpe,
                bpe_model=args.bpe_codes or args.sentencepiece_model,
                generation={
                    k: getattr(args, k) for k in ("lenpen", "max_len_a", "max_len_b", "min_len")
                },
                **options,
            )
        return convert_eole(
            args.model,
            args.out,
            lowercase=args.lowercase,
            split_punctuation=args.split_punctuation,
            fold_accents=args.fold_accents,
            src_subword_model=args.src_subword_model,
            tgt_subword_model=args.tgt_subword_model,
            framework=args.framework,
            **options,
        )

    return run_export("nmt-convert", export, args.out)


if __name__ == "__main__":
    sys.exit(main())
