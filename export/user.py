"""Serve your own model: ``export_modules(UserModel(...), out)`` or
``nmt-export --from-modules mypkg.model:load --out model_repository/<name>/<version>``.

``load`` is any function of yours, taking no arguments, that returns a
:class:`UserModel`: your encoder and one-step decoder modules (trained, unchanged),
their tokenizers, the special ids and a :class:`export.modules.Signature` saying how
the modules are called. The export traces them, checks that every sentence translates
exactly as your modules translate it alone, and writes a bundle ``nmt-serve`` loads
without torch.
"""

from __future__ import annotations

import importlib
import re
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from torch import nn

from export.modules import AdaptedModel, AdapterError, Signature
from export.parity import ParityError
from export.spec import BundleConfig
from export.writer import MAX_SOURCE_TOKENS, ExportError, write_bundle
from models.pieces import PieceTokenizer
from models.tokenizer import Tokenizer, read_lines, unk_id_of


@dataclass
class UserModel:
    """A user's trained modules and what is needed to serve them.

    ``source``/``target``: tokenizers, a :class:`models.words.WordTokenizer` (word
    vocabularies), a :class:`models.tokenizer.Tokenizer` (SentencePiece) or a
    :class:`models.pieces.PieceTokenizer` (SentencePiece pieces, a vocabulary's ids).
    ``special_ids``: ``{"pad": .., "unk": .., "bos": .., "eos": ..}`` as the model was
    trained (any ids; the target side's are the ones decoding uses).
    """

    encoder: nn.Module
    decoder: nn.Module
    source: Any
    target: Any
    special_ids: Mapping[str, int]
    signature: Signature = field(default_factory=Signature)
    origin: Mapping[str, Any] | None = None  # where a converter read it from, for the manifest
    # decoding defaults the server applies (DecodeOptions fields), e.g. Eole's length rule
    decoding: Mapping[str, Any] | None = None

    def adapted(self) -> AdaptedModel:
        missing = {"pad", "unk", "bos", "eos"} - set(self.special_ids)
        if missing:
            raise AdapterError(f"special_ids lacks {sorted(missing)}; give pad, unk, bos and eos")
        check_special_ids(self.source, self.target, self.special_ids)
        marks = [*getattr(self.target, "start_tokens", ()), *getattr(self.target, "end_tokens", ())]
        if marks:
            raise AdapterError(
                f"the target tokenizer adds {marks} to every sentence; decoding starts from "
                "bos and stops at eos by itself: give start_tokens/end_tokens to the source "
                "tokenizer only"
            )
        sig = self.signature
        config = BundleConfig(
            src_vocab_size=self.source.vocab_size,
            tgt_vocab_size=self.target.vocab_size,
            pad_id=int(self.special_ids["pad"]),
            unk_id=int(self.special_ids["unk"]),
            bos_id=int(self.special_ids["bos"]),
            eos_id=int(self.special_ids["eos"]),
            state_names=sig.state_names,
            exact_lengths="lengths" not in sig.encoder_args,
        )
        return AdaptedModel(self.encoder, self.decoder, config=config, signature=sig).eval()

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "modules",
            "encoder": f"{type(self.encoder).__module__}.{type(self.encoder).__qualname__}",
            "decoder": f"{type(self.decoder).__module__}.{type(self.decoder).__qualname__}",
            "signature": self.signature.describe(),
        } | ({"origin": dict(self.origin)} if self.origin else {})


# Vocabulary entries that look like markers, not words: <pad>, [UNK], SOS, </s>.
_MARKER = re.compile(r"^(<.*>|\[.*\]|[A-Z_]+)$")
# Special ids that must not be words: the server never emits target pad or bos, ends a
# translation at eos, and reads every unknown source word as unk.
_NOT_WORDS = (
    ("target", "pad", "would never be produced"),
    ("target", "bos", "would never be produced"),
    ("target", "eos", "would end every translation it appears in"),
    ("source", "unk", "would stand for every unknown source word"),
)


def word_at(tokenizer: Any, token_id: int) -> str | None:
    """The text of ``token_id`` when it is an ordinary token that text encodes to (a
    word), else None (a marker, a control piece, an id outside the vocabulary)."""
    if not 0 <= token_id < tokenizer.vocab_size:
        return None
    tokenizer = getattr(tokenizer, "inner", tokenizer)  # a NormalizingTokenizer's own
    if isinstance(tokenizer, Tokenizer | PieceTokenizer):  # SentencePiece: control pieces
        return None if tokenizer.is_special(token_id) else tokenizer.decode([token_id]) or None
    (text,) = tokenizer.pieces([token_id])
    if _MARKER.match(text) or not hasattr(tokenizer, "words"):
        return None
    return text if tokenizer.words(text) == [text] else None


def check_special_ids(source: Any, target: Any, special_ids: Mapping[str, int]) -> None:
    """Refuse special ids that are words of the vocabulary: the export and its gate
    would pass (their reference uses the same ids) and the bundle translate wrong."""
    for side, name, harm in _NOT_WORDS:
        token_id = int(special_ids[name])
        if side == "source":
            # a vocabulary of its own maps unknown words to its own unk (d2l's sorted
            # vocabularies put the specials at different ids on the two sides)
            own = unk_id_of(source)
            token_id = token_id if own is None else own
        word = word_at(source if side == "source" else target, token_id)
        if word is not None:
            raise AdapterError(
                f"special_ids: {name} {token_id} is the {side} word {word!r}, which {harm}; "
                f"give {name} an id of its own (the PyTorch tutorial's Lang has only SOS and "
                "EOS: add PAD and UNK entries before training)"
            )


