"""Reference greedy and beam search in PyTorch.

These are deliberately plain: they define the ground truth that the ONNX decode
loop and the service must reproduce token for token, and they are the "plain
PyTorch" baseline of the benchmarks. Their selection is their own (the service's
strategies are independent numpy code); the length limit, the EOS rules and the
scores are the shared :class:`models.scoring.ScoringRules`. They implement the
standard search (``DecodeOptions.search == "standard"``) only.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor

from models.options import DecodeOptions, Hypothesis
from models.scoring import Eos, ScoringRules, restrict
from models.seq2seq import Seq2Seq

NEG_INF = float("-inf")


def block_specials(log_probs: Tensor, *, pad_id: int, bos_id: int) -> None:
    """Never emit padding or BOS. ``log_probs``: ``(rows, vocab)``, edited in place."""
    log_probs[:, pad_id] = NEG_INF
    log_probs[:, bos_id] = NEG_INF


def restrict_candidates(values: Tensor, eos: Sequence[Eos]) -> Tensor:
    """:func:`models.scoring.restrict` (the EOS rules, shared with the service) on a
    tensor of candidates ``(rows, k + 1)``, EOS last; ``eos``: each row's rule."""
    host = values.cpu()
    restrict(host.numpy(), eos)
    return host.to(values.device)


def step_candidates(log_probs: Tensor, *, k: int, eos_id: int) -> tuple[Tensor, Tensor]:
    """A step's candidates exactly as the exported decoder graph ranks them.

    The ``k`` best non-EOS tokens per row (equal log-probs: lower id first, the ONNX
    ``TopK`` rule) followed by EOS in the last column. Ranking the same columns in the
    same order is what makes tied scores break the same way here and in the service.

    Args:
        log_probs: ``(rows, vocab)`` with specials already blocked.

    Returns:
        values ``(rows, k + 1)`` and ids ``(rows, k + 1)``.
    """
    no_eos = log_probs.clone()
    no_eos[:, eos_id] = NEG_INF
    values, ids = torch.sort(no_eos, dim=-1, descending=True, stable=True)
    eos_ids = torch.full((log_probs.size(0), 1), eos_id, dtype=ids.dtype, device=ids.device)
    return (
        torch.cat([values[:, :k], log_probs[:, eos_id : eos_id + 1]], dim=1),
        torch.cat([ids[:, :k], eos_ids], dim=1),
    )


def _coverage(steps: list[Tensor]):
    """``(src_len,)`` float64 attention sums of a hypothesis's steps (coverage penalty),
    added up step by step in float64 as the service's loop does."""
    total = torch.zeros(steps[0].shape[-1], dtype=torch.float64)
    for a in steps:
        total += a.detach().cpu().double()
    return total.numpy()


def apply_bans(log_probs: Tensor, rules: ScoringRules, hyps: Sequence[Sequence[int]], unk_id: int):
    """-inf for the tokens each row's hypothesis ``hyps[row]`` may not take next
    (:meth:`models.scoring.ScoringRules.banned`). ``log_probs``: ``(rows, vocab)``."""
    if rules.bans_tokens:
        for row, tokens in enumerate(hyps):
            banned = rules.banned(tokens, unk_id)
            if banned:
                log_probs[row, banned] = NEG_INF


def _next_log_probs(model: Seq2Seq, prev: Tensor, state, keys, memory, mask):
    logits, state, weights = model.decoder(prev, state, keys, memory, mask)
    log_probs = torch.log_softmax(logits.float(), dim=-1)
    cfg = model.config
    block_specials(log_probs, pad_id=cfg.pad_id, bos_id=cfg.bos_id)
    return log_probs, state, weights


