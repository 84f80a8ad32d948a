"""Word-level vocabularies, the tokenisation most attention tutorials train with (torch-free).

A vocabulary is a list of tokens whose index is the id. Text is normalised the way the
tutorials do it (lower-case, accents folded to ASCII, punctuation split off the words)
and split on whitespace; a word not in the vocabulary becomes ``unk``. Decoding joins
tokens with spaces and, when punctuation was split off, glues it back on.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from pathlib import Path

from models.tokenizer import TokenizerError, index_vocabulary, mark_ids

_WORDS = re.compile(r"\w+|[^\w\s]")
# No space before closing punctuation, none after opening marks.
_CLOSE = re.compile(r" ([.,!?;:%)\]}»…])")
_OPEN = re.compile(r"([(\[{¿¡«]) ")


def _is_word(token: object) -> bool:
    """A vocabulary entry of a word vocabulary: text without whitespace."""
    return isinstance(token, str) and bool(token) and not any(c.isspace() for c in token)


def fold_accents(text: str) -> str:
    """``"Él está"`` -> ``"El esta"`` (the PyTorch tutorial's ``unicodeToAscii``)."""
    return "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")


def read_vocabulary(path: Path | str) -> list[str]:
    """Tokens by id from a file with one token per line, or a JSON list of tokens, or a
    JSON object mapping token -> id (ids must be 0..N-1, each once)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8-sig")  # a BOM is not part of token 0
    except FileNotFoundError:
        raise TokenizerError(f"vocabulary file not found: {path}") from None
    except UnicodeDecodeError:
        raise TokenizerError(f"{path} is not UTF-8 text; give one token per line") from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TokenizerError(f"{path} is not valid JSON: {exc}") from None
        if isinstance(data, list) and all(isinstance(t, str) for t in data):
            return data
        if isinstance(data, dict) and all(isinstance(i, int) for i in data.values()):
            tokens = sorted(data, key=data.__getitem__)
            if sorted(data.values()) != list(range(len(data))):
                raise TokenizerError(
                    f"{path}: token ids must be 0..{len(data) - 1}, each used once"
                )
            return tokens
        raise TokenizerError(f"{path}: expected a JSON list of tokens or a token -> id object")
    return text.split("\n")[:-1] if text.endswith("\n") else text.split("\n")


def _padded(items: list, width: int, pad: object) -> list:
    """``items`` with ``pad`` appended up to ``width`` entries (a longer list as it is)."""
    return items + [pad] * (width - len(items))


class WordTokenizer:
    """Text <-> ids over a word vocabulary; same interface as :class:`Tokenizer`."""

    kind = "words"

    def __init__(
        self,
        tokens: Sequence[str],
        *,
        unk_id: int,
        lowercase: bool = True,
        fold_accents: bool = False,
        split_punctuation: bool = True,
        end_tokens: Sequence[str] = (),
        start_tokens: Sequence[str] = (),
        space_before: str = "",
        split_off: str = "",
        keep: str = "",
        unknown: str = "unk",
        pad_to: int = 0,
        pad_token: str = "",
        unicode_form: str = "",
        keep_only: str = "",
    ) -> None:
        """``end_tokens``: appended to every encoded sentence, e.g. ``["EOS"]`` for a model
        trained on sources that end in EOS (the PyTorch tutorial's ``tensorFromSentence``);
        ``start_tokens``: put before it, e.g. ``["<sos>"]`` (bentrevett/pytorch-seq2seq
        wraps every source in ``<sos>`` ... ``<eos>``). ``space_before``: instead of
        ``split_punctuation``, only these characters are split off, by a space put before
        each that follows a non-space (d2l's ``MTFraEng._preprocess`` with ``",.!?"``:
        ``"he's calm."`` -> ``he's``, ``calm``, ``.``).

        TensorFlow's tutorial (``preprocess_sentence`` + a Keras ``Tokenizer``):
        ``split_off``: characters made tokens of their own (a space either side; glued
        back on output); ``keep``: the characters kept, every run of others becomes a
        space (``"a-z"`` is not a range here: list each character); ``unknown="drop"``:
        words not in the vocabulary are left out, as ``texts_to_sequences`` does without
        an ``oov_token``; ``pad_to``: each sentence is padded with ``pad_token`` to that
        many tokens (a model trained on sources padded to a fixed width, whose encoder
        and attention read the padding).

        TensorFlow's newer tutorial (``tf_lower_and_split_punct`` of a
        ``TextVectorization``): ``unicode_form``: the text normalised first (``"NFKD"``);
        ``keep_only``: the characters kept, every other one deleted (not a space)."""
        self.tokens = list(tokens)
        self.ids = index_vocabulary(
            self.tokens, unk_id, is_token=_is_word, bad="is empty or has spaces"
        )
        self.unk_id = unk_id
        self._start_ids = mark_ids(self.ids, start_tokens, "start")
        self._end_ids = mark_ids(self.ids, end_tokens, "end")
        self.start_tokens = tuple(start_tokens)
        self.end_tokens = tuple(end_tokens)
        self.lowercase = lowercase
        self.fold_accents = fold_accents
        self.split_punctuation = split_punctuation
        if space_before and split_punctuation:
            raise TokenizerError(
                "space_before splits off only the characters it names; split_punctuation "
                "splits off every punctuation mark: set split_punctuation=False with it"
            )
        if not isinstance(space_before, str) or any(c.isspace() for c in space_before):
            raise TokenizerError(f"space_before takes characters, got {space_before!r}")
        self.space_before = space_before
        chars = "[" + re.escape(space_before) + "]"
        self._space_before = re.compile(rf"(?<=\S)({chars})") if space_before else None
        self._glue = re.compile(rf" ({chars})") if space_before else None
        if split_off and split_punctuation:
            raise TokenizerError("split_off names the characters to split off: set "
                                 "split_punctuation=False with it")  # fmt: skip
        for name, value in (("split_off", split_off), ("keep", keep)):
            if not isinstance(value, str) or any(c.isspace() for c in value):
                raise TokenizerError(f"{name} takes characters, got {value!r}")
        if unicode_form not in ("", "NFC", "NFD", "NFKC", "NFKD"):
            raise TokenizerError(
                f"unicode_form must be NFC, NFD, NFKC or NFKD, got {unicode_form!r}"
            )
        if keep and keep_only:
            raise TokenizerError(
                "keep turns other characters into spaces, keep_only deletes them: give one"
            )
        if not isinstance(keep_only, str):
            raise TokenizerError(f"keep_only takes characters, got {keep_only!r}")
        self.unicode_form, self.keep_only = unicode_form, keep_only
        self._delete = re.compile(f"[^{re.escape(keep_only)}]+") if keep_only else None
        self.split_off, self.keep = split_off, keep
        self._split_off = re.compile(f"([{re.escape(split_off)}])") if split_off else None
        self._drop = re.compile(f"[^{re.escape(keep)}]+") if keep else None
        if unknown not in ("unk", "drop"):
            raise TokenizerError(f"unknown must be 'unk' or 'drop', got {unknown!r}")
        self.unknown = unknown
        if not isinstance(pad_to, int) or isinstance(pad_to, bool) or pad_to < 0:
            raise TokenizerError(f"pad_to must be a number of tokens >= 0, got {pad_to!r}")
        if pad_to and pad_token not in self.ids:
            raise TokenizerError(f"pad_to needs a pad_token in the vocabulary, got {pad_token!r}")
        self.pad_to, self.pad_token = pad_to, pad_token

    @classmethod
    def from_file(cls, path: Path | str, **options) -> WordTokenizer:
        return cls(read_vocabulary(path), **options)

    @property
    def vocab_size(self) -> int:
        return len(self.tokens)

    def words(self, text: str) -> list[str]:
        """Normalised tokens of ``text`` (with ``unknown="drop"``, those it knows)."""
        return self._known(self._split(text))

    def _known(self, words: list[str]) -> list[str]:
        """``words`` less those not in the vocabulary when ``unknown="drop"``."""
        return [w for w in words if w in self.ids] if self.unknown == "drop" else words

    def _split(self, text: str) -> list[str]:
        """Every normalised token of ``text``, known or not."""
        if self.unicode_form:
            text = unicodedata.normalize(self.unicode_form, text)
        if self.lowercase:
            text = text.lower()
        if self.fold_accents:
            text = fold_accents(text)
        if self._space_before is not None:
            text = self._space_before.sub(r" \1", text)
        if self._delete is not None:
            text = self._delete.sub("", text)
        if self._split_off is not None:
            text = self._split_off.sub(r" \1 ", text)
        if self._drop is not None:
            text = self._drop.sub(" ", text)
        return _WORDS.findall(text) if self.split_punctuation else text.split()

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` between the start and end tokens (none by default);
        unknown words are ``unk`` (or left out: a text of unknown words alone is then the
        markers alone, as Keras's ``texts_to_sequences`` gives it). A text with no word
        at all is nothing to translate: ``[]``."""
        words = self._split(text)  # once: normalising is most of the cost
        if not words:
            return []
        ids = [self.ids.get(w, self.unk_id) for w in self._known(words)]
        return _padded(
            self._start_ids + ids + self._end_ids, self.pad_to, self.ids.get(self.pad_token)
        )

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return [self.encode(t) for t in texts]

    def pieces(self, ids: Sequence[int]) -> list[str]:
        return [self.tokens[int(i)] for i in ids]

    def surface(self, text: str) -> list[str]:
        """``text``'s words as normalised (not looked up), one per id of :meth:`encode`."""
        words = self._split(text)
        if not words:
            return []
        words = self._known(words)
        return _padded([*self.start_tokens, *words, *self.end_tokens], self.pad_to, self.pad_token)

    def decode(self, ids: Sequence[int]) -> str:
        return self.detokenize(self.pieces(ids))

    def detokenize(self, pieces: Sequence[str]) -> str:
        """The text of words, some perhaps copied from a source (``replace_unk``)."""
        text = " ".join(pieces)
        if self.split_punctuation or self.split_off:
            text = _OPEN.sub(r"\1", _CLOSE.sub(r"\1", text))
        elif self._glue is not None:
            text = self._glue.sub(r"\1", text)
        return text

    def options(self) -> dict:
        """What the manifest records so the service rebuilds this tokenizer."""
        return {
            "unk_id": self.unk_id,
            "lowercase": self.lowercase,
            "fold_accents": self.fold_accents,
            "split_punctuation": self.split_punctuation,
            "end_tokens": list(self.end_tokens),
            # only when set: a manifest without it still loads in servers older than it
            **({"start_tokens": list(self.start_tokens)} if self.start_tokens else {}),
            **({"space_before": self.space_before} if self.space_before else {}),
            **({"split_off": self.split_off} if self.split_off else {}),
            **({"keep": self.keep} if self.keep else {}),
            **({"unicode_form": self.unicode_form} if self.unicode_form else {}),
            **({"keep_only": self.keep_only} if self.keep_only else {}),
            **({"unknown": self.unknown} if self.unknown != "unk" else {}),
            **({"pad_to": self.pad_to, "pad_token": self.pad_token} if self.pad_to else {}),
        }

    def save(self, path: Path) -> None:
        path.write_text(json.dumps(self.tokens, ensure_ascii=False) + "\n", encoding="utf-8")

    def write(self, directory: Path, side: str) -> dict[str, str]:
        """Write this tokenizer's file into ``directory``; its manifest key."""
        name = f"{side}.vocab.json"
        self.save(directory / name)
        return {"file": name}
