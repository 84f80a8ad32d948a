"""``nmt-train``: train an attention RNN translation model on a ``nmt-data`` corpus.

AdamW, gradient clipping, teacher forcing, padding-aware label-smoothed loss,
length-bucketed batches, validation loss and sacreBLEU every epoch, early
stopping, best checkpoint kept, resumable (``RUN_DIR/last.pt``), seeded; an optional
time budget with a learning rate that decays to zero over it, and bf16 autocast.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import torch
from torch import Tensor, nn

from models.batching import ParallelData, bucket_batches
from models.checkpoint import CheckpointError, read_payload, save_checkpoint
from models.commands import show_defaults
from models.config import ConfigError, ModelConfig
from models.options import DecodeOptions
from models.seq2seq import Seq2Seq
from models.tokenizer import Tokenizer, TokenizerError
from models.translate import bleu, translate_texts

LR_SCHEDULES = ("plateau", "budget")
PRECISIONS = ("fp32", "bf16")


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 30
    max_tokens: int = 3000
    lr: float = 2e-3
    weight_decay: float = 0.01
    clip_norm: float = 1.0
    label_smoothing: float = 0.1
    teacher_forcing: float = 1.0
    patience: int = 3
    max_len: int = 64
    # Wall-clock budget (0: none): training stops when it is spent, mid-epoch if need be,
    # then validates and saves once more.
    max_minutes: float = 0.0
    # "plateau": halve the rate when validation loss stops falling; "budget": decay it
    # linearly from lr to 0 over max_minutes (budgeted training, Li et al. 2020), so a
    # time-limited run ends annealed instead of cut off at full rate.
    lr_schedule: str = "plateau"
    # "bf16": autocast forward passes to bfloat16 (weights, optimizer and loss stay fp32);
    # ~1.4x faster on CPUs with native bf16 (AVX512-BF16), checkpoints are fp32 either
    # way. Refused on a CPU without oneDNN bf16 kernels (AVX2 only: an order of magnitude slower).
    precision: str = "fp32"
    bleu_sentences: int = 2000
    seed: int = 1
    threads: int = 0
    # Comma-separated sources (valid.origin, from nmt-data build): the best checkpoint is
    # chosen by greedy BLEU on the valid lines of these sources only; empty: on all.
    select_on: str = ""
    # Weight λ of the coverage loss (Tu et al. 2016, See et al. 2017) added to the
    # cross-entropy: sum_j min(a_tj, c_tj) per target token; needs a coverage model.
    coverage_loss: float = 0.0

    def __post_init__(self) -> None:
        if self.epochs < 1 or self.max_tokens < 1 or self.lr <= 0 or self.patience < 1:
            raise ConfigError("epochs, max_tokens, lr and patience must be positive")
        if not 0.0 <= self.teacher_forcing <= 1.0:
            raise ConfigError("teacher forcing ratio must be in [0, 1]")
        if not self.coverage_loss >= 0.0:
            raise ConfigError(f"coverage_loss must be >= 0, got {self.coverage_loss}")
        if not self.max_minutes >= 0.0:
            raise ConfigError(f"max_minutes must be >= 0, got {self.max_minutes}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ConfigError(
                f"lr_schedule must be one of {', '.join(LR_SCHEDULES)}, got {self.lr_schedule!r}"
            )
        if self.lr_schedule == "budget" and not self.max_minutes:
            raise ConfigError("lr_schedule 'budget' decays over max_minutes: set --max-minutes")
        if self.precision not in PRECISIONS:
            raise ConfigError(
                f"precision must be one of {', '.join(PRECISIONS)}, got {self.precision!r}"
            )

    def check_device(self, device: torch.device) -> None:
        """Refuse a precision the device would run far slower than fp32."""
        if self.precision == "bf16" and device.type == "cpu" and not cpu_has_bf16():
            raise ConfigError(
                f"precision bf16: oneDNN has no bfloat16 kernels for this CPU (torch reports "
                f"{torch.backends.cpu.get_cpu_capability()}), so bf16 would train far slower "
                "than fp32 here; use --precision fp32"
            )

    def check_model(self, model_config: ModelConfig) -> None:
        """Refuse training options the model cannot use."""
        if self.coverage_loss and not model_config.coverage:
            raise ConfigError(
                f"coverage_loss={self.coverage_loss} needs a coverage model: "
                "add --coverage or drop --coverage-loss"
            )


def cpu_has_bf16() -> bool:
    """Whether oneDNN has bfloat16 kernels for this CPU (x86: AVX-512 BW/VL/DQ, native
    with AVX512-BF16 or AMX). Without them autocast falls back to reference code: on a
    2-core AVX2 EPYC the demo model trained at 13 pairs/s in bf16 against 176 in fp32
    (a few batches timed by hand, 2026-11-25)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def coverage_loss(attention: Tensor, tgt_out: Tensor, pad_id: int) -> Tensor:
    """Summed coverage loss ``sum_t sum_j min(a_tj, c_tj)`` over real target tokens, with
    ``c_tj = sum_{t' < t} a_t'j`` the coverage before step ``t``: attending again to a
    position already covered costs, so the model learns not to repeat source words.

    Args:
        attention: ``(batch, tgt_len, src_len)`` weights of the training forward.
        tgt_out: ``(batch, tgt_len)`` gold targets, ``pad_id`` past each one's end.

    Returns:
        A scalar, summed like the cross-entropy (``reduction="sum"``).
    """
    before = attention.cumsum(1) - attention
    per_step = torch.minimum(attention, before).sum(-1)
    return per_step.masked_fill(tgt_out == pad_id, 0.0).sum()


