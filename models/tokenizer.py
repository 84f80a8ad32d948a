"""SentencePiece tokenizers (the project's trainer fixes their special ids to 0/1/2/3;
imported models give theirs), and how bundles write and load tokenizers (torch-free).

A bundle's manifest names each side's tokenizer by ``kind``: ``sentencepiece`` (ids are
the SentencePiece model's), ``words`` (:mod:`models.words`) or ``pieces`` (SentencePiece
segmentation numbered by a vocabulary of the model's own, :mod:`models.pieces`) or
``onmt`` (the OpenNMT Tokenizer, :mod:`models.onmt`) or ``bpe`` (subword-nmt BPE,
:mod:`models.bpe`).
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import sentencepiece as spm

from models.config import BOS_ID, EOS_ID, PAD_ID, UNK_ID

DEFAULT_SPECIALS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID)
TOKENIZER_KINDS = ("sentencepiece", "words", "pieces", "onmt", "bpe")
# Manifest keys of a tokenizer entry that name files of the bundle.
_FILE_KEYS = ("file", "model_file", "vocabulary_file")


class TokenizerError(ValueError):
    """A tokenizer model that cannot be used with this project."""


def sentencepiece_processor(model_proto: bytes) -> spm.SentencePieceProcessor:
    """A SentencePiece processor of ``model_proto`` (a ``.model`` file's bytes)."""
    sp = spm.SentencePieceProcessor()
    try:
        sp.LoadFromSerializedProto(model_proto)
    except Exception:  # sentencepiece raises plain RuntimeError/OSError, in C++'s words
        raise TokenizerError(
            "not a SentencePiece model (the .model file spm_train wrote; not its .vocab, "
            "nor BPE codes)"
        ) from None
    return sp


def decode_pieces(sp: spm.SentencePieceProcessor, pieces: Sequence[str]) -> str:
    """SentencePiece's detokenisation of ``pieces``; a piece its model does not have (a
    source piece copied in by ``replace_unk``) comes out as its text, ``▁`` a space,
    where SentencePiece would keep the ``▁``."""
    unk = sp.unk_id()
    unk_piece = sp.id_to_piece(unk)
    foreign = [p != unk_piece and sp.piece_to_id(p) == unk for p in pieces]
    if not any(foreign):
        return sp.decode_pieces(list(pieces))
    out: list[str] = []
    pairs = zip(pieces, foreign, strict=True)
    for is_foreign, group in itertools.groupby(pairs, key=lambda pair: pair[1]):
        run = [piece for piece, _ in group]
        if is_foreign:
            out.extend(piece.replace("\u2581", " ") for piece in run)
        else:
            text = sp.decode_pieces(run)
            # SentencePiece drops a leading word boundary: keep it after text already out
            out.append(" " + text if out and run[0].startswith("\u2581") else text)
    return "".join(out).lstrip(" ")


def index_vocabulary(
    tokens: Sequence[str], unk_id: int, *, is_token: Callable[[object], bool], bad: str
) -> dict[str, int]:
    """Token -> id of a vocabulary listed by id; refuses an ``unk_id`` outside it, an
    entry ``is_token`` rejects (the error says it ``bad``) and a repeated entry."""
    if not 0 <= unk_id < len(tokens):
        raise TokenizerError(f"unk id {unk_id} is outside the vocabulary of {len(tokens)}")
    ids: dict[str, int] = {}
    for i, token in enumerate(tokens):
        if not is_token(token):
            raise TokenizerError(f"vocabulary entry {i} ({token!r}) {bad}")
        if token in ids:  # Eole never writes one either (pyonmttok drops repeats)
            raise TokenizerError(
                f"vocabulary entry {i} ({token!r}) repeats entry {ids[token]}: "
                "which id the model learned for it is ambiguous"
            )
        ids[token] = i
    return ids


def nonempty_str(token: object) -> bool:
    """A vocabulary entry that is a string of at least one character."""
    return isinstance(token, str) and bool(token)


def mark_ids(ids: dict[str, int], marks: Sequence[str], which: str) -> list[int]:
    """The ids of ``marks`` (start or end tokens a tokenizer puts around every sentence),
    refusing those the vocabulary ``ids`` lacks."""
    unknown = [t for t in marks if t not in ids]
    if unknown:
        raise TokenizerError(f"{which} tokens {unknown} are not in the vocabulary")
    return [ids[t] for t in marks]


def unk_id_of(tokenizer: Any) -> int | None:
    """The id ``tokenizer`` gives text it does not know, or None when it has none: a
    vocabulary's own ``unk_id`` (words, pieces, onmt, bpe), a SentencePiece model's unk
    piece, either inside a :class:`models.normalize.NormalizingTokenizer`."""
    tok = getattr(tokenizer, "inner", tokenizer)
    if isinstance(tok, Tokenizer):
        return tok.unk_piece_id
    return getattr(tok, "unk_id", None)


class SegmentingTokenizer:
    """What the tokenizers share that segment text with a library of their own
    (``surface``, ``detokenize``) and number the segments with the model's vocabulary:
    ids, pieces, decode and the vocabulary file (same interface as :class:`Tokenizer`).
    Subclasses call :meth:`_set_vocabulary` and give ``surface`` and ``detokenize``."""

    tokens: list[str]
    ids: dict[str, int]
    unk_id: int

    def _set_vocabulary(self, tokens: Sequence[str], unk_id: int) -> None:
        self.tokens = list(tokens)
        self.ids = index_vocabulary(
            self.tokens, unk_id, is_token=nonempty_str, bad="is not a token"
        )
        self.unk_id = unk_id

    def surface(self, text: str) -> list[str]:
        raise NotImplementedError

    def detokenize(self, pieces: Sequence[str]) -> str:
        raise NotImplementedError

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def encode(self, text: str) -> list[int]:
        """Vocabulary ids of ``text``'s segments, without BOS/EOS; unknown ones are unk."""
        get, unk = self.ids.get, self.unk_id
        return [get(token, unk) for token in self.surface(text)]

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[int(i)] for i in ids]

    def decode(self, ids: Sequence[int]) -> str:
        return self.detokenize(self.pieces(ids))

    def _write_vocabulary(self, directory: Path, side: str) -> dict[str, str]:
        """Write the vocabulary (a JSON list, token by id); its manifest key."""
        files = {"file": f"{side}.vocab.json"}
        text = json.dumps(self.tokens, ensure_ascii=False) + "\n"
        (directory / files["file"]).write_text(text, encoding="utf-8")
        return files


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

    kind = "sentencepiece"

    def __init__(
        self, model_proto: bytes, special_ids: tuple[int, int, int, int] | None = DEFAULT_SPECIALS
    ) -> None:
        """``special_ids``: the (pad, unk, bos, eos) ids the model was trained with; each
        one the SentencePiece model defines must match (``None``: no check)."""
        self.model_proto = model_proto
        self._sp = sentencepiece_processor(model_proto)
        self.special_ids = special_ids
        ids = (self._sp.pad_id(), self._sp.unk_id(), self._sp.bos_id(), self._sp.eos_id())
        if special_ids is None:
            return
        if special_ids == DEFAULT_SPECIALS and ids != DEFAULT_SPECIALS:
            raise TokenizerError(
                f"tokenizer special ids (pad, unk, bos, eos) are {ids}, expected "
                f"{DEFAULT_SPECIALS}; retrain it with `nmt-data spm`, or (a model of your own) "
                "pass the ids it was trained with: Tokenizer(proto, special_ids=(pad, unk, "
                "bos, eos))"
            )
        clash = [
            f"{name} {own} (model says {want})"
            for name, own, want in zip(("pad", "unk", "bos", "eos"), ids, special_ids, strict=True)
            if own >= 0 and own != want
        ]
        if clash:
            raise TokenizerError(
                "the SentencePiece model's own special ids differ from the model's: "
                + ", ".join(clash)
                + "; give the ids the model was trained with"
            )

    @classmethod
    def from_file(
        cls, path: Path | str, special_ids: tuple[int, int, int, int] | None = DEFAULT_SPECIALS
    ) -> Tokenizer:
        try:
            return cls(Path(path).read_bytes(), special_ids)
        except FileNotFoundError:
            raise TokenizerError(f"tokenizer model not found: {path}") from None

    def options(self) -> dict:
        """What the manifest records besides the file (nothing: the model says it all)."""
        return {}

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

    def surface(self, text: str) -> list[str]:
        """``text``'s pieces as written, one per id of :meth:`encode` (a character the
        model does not know is itself here, ``<unk>`` there)."""
        return self._sp.encode(text, out_type=str)

    def detokenize(self, pieces: Sequence[str]) -> str:
        """The text of piece strings (:meth:`pieces`, some perhaps copied from a source)."""
        return decode_pieces(self._sp, pieces)

    @property
    def unk_piece_id(self) -> int:
        """The id of text the SentencePiece model has no piece for (its ``<unk>``)."""
        return self._sp.unk_id()

    def is_special(self, token_id: int) -> bool:
        """Whether ``token_id`` is a control, unknown or unused piece (no text maps to it)."""
        sp = self._sp
        return sp.IsControl(token_id) or sp.IsUnknown(token_id) or sp.IsUnused(token_id)

    def pieces(self, ids: Sequence[int]) -> list[str]:
        """Piece strings of ``ids``, e.g. for labelling attention heatmaps."""
        # One call for the list: per-id calls cost 4x as much per request.
        return self._sp.id_to_piece([int(i) for i in ids])

    def save(self, path: Path) -> None:
        path.write_bytes(self.model_proto)

    def write(self, directory: Path, side: str) -> dict[str, str]:
        """Write this tokenizer's file into ``directory``; its manifest key."""
        name = f"{side}.spm.model"
        self.save(directory / name)
        return {"file": name}

    def __getstate__(self) -> bytes:
        return self.model_proto

    def __setstate__(self, state: bytes) -> None:
        self.__init__(state)


