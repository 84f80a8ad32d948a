"""The ensemble's gate: its composed graphs against its members' own sessions.

The reference (:class:`MemberEnsemble`) runs each member bundle as the server would run
it alone and combines their log-probs in numpy, with the rule of
:mod:`export.ensemble`; the composed bundle must match it step by step (log-probs,
EOS, attention, on random and real batches) and in search (greedy identical on every
parity sentence, beam-5 n-best lists identical on ``beam_sentences``), within the
thresholds of :class:`export.parity.ParityThresholds`. Each member passed its own gate
against its source framework, so this checks the composition, not the members.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort

from export import spec
from export.ensemble import Member
from export.ensemble_graphs import combined_value
from export.parity import (
    ParityError,
    ParityInputError,
    ParityReport,
    ParityThresholds,
    check_diff,
    max_abs_diff,
)
from export.spec import BundleConfig
from models.options import DecodeOptions
from service.decoding import Encoded, SpecialIds, StepOutput, pad_batch
from service.loop import decode
from service.pool import MemoryPool
from service.runtime import OnnxModel
from service.sessions import RuntimeConfig

log = logging.getLogger(__name__)

# one step a call and ORT's own TopK: the reference is the members as plainly run as can be
_PLAIN = RuntimeConfig(providers=("cpu",), intra_op_threads=1, greedy_steps=1, chunked_topk="off")


class MemberEnsemble:
    """A :class:`service.decoding.StepModel` over the member bundles, combined in numpy.

    Each member's encoder runs as the server runs it alone; its decoder runs as written,
    one more output exposing the log-probs the ensemble combines (see
    :func:`export.ensemble_graphs.combined_value`). Memory, keys and states are laid out
    as the composed graphs lay them out (members' columns concatenated, states in member
    order), so both take the same pool and the same loop."""

    def __init__(
        self, members: Sequence[Member], config: BundleConfig, weights: Sequence[float],
        combine: str, renormalize: bool = False,
    ) -> None:  # fmt: skip
        self.models = [
            OnnxModel(
                m.path,
                m.config.state_names,
                _PLAIN,
                exact_lengths=m.config.exact_lengths,
                pad_id=m.config.pad_id,
            )
            for m in members
        ]
        self.steps = [_exposing(m, renormalize) for m in members]
        self.members = members
        self.weights = np.array(weights, dtype=np.float32)
        self.combine = combine
        self.renormalize = renormalize
        self.vocab = config.tgt_vocab_size
        self.bos, self.eos = config.bos_id, config.eos_id
        self.blocked = [config.pad_id, config.bos_id, config.eos_id]

    def new_pool(self) -> MemoryPool:
        return MemoryPool()

    def encode(self, src_ids: np.ndarray, src_lengths: np.ndarray) -> Encoded:
        """``src_ids`` ``(batch, src_len)``: every member's encoder, outputs concatenated."""
        outs = [model.encode(src_ids, src_lengths) for model in self.models]
        return Encoded(
            np.concatenate([o.memory for o in outs], axis=2),
            np.concatenate([o.keys for o in outs], axis=2),
            outs[0].mask,
            tuple(s for o in outs for s in o.states),
        )

    def combined(self, xs: Sequence[np.ndarray]) -> np.ndarray:
        """The members' log-probs (same shapes) combined, float32 as the graph does."""
        w = self.weights
        if self.combine == "log-linear":
            total = xs[0] * w[0] if w[0] != 1 else xs[0]
            for x, wi in zip(xs[1:], w[1:], strict=True):
                total = total + (x * wi if wi != 1 else x)
            return total.astype(np.float32)
        top = np.maximum.reduce(list(xs))
        shift = np.where(np.isneginf(top), np.float32(0), top)
        with np.errstate(divide="ignore"):
            total = sum(np.exp(x - shift) * wi for x, wi in zip(xs, w, strict=True))
            return (np.log(total) + shift).astype(np.float32)

    def full_step(
        self, *, prev_tokens, parent_rows, row_sentence, mask, memory, keys, states
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple]:
        """One step of every member: the combined ``(rows, V)`` log-probs with pad, bos
        and eos at -inf, the combined ``(rows,)`` EOS log-probs, the weighted mean
        attention and the new states."""
        at_m = at_k = at_s = 0
        values, eos, attention, new_states = [], [], [], []
        for m, (session, outputs) in zip(self.members, self.steps, strict=True):
            n = len(m.states)
            feeds = {
                spec.PREV_TOKENS: prev_tokens, spec.PARENT_ROWS: parent_rows,
                spec.ROW_SENTENCE: row_sentence, spec.SRC_MASK: mask,
                spec.MEMORY: np.ascontiguousarray(memory[:, :, at_m : at_m + m.memory_dim]),
                spec.KEYS: np.ascontiguousarray(keys[:, :, at_k : at_k + m.keys_dim]),
                spec.TOP_K: np.array([1], dtype=np.int64),
                **dict(zip(m.config.state_names, states[at_s : at_s + n], strict=True)),
            }  # fmt: skip
            wanted = {i.name for i in session.get_inputs()}
            value, e, a, *s = session.run(outputs, {k: v for k, v in feeds.items() if k in wanted})
            at_m, at_k, at_s = at_m + m.memory_dim, at_k + m.keys_dim, at_s + n
            values.append(value)
            eos.append(e)
            attention.append(a)
            new_states.extend(s)
        share = self.weights / self.weights.sum()
        mean_attention = sum(a * s for a, s in zip(attention, share, strict=True))
        combined = self.combined(values)
        if not self.renormalize:
            return combined, self.combined(eos), mean_attention, tuple(new_states)
        wide = combined.astype(np.float64)
        top = wide.max(axis=1, keepdims=True)
        with np.errstate(invalid="ignore"):  # an all -inf or NaN row: NaN, as the graph's
            normal = wide - top - np.log(np.exp(wide - top).sum(axis=1, keepdims=True))
        ranked = normal.astype(np.float32)
        eos_values = ranked[:, self.eos].copy()
        ranked[:, self.blocked] = -np.inf
        return ranked, eos_values, mean_attention, tuple(new_states)

    def step(self, *, top_k: int, eos_mask=None, log_probs: bool = False, **feeds) -> StepOutput:
        ranked, eos, attention, states = self.full_step(**feeds)
        # ONNX TopK's order: by value, ties to the lower index
        order = np.argsort(-ranked, axis=1, kind="stable")[:, :top_k]
        values = np.take_along_axis(ranked, order, axis=1)
        every = ranked if log_probs else None  # what the composed graph's forced output is
        return StepOutput(values, order.astype(np.int64), eos, attention, states, every)


