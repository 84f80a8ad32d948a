"""The OpenNMT Tokenizer (``pyonmttok``) over a vocabulary of the model's own (torch-free).

Eole's ``onmt_tokenize`` transform (and OpenNMT-py's before it) tokenises text with
``pyonmttok.Tokenizer(**onmttok_kwargs, bpe_model_path=... | sp_model_path=...)``: a mode
(``none``, ``conservative``, ``aggressive``, ...), joiner or spacer annotation, case
markup, optional BPE or SentencePiece subwords. The model numbers the resulting tokens in
its ``vocab.json``; on the way back Eole calls the same tokenizer's ``detokenize`` and turns
byte-fallback pieces (``<0xE2><0x82><0xAC>``) back into characters. This module does the
same with the same library, so a bundle of this kind needs ``pip install pyonmttok``
(OpenNMT-py 3.5's transform leaves byte pieces as they are: ``decode_bytes=False``).
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from models.tokenizer import SegmentingTokenizer, TokenizerError, bundle_file

SUBWORD_TYPES = ("none", "bpe", "sentencepiece")
_MODEL_FILE = {"bpe": "bpe.codes", "sentencepiece": "spm.model"}
_MODEL_ARG = {"bpe": "bpe_model_path", "sentencepiece": "sp_model_path"}
_BYTES = re.compile(r"(?:<0x[0-9A-Fa-f]{2}>\s*)+")  # Eole's byte-fallback pattern


def _bytes_to_text(match: re.Match) -> str:
    data = bytes.fromhex("".join(re.findall(r"<0x([0-9A-Fa-f]{2})>", match.group(0))))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "\N{REPLACEMENT CHARACTER}"


class OnmtTokenizer(SegmentingTokenizer):
    """Text <-> ids through ``pyonmttok`` and a token vocabulary; same interface as
    :class:`models.tokenizer.Tokenizer`."""

    kind = "onmt"

    def __init__(
        self,
        tokens: Sequence[str],
        *,
        unk_id: int,
        options: dict[str, Any],
        subword_type: str = "none",
        model_file: Path | str | None = None,
        decode_bytes: bool = True,
        vocabulary_file: Path | str | None = None,
        vocabulary_threshold: int = 0,
    ) -> None:
        """``options``: ``pyonmttok.Tokenizer`` keyword arguments (``mode`` included, no
        file paths); ``subword_type``/``model_file``: the BPE codes or SentencePiece model;
        ``decode_bytes``: turn byte-fallback pieces back into characters after
        detokenising (Eole does, OpenNMT-py 3.5 does not); ``vocabulary_file`` /
        ``vocabulary_threshold``: pyonmttok's subword vocabulary restriction (tokens seen
        fewer times are split further), as Eole passes it with a threshold above 0."""
        try:
            import pyonmttok
        except ImportError:
            raise TokenizerError(
                "this tokenizer is the OpenNMT Tokenizer: pip install pyonmttok"
            ) from None
        if subword_type not in SUBWORD_TYPES:
            known = ", ".join(SUBWORD_TYPES)
            raise TokenizerError(f"subword type {subword_type!r}; known: {known}")
        if (subword_type == "none") != (model_file is None):
            raise TokenizerError(f"subword type {subword_type!r} with model file {model_file}")
        paths = sorted(set(options) & {"bpe_model_path", "sp_model_path", "vocabulary_path"})
        if paths:
            raise TokenizerError(f"tokenizer options name files ({', '.join(paths)})")
        self.options_ = dict(options)
        self.subword_type = subword_type
        self.model_file = Path(model_file) if model_file is not None else None
        kwargs = dict(options)
        mode = kwargs.pop("mode", None)
        if not isinstance(mode, str):
            raise TokenizerError(f"tokenizer options {options} lack a mode (none, aggressive, ...)")
        if self.model_file is not None:
            if not self.model_file.is_file():
                raise TokenizerError(f"{subword_type} model not found: {self.model_file}")
            kwargs[_MODEL_ARG[subword_type]] = str(self.model_file)
        self.vocabulary_file = Path(vocabulary_file) if vocabulary_file is not None else None
        self.vocabulary_threshold = int(vocabulary_threshold)
        if self.vocabulary_file is not None:
            if not self.vocabulary_file.is_file():
                raise TokenizerError(f"subword vocabulary not found: {self.vocabulary_file}")
            kwargs["vocabulary_path"] = str(self.vocabulary_file)
            kwargs["vocabulary_threshold"] = self.vocabulary_threshold
        try:
            self._tok = pyonmttok.Tokenizer(mode, **kwargs)
        except (TypeError, ValueError, RuntimeError) as exc:
            raise TokenizerError(f"pyonmttok refuses options {options}: {exc}") from None
        self._set_vocabulary(tokens, unk_id)
        self.decode_bytes = decode_bytes

    def surface(self, text: str) -> list[str]:
        """``text``'s tokens as written, one per id of :meth:`encode`."""
        # training=False: no BPE dropout / SentencePiece sampling (refused at conversion)
        tokens, _ = self._tok.tokenize(text, training=False)
        return list(tokens)

    def detokenize(self, pieces: Sequence[str]) -> str:
        """The text of token strings, some perhaps copied from a source (``replace_unk``)."""
        text = self._tok.detokenize(list(pieces))
        return _BYTES.sub(_bytes_to_text, text) if self.decode_bytes else text

    def options(self) -> dict:
        """What the manifest records besides the files."""
        return {
            "unk_id": self.unk_id,
            "subword_type": self.subword_type,
            "onmttok": self.options_,
            "decode_bytes": self.decode_bytes,
        } | ({"vocabulary_threshold": self.vocabulary_threshold} if self.vocabulary_file else {})

    def write(self, directory: Path, side: str) -> dict[str, str]:
        """Write this tokenizer's files into ``directory``; their manifest keys."""
        files = self._write_vocabulary(directory, side)
        if self.model_file is not None:
            files["model_file"] = f"{side}.{_MODEL_FILE[self.subword_type]}"
            shutil.copyfile(self.model_file, directory / files["model_file"])
        if self.vocabulary_file is not None:
            files["vocabulary_file"] = f"{side}.subword-vocab.txt"
            shutil.copyfile(self.vocabulary_file, directory / files["vocabulary_file"])
        return files


def load_onmt(entry: dict, directory: Path) -> OnmtTokenizer:
    """The ``onmt`` tokenizer a manifest entry describes (see :meth:`OnmtTokenizer.write`)."""
    try:
        tokens = json.loads(bundle_file(directory, entry["file"]).read_text(encoding="utf-8"))
        options, unk_id = entry["onmttok"], entry["unk_id"]
    except (KeyError, OSError, ValueError) as exc:
        raise TokenizerError(f"unreadable onmt tokenizer entry {entry}: {exc}") from None
    if not isinstance(tokens, list) or not isinstance(options, dict) or not isinstance(unk_id, int):
        raise TokenizerError("an onmt tokenizer entry needs a token list, onmttok options, unk_id")
    model, vocabulary = entry.get("model_file"), entry.get("vocabulary_file")
    return OnmtTokenizer(
        tokens,
        unk_id=unk_id,
        options=options,
        subword_type=str(entry.get("subword_type", "none")),
        model_file=bundle_file(directory, model) if model else None,
        decode_bytes=bool(entry.get("decode_bytes", True)),
        vocabulary_file=bundle_file(directory, vocabulary) if vocabulary else None,
        vocabulary_threshold=int(entry.get("vocabulary_threshold", 0)),
    )