def set_seed(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def evaluate_loss(
    model: Seq2Seq, data: ParallelData, device: torch.device, max_tokens: int
) -> float:
    """Mean per-token cross-entropy (no smoothing) with teacher forcing."""
    model.eval()
    total, tokens = 0.0, 0
    loss_fn = nn.CrossEntropyLoss(ignore_index=model.config.pad_id, reduction="sum")
    with torch.no_grad():
        for batch in bucket_batches(data, max_tokens=max_tokens, shuffle=False):
            batch = batch.to(device)
            logits = model(batch.src, batch.lengths, batch.tgt_in)
            total += float(loss_fn(logits.flatten(0, 1), batch.tgt_out.flatten()))
            tokens += batch.target_tokens
    return total / max(tokens, 1)


def evaluate_bleu(
    model: Seq2Seq,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    data: ParallelData,
    limit: int,
    lines: Sequence[int] | None = None,
) -> float:
    """Greedy sacreBLEU on the first ``limit`` of ``lines`` (default: all lines)."""
    model.eval()
    lines = list(range(len(data.src_text)) if lines is None else lines)[:limit]
    hyps = translate_texts(
        model,
        src_tok,
        tgt_tok,
        [data.src_text[i] for i in lines],
        options=DecodeOptions(beam_size=1),
    )
    return bleu(hyps, [data.tgt_text[i] for i in lines])


def selection_lines(data_dir: Path, select_on: str, valid_size: int) -> list[int] | None:
    """Indices of the valid lines whose source (``valid.origin``) is in ``select_on``."""
    names = {n.strip() for n in select_on.split(",") if n.strip()}
    if not names:
        return None
    path = data_dir / "valid.origin"
    if not path.is_file():
        raise CheckpointError(f"--select-on needs {path}; rebuild the corpus with nmt-data build")
    origin = path.read_text(encoding="utf-8").splitlines()
    if len(origin) != valid_size:
        raise CheckpointError(f"{path} has {len(origin)} lines, valid.en has {valid_size}")
    unknown = sorted(names - set(origin))
    if unknown:
        raise CheckpointError(
            f"--select-on {', '.join(unknown)}: no valid line comes from it; "
            f"{path} names {', '.join(sorted(set(origin)))}"
        )
    return [i for i, name in enumerate(origin) if name in names]


def train(
    data_dir: Path,
    run_dir: Path,
    model_config: ModelConfig,
    cfg: TrainConfig,
    *,
    resume: bool = False,
    progress: bool = True,
    clock: Callable[[], float] = time.monotonic,
) -> dict:
    """Train and return the summary written to ``run_dir/summary.json``; ``clock`` (seconds)
    measures the time budget and the epochs."""
    from tqdm import tqdm

    cfg.check_model(model_config)
    set_seed(cfg.seed)
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    cfg.check_device(device)
    src_tok = Tokenizer.from_file(data_dir / "spm.en.model")
    tgt_tok = Tokenizer.from_file(data_dir / "spm.es.model")
    train_data = ParallelData.load(data_dir, "train", src_tok, tgt_tok, max_len=cfg.max_len)
    valid_data = ParallelData.load(data_dir, "valid", src_tok, tgt_tok)
    select = selection_lines(data_dir, cfg.select_on, len(valid_data.src_text))
    model = Seq2Seq(model_config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, factor=0.5, patience=0)
    loss_fn = nn.CrossEntropyLoss(
        ignore_index=model_config.pad_id, label_smoothing=cfg.label_smoothing, reduction="sum"
    )
    history: list[dict] = []
    start_epoch, best_bleu, bad_epochs, elapsed_before = 1, -1.0, 0, 0.0
    last_path, best_path = run_dir / "last.pt", run_dir / "best.pt"
    if resume and last_path.exists():
        payload = read_payload(last_path)
        if payload["config"] != model_config.to_dict():
            raise CheckpointError(f"{last_path} was trained with another model config")
        model.load_state_dict(payload["state_dict"])
        optimizer.load_state_dict(payload["optimizer"])
        scheduler.load_state_dict(payload["scheduler"])
        state = payload["train_state"]
        start_epoch, best_bleu = state["epoch"] + 1, state["best_bleu"]
        bad_epochs, history = state["bad_epochs"], state["history"]
        elapsed_before = state["elapsed"]
        torch.set_rng_state(payload["rng"])
    t0 = clock()
    budget = cfg.max_minutes * 60

    def spent() -> float:
        return elapsed_before + clock() - t0

    for epoch in range(start_epoch, cfg.epochs + 1):
        model.train()
        batches = list(
            bucket_batches(
                train_data, max_tokens=cfg.max_tokens, shuffle=True, seed=cfg.seed * 1000 + epoch
            )
        )
        epoch_loss, epoch_tokens, epoch_pairs, epoch_start = 0.0, 0, 0, clock()
        bar = tqdm(batches, desc=f"epoch {epoch}", unit="batch", disable=not progress)
        for batch in bar:
            now = spent()
            if budget and now >= budget:
                break  # the epoch-end check below sees it too: time only grows
            if cfg.lr_schedule == "budget":
                for group in optimizer.param_groups:
                    group["lr"] = cfg.lr * (1.0 - now / budget)
            batch = batch.to(device)
            with torch.autocast(device.type, torch.bfloat16, enabled=cfg.precision == "bf16"):
                logits, attention = model.decode_train(
                    batch.src,
                    batch.lengths,
                    batch.tgt_in,
                    teacher_forcing_ratio=cfg.teacher_forcing,
                )
            loss = loss_fn(logits.float().flatten(0, 1), batch.tgt_out.flatten())
            if cfg.coverage_loss:
                loss = loss + cfg.coverage_loss * coverage_loss(
                    attention.float(), batch.tgt_out, model_config.pad_id
                )
            ntok = batch.target_tokens
            optimizer.zero_grad(set_to_none=True)
            (loss / ntok).backward()
            nn.utils.clip_grad_norm_(model.parameters(), cfg.clip_norm)
            optimizer.step()
            epoch_loss += loss.item()
            epoch_tokens += ntok
            epoch_pairs += batch.src.size(0)
            bar.set_postfix(loss=f"{epoch_loss / epoch_tokens:.3f}")
        bar.close()
        if not epoch_pairs:
            break
        train_seconds = clock() - epoch_start
        valid_loss = evaluate_loss(model, valid_data, device, cfg.max_tokens)
        valid_bleu = evaluate_bleu(model, src_tok, tgt_tok, valid_data, cfg.bleu_sentences)
        select_bleu = valid_bleu
        if select is not None:
            select_bleu = evaluate_bleu(
                model, src_tok, tgt_tok, valid_data, cfg.bleu_sentences, select
            )
        if cfg.lr_schedule == "plateau":
            scheduler.step(valid_loss)
        elapsed = spent()
        record = {
            "epoch": epoch,
            "train_loss": epoch_loss / max(epoch_tokens, 1),
            "valid_loss": valid_loss,
            "valid_ppl": math.exp(min(valid_loss, 50)),
            "valid_bleu": valid_bleu,
            **({"select_bleu": select_bleu} if select is not None else {}),
            "pairs": epoch_pairs,
            "pairs_per_second": epoch_pairs / train_seconds,
            "lr": optimizer.param_groups[0]["lr"],
            "elapsed_seconds": elapsed,
        }
        history.append(record)
        print(json.dumps(record), flush=True)
        meta = {"device": str(device), "train_pairs": len(train_data), "history": history}
        if select_bleu > best_bleu:
            best_bleu, bad_epochs = select_bleu, 0
            save_checkpoint(best_path, model, src_tok, tgt_tok, meta=meta | {"epoch": epoch})
        else:
            bad_epochs += 1
        save_checkpoint(
            last_path,
            model,
            src_tok,
            tgt_tok,
            meta=meta,
            extra={
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "rng": torch.get_rng_state(),
                "train_state": {
                    "epoch": epoch,
                    "best_bleu": best_bleu,
                    "bad_epochs": bad_epochs,
                    "history": history,
                    "elapsed": elapsed,
                },
            },
        )
        if bad_epochs >= cfg.patience:
            print(f"early stopping: no BLEU gain in {cfg.patience} epochs", flush=True)
            break
        if budget and elapsed >= budget:
            print(f"time budget of {cfg.max_minutes} minutes reached", flush=True)
            break
    summary = {
        "best_valid_bleu": best_bleu,
        "epochs": len(history),
        "parameters": model.parameter_count(),
        "device": str(device),
        "train_pairs": len(train_data),
        "history": history,
    }
    (run_dir / "summary.json").write_text(json.dumps(summary, indent=2))
    return summary


# Second spellings of a few flags: the name the literature (and issue 19) uses.
FLAG_ALIASES = {"coverage": ("--attention-coverage",)}


def _add_dataclass_args(parser: argparse.ArgumentParser, cls, skip: Sequence[str] = ()) -> None:
    for f in fields(cls):
        if f.name in skip:
            continue
        flags = ("--" + f.name.replace("_", "-"), *FLAG_ALIASES.get(f.name, ()))
        if f.type in ("bool", bool):
            parser.add_argument(
                *flags, dest=f.name, action=argparse.BooleanOptionalAction, default=f.default
            )
        else:
            kind = {"int": int, "float": float, "str": str}.get(str(f.type), str)
            parser.add_argument(*flags, dest=f.name, type=kind, default=f.default)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="nmt-train", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="directory from nmt-data build")
    parser.add_argument("--out", type=Path, required=True, help="run directory")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    parser.add_argument("--no-progress", action="store_true")
    _add_dataclass_args(
        parser,
        ModelConfig,
        skip=("src_vocab_size", "tgt_vocab_size", "pad_id", "unk_id", "bos_id", "eos_id"),
    )
    _add_dataclass_args(parser, TrainConfig)
    args = show_defaults(parser).parse_args(argv)
    try:
        for name in ("spm.en.model", "spm.es.model", "train.en", "valid.en"):
            if not (args.data / name).is_file():
                raise CheckpointError(f"{args.data / name} not found; run `nmt-data build` first")
        src_tok = Tokenizer.from_file(args.data / "spm.en.model")
        tgt_tok = Tokenizer.from_file(args.data / "spm.es.model")
        model_kwargs = {
            f.name: getattr(args, f.name) for f in fields(ModelConfig) if hasattr(args, f.name)
        }
        model_config = ModelConfig(
            src_vocab_size=src_tok.vocab_size, tgt_vocab_size=tgt_tok.vocab_size, **model_kwargs
        )
        train_config = TrainConfig(**{f.name: getattr(args, f.name) for f in fields(TrainConfig)})
        args.out.mkdir(parents=True, exist_ok=True)
        summary = train(
            args.data,
            args.out,
            model_config,
            train_config,
            resume=args.resume,
            progress=not args.no_progress,
        )
    except (CheckpointError, ConfigError, TokenizerError) as exc:
        print(f"nmt-train: error: {exc}", file=sys.stderr)
        return 2
    print(
        f"best valid BLEU {summary['best_valid_bleu']:.2f} after {summary['epochs']} epochs; "
        f"checkpoint: {args.out / 'best.pt'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