def _exposing(m: Member, renormalize: bool) -> tuple[ort.InferenceSession, list[str]]:
    """Member ``m``'s decoder as written, plus an output: the value the ensemble combines
    (:func:`~export.ensemble_graphs.combined_value`); and the outputs to fetch."""
    model = onnx.load(str(m.path / spec.DECODER_FILE))
    value, _ = combined_value(model.graph, "", renormalize, f"member {m.index + 1} ({m.path})")
    model.graph.output.append(
        onnx.helper.make_tensor_value_info(value, onnx.TensorProto.FLOAT, None)
    )
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    names = [s + spec.STATE_OUT_SUFFIX for s in m.config.state_names]
    return session, [value, spec.EOS_LOG_PROBS, spec.ATTENTION, *names]


def _compare_steps(
    ref: MemberEnsemble, got: OnnxModel, src: np.ndarray, lengths: np.ndarray, steps: int,
    rng: np.random.Generator, pool: np.ndarray, report: ParityReport, rtol: float,
) -> None:  # fmt: skip
    """Encoder outputs and ``steps`` decoder steps fed random tokens, both ways."""
    enc_r, enc_g = ref.encode(src, lengths), got.encode(src, lengths)
    mask = enc_r.mask
    for a, b in ((enc_g.memory, enc_r.memory), (enc_g.keys, enc_r.keys)):
        report.max_memory_diff = max(report.max_memory_diff, max_abs_diff(a[mask], b[mask]))
    if not np.array_equal(enc_g.mask, mask):
        report.failures.append("the source mask differs from the first member's")
    batch = src.shape[0]
    rows = np.arange(batch, dtype=np.int64)
    states_r, states_g = enc_r.states, enc_g.states
    for step in range(steps):
        prev = np.full(batch, ref.bos) if step == 0 else pool[rng.integers(0, len(pool), batch)]
        feeds = dict(prev_tokens=prev.astype(np.int64), parent_rows=rows, row_sentence=rows,
                     mask=mask)  # fmt: skip
        want, eos_r, att_r, states_r = ref.full_step(
            **feeds, memory=enc_r.memory, keys=enc_r.keys, states=states_r
        )
        out = got.step(**feeds, memory=enc_g.memory, keys=enc_g.keys, states=states_g,
                       top_k=ref.vocab)  # fmt: skip
        states_g = out.states
        have = np.full_like(want, np.nan)
        np.put_along_axis(have, out.topk_ids, out.topk_values, axis=1)
        for a, b in ((have, want), (out.eos_values, eos_r)):
            report.max_log_prob_diff = max(report.max_log_prob_diff, max_abs_diff(a, b))
            report.max_log_prob_excess = max(report.max_log_prob_excess, max_abs_diff(a, b, rtol))
        report.max_attention_diff = max(
            report.max_attention_diff, max_abs_diff(out.attention, att_r)
        )
    report.batches_checked += 1


