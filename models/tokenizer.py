"""SentencePiece tokenizers with the project's fixed special ids (torch-free)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import sentencepiece as spm

from models.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID


class TokenizerError(ValueError):
    """A tokenizer model that cannot be used with this project."""


def train_sentencepiece(
    sentences: Iterable[str],
    out_prefix: Path,
    *,
    vocab_size: int,
    model_type: str = "unigram",
    character_coverage: float = 1.0,
    seed_sentences: int = 200_000,
) -> Path:
    """Train a SentencePiece model with pad/unk/bos/eos = 0/1/2/3; returns the .model path."""
    out_prefix.parent.mkdir(parents=True, exist_ok=True)
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(sentences),
        model_prefix=str(out_prefix),
        vocab_size=vocab_size,
        model_type=model_type,
        character_coverage=character_coverage,
        pad_id=PAD_ID,
        unk_id=UNK_ID,
        bos_id=BOS_ID,
        eos_id=EOS_ID,
        input_sentence_size=seed_sentences,
        shuffle_input_sentence=True,
        num_threads=2,
        minloglevel=2,
    )
    return out_prefix.with_suffix(".model")


class Tokenizer:
    """Text <-> ids for one side of the model."""

    def __init__(self, model_proto: bytes) -> None:
        self.model_proto = model_proto
        self._sp = spm.SentencePieceProcessor()
        try:
            self._sp.LoadFromSerializedProto(model_proto)
        except Exception as exc:  # sentencepiece raises plain RuntimeError/OSError
            raise TokenizerError(f"not a SentencePiece model: {exc}") from None
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if ids != (PAD_ID, UNK_ID, BOS_ID, EOS_ID):
            raise TokenizerError(
                f"tokenizer special ids (pad, unk, bos, eos) are {ids}, expected "
                f"{(PAD_ID, UNK_ID, BOS_ID, EOS_ID)}; retrain it with `nmt-data spm`"
            )

    @classmethod
    def from_file(cls, path: Path | str) -> Tokenizer:
        try:
            return cls(Path(path).read_bytes())
        except FileNotFoundError:
            raise TokenizerError(f"tokenizer model not found: {path}") from None

    @property
    def vocab_size(self) -> int:
        return self._sp.get_piece_size()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without BOS/EOS."""
        return self._sp.encode(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self._sp.encode(list(texts))

    def decode(self, ids: Sequence[int]) -> str:
        return self._sp.decode(list(ids))

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """Piece strings of ``ids``, e.g. for labelling attention heatmaps."""
        # One call for the list: per-id calls cost 4x as much per request.
        return self._sp.id_to_piece([int(i) for i in ids])

    def save(self, path: Path) -> None:
        path.write_bytes(self.model_proto)

    def __getstate__(self) -> bytes:
        return self.model_proto

    def __setstate__(self, state: bytes) -> None:
        self.__init__(state)


def read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh]
