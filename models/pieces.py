"""SentencePiece segmentation over a vocabulary of the model's own (torch-free).

Eole and OpenNMT-py train on SentencePiece *piece strings* and number them in their own
vocabulary (``vocab.json``: specials first, then pieces by frequency), not with the ids of
the SentencePiece model. Serving such a model takes both files: the SentencePiece model
segments text into pieces, the vocabulary maps pieces to the ids the network learned
(a piece the vocabulary lacks becomes ``unk``), and on the way back the pieces of the
output ids are joined by SentencePiece's own detokeniser (``▁`` -> space). This is what
Eole's ``sentencepiece`` transform does at inference (``encode(text, out_type=str)``,
``DecodePieces``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from models.tokenizer import (
    TokenizerError,
    decode_pieces,
    index_vocabulary,
    mark_ids,
    nonempty_str,
    sentencepiece_processor,
)


class PieceTokenizer:
    """Text <-> ids through SentencePiece pieces and a piece vocabulary; same interface
    as :class:`models.tokenizer.Tokenizer`."""

    kind = "pieces"

    def __init__(
        self,
        model_proto: bytes,
        tokens: Sequence[str],
        *,
        unk_id: int,
        end_tokens: Sequence[str] = (),
        strip: bool = False,
    ) -> None:
        """``model_proto``: the SentencePiece model's bytes; ``tokens``: the vocabulary,
        token by id; ``unk_id``: the id of pieces the vocabulary lacks; ``end_tokens``:
        appended to every sentence (Joey NMT appends ``</s>`` to its sources);
        ``strip``: decoded text loses leading and trailing spaces (Joey NMT strips it; a
        final lone ``▁`` piece otherwise leaves a space)."""
        self.model_proto = model_proto
        self._sp = sentencepiece_processor(model_proto)
        self.tokens = list(tokens)
        self.ids = index_vocabulary(
            self.tokens, unk_id, is_token=nonempty_str, bad="is not a piece"
        )
        self.unk_id = unk_id
        self._end_ids = mark_ids(self.ids, end_tokens, "end")
        self.end_tokens = tuple(end_tokens)
        self.strip = strip

    @classmethod
    def from_files(
        cls, model: Path | str, vocab: Path | str, *, unk_id: int, **options
    ) -> PieceTokenizer:
        """Read the SentencePiece model and a JSON list of tokens (the bundle's files)."""
        try:
            proto = Path(model).read_bytes()
        except FileNotFoundError:
            raise TokenizerError(f"SentencePiece model not found: {model}") from None
        try:
            tokens = json.loads(Path(vocab).read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise TokenizerError(f"vocabulary file not found: {vocab}") from None
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise TokenizerError(f"{vocab} is not a JSON list of pieces: {exc}") from None
        if not isinstance(tokens, list):
            raise TokenizerError(f"{vocab} is not a JSON list of pieces")
        return cls(proto, tokens, unk_id=unk_id, **options)

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        """Vocabulary ids of ``text``'s pieces, without BOS/EOS; unknown pieces are unk."""
        get, unk = self.ids.get, self.unk_id
        ids = [get(p, unk) for p in self._sp.encode(text, out_type=str)]
        return ids + self._end_ids if ids else ids

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        get, unk, end = self.ids.get, self.unk_id, self._end_ids
        pieces = self._sp.encode(list(texts), out_type=str)
        return [[get(p, unk) for p in ps] + end if ps else [] for ps in pieces]

    def is_special(self, token_id: int) -> bool:
        """Whether no text segments to ``token_id``: a vocabulary entry SentencePiece does
        not produce (``<blank>``, ``<unk>``) or one of its control pieces (``<s>``)."""
        sp = self._sp
        piece_id = sp.piece_to_id(self.tokens[int(token_id)])
        return sp.IsUnknown(piece_id) or sp.IsControl(piece_id) or sp.IsUnused(piece_id)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """Piece strings of ``ids``, e.g. for labelling attention heatmaps."""
        return [self.tokens[int(i)] for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        """SentencePiece's detokenisation of the pieces (a piece it does not know, such as
        ``<unk>``, comes out as its unknown surface `` ⁇ ``, as in Eole)."""
        text = self._sp.decode_pieces(self.pieces(ids))
        return text.strip() if self.strip else text

    def surface(self, text: str) -> list[str]:
        """``text``'s pieces as written, one per id of :meth:`encode`."""
        pieces = self._sp.encode(text, out_type=str)
        return pieces + list(self.end_tokens) if pieces else pieces

    def detokenize(self, pieces: Sequence[str]) -> str:
        """The text of piece strings, some perhaps copied from a source (``replace_unk``)."""
        text = decode_pieces(self._sp, pieces)
        return text.strip() if self.strip else text

    def options(self) -> dict:
        """What the manifest records besides the files (Joey NMT's options only when
        set: a manifest without them reads as before)."""
        joey = {"end_tokens": list(self.end_tokens)} if self.end_tokens else {}
        return {"unk_id": self.unk_id} | joey | ({"strip": True} if self.strip else {})

    def write(self, directory: Path, side: str) -> dict[str, str]:
        """Write this tokenizer's files into ``directory``; their manifest keys."""
        files = {"file": f"{side}.vocab.json", "model_file": f"{side}.spm.model"}
        text = json.dumps(self.tokens, ensure_ascii=False) + "\n"
        (directory / files["file"]).write_text(text, encoding="utf-8")
        (directory / files["model_file"]).write_bytes(self.model_proto)
        return files

    def __getstate__(self) -> dict:
        return {"model_proto": self.model_proto, "tokens": self.tokens} | self.options()

    def __setstate__(self, state: dict) -> None:
        self.__init__(**state)
