"""Every architecture variant learns a tiny copy task, and greedy search then copies."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch import nn

from models.batching import pad
from models.config import (
    ATTENTION_TYPES,
    BOS_ID,
    EOS_ID,
    LUONG_ONLY_ATTENTION,
    PAD_ID,
    PLACEMENTS,
    RNN_TYPES,
)
from models.options import DecodeOptions
from models.search import greedy_search
from models.seq2seq import Seq2Seq

VOCAB = 12  # ids 0..3 are pad/unk/bos/eos, 4..11 are the symbols to copy
MAX_STEPS = 300
STOP_LOSS = 0.05
LR = 2e-2
BATCH = 64


def copy_batch(gen: torch.Generator, size: int):
    """Random sequences of 3-6 symbols; the target is the source."""
    lengths = torch.randint(3, 7, (size,), generator=gen)
    seqs = [torch.randint(4, VOCAB, (int(n),), generator=gen).tolist() for n in lengths]
    return (
        pad(seqs),
        lengths,
        pad([[BOS_ID, *s] for s in seqs]),
        pad([[*s, EOS_ID] for s in seqs]),
        seqs,
    )


def teacher_forced_loss(model: Seq2Seq, batch) -> torch.Tensor:
    src, lengths, tgt_in, tgt_out, _ = batch
    logits = model(src, lengths, tgt_in)
    return nn.functional.cross_entropy(logits.flatten(0, 1), tgt_out.flatten(), ignore_index=PAD_ID)


VARIANTS = [
    pytest.param({"rnn_type": r, "attention": a, "placement": p}, id=f"{r}-{a}-{p}")
    for r, a, p in itertools.product(RNN_TYPES, ATTENTION_TYPES, PLACEMENTS)
    if p == "luong" or a not in LUONG_ONLY_ATTENTION
] + [
    pytest.param(
        {
            "rnn_type": "gru",
            "attention": "additive",
            "placement": "luong",
            "encoder_layers": 2,
            "decoder_layers": 2,
        },
        id="gru-additive-luong-2layers",
    ),
    pytest.param(
        {
            "rnn_type": "lstm",
            "attention": "general",
            "placement": "bahdanau",
            "bidirectional": False,
        },
        id="lstm-general-bahdanau-unidirectional",
    ),
    pytest.param(
        {"rnn_type": "gru", "attention": "dot", "placement": "luong", "input_feed": False},
        id="gru-dot-luong-no-input-feed",
    ),
    pytest.param(
        {"rnn_type": "gru", "attention": "additive", "placement": "bahdanau", "coverage": True},
        id="gru-additive-bahdanau-coverage",
    ),
    pytest.param(
        {"rnn_type": "lstm", "attention": "concat", "placement": "luong", "coverage": True},
        id="lstm-concat-luong-coverage",
    ),
    pytest.param(
        {"rnn_type": "gru", "attention": "local-p", "placement": "luong", "local_window": 1},
        id="gru-local-p-luong-window-1",
    ),
]


@pytest.mark.parametrize("overrides", VARIANTS)
def test_variant_learns_copy_task(make_config, overrides: dict) -> None:
    memory_dim = 32 * (2 if overrides.get("bidirectional", True) else 1)
    cfg = make_config(
        src_vocab_size=VOCAB,
        tgt_vocab_size=VOCAB,
        embed_dim=32,
        encoder_hidden=32,
        decoder_hidden=memory_dim,
        attention_dim=32,
        output_dim=32,
        dropout=0.0,
        **overrides,
    )
    torch.manual_seed(0)
    model = Seq2Seq(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=LR)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda step: max(0.05, 1.0 - step / MAX_STEPS)
    )
    train_gen = torch.Generator().manual_seed(1)
    check = copy_batch(torch.Generator().manual_seed(99), 256)
    held_out = copy_batch(torch.Generator().manual_seed(7), 256)

    check_loss = float("inf")
    for step in range(1, MAX_STEPS + 1):
        model.train()
        loss = teacher_forced_loss(model, copy_batch(train_gen, BATCH))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        if step % 10 == 0 and step >= 40:
            model.eval()
            with torch.no_grad():
                check_loss = float(teacher_forced_loss(model, check))
            if check_loss < STOP_LOSS:
                break

    model.eval()
    with torch.no_grad():
        final_loss = float(teacher_forced_loss(model, held_out))
    assert final_loss < 0.1, f"copy loss {final_loss:.4f} after {step} steps ({check_loss=:.4f})"

    # Greedy search copies: allow at most two slips in eight held-out sentences, and its
    # log-prob of a copied sentence is the teacher-forced log-prob of that sentence.
    src, lengths, tgt_in, tgt_out, seqs = held_out
    hyps = greedy_search(model, src[:8], lengths[:8], options=DecodeOptions())
    copied = [list(h.tokens) == seq for h, seq in zip(hyps, seqs[:8], strict=True)]
    assert sum(copied) >= 6, [h.tokens for h in hyps]
    with torch.no_grad():
        log_probs = torch.log_softmax(model(src[:8], lengths[:8], tgt_in[:8]), -1)
    gold = log_probs.gather(-1, tgt_out[:8].unsqueeze(-1)).squeeze(-1) * (tgt_out[:8] != PAD_ID)
    for b, hyp in enumerate(hyps):
        if copied[b]:
            assert hyp.log_prob == pytest.approx(float(gold[b].sum()), rel=1e-4, abs=1e-5)