def load_user_model(target: str) -> UserModel:
    """Call ``module:function`` for a UserModel: a module importable from the working
    directory (``mypkg.model``), or a Python file's path (``src/mymodel.py``), whose
    directory then comes first on the import path, as ``python src/mymodel.py`` has it."""
    module_name, _, func_name = target.rpartition(":")
    if not module_name or not func_name:
        raise ExportError(
            f"--from-modules takes MODULE:FUNCTION, e.g. mypkg.model:load or "
            f"src/mymodel.py:load; got {target!r}"
        )
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")  # the user's package in the working directory
    path = Path(module_name)
    if path.suffix == ".py":
        if not path.is_file():
            raise ExportError(f"cannot import {module_name!r}: no such file")
        sys.path.insert(0, str(path.resolve().parent))
        module_name = path.stem
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        where = "this directory" if exc.name == module_name.split(".")[0] else "the import path"
        raise ExportError(
            f"cannot import {module_name!r}: no module named {exc.name!r} in {where}: run "
            "nmt-export from the directory that holds it, give the file's path "
            "(src/mymodel.py:load), or add its directory to PYTHONPATH"
        ) from None
    except Exception as exc:  # a SyntaxError/... in the user's module
        raise ExportError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from None
    func = getattr(module, func_name, None)
    if not callable(func):
        raise ExportError(f"{module_name} has no function {func_name!r}")
    try:
        model = func()
    except Exception as exc:  # the user's loader: one line, not a traceback
        raise ExportError(f"{target} raised {type(exc).__name__}: {exc}") from exc
    if not isinstance(model, UserModel):
        raise ExportError(
            f"{target} returned {type(model).__name__}; it must return an export.user.UserModel"
        )
    return model


def parity_ids(
    tokenizer: Any,
    config: BundleConfig,
    path: Path | None,
    limit: int | None,
    seed: int = 0,
) -> tuple[list[list[int]], str]:
    """Token ids the gate decodes: the lines of ``path``, else random token sequences
    (a model without data of its own; specials left out)."""
    if path is not None:
        if not path.is_file():
            raise ExportError(f"parity source file not found: {path}")
        lines = [line for line in read_lines(path) if line.strip()]
        lines = lines[:limit] if limit else lines
        ids = [s for s in tokenizer.encode_batch(lines) if s]
        if not ids:
            raise ExportError(
                f"{path}: no parity sentences: give --parity-src with at least one non-empty line"
            )
        return ids, str(path)
    rng = np.random.default_rng(seed)
    specials = {config.pad_id, config.unk_id, config.bos_id, config.eos_id}
    pool = np.array([i for i in range(config.src_vocab_size) if i not in specials])
    n = limit or 50
    return [list(rng.choice(pool, rng.integers(1, 16))) for _ in range(n)], "random"


def export_modules(
    user: UserModel,
    out: Path | str,
    *,
    parity_src: Path | str | None = None,
    parity_limit: int | None = None,
    beam_sentences: int = 200,
    name: str | None = None,
    force: bool = False,
    precision: str = "fp32",
    parity_ref: Path | str | None = None,
    max_source_tokens: int = MAX_SOURCE_TOKENS,
) -> dict:
    """Export ``user``'s modules as a bundle in ``out`` and return its manifest.

    The gate decodes the ``parity_src`` lines (random token sequences without it) with
    the ONNX graphs, in padded batches as the service does, and with your modules one
    sentence at a time; greedy must agree token for token, beam on every n-best list.
    Raises :class:`export.parity.ParityError` (nothing written) when they do not.
    """
    kwargs = dict(
        force=force,
        beam_sentences=beam_sentences,
        name=name,
        precision=precision,
        parity_ref=Path(parity_ref) if parity_ref else None,
        parity_limit=parity_limit,
        max_source_tokens=max_source_tokens,
    )
    model = user.adapted()
    sources, source_name = parity_ids(
        user.source, model.config, Path(parity_src) if parity_src else None, parity_limit
    )
    try:
        return _write(user, model, out, sources, source_name, **kwargs)
    except ParityError as exc:
        if "greedy output differs" not in str(exc) and "n-best differs" not in str(exc):
            raise
        raise ParityError(
            f"{exc}. The gate compares each sentence decoded in padded batches (as served) "
            "with your modules decoding it alone: a decoder that reads the encoder memory "
            "outside its attention softmax sees the padding; give it a mask argument and list "
            "'mask' in Signature.decoder_args"
        ) from None


def _write(user, model, out, sources, source_name, **kwargs) -> dict:
    return write_bundle(
        model,
        user.source,
        user.target,
        Path(out),
        sources=sources,
        source_name=source_name,
        provenance={"source_model": user.describe()},
        description=user.describe(),
        # your modules' own answer is a sentence decoded alone, with no padding
        reference_batch_size=1,
        decoding=dict(user.decoding or {}),
        **kwargs,
    )
