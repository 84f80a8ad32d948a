"""The parity gate: an exported bundle must translate exactly like its checkpoint.

Checks (thresholds in :class:`ParityThresholds`):

1. encoder outputs and decoder-step log-probs / attention of ONNX Runtime vs PyTorch
   on random and real batches across batch sizes and source lengths (1 and max);
2. greedy translations identical token for token (every given sentence);
3. beam hypotheses identical on a sample.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from models.options import DecodeOptions
from models.seq2seq import Seq2Seq
from models.translate import translate_ids
from service.decoding import SpecialIds, StepModel, pad_batch
from service.loop import decode


class ParityError(RuntimeError):
    """The exported graphs do not reproduce the PyTorch model."""


class ParityInputError(ValueError):
    """The gate was asked to check nothing (no sentences, no beam sample): a usage error,
    not a verdict on the graphs."""


NO_SENTENCES = "no parity sentences: give --parity-src with at least one non-empty line"


log = logging.getLogger(__name__)


def max_abs_diff(got, want, rtol: float = 0.0) -> float:
    """``max |got - want| - rtol * |want|``, ``+inf`` when any difference is not finite.

    Equal entries count as 0, so a column that is ``-inf`` on both sides (a token the
    model cannot emit) is no failure; NaN anywhere, or an infinity on one side only, is.
    ``rtol`` (``numpy.isclose``'s): the part of a difference that grows with the value.
    """
    got = np.asarray(got, dtype=np.float64)
    want = np.asarray(want, dtype=np.float64)
    if got.size == 0 and want.size == 0:
        return 0.0
    with np.errstate(invalid="ignore"):
        diff = np.where(got == want, 0.0, np.abs(got - want) - rtol * np.abs(want))
    if not np.isfinite(diff).all():
        return math.inf
    return max(0.0, float(diff.max()))  # within the rtol part: 0, not a negative excess


@dataclass(frozen=True)
class ParityThresholds:
    """Log-probs pass when ``|onnx - torch| <= log_prob_atol + log_prob_rtol * |torch|``
    (``numpy.isclose``'s form and default rtol): a float32 log-prob of -17 is as exact
    as its last bits, and two kernels that sum in another order differ there by ~1e-4.
    Attention weights are held to the memory's tolerance, from which they are computed: a
    model whose recurrence amplifies rounding (TensorFlow's tutorial model, its encoder run
    over 27 positions of padding, memory 3e-5 apart) puts 1e-5 between two softmaxes over
    the gate's random steps; a wrong mask or window is off by far more."""

    log_prob_atol: float = 1e-4
    attention_atol: float = 1e-4
    memory_atol: float = 1e-4
    log_prob_rtol: float = 1e-5


@dataclass
class ParityReport:
    max_log_prob_diff: float = 0.0
    # max |difference| - rtol * |log-prob|: what the gate holds to the absolute tolerance
    max_log_prob_excess: float = 0.0
    max_attention_diff: float = 0.0
    max_memory_diff: float = 0.0
    batches_checked: int = 0
    greedy_sentences: int = 0
    greedy_mismatches: int = 0
    beam_size: int = 5
    beam_sentences: int = 0
    beam_mismatches: int = 0
    # lists whose hypotheses at some rank differ but tie in score (check_search)
    beam_near_ties: int = 0
    # max |difference| - log_prob_rtol * |score|: scores are sums of log-probs
    max_score_diff: float = 0.0
    seconds: float = 0.0
    failures: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "failures"}


def _step_both(
    model: Seq2Seq,
    onnx: StepModel,
    src: np.ndarray,
    lengths: np.ndarray,
    steps: int,
    rng: np.random.Generator,
    report: ParityReport,
    rtol: float,
) -> None:
    """Compare encoder outputs and ``steps`` decoder steps fed with random tokens
    (``rtol``: of the log-probs, see :class:`ParityThresholds`)."""
    cfg = model.config
    with torch.no_grad():
        enc_t = model.encode(torch.from_numpy(src), torch.from_numpy(lengths))
    enc_o = onnx.encode(src, lengths)
    mask = enc_o.mask
    diff = max_abs_diff(enc_o.memory[mask], enc_t.memory.numpy()[mask])
    report.max_memory_diff = max(report.max_memory_diff, diff)
    batch = src.shape[0]
    state_t, state_o = enc_t.state, enc_o.states
    rows = np.arange(batch, dtype=np.int64)
    keep = np.ones(cfg.tgt_vocab_size, dtype=bool)
    keep[[cfg.pad_id, cfg.bos_id, cfg.eos_id]] = False
    top_k = int(keep.sum())
    tgt_pool = _ordinary_ids(cfg, cfg.tgt_vocab_size)
    for step in range(steps):
        prev = (np.full(batch, cfg.bos_id) if step == 0 else _draw(rng, tgt_pool, batch)).astype(
            np.int64
        )
        with torch.no_grad():
            logits, state_t, attn_t = model.decoder(
                torch.from_numpy(prev), state_t, enc_t.keys, enc_t.memory, enc_t.mask
            )
            lp_t = torch.log_softmax(logits, -1).numpy()
        out = onnx.step(
            prev_tokens=prev,
            parent_rows=rows,
            row_sentence=rows,
            memory=enc_o.memory,
            keys=enc_o.keys,
            mask=mask,
            states=state_o,
            top_k=top_k,
        )
        state_o = out.states
        lp_o = np.full_like(lp_t, np.nan)
        np.put_along_axis(lp_o, out.topk_ids, out.topk_values, axis=1)
        lp_o[:, cfg.eos_id] = out.eos_values
        cols = keep.copy()
        cols[cfg.eos_id] = True
        d_lp = max_abs_diff(lp_o[:, cols], lp_t[:, cols])
        excess = max_abs_diff(lp_o[:, cols], lp_t[:, cols], rtol)
        d_att = max_abs_diff(out.attention, attn_t.numpy())
        report.max_log_prob_diff = max(report.max_log_prob_diff, d_lp)
        report.max_log_prob_excess = max(report.max_log_prob_excess, excess)
        report.max_attention_diff = max(report.max_attention_diff, d_att)
    report.batches_checked += 1


def _ordinary_ids(cfg, vocab: int) -> np.ndarray:
    """Ids of a vocabulary that are none of the special ones (wherever those are)."""
    special = {cfg.pad_id, cfg.unk_id, cfg.bos_id, cfg.eos_id}
    return np.array([i for i in range(vocab) if i not in special], dtype=np.int64)


def _draw(rng: np.random.Generator, pool: np.ndarray, size) -> np.ndarray:
    # integers(0, n) then a lookup: the same draws as integers(4, vocab) when the
    # specials are 0..3, so the figures of bundles exported before stay reproducible
    return pool[rng.integers(0, len(pool), size)]


def check_steps(
    model: Seq2Seq,
    onnx: StepModel,
    real: Sequence[Sequence[int]],
    *,
    max_len: int,
    report: ParityReport,
    seed: int = 0,
    log_prob_rtol: float = ParityThresholds.log_prob_rtol,
) -> None:
    """Random batches (sizes 1, 3, 8; lengths 1, 7, ``max_len``) and real batches."""
    rng = np.random.default_rng(seed)
    src_pool = _ordinary_ids(model.config, model.config.src_vocab_size)
    for batch in (1, 3, 8):
        for length in (1, 7, max_len):
            lengths = rng.integers(1, length + 1, batch)
            lengths[0] = length
            src = _draw(rng, src_pool, (batch, length)).astype(np.int64)
            src[np.arange(length)[None, :] >= lengths[:, None]] = model.config.pad_id
            _step_both(model, onnx, src, lengths.astype(np.int64), 4, rng, report, log_prob_rtol)
    real = [list(s[:max_len]) for s in real if s]
    for start in range(0, min(len(real), 64), 16):
        src, lengths = pad_batch(real[start : start + 16], model.config.pad_id)
        _step_both(model, onnx, src, lengths, 6, rng, report, log_prob_rtol)


def check_search(
    model: Seq2Seq,
    onnx: StepModel,
    sources: Sequence[Sequence[int]],
    *,
    options: DecodeOptions,
    report: ParityReport,
    batch_size: int = 64,
    rtol: float = 0.0,
    atol: float | None = None,
) -> int:
    """Decode ``sources`` both ways (the reference ``batch_size`` sentences at a time);
    returns the number of sentences that differ. Score differences are recorded as
    ``max |difference| - rtol * |score|`` (see :class:`ParityThresholds`).

    With ``atol`` (beam search; greedy leaves it None: the same tokens or a mismatch) an
    n-best list matches when each rank holds the same hypothesis, or two whose scores tie
    within ``atol + rtol * |score|``: a model that loops can end two hypotheses with
    the same tokens in another order 1.5e-5 apart out of -112.5, which the two runtimes'
    rounding may rank either way (counted in ``report.beam_near_ties``)."""
    cfg = model.config
    special = SpecialIds(cfg.pad_id, cfg.bos_id, cfg.eos_id, cfg.unk_id)
    ref = translate_ids(model, sources, options=options, batch_size=batch_size)
    got = decode(onnx, [list(s) for s in sources], options=options, special=special)
    mismatches = 0
    for r, g in zip(ref, got, strict=True):
        if len(r) != len(g):
            mismatches += 1
            continue
        ties = 0
        for hr, hg in zip(r, g, strict=True):
            diff = max_abs_diff(hg.score, hr.score, rtol)
            if hr.tokens != hg.tokens:
                if atol is None or not diff <= atol:  # NaN too
                    mismatches += 1
                    break
                ties += 1
                continue
            report.max_score_diff = max(report.max_score_diff, diff)
        else:
            report.beam_near_ties += ties > 0
    return mismatches


def check_diff(
    report: ParityReport, diff: float, atol: float, what: str, verb: str, over: str | None = None
) -> None:
    """Fail ``report`` when ``diff`` is not finite or above ``atol``; ``over``: the
    message of the latter, when the default (``diff > atol``) is not the clearest."""
    if not math.isfinite(diff):
        report.failures.append(f"non-finite values in {what} (NaN or inf on one side)")
    elif diff > atol:
        report.failures.append(over or f"{what} {verb} by {diff:.2e} > {atol:.0e}")


def run_gate(
    model: Seq2Seq,
    onnx: StepModel,
    sources: Sequence[Sequence[int]],
    *,
    beam_sentences: int = 200,
    beam_size: int = 5,
    max_len: int = 128,
    thresholds: ParityThresholds | None = None,
    reference_batch_size: int = 64,
) -> ParityReport:
    """Run every check; raise :class:`ParityError` listing what failed, or
    :class:`ParityInputError` when there is nothing to check (no non-empty sentence,
    ``beam_sentences < 1``). ``reference_batch_size``: sentences per batch of the greedy
    PyTorch reference."""
    if beam_sentences < 1:
        raise ParityInputError(
            f"beam_sentences must be >= 1; the beam check cannot be skipped (got {beam_sentences})"
        )
    if reference_batch_size < 1:
        raise ParityInputError(f"reference_batch_size must be >= 1, got {reference_batch_size}")
    sources = [list(s[:max_len]) for s in sources if len(s)]
    if not sources:
        raise ParityInputError(NO_SENTENCES)
    th = thresholds or ParityThresholds()
    start = time.monotonic()
    model = model.eval()
    report = ParityReport(beam_size=beam_size)
    log.info("parity gate: decoder steps, PyTorch vs ONNX Runtime, random and real batches")
    check_steps(
        model, onnx, sources, max_len=max_len, report=report, log_prob_rtol=th.log_prob_rtol
    )
    check_diff(report, report.max_memory_diff, th.memory_atol, "encoder memory", "differs")
    check_diff(
        report,
        report.max_log_prob_excess,
        th.log_prob_atol,
        "decoder log-probs",
        "differ",
        over=f"decoder log-probs differ by {report.max_log_prob_diff:.2e} (more than "
        f"{th.log_prob_atol:.0e} + {th.log_prob_rtol:.0e} x |log-prob|)",
    )
    check_diff(report, report.max_attention_diff, th.attention_atol, "attention", "differs")
    report.greedy_sentences = len(sources)
    log.info("parity gate: greedy on %s sentences, PyTorch vs ONNX Runtime", f"{len(sources):,}")
    report.greedy_mismatches = check_search(
        model,
        onnx,
        sources,
        options=DecodeOptions(beam_size=1),
        report=report,
        batch_size=reference_batch_size,
        rtol=th.log_prob_rtol,
    )
    if report.greedy_mismatches:
        report.failures.append(
            f"greedy output differs on {report.greedy_mismatches}/{len(sources)} sentences"
        )
    sample = sources[:beam_sentences]
    report.beam_sentences = len(sample)
    log.info("parity gate: beam %d n-best on %s sentences", beam_size, f"{len(sample):,}")
    report.beam_mismatches = check_search(
        model,
        onnx,
        sample,
        options=DecodeOptions(beam_size=beam_size, n_best=beam_size),
        report=report,
        rtol=th.log_prob_rtol,
        atol=th.log_prob_atol,
    )
    if report.beam_mismatches:
        report.failures.append(
            f"beam {beam_size} n-best differs on {report.beam_mismatches}/{len(sample)} sentences"
        )
    check_diff(
        report,
        report.max_score_diff,
        th.log_prob_atol,
        "hypothesis scores",
        f"differ (beyond {th.log_prob_rtol:.0e} x |score|)",
    )
    report.seconds = time.monotonic() - start
    if report.failures:
        raise ParityError("; ".join(report.failures))
    return report