def write_tokenizer(tokenizer, directory: Path, side: str) -> dict:
    """Write ``tokenizer`` as the bundle's ``side`` ("source"/"target") tokenizer into
    ``directory``; returns its manifest entry (kind, files, options)."""
    return {"kind": tokenizer.kind} | tokenizer.write(directory, side) | tokenizer.options()


def tokenizer_files(entry: dict) -> list[str]:
    """The bundle files a manifest tokenizer entry names."""
    return [str(entry[key]) for key in _FILE_KEYS if key in entry]


def load_tokenizer(entry: dict, directory: Path, special_ids: tuple[int, int, int, int]):
    """The tokenizer a manifest's ``tokenizers`` entry describes, from ``directory``.

    ``entry``: ``{"kind": "sentencepiece", "file": ...}``, ``{"kind": "words", "file":
    ..., "unk_id": ..., "lowercase": ..., "fold_accents": ..., "split_punctuation": ...}``
    or ``{"kind": "pieces", "file": vocab, "model_file": spm model, "unk_id": ...}``, ...;
    any of them with ``"normalize": {...}`` (Moses punctuation normalisation of the text
    first, :mod:`models.normalize`).
    """
    if "normalize" not in entry:
        return _load_kind(entry, directory, special_ids)
    from models.normalize import Normalization, NormalizingTokenizer

    options = entry["normalize"]
    try:
        normalization = Normalization(**options)
    except TypeError as exc:
        raise TokenizerError(f"bad normalize options {options!r}: {exc}") from None
    inner = {k: v for k, v in entry.items() if k != "normalize"}
    return NormalizingTokenizer(_load_kind(inner, directory, special_ids), normalization)


