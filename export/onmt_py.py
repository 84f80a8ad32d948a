"""Read an OpenNMT-py 1.x, 2.x or 3.x RNN checkpoint (``model_step_N.pt``) into the Eole modules.

Eole forked OpenNMT-py 3.5, and for RNN translation models the two compute the same
thing: the same embeddings, (b)RNN encoder and bridge, StdRNN / InputFeed decoders,
global attention and beam search. What differs is where things are written:

* one ``.pt`` file, a pickled dict ``{"model", "generator", "vocab", "opt", "optim"}``:
  the options are an ``argparse.Namespace`` of every training option (flat, not Eole's
  nested config), the vocabularies lists of tokens, the generator's weights apart;
* embeddings live under ``encoder.embeddings.make_embedding.emb_luts.0`` (Eole:
  ``src_emb.embeddings``);
* with ``position_encoding``, OpenNMT-py's RNN decoders call the embeddings without the
  step, so every target position gets ``pe[0]`` (Eole: ``pe[step]``);
* ``onmt_translate``'s length limit is ``min(250, 1.25 x source + 5)`` (Eole: 2 x).

OpenNMT-py 1.x and 2.x checkpoints hold the same weights and options, but their
vocabularies are pickled torchtext ``Field`` objects (``TextMultiField`` of ``Field`` with
a ``Vocab``), and their ``onmt_translate`` decodes with other defaults (at most 100
tokens whatever the source length, no length penalty) and ends beam search otherwise.

The checkpoint is read with ``torch.load(weights_only=True)`` allowing only
``argparse.Namespace`` besides tensors and containers, and for 2.x the few torchtext and
OpenNMT-py names its vocabulary pickles, each read into an inert stand-in that only keeps
the attributes (:class:`_Pickled`): no OpenNMT-py or torchtext install is needed and no
code in the file runs. This module renames what it read into Eole's layout and hands it
to :func:`export.eole_modules.build_model`, which checks every option.
"""

from __future__ import annotations

import argparse
import ast
import zipfile
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from export.eole_modules import EoleError, EoleModel, build_model

# onmt_translate's defaults (OpenNMT-py 3.5.1, onmt/opts.py; translator.py:828): at most
# int(min(250, 1.25 x source + 5)) target tokens before EOS, i.e. floor(1.25 x source)
# + 6 with the EOS this server counts; no minimum length; Eole's beam search and "avg"
# length penalty (Eole forked it unchanged).
ONMT_DECODING = {
    "max_length": 251,
    "max_length_ratio": 1.25,
    "max_length_offset": 6,
    "min_length": 0,
    "length_penalty": 1.0,
    "search": "eole",
}
# onmt_translate 1.x's and 2.x's defaults (OpenNMT-py 1.2.0 and 2.3.0, onmt/opts.py:
# -max_length 100, -min_length 0, -length_penalty none, -ratio 0): at most 100 tokens
# before the length limit ends a hypothesis without an EOS, whatever the source length
# (101 with the EOS this server counts; no ratio: 0 x source + 101); scores are plain
# log-probs (length penalty exponent 0). Their beam searches end otherwise than Eole's,
# and each otherwise than the other (service.strategies.OnmtPy1Beam, OnmtPy2Beam).
ONMT2_DECODING = {
    "max_length": 101,
    "max_length_ratio": 0.0,
    "max_length_offset": 101,
    "min_length": 0,
    "length_penalty": 0.0,
    "search": "opennmt-py-2",
}
ONMT1_DECODING = ONMT2_DECODING | {"search": "opennmt-py-1"}
# the decoding defaults of each OpenNMT-py version's onmt_translate
DECODING = {"1.x": ONMT1_DECODING, "2.x": ONMT2_DECODING, "3.x": ONMT_DECODING}
_RENAME = {
    "encoder.embeddings.make_embedding.emb_luts.0.weight": "src_emb.embeddings.weight",
    "encoder.embeddings.make_embedding.pe.pe": "src_emb.pe.pe",
    "decoder.embeddings.make_embedding.emb_luts.0.weight": "tgt_emb.embeddings.weight",
    "decoder.embeddings.make_embedding.pe.pe": "tgt_emb.pe.pe",
}
# Options Eole's nested config keeps under model.encoder / model.decoder.
_SUBWORD_OPTIONS = (
    "subword_model",
    "subword_type",
    "subword_nbest",
    "subword_alpha",
    "subword_vocab",
    "vocab_threshold",
    "onmttok_kwargs",
)


