"""``nmt-convert eole MODEL_DIR --out model_repository/<name>/<version>``,
``nmt-convert opennmt-py model_step_N.pt --out ...``, ``nmt-convert joeynmt
MODEL_DIR/config.yaml --out ...`` (:mod:`export.joeynmt`), ``nmt-convert fairseq
checkpoint_best.pt --out ...`` (:mod:`export.fairseq`) and ``nmt-convert marian
model.npz --out ...`` (:mod:`export.marian`; Nematus-format models too, also as
``nmt-convert nematus``: :mod:`export.nematus`), ``nmt-convert keras CHECKPOINT_DIR
--source-tokenizer inp.json --target-tokenizer targ.json ...`` (TensorFlow's tutorial
models: :mod:`export.keras`; its newer version: ``nmt-convert keras-text``,
:mod:`export.keras_text`), ``nmt-convert opennmt-tf MODEL_DIR --config config.yml
--out ...`` (:mod:`export.opennmt_tf`); ``nmt-convert ensemble BUNDLE BUNDLE
... --out ...`` composes bundles into one ensemble (:mod:`export.ensemble`).

Converters in CTranslate2's shape: load the checkpoint, refuse (by name) every option
the bundle cannot express, then write the bundle through the same gate as every other
way in (:func:`export.user.export_modules`). Eole's modules are rebuilt from its weights
in :mod:`export.eole_modules` (OpenNMT-py's, which Eole forked, too: :mod:`export.onmt_py`
renames them); :mod:`export.eole` declares how they are called and tokenised; this
module is the command line.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from export.cli import add_bundle_arguments, bundle_options, check_bundle_arguments, run_export
from export.user import export_modules
from models.commands import parse_strictly, show_defaults


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
    from export.eole import eole_user_model

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


def convert_keras(
    checkpoint: Path | str,
    out: Path | str,
    *,
    source_tokenizer: Path | str,
    target_tokenizer: Path | str,
    max_source_length: int,
    max_target_length: int,
    **options,
) -> dict:
    """Convert a model TensorFlow's attention tutorial trained (its ``tf.train.Checkpoint``
    and the two ``Tokenizer.to_json()`` files) into a bundle in ``out``; returns the
    manifest. ``options``: those of :func:`export.user.export_modules`."""
    from export.keras import keras_user_model

    user = keras_user_model(
        Path(checkpoint),
        Path(source_tokenizer),
        Path(target_tokenizer),
        max_source_length=max_source_length,
        max_target_length=max_target_length,
    )
    return export_modules(user, out, **options)


def convert_keras_text(
    checkpoint: Path | str,
    out: Path | str,
    *,
    source_vocabulary: Path | str | None = None,
    target_vocabulary: Path | str | None = None,
    **options,
) -> dict:
    """Convert a model TensorFlow's newer attention tutorial trained (the SavedModel
    ``tf.saved_model.save`` wrote, or ``model.save_weights`` and the two
    ``get_vocabulary()`` lists as JSON) into a bundle in ``out``; returns the manifest.
    ``options``: those of :func:`export.user.export_modules`."""
    from export.keras_text import keras_text_user_model

    vocabularies = [
        Path(v) if v is not None else None for v in (source_vocabulary, target_vocabulary)
    ]
    user = keras_text_user_model(Path(checkpoint), *vocabularies)
    return export_modules(user, out, **options)


def convert_opennmt_tf(
    model: Path | str,
    out: Path | str,
    *,
    configs: Sequence[Path | str],
    auto_config: bool | None = None,
    model_type: str | None = None,
    source_vocabulary: Path | str | None = None,
    target_vocabulary: Path | str | None = None,
    **options,
) -> dict:
    """Convert an OpenNMT-tf 2.x RNN model (its model directory or a checkpoint in it, and
    the ``--config`` files ``onmt-main`` ran with) into a bundle in ``out``; returns the
    manifest. ``options``: those of :func:`export.user.export_modules`."""
    from export.opennmt_tf import opennmt_tf_user_model

    def path(p: Path | str | None) -> Path | None:
        return Path(p) if p is not None else None

    user = opennmt_tf_user_model(
        Path(model), [Path(c) for c in configs], auto_config=auto_config, model_type=model_type,
        source_vocabulary=path(source_vocabulary), target_vocabulary=path(target_vocabulary),
    )  # fmt: skip
    return export_modules(user, out, **options)


def _opennmt_tf_parser(sub) -> None:
    from export.opennmt_tf_files import CATALOG

    parser = sub.add_parser(
        "opennmt-tf",
        help="an OpenNMT-tf 2.x RNN model (model directory + its configuration)",
        description="Convert an OpenNMT-tf 2.x RNN model (read without TensorFlow and without "
        "running its model definition): RNNEncoder of LSTM cells (bidirectional or not), "
        "AttentionalRNNDecoder with Luong attention, as the catalog's NMTSmallV1, "
        "NMTMediumV1, NMTBigV1 and LuongAttention build them; text split on spaces or by "
        "an OpenNMTTokenizer configuration. Other models and options are refused by name.",
    )
    parser.add_argument(
        "model",
        type=Path,
        help="the model_dir onmt-main trained into (its latest checkpoint), or a checkpoint "
        "prefix in it (model_dir/ckpt-5000)",
    )
    parser.add_argument("--config", type=Path, nargs="+", required=True, metavar="YAML",
                        help="the configuration files onmt-main ran with, in order")  # fmt: skip
    parser.add_argument("--auto-config", action="store_true",
                        help="onmt-main ran with --auto_config (without: the config's "
                        "auto_config decides)")  # fmt: skip
    parser.add_argument("--model-type", choices=sorted(CATALOG), metavar="NAME",
                        help="the catalog model trained (onmt-main --model_type), when the "
                        "model directory has no model_description.py")  # fmt: skip
    parser.add_argument("--source-vocabulary", type=Path, metavar="FILE",
                        help="the source vocabulary, if not where the config says")  # fmt: skip
    parser.add_argument("--target-vocabulary", type=Path, metavar="FILE",
                        help="the target vocabulary, if not where the config says")  # fmt: skip
    add_bundle_arguments(parser)


def _keras_text_parser(sub) -> None:
    parser = sub.add_parser(
        "keras-text",
        help="a model the newer TensorFlow tutorial (TextVectorization, MultiHeadAttention) "
        "trained (its SavedModel, or model.save_weights + get_vocabulary() lists)",
        description="Convert a model trained with the 2022+ version of TensorFlow's tutorial "
        "'Neural machine translation with attention' (Keras Encoder with a bidirectional "
        "GRU, CrossAttention, Decoder; read without TensorFlow): its "
        "tf_lower_and_split_punct, vocabularies and greedy translate() as the tutorial "
        "runs them. Other models are refused by name.",
    )
    parser.add_argument(
        "checkpoint",
        type=Path,
        help="the SavedModel directory tf.saved_model.save wrote (the tutorial's 'translator'), "
        "or what model.save_weights(prefix) wrote: the prefix (weights/ckpt) or its directory",
    )
    parser.add_argument("--source-vocabulary", type=Path, metavar="JSON",
                        help="context_text_processor.get_vocabulary() as a JSON list (needed "
                        "for model.save_weights; a SavedModel holds it)")  # fmt: skip
    parser.add_argument("--target-vocabulary", type=Path, metavar="JSON",
                        help="target_text_processor.get_vocabulary() as a JSON list (needed "
                        "for model.save_weights; a SavedModel holds it)")  # fmt: skip
    add_bundle_arguments(parser)


def _keras_parser(sub) -> None:
    parser = sub.add_parser(
        "keras",
        aliases=["tensorflow-tutorial"],
        help="a model TensorFlow's 'Neural machine translation with attention' tutorial "
        "trained (tf.train.Checkpoint + Tokenizer.to_json() files)",
        description="Convert a model trained with TensorFlow's tutorial 'Neural machine "
        "translation with attention' (TF 2.x: Keras Encoder, BahdanauAttention, Decoder; "
        "read without TensorFlow): its preprocess_sentence, Keras Tokenizers, source "
        "padding and greedy evaluate() as the tutorial runs them. Other models are refused "
        "by name.",
    )
    parser.add_argument(
        "checkpoint",
        type=Path,
        help="the checkpoint directory (its 'checkpoint' file names the latest save), a "
        "checkpoint prefix such as training_checkpoints/ckpt-10",
    )
    parser.add_argument("--source-tokenizer", type=Path, required=True, metavar="JSON",
                        help="the source side's Tokenizer.to_json() (inp_lang)")  # fmt: skip
    parser.add_argument("--target-tokenizer", type=Path, required=True, metavar="JSON",
                        help="the target side's Tokenizer.to_json() (targ_lang)")  # fmt: skip
    parser.add_argument(
        "--max-source-length",
        type=int,
        required=True,
        metavar="N",
        help="the tutorial's max_length_inp: the width sources were padded to in training "
        "(0: the model was trained without padding)",
    )
    parser.add_argument(
        "--max-target-length",
        type=int,
        required=True,
        metavar="N",
        help="the tutorial's max_length_targ: evaluate() decodes at most this many tokens",
    )
    add_bundle_arguments(parser)


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


def _ensemble_parser(sub) -> None:
    from export.ensemble import COMBINE

    parser = sub.add_parser(
        "ensemble",
        help="several bundles (e.g. converted Marian, Nematus, fairseq or OpenNMT-py models) "
        "decoded as one ensemble",
        description="Compose bundles that share their tokenizers, vocabularies and decoding "
        "defaults into one bundle that decodes with all of them: each step ranks the "
        "candidates by the members' combined log-probs (log-linear: sum of w_i log p_i, "
        "as Marian --models/--weights and Nematus; with w = 1/n and --renormalize, as Eole "
        "and OpenNMT-py -model a b; linear: log sum of w_i p_i, as fairseq --path a:b "
        "with w = 1/n). Gated against the members' own sessions combined in numpy.",
    )
    parser.add_argument("bundles", type=Path, nargs="+", metavar="BUNDLE",
                        help="member bundle directories (at least two)")  # fmt: skip
    parser.add_argument(
        "--combine",
        choices=COMBINE,
        default=COMBINE[0],
        help="how the members' log-probs are combined (default: %(default)s)",
    )
    parser.add_argument(
        "--weights",
        type=float,
        nargs="+",
        metavar="W",
        help="one weight per bundle, 1e-6 to 1e6: log-linear uses them as given (default: "
        "1 each, Marian's), linear scales them to sum to 1 (default: 1/n each, fairseq's)",
    )
    parser.add_argument(
        "--renormalize",
        action="store_true",
        help="log_softmax of the combination at each step: with --weights 1/n each, the "
        "ensembles of Eole and OpenNMT-py >= 3.0.3 (-model a b: the mean of the members' "
        "logits, normalised); OpenNMT-py <= 3.0.2 averages log-probs (no --renormalize)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="bundle directory, e.g. model_repository/en-es/9"
    )
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    parser.add_argument(
        "--parity-src",
        type=Path,
        help="source sentences for the gate (default: random token sequences)",
    )
    parser.add_argument(
        "--parity-limit", type=int, help="use only the first N parity sentences for greedy"
    )
    parser.add_argument(
        "--beam-sentences",
        type=int,
        default=200,
        help="sentences the beam check decodes (>= 1; default: %(default)s)",
    )
    parser.add_argument(
        "--max-source-tokens",
        type=int,
        help="longest source the server accepts (default and most: the members' least)",
    )
    parser.add_argument("--name", help="model name (default: parent dir of --out)")


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
    _keras_parser(sub)
    _keras_text_parser(sub)
    _opennmt_tf_parser(sub)
    _ensemble_parser(sub)
    args = parse_strictly(show_defaults(parser), argv)
    if args.framework == "ensemble":
        return _ensemble(args)
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
        if args.framework in ("keras", "tensorflow-tutorial"):
            return convert_keras(
                args.checkpoint,
                args.out,
                source_tokenizer=args.source_tokenizer,
                target_tokenizer=args.target_tokenizer,
                max_source_length=args.max_source_length,
                max_target_length=args.max_target_length,
                **options,
            )
        if args.framework == "keras-text":
            return convert_keras_text(
                args.checkpoint,
                args.out,
                source_vocabulary=args.source_vocabulary,
                target_vocabulary=args.target_vocabulary,
                **options,
            )
        if args.framework == "opennmt-tf":
            return convert_opennmt_tf(
                args.model, args.out, configs=args.config, auto_config=args.auto_config or None,
                model_type=args.model_type, source_vocabulary=args.source_vocabulary,
                target_vocabulary=args.target_vocabulary, **options,
            )  # fmt: skip
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


def _ensemble(args: argparse.Namespace) -> int:
    from export.ensemble import write_ensemble

    for flag, value in (("--beam-sentences", args.beam_sentences),
                        ("--parity-limit", args.parity_limit),
                        ("--max-source-tokens", args.max_source_tokens)):  # fmt: skip
        if value is not None and value < 1:
            print(f"nmt-convert: error: {flag} must be >= 1, got {value}", file=sys.stderr)
            return 2

    def export() -> dict:
        return write_ensemble(
            args.bundles,
            args.out,
            weights=args.weights,
            combine=args.combine,
            renormalize=args.renormalize,
            force=args.force,
            parity_src=args.parity_src,
            parity_limit=args.parity_limit,
            beam_sentences=args.beam_sentences,
            name=args.name,
            max_source_tokens=args.max_source_tokens,
        )

    return run_export("nmt-convert", export, args.out)


if __name__ == "__main__":
    sys.exit(main())