def bundle_file(directory: Path, name: object) -> Path:
    """The file ``name`` of a bundle's manifest in ``directory``; one outside it (an
    absolute path, ``../``, a link out) is refused: a bundle loads its own files only
    (a crafted manifest read /proc/self/environ as a vocabulary, helper-87)."""
    text = str(name)
    path = directory / text
    if Path(text).is_absolute() or not path.resolve().is_relative_to(directory.resolve()):
        raise TokenizerError(f"{text!r} is outside the bundle directory: its files are its own")
    return path


def _load_kind(entry: dict, directory: Path, special_ids: tuple[int, int, int, int]):
    kind = entry.get("kind")
    if kind not in TOKENIZER_KINDS:
        raise TokenizerError(
            f"unknown tokenizer kind {kind!r}; known: {', '.join(TOKENIZER_KINDS)}"
        )
    path = bundle_file(directory, entry.get("file", ""))
    if kind == "sentencepiece":
        return Tokenizer.from_file(path, special_ids)
    if kind == "onmt":
        from models.onmt import load_onmt

        return load_onmt(entry, directory)
    if kind == "bpe":
        from models.bpe import load_bpe

        return load_bpe(entry, directory)
    if kind == "pieces":
        from models.pieces import PieceTokenizer

        unk_id = entry.get("unk_id")
        if not isinstance(unk_id, int) or "model_file" not in entry:
            raise TokenizerError("a pieces tokenizer entry needs model_file and an integer unk_id")
        end, strip = entry.get("end_tokens", []), entry.get("strip", False)
        if not isinstance(end, list) or not isinstance(strip, bool):
            raise TokenizerError("a pieces tokenizer entry's end_tokens is a list, strip a bool")
        model = bundle_file(directory, entry["model_file"])
        return PieceTokenizer.from_files(model, path, unk_id=unk_id, end_tokens=end, strip=strip)
    from models.words import WordTokenizer

    options = {k: v for k, v in entry.items() if k not in ("kind", "file")}
    try:
        return WordTokenizer.from_file(path, **options)
    except TypeError as exc:
        raise TokenizerError(f"bad words tokenizer options {sorted(options)}: {exc}") from None


def read_lines(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as fh:
        return [line.rstrip("\n") for line in fh]
