"""Read an Eole 0.6.4 model directory, without importing eole.

Eole writes ``config.json`` (only the options that were set), ``model.00.safetensors``
(more shards for big models) and ``vocab.json``; :func:`load_eole` reads them, drops what
only training uses, and builds the modules with :func:`export.eole_modules.build_model`.
"""

from __future__ import annotations

import json
import pickletools
import struct
import zipfile
from pathlib import Path

import torch
from torch import Tensor

from export.eole_modules import EoleError, EoleModel, build_model

_ST_DTYPES = {
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "F64": torch.float64,
}


def load_eole(
    path: Path, src_subword_model: Path | None = None, tgt_subword_model: Path | None = None
) -> EoleModel:
    """Read an Eole 0.6.4 RNN model directory; raise EoleError for anything it cannot express.

    ``src_subword_model``/``tgt_subword_model``: SentencePiece models to use instead of
    those the config names (a sentencepiece-transform model moved from its machine).
    """
    path = Path(path)
    if not path.exists():
        raise EoleError(f"Eole model not found: {path} does not exist")
    if path.is_file():
        _refuse_file(path)
    for name in ("config.json", "vocab.json"):
        if not (path / name).is_file():
            inside = [p.parent for p in sorted(path.glob("model*/**/config.json"))]
            hint = f"; an Eole run keeps its models below it, e.g. {inside[-1]}" if inside else ""
            raise EoleError(f"{path} is not an Eole model directory: {name} is missing{hint}")
    shards = sorted(path.glob("model.*.safetensors"))
    if not shards:
        raise EoleError(f"{path} is not an Eole model directory: model.00.safetensors is missing")
    try:
        cfg = json.loads((path / "config.json").read_text(encoding="utf-8"))
        vocab = json.loads((path / "vocab.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EoleError(f"unreadable Eole config/vocab in {path}: {exc}") from None
    w: dict[str, Tensor] = {}
    for shard in shards:
        w.update(_read_safetensors(shard))
    for k in [k for k in w if k.startswith("estimator.")]:
        w.pop(k)  # add_estimator: a quality-estimation head, not used to translate
    return build_model(cfg, vocab, w, path, src_subword_model, tgt_subword_model)


def _read_safetensors(path: Path) -> dict[str, Tensor]:
    try:
        data = path.read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8 : 8 + n])
        out = {}
        for name, info in header.items():
            if name == "__metadata__":
                continue
            begin, end = info["data_offsets"]
            raw = bytearray(data[8 + n + begin : 8 + n + end])
            out[name] = (
                torch.frombuffer(raw, dtype=_ST_DTYPES[info["dtype"]])
                .reshape(info["shape"])
                .float()
            )
        return out
    except (OSError, ValueError, KeyError, RuntimeError, struct.error) as exc:
        # RuntimeError: torch's reshape of a truncated or corrupt tensor
        text = " ".join(str(exc).split())[:200]
        raise EoleError(f"unreadable safetensors file {path}: {text}") from None


def _pickle_strings(path: Path) -> set[str]:
    """String constants of a torch zip checkpoint's pickle, read without unpickling."""
    try:
        with zipfile.ZipFile(path) as z:
            name = next(n for n in z.namelist() if n.endswith("data.pkl"))
            return {arg for _, arg, _ in pickletools.genops(z.read(name)) if isinstance(arg, str)}
    except (zipfile.BadZipFile, StopIteration, ValueError, OSError):
        return set()


def _refuse_file(path: Path) -> None:
    if {"model", "generator", "vocab", "opt"} <= _pickle_strings(path):
        raise EoleError(
            f"{path} is an OpenNMT-py checkpoint (.pt), not an Eole model directory: "
            f"convert it with `nmt-convert opennmt-py {path}`"
        )
    raise EoleError(
        f"{path} is a file, expected an Eole model directory (config.json, "
        "model.00.safetensors, vocab.json)"
    )