@torch.no_grad()
def greedy_search(
    model: Seq2Seq,
    src: Tensor,
    lengths: Tensor,
    *,
    options: DecodeOptions,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> list[Hypothesis]:
    """Batched greedy decoding.

    Args:
        src: ``(batch, src_len)`` int64 padded source ids.
        lengths: ``(batch,)`` int64 true lengths.

    Returns:
        One hypothesis per sentence, in input order.
    """
    cfg = model.config
    rules = ScoringRules.of(options)
    enc = model.encode(src, lengths)
    batch = src.size(0)
    device = src.device
    limits = [rules.length_limit(int(n)) for n in lengths]
    prev = torch.full((batch,), cfg.bos_id, dtype=torch.long, device=device)
    state = enc.state
    done = torch.zeros(batch, dtype=torch.bool)
    log_prob = torch.zeros(batch, dtype=torch.float64)
    tokens: list[list[int]] = [[] for _ in range(batch)]
    attn: list[list[Tensor]] = [[] for _ in range(batch)]
    for step in range(max(limits)):
        log_probs, state, weights = _next_log_probs(
            model, prev, state, enc.keys, enc.memory, enc.mask
        )
        # a forced prefix token adds its own log-prob (read before any ban), unless the
        # rules drop a prefix's (ScoringRules.prefix_scored; a whole target always counts)
        forced = {
            b: (prefix[step], float(log_probs[b, prefix[step]]))
            if rules.prefix_scored or prefix[-1] == cfg.eos_id
            else (prefix[step], 0.0)
            for b, prefix in enumerate(prefixes or ())
            if step < len(prefix)
        }
        apply_bans(log_probs, rules, tokens, cfg.unk_id)
        values, ids = step_candidates(log_probs, k=1, eos_id=cfg.eos_id)
        values = restrict_candidates(values, [rules.eos_rule(step, limit) for limit in limits])
        # argmax keeps the first of equal values: the non-EOS candidate, as in the service.
        pick = values.argmax(-1, keepdim=True)
        best = ids.gather(1, pick).squeeze(1)
        best_log_prob = values.gather(1, pick).squeeze(1)
        for b, (token, forced_log_prob) in forced.items():  # forced target prefix
            best[b] = token
            best_log_prob[b] = forced_log_prob
        for b in range(batch):
            if done[b]:
                continue
            tok = int(best[b])
            log_prob[b] += float(best_log_prob[b])
            attn[b].append(weights[b, : int(lengths[b])])
            if tok == cfg.eos_id:
                done[b] = True
            else:
                tokens[b].append(tok)
        if bool(done.all()):
            break
        prev = best
    return [
        Hypothesis(
            tokens=tuple(tokens[b]),
            score=rules.score(
                float(log_prob[b]),
                len(tokens[b]),
                coverage=_coverage(attn[b]) if rules.needs_coverage else None,
            ),
            log_prob=float(log_prob[b]),
            attention=torch.stack(attn[b]).cpu().numpy() if options.return_attention else None,
        )
        for b in range(batch)
    ]


@torch.no_grad()
def beam_search(
    model: Seq2Seq,
    src: Tensor,
    lengths: Tensor,
    *,
    options: DecodeOptions,
    prefixes: Sequence[Sequence[int]] | None = None,
) -> list[list[Hypothesis]]:
    """Beam search, one sentence at a time (the reference, not the fast path).

    Each step takes the best ``2 * beam`` continuations by cumulative log-prob; an
    EOS among the first ``beam`` of them finishes a hypothesis, the best ``beam``
    non-EOS ones stay live. Search stops when ``beam`` hypotheses have finished.

    Args:
        src: ``(batch, src_len)`` int64 padded source ids.
        lengths: ``(batch,)`` int64 true lengths.

    Returns:
        For each sentence, its ``n_best`` hypotheses, best first.
    """
    return [
        _beam_one(
            model,
            src[b : b + 1, : int(lengths[b])],
            int(lengths[b]),
            options,
            tuple(prefixes[b]) if prefixes else (),
        )
        for b in range(src.size(0))
    ]


def _beam_one(
    model: Seq2Seq, src: Tensor, length: int, options: DecodeOptions, prefix: tuple[int, ...] = ()
) -> list[Hypothesis]:
    cfg = model.config
    rules = ScoringRules.of(options)
    k = options.beam_size
    device = src.device
    enc = model.encode(src, torch.tensor([length], device=device))
    limit = rules.length_limit(length)
    live_tokens: list[list[int]] = [[]]
    live_attn: list[list[Tensor]] = [[]]
    live_scores = torch.zeros(1, dtype=torch.float32, device=device)
    state = enc.state
    prev = torch.tensor([cfg.bos_id], device=device)
    finished: list[Hypothesis] = []
    for step in range(limit):
        rows = len(live_tokens)
        rep = torch.zeros(rows, dtype=torch.long, device=device)
        log_probs, state, weights = _next_log_probs(
            model, prev, state, enc.keys[rep], enc.memory[rep], enc.mask[rep]
        )
        if step < len(prefix):  # forced target prefix: one row, the token adds its log-prob
            if rules.prefix_scored:  # (unless the rules drop a prefix's: Eole's)
                live_scores = live_scores[:1] + log_probs[0, prefix[step]]
            live_tokens = [live_tokens[0] + [prefix[step]]]
            live_attn = [live_attn[0] + [weights[0]]]
            state = tuple(s[:1] for s in state)
            prev = torch.tensor([prefix[step]], device=device)
            continue
        apply_bans(log_probs, rules, live_tokens, cfg.unk_id)
        values, ids = step_candidates(log_probs, k=2 * k, eos_id=cfg.eos_id)
        values = restrict_candidates(values, [rules.eos_rule(step, limit)] * rows)
        width = values.size(1)
        cand = (live_scores.unsqueeze(1) + values).view(-1)
        top_scores, top_idx = torch.sort(cand, descending=True, stable=True)
        parents, next_tokens, next_scores = [], [], []
        for rank in range(min(2 * k, top_idx.numel())):
            score = float(top_scores[rank])
            if score == NEG_INF:
                break
            beam, col = divmod(int(top_idx[rank]), width)
            tok = int(ids[beam, col])
            if tok == cfg.eos_id:
                if rank < k:
                    toks = live_tokens[beam]
                    finished.append(
                        Hypothesis(
                            tokens=tuple(toks),
                            score=rules.score(
                                score,
                                len(toks),
                                coverage=_coverage(live_attn[beam] + [weights[beam]])
                                if rules.needs_coverage
                                else None,
                            ),
                            log_prob=score,
                            attention=torch.stack(live_attn[beam] + [weights[beam]]).cpu().numpy()
                            if options.return_attention
                            else None,
                        )
                    )
                continue
            parents.append(beam)
            next_tokens.append(tok)
            next_scores.append(score)
            if len(parents) == k:
                break
        if len(finished) >= k or not parents:
            break
        live_tokens = [live_tokens[p] + [t] for p, t in zip(parents, next_tokens, strict=True)]
        live_attn = [live_attn[p] + [weights[p]] for p in parents]
        live_scores = torch.tensor(next_scores, dtype=torch.float32, device=device)
        order = torch.tensor(parents, device=device)
        state = tuple(s[order] for s in state)
        prev = torch.tensor(next_tokens, device=device)
    finished.sort(key=lambda h: h.score, reverse=True)
    return finished[: options.n_best]