def _compare_search(
    ref: MemberEnsemble, got: OnnxModel, sources: list[list[int]], options: DecodeOptions,
    special: SpecialIds, report: ParityReport, rtol: float,
) -> int:  # fmt: skip
    """Sentences whose n-best tokens differ; score differences into ``report``."""
    want = decode(ref, sources, options=options, special=special)
    have = decode(got, sources, options=options, special=special)
    mismatches = 0
    for r, g in zip(want, have, strict=True):
        if [h.tokens for h in r] != [h.tokens for h in g]:
            mismatches += 1
            continue
        for hr, hg in zip(r, g, strict=True):
            report.max_score_diff = max(
                report.max_score_diff, max_abs_diff(hg.score, hr.score, rtol)
            )
    return mismatches


def run_ensemble_gate(
    members: Sequence[Member], bundle_dir: Path, config: BundleConfig, weights: Sequence[float],
    combine: str, sources: Sequence[Sequence[int]], *, renormalize: bool = False,
    beam_sentences: int = 200, beam_size: int = 5, max_len: int = 128,
    thresholds: ParityThresholds | None = None,
) -> ParityReport:  # fmt: skip
    """Check the composed graphs in ``bundle_dir`` against the members; raise
    :class:`ParityError` listing what failed, :class:`ParityInputError` when there is
    nothing to check."""
    if beam_sentences < 1:
        raise ParityInputError(f"beam_sentences must be >= 1, got {beam_sentences}")
    sources = [list(s[:max_len]) for s in sources if len(s)]
    if not sources:
        raise ParityInputError("no parity sentences: give --parity-src with a non-empty line")
    th = thresholds or ParityThresholds()
    start = time.monotonic()
    ref = MemberEnsemble(members, config, weights, combine, renormalize)
    got = OnnxModel(bundle_dir, config.state_names, _PLAIN, exact_lengths=config.exact_lengths,
                    pad_id=config.pad_id)  # fmt: skip
    special = SpecialIds(config.pad_id, config.bos_id, config.eos_id, config.unk_id)
    report = ParityReport(beam_size=beam_size)
    log.info("ensemble gate: decoder steps, composed graphs vs the members combined")
    rng = np.random.default_rng(0)
    specials = {config.pad_id, config.unk_id, config.bos_id, config.eos_id}
    src_pool = np.array([i for i in range(config.src_vocab_size) if i not in specials])
    tgt_pool = np.array([i for i in range(config.tgt_vocab_size) if i not in specials])
    for batch in (1, 3, 8):
        for length in (1, 7, max_len):
            lengths = rng.integers(1, length + 1, batch)
            lengths[0] = length
            src = src_pool[rng.integers(0, len(src_pool), (batch, length))].astype(np.int64)
            src[np.arange(length)[None, :] >= lengths[:, None]] = config.pad_id
            _compare_steps(ref, got, src, lengths.astype(np.int64), 4, rng, tgt_pool, report,
                           th.log_prob_rtol)  # fmt: skip
    for at in range(0, min(len(sources), 64), 16):
        src, lengths = pad_batch(sources[at : at + 16], config.pad_id)
        _compare_steps(ref, got, src, lengths, 6, rng, tgt_pool, report, th.log_prob_rtol)
    check_diff(report, report.max_memory_diff, th.memory_atol, "encoder memory and keys", "differ")
    check_diff(
        report, report.max_log_prob_excess, th.log_prob_atol, "combined log-probs", "differ",
        over=f"combined log-probs differ by {report.max_log_prob_diff:.2e} (more than "
        f"{th.log_prob_atol:.0e} + {th.log_prob_rtol:.0e} x |log-prob|)",
    )  # fmt: skip
    check_diff(report, report.max_attention_diff, th.attention_atol, "attention", "differs")
    report.greedy_sentences = len(sources)
    log.info("ensemble gate: greedy on %s sentences", f"{len(sources):,}")
    report.greedy_mismatches = _compare_search(
        ref, got, sources, DecodeOptions(beam_size=1), special, report, th.log_prob_rtol
    )
    if report.greedy_mismatches:
        report.failures.append(
            f"greedy output differs on {report.greedy_mismatches}/{len(sources)} sentences"
        )
    sample = sources[:beam_sentences]
    report.beam_sentences = len(sample)
    log.info("ensemble gate: beam %d n-best on %s sentences", beam_size, f"{len(sample):,}")
    report.beam_mismatches = _compare_search(
        ref, got, sample, DecodeOptions(beam_size=beam_size, n_best=beam_size), special, report,
        th.log_prob_rtol,
    )  # fmt: skip
    if report.beam_mismatches:
        report.failures.append(
            f"beam {beam_size} n-best differs on {report.beam_mismatches}/{len(sample)} sentences"
        )
    check_diff(report, report.max_score_diff, th.log_prob_atol, "hypothesis scores",
                f"differ (beyond {th.log_prob_rtol:.0e} x |score|)")  # fmt: skip
    report.seconds = time.monotonic() - start
    if report.failures:
        raise ParityError("; ".join(report.failures))
    return report
