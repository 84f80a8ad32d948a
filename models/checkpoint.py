"""Self-contained checkpoints: config + weights + both tokenizers in one file."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from models.config import ConfigError, ModelConfig
from models.seq2seq import Seq2Seq
from models.tokenizer import Tokenizer, TokenizerError

FORMAT = "rnn-nmt-checkpoint/1"


class CheckpointError(ValueError):
    """A file that is not a usable checkpoint of this project."""


@dataclass
class Checkpoint:
    model: Seq2Seq
    src_tokenizer: Tokenizer
    tgt_tokenizer: Tokenizer
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def config(self) -> ModelConfig:
        return self.model.config


def save_checkpoint(
    path: Path,
    model: Seq2Seq,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    *,
    meta: dict[str, Any] | None = None,
    half: bool = False,
    extra: dict[str, Any] | None = None,
) -> None:
    """Write a checkpoint atomically. ``half`` stores fp16 weights (loads back as fp32)."""
    state = {
        k: (v.half() if half and v.is_floating_point() else v)
        for k, v in model.state_dict().items()
    }
    payload = {
        "format": FORMAT,
        "config": model.config.to_dict(),
        "state_dict": state,
        "src_tokenizer": src_tokenizer.model_proto,
        "tgt_tokenizer": tgt_tokenizer.model_proto,
        "meta": dict(meta or {}),
    }
    payload.update(extra or {})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    torch.save(payload, tmp)
    tmp.replace(path)


def read_payload(path: Path) -> dict[str, Any]:
    """Load and check the raw checkpoint dict (used for resuming training too)."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"checkpoint not found: {path}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:
        raise CheckpointError(
            f"{path} is not a readable PyTorch checkpoint ({exc.__class__.__name__})"
        ) from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError(
            f"{path} is not an rnn-nmt checkpoint (expected format {FORMAT!r}); "
            "train one with `nmt-train`"
        )
    return payload


def load_checkpoint(path: Path | str) -> Checkpoint:
    """Rebuild the model (fp32, eval mode) and tokenizers from a checkpoint file alone."""
    payload = read_payload(Path(path))
    try:
        config = ModelConfig.from_dict(payload["config"])
        src_tok = Tokenizer(payload["src_tokenizer"])
        tgt_tok = Tokenizer(payload["tgt_tokenizer"])
    except (ConfigError, TokenizerError, KeyError) as exc:
        raise CheckpointError(f"{path}: {exc}") from None
    model = Seq2Seq(config)
    state = {k: v.float() if v.is_floating_point() else v for k, v in payload["state_dict"].items()}
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        # torch lists one line per mismatched tensor; a CLI error must stay one line.
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        detail = lines[1] if len(lines) > 1 else (lines[0] if lines else "")
        more = f" (and {len(lines) - 2} more)" if len(lines) > 2 else ""
        raise CheckpointError(f"{path}: weights do not match its config: {detail}{more}") from None
    model.eval()
    return Checkpoint(model, src_tok, tgt_tok, dict(payload.get("meta", {})))
