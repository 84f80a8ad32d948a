"""Eole RNN models and OpenNMT-py 1.x-3.x checkpoints as :class:`export.user.UserModel`:
``nmt-convert eole MODEL_DIR`` / ``nmt-convert opennmt-py model_step_N.pt``.

:mod:`export.eole_reader` and :mod:`export.onmt_py` load the checkpoint and rebuild its
modules (:mod:`export.eole_modules`); this module declares how they are called (the
step's position rides along as decoder state: :class:`EoleStep`), how their text is
tokenised (:mod:`export.eole_text`'s transforms) and what they decode with by default.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import Tensor, nn

from export.eole_text import SideText
from export.signature import Signature
from export.user import UserModel
from models.bpe import BpeTokenizer
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
    # its search resets the log-prob after a target prefix (ScoringRules.prefix_scored)
    "prefix_scored": False,
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