class _Pickled:
    """Stands in for a class a 1.x/2.x checkpoint's vocabulary pickles (torchtext's
    ``Field`` and ``Vocab``, OpenNMT-py's ``TextMultiField``, ``functools.partial``):
    unpickling only fills its attributes, so none of those packages' code runs. The two
    the converter reads are told apart by subclasses."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args

    def __setstate__(self, state: Any) -> None:
        self.__dict__.update(state if isinstance(state, dict) else {"state": state})


class _TextMultiField(_Pickled):
    pass


class _Field(_Pickled):
    pass


def _never_called(*args: Any, **kwargs: Any) -> None:
    """Stands in for the tokenizing functions a 2.x ``Field`` names (never called)."""
    raise RuntimeError("a pickled OpenNMT-py 2.x tokenizer function was called")


# (torch's own allowlist already has set and collections.Counter, which 2.x's Vocab holds)
_SAFE_GLOBALS = [
    argparse.Namespace,
    (_TextMultiField, "onmt.inputters.text_dataset.TextMultiField"),
    (_Field, "torchtext.data.field.Field"),
    (_Pickled, "torchtext.vocab.Vocab"),
    (_Pickled, "functools.partial"),
    (_never_called, "onmt.inputters.text_dataset._feature_tokenize"),
    (_never_called, "torchtext.data.utils._split_tokenizer"),
]


def read_checkpoint(path: Path) -> dict[str, Any]:
    """The checkpoint's dict, unpickled with nothing but tensors, containers, the
    options' ``argparse.Namespace`` and (2.x) inert stand-ins for its vocabulary's
    torchtext objects allowed."""
    if path.is_dir():
        eole = (path / "config.json").is_file() and any(path.glob("model.*.safetensors"))
        raise EoleError(
            f"{path} is an Eole model directory: convert it with `nmt-convert eole {path}`"
            if eole
            else f"{path} is a directory: give the OpenNMT-py checkpoint (.pt) itself, e.g. "
            f"{path}/model_step_N.pt"
        )
    if not path.is_file():
        raise EoleError(f"OpenNMT-py checkpoint not found: {path}")
    if not zipfile.is_zipfile(path):
        raise EoleError(f"{path} is not a torch checkpoint (.pt written by onmt_train)")
    try:
        with torch.serialization.safe_globals(_SAFE_GLOBALS):
            ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # pickle/zip errors of every kind: one line
        first = " ".join(str(exc).split())[:200]
        raise EoleError(f"unreadable OpenNMT-py checkpoint {path}: {first}") from None
    if not isinstance(ckpt, dict) or not {"vocab", "opt"} <= set(ckpt):
        raise EoleError(f"{path} is not an OpenNMT-py checkpoint (no vocab and opt inside)")
    if "model" not in ckpt or "generator" not in ckpt:
        raise EoleError(
            f"{path} holds no weights (save_format safetensors keeps them beside it in "
            "*.safetensors); convert a checkpoint saved with the default save_format"
        )
    return ckpt


def _legacy_vocab(path: Path, voc: dict) -> dict[str, Any]:
    """A 2.x checkpoint's torchtext fields as the vocab.json shape: token lists, the
    special tokens the target field names, its BOS as the decoder start."""
    fields = {}
    for side in ("src", "tgt"):
        multi = voc.get(side)
        pairs = getattr(multi, "fields", None)
        if not isinstance(multi, _TextMultiField) or not pairs:
            raise EoleError(f"{path}: the {side} vocabulary is not an OpenNMT-py 2.x field")
        if len(pairs) > 1:
            raise EoleError(
                f"{path}: {side} features ({len(pairs) - 1} besides the words) are not supported"
            )
        field = pairs[0][1]
        itos = getattr(getattr(field, "vocab", None), "itos", None)
        if not isinstance(field, _Field) or not isinstance(itos, list):
            raise EoleError(f"{path}: the {side} field has no token list (vocab.itos)")
        if getattr(field, "lower", False):
            raise EoleError(f"{path}: the {side} field lowercases its input (lower), not supported")
        fields[side] = (field, itos)
    (src, src_itos), (tgt, tgt_itos) = fields["src"], fields["tgt"]
    for name in ("pad_token", "unk_token"):
        if getattr(src, name, None) != getattr(tgt, name, None):
            raise EoleError(
                f"{path}: the source and target fields name different {name}s "
                f"({getattr(src, name, None)!r}, {getattr(tgt, name, None)!r})"
            )
    return {
        "src": src_itos,
        "tgt": tgt_itos,
        "decoder_start_token": tgt.init_token,
        "specials": {
            "pad_token": tgt.pad_token,
            "unk_token": tgt.unk_token,
            "eos_token": tgt.eos_token,
        },
    }


def _config(opt: dict[str, Any]) -> dict[str, Any]:
    """OpenNMT-py's flat options in the shape of Eole's config.json."""
    if opt.get("model_type", "text") != "text":
        raise EoleError(f"model_type {opt['model_type']!r} is not supported (only text)")
    if opt.get("rnn_type", "LSTM") not in ("LSTM", "GRU"):
        raise EoleError(f"rnn_type {opt['rnn_type']!r} is not supported (only LSTM and GRU)")
    if opt.get("n_src_feats"):
        raise EoleError("source features (n_src_feats) are not supported")
    rnn = {"rnn_type": opt.get("rnn_type", "LSTM")}
    position = opt.get("position_encoding_type", "SinusoidalInterleaved")
    transforms: dict[str, dict[str, Any]] = {}
    for name in set(opt.get("transforms") or []) & {"sentencepiece", "onmt_tokenize", "bpe"}:
        section = {}
        for side in ("src", "tgt"):
            for key in _SUBWORD_OPTIONS:
                value = opt.get(f"{side}_{key}")
                if key == "onmttok_kwargs" and isinstance(value, str):
                    value = _literal(value, f"{side}_{key}")
                if value is not None:
                    section[f"{side}_{key}"] = value
        for key in ("gpt2_pretok", "mapped_tokens"):
            if opt.get(key):
                section[key] = opt[key]
        transforms[name] = section
    if "normalize" in (opt.get("transforms") or []):  # OpenNMT-py's options are flat
        keys = ("src_lang", "tgt_lang", "penn", "norm_quote_commas", "norm_numbers")
        keys += ("pre_replace_unicode_punct", "post_remove_control_chars")
        transforms["normalize"] = {k: opt[k] for k in keys if opt.get(k) is not None}
    return {
        "share_vocab": bool(opt.get("share_vocab")),
        "transforms": list(opt.get("transforms") or []),
        "transforms_configs": transforms,
        "model": {
            "architecture": "custom",
            "input_feed": int(opt.get("input_feed", 1)),
            "share_embeddings": bool(opt.get("share_embeddings")),
            "share_decoder_embeddings": bool(opt.get("share_decoder_embeddings")),
            "copy_attn": bool(opt.get("copy_attn")),
            "encoder": {"encoder_type": opt.get("encoder_type", "rnn"), **rnn},
            "decoder": {
                "decoder_type": opt.get("decoder_type", "rnn"),
                "global_attention": opt.get("global_attention", "general"),
                "global_attention_function": opt.get("global_attention_function", "softmax"),
                "coverage_attn": bool(opt.get("coverage_attn")),
                "context_gate": opt.get("context_gate"),
                **rnn,
            },
            "embeddings": {
                "position_encoding_type": position if opt.get("position_encoding") else None,
            },
        },
    }


def _literal(text: str, key: str) -> Any:
    try:
        return ast.literal_eval(text)  # OpenNMT-py keeps e.g. "{'mode': 'none'}" as text
    except (ValueError, SyntaxError):
        raise EoleError(f"{key} {text!r} is not a Python literal dict") from None


def load_onmt_py(
    path: Path, src_subword_model: Path | None = None, tgt_subword_model: Path | None = None
) -> EoleModel:
    """Read an OpenNMT-py 1.x, 2.x or 3.x RNN checkpoint; raise EoleError for anything it
    cannot express. Subword models the options name are looked for where the options
    say, then beside the checkpoint, unless given."""
    path = Path(path)
    ckpt = read_checkpoint(path)
    opt = vars(ckpt["opt"]) if isinstance(ckpt["opt"], argparse.Namespace) else ckpt["opt"]
    voc = ckpt["vocab"]
    if not isinstance(opt, dict) or not isinstance(voc, dict) or "src" not in voc:
        raise EoleError(
            f"{path}: options or vocabulary in a layout this converter does not know "
            "(OpenNMT-py 1.x, 2.x and 3.x checkpoints are supported)"
        )
    legacy = isinstance(voc["src"], _Pickled)
    if legacy:
        vocab = _legacy_vocab(path, voc)
        # 2.x trains from a YAML "data" of corpora, 1.x from onmt_preprocess's prefix
        version = "2.x" if isinstance(opt.get("data"), dict) else "1.x"
    else:
        version = "3.x"
        vocab = {
            "src": list(voc["src"]),
            "tgt": list(voc["tgt"]),
            "decoder_start_token": voc.get("decoder_start_token", "<s>"),
        }
    w: dict[str, Tensor] = {_RENAME.get(k, k): v for k, v in ckpt["model"].items()}
    # 2.x's generator is Sequential(Linear, Cast, LogSoftmax): its Linear is "0."
    w |= {
        f"generator.{k.removeprefix('0.') if legacy else k}": v
        for k, v in ckpt["generator"].items()
    }
    model = build_model(
        _config(opt),
        vocab,
        w,
        path.parent,
        src_subword_model,
        tgt_subword_model,
        bridge_with_brnn=None,
    )
    model.options |= {"opennmt_py_options": version}
    model.decoder_positions = False
    model.decode_bytes = False  # its onmt_tokenize leaves <0x..> pieces as they are
    return model
