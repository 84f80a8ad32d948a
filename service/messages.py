"""Protobuf messages <-> domain objects: request options in, translations and timings out.
Torch-free, no gRPC calls; the servicer uses these at the edge of every RPC."""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import Mapping, Sequence

from models.options import DecodeOptions
from nmt_api import DEFAULT_BEAM, LENGTH_PENALTY_FORMS
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.alignment import hard_alignment
from service.diagnostics import Diagnostics
from service.engine import Job, TranslationResult, decode_options
from service.errors import InvalidRequest

# The proto's ``optional`` fields a request leaves unset to take the model's default.
MODEL_DEFAULTED = (
    "length_penalty",
    "max_length_ratio",
    "coverage_penalty",
    "min_length",
    "ban_unk",
    "block_ngram_repeat",
    "sampling_temperature",
    "sampling_topp",
)
# More tokens than anyone would exempt from n-gram blocking: a guard against huge lists.
MAX_IGNORED_TOKENS = 1024
# The proto's LengthPenaltyForm -> DecodeOptions.length_penalty_form
PENALTY_FORMS = {number: name for name, number in LENGTH_PENALTY_FORMS.items()}


def to_options(
    msg: pb.DecodeOptions,
    *,
    default_max_length: int,
    defaults: DecodeOptions | None = None,
    target_index: Mapping[str, int] | None = None,
) -> DecodeOptions:
    """Proto options -> domain options: what the request sets, else the model's decoding
    defaults (``defaults``, from its manifest), else the documented ones;
    ``target_index``: the model's target token -> id (for ``ignore_when_blocking``)."""
    defaults = defaults or DecodeOptions()
    beam = msg.beam_size
    # the model's own beam (1 unless its manifest sets one), for a request that asks for
    # no search of its own: diverse groups choose theirs, and sampling draws as many
    # samples as it asks n_best of (fairseq's --sampling --beam N --nbest N)
    if msg.sampling_topk > 1:
        model_beam = max(1, msg.n_best)
    else:
        model_beam = 1 if msg.diverse_beam_groups > 1 else defaults.beam_size
    if msg.strategy == pb.STRATEGY_GREEDY:
        if beam > 1:
            raise InvalidRequest(
                f"strategy GREEDY with beam_size {beam}: use STRATEGY_BEAM or beam_size 0/1"
            )
        beam = 1
    elif msg.strategy == pb.STRATEGY_BEAM:
        # (sampling: its n_best samples, whatever the strategy says; helper-90)
        beam = beam or (model_beam if model_beam > 1 or msg.sampling_topk > 1 else DEFAULT_BEAM)
    elif msg.strategy == pb.STRATEGY_UNSPECIFIED:
        beam = beam or model_beam
    else:  # a client built against a newer proto: refuse rather than guess
        raise InvalidRequest(
            f"unknown strategy {msg.strategy}: use STRATEGY_GREEDY (1), STRATEGY_BEAM (2) "
            "or leave it unset"
        )
    replace_unk = msg.replace_unk or defaults.replace_unk  # (a model may default to it)
    options = decode_options(
        defaults,
        beam_size=beam,
        # the model's n-best list goes with its beam; another beam gets one hypothesis
        n_best=msg.n_best or (defaults.n_best if beam == model_beam > 1 else 1),
        max_length=msg.max_length or min(default_max_length, defaults.max_length),
        # Diagnostics, alignments and replace_unk read the attention: the loop must keep it.
        return_attention=(
            msg.return_attention or msg.return_diagnostics or msg.return_alignment or replace_unk
        ),
        ignore_when_blocking=_token_ids(msg.ignore_when_blocking, target_index),
        replace_unk=replace_unk,
        return_token_scores=msg.return_token_scores,
        sampling_topk=msg.sampling_topk,
        seed=msg.seed if msg.HasField("seed") else _fresh_seed(msg),
        # a request's alone (a model default would refuse every greedy request)
        diversity_rate=msg.diversity_rate if msg.HasField("diversity_rate") else 0.0,
        length_penalty_form=_penalty_form(msg.length_penalty_form, defaults),
        # a request's alone, like diversity_rate
        diverse_beam_groups=msg.diverse_beam_groups,
        diverse_beam_strength=(
            msg.diverse_beam_strength
            if msg.HasField("diverse_beam_strength")
            else DecodeOptions.diverse_beam_strength
        ),
        **{
            name: getattr(msg, name) if msg.HasField(name) else getattr(defaults, name)
            for name in MODEL_DEFAULTED
        },
    )
    _refuse_unused(msg, options)
    return options


def _refuse_unused(msg: pb.DecodeOptions, options: DecodeOptions) -> None:
    """Options a request sets that the decoding it asks for would ignore are refused:
    a client that sets them expects an effect it would not get. (A seed is not: greedy
    and beam search are deterministic, so a client may send one with every request.)"""
    if not options.sampling:
        for name in ("sampling_temperature", "sampling_topp"):
            if msg.HasField(name):
                raise InvalidRequest(
                    f"{name} applies to random sampling only: set sampling_topk > 1 to "
                    f"sample, or leave {name} unset"
                )
    if options.diverse_beam_groups <= 1 and msg.HasField("diverse_beam_strength"):
        raise InvalidRequest(
            "diverse_beam_strength applies to diverse beam search only: set "
            "diverse_beam_groups > 1, or leave diverse_beam_strength unset"
        )
    if msg.ignore_when_blocking and not options.block_ngram_repeat:
        raise InvalidRequest(
            "ignore_when_blocking applies to n-gram blocking only: set block_ngram_repeat "
            "(this model's default is 0), or leave ignore_when_blocking empty"
        )


def split_options(request: pb.TranslateRequest, options: DecodeOptions) -> DecodeOptions:
    """``options`` for a ``split_sentences`` request, which joins each text's best
    sentence translations into one: what is per sentence or per hypothesis list does not
    join, so a request asking for it is refused (rather than answered for one sentence
    of the text); a model's own n-best list becomes one hypothesis."""
    msg = request.options
    if not msg.n_best and options.n_best > 1:
        options = dataclasses.replace(options, n_best=1)
    asked = [
        name
        for name, on in (
            (f"n_best {options.n_best}", options.n_best > 1),
            ("return_attention", msg.return_attention),
            ("return_alignment", msg.return_alignment),
            ("return_diagnostics", msg.return_diagnostics),
            ("return_token_scores", msg.return_token_scores),
            ("target_prefix", any(request.target_prefix)),
            ("constraints", any(c.phrases for c in request.constraints)),
        )
        if on
    ]
    if asked:
        raise InvalidRequest(
            f"split_sentences joins one translation per sentence: {', '.join(asked)} "
            "cannot be joined; send the sentences as texts of their own instead"
        )
    return options


def to_score_options(
    msg: pb.ScoreOptions, *, max_length: int, defaults: DecodeOptions | None = None
) -> DecodeOptions:
    """A ``Score`` request's options: one row per sentence, nothing banned or sampled,
    the model's length penalty and coverage penalty unless the request sets them (its
    score is then Translate's for the same tokens), and a length limit of ``max_length``
    target tokens (EOS counted) whatever the source's length."""
    defaults = defaults or DecodeOptions()
    return decode_options(
        defaults,
        beam_size=1,
        n_best=1,
        max_length=max_length,
        max_length_ratio=0.0,
        max_length_offset=max_length,
        min_length=0,
        return_attention=msg.return_attention or msg.return_diagnostics or msg.return_alignment,
        ban_unk=False,
        block_ngram_repeat=0,
        ignore_when_blocking=(),
        replace_unk=False,
        sampling_topk=0,
        length_penalty=(
            msg.length_penalty if msg.HasField("length_penalty") else defaults.length_penalty
        ),
        coverage_penalty=(
            msg.coverage_penalty if msg.HasField("coverage_penalty") else defaults.coverage_penalty
        ),
        length_penalty_form=_penalty_form(msg.length_penalty_form, defaults),
    )


def _penalty_form(value: int, defaults: DecodeOptions) -> str:
    """A request's ``length_penalty_form``: unspecified is the model's."""
    if value == pb.LENGTH_PENALTY_FORM_UNSPECIFIED:
        return defaults.length_penalty_form
    if value not in PENALTY_FORMS:  # a client built against a newer proto
        known = ", ".join(f"{pb.LengthPenaltyForm.Name(n)} ({n})" for n in PENALTY_FORMS)
        raise InvalidRequest(f"unknown length_penalty_form {value}: use {known} or leave it unset")
    return PENALTY_FORMS[value]


def _fresh_seed(msg: pb.DecodeOptions) -> int:
    """A sampling request without a seed gets a fresh one, so that two such requests draw
    differently; 0 when nothing is drawn (the options stay a plain value)."""
    return secrets.randbits(64) if msg.sampling_topk > 1 else 0


def _token_ids(tokens: Sequence[str], index: Mapping[str, int] | None) -> tuple[int, ...]:
    """``ignore_when_blocking``'s tokens as target ids; each must be a vocabulary entry."""
    if not tokens:
        return ()
    if len(tokens) > MAX_IGNORED_TOKENS:
        raise InvalidRequest(
            f"ignore_when_blocking lists {len(tokens)} tokens: give at most {MAX_IGNORED_TOKENS}"
        )
    missing = [t for t in tokens if index is None or t not in index]
    if missing:
        shown = ", ".join(repr(t[:40]) for t in missing[:3])
        raise InvalidRequest(
            f"ignore_when_blocking: {shown} not in the model's target vocabulary; give tokens "
            "as a hypothesis's tokens spell them (e.g. '.' or a SentencePiece piece)"
        )
    return tuple(sorted({index[t] for t in tokens}))  # type: ignore[index]


def strategy_label(options: DecodeOptions | None) -> str:
    """The ``strategy`` label of the latency histogram."""
    if options is None:
        return "unknown"
    if options.sampling:
        return "sampling"
    return "greedy" if options.beam_size == 1 else "beam"


def to_diagnostics(diag: Diagnostics) -> pb.AttentionDiagnostics:
    out = pb.AttentionDiagnostics(unk_share=diag.unk_share)
    for name in ("entropy_mean", "entropy_max", "coverage_deficit", "over_attention"):
        value = getattr(diag, name)
        if value is not None:  # unset: no usable attention row
            setattr(out, name, value)
    return out


def to_translation(
    result: TranslationResult,
    *,
    scores: bool,
    attention: bool = True,
    diagnostics: Sequence[Diagnostics] | None = None,
    alignment: bool = False,
    finish_reasons: bool = False,
) -> pb.Translation:
    """``result`` as a message; ``attention``: include the matrices the hypotheses carry
    (a request for diagnostics alone makes the loop keep them too); ``diagnostics``: one
    per hypothesis, or None; ``alignment``: each hypothesis's hard alignment, from the
    attention the loop kept for it, and the source pieces it indexes; ``finish_reasons``:
    why each hypothesis ended (a translation's, not a score's)."""
    out = pb.Translation(source_tokens=len(result.source_pieces))
    span = result.source_span
    if alignment:
        out.source_pieces.extend(result.source_pieces[span[0] : span[1]])
    for i, (text, pieces, hyp) in enumerate(result.hypotheses):
        h = out.hypotheses.add(text=text, tokens=pieces)
        if scores:
            h.score, h.log_prob = hyp.score, hyp.log_prob
        if finish_reasons:
            limited = result.at_limit[i]
            h.finish_reason = pb.FINISH_REASON_LENGTH if limited else pb.FINISH_REASON_EOS
        if hyp.token_log_probs is not None:  # Score, or return_token_scores
            h.token_log_probs.extend(hyp.token_log_probs)
        if diagnostics is not None:
            h.diagnostics.CopyFrom(to_diagnostics(diagnostics[i]))
        if alignment and hyp.attention is not None:
            h.alignment.extend(hard_alignment(hyp.attention, span, len(hyp.tokens)))
        if attention and hyp.attention is not None:
            rows, cols = hyp.attention.shape
            h.attention.rows, h.attention.cols = rows, cols
            h.attention.values.extend(hyp.attention.astype(float).ravel().tolist())
            h.attention.source_tokens.extend(result.source_pieces)
            h.attention.target_tokens.extend([*pieces, "</s>"])
    return out


def to_timing(job: Job) -> pb.Timing:
    t = job.timing
    return pb.Timing(
        queue_ms=t.queue_ms, encode_ms=t.encode_ms, decode_ms=t.decode_ms, total_ms=t.total_ms
    )


def _file_names(value: object) -> object:
    """``value`` with every string that holds a path reduced to its last part."""
    if isinstance(value, dict):
        return {k: _file_names(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_file_names(v) for v in value]
    if isinstance(value, str) and ("/" in value or "\\" in value):
        return value.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    return value


def model_info(name: str, engine, *, default: bool, max_message_bytes: int) -> pb.ModelInfo:
    """One model's ListModels entry; ``engine`` is its :class:`service.front.EngineFront`."""
    m = engine.bundle.manifest
    cfg = engine.config
    limits = pb.RequestLimits(
        max_sentences=cfg.max_sentences_per_request,
        max_live_rows=cfg.max_live_rows,
        max_beam_size=cfg.max_beam_size,
        max_n_best=cfg.max_n_best,
        max_target_length=cfg.max_target_length,
        max_sampling_topk=cfg.max_sampling_topk,
        max_message_bytes=max_message_bytes,
    )
    summary = {
        # the model's own decoding defaults (what a request leaving an option unset gets
        # where they differ from DecodeOptions' documented ones)
        "decoding": m.get("decoding", {}),
        # paths of the machine that exported it (checkpoints, parity sources) by their
        # file names only: any client may ask (helper-87)
        "parity": _file_names(m.get("parity", {})),
        "versions": m.get("versions", {}),
        "created": m.get("created"),
        "checkpoint": _file_names(m.get("checkpoint", {}).get("meta", {})),
        "source_model": _file_names(m.get("source_model")),
        "tokenizers": _file_names(m.get("tokenizers")),
    }
    return pb.ModelInfo(
        name=name,
        version=str(m.get("version", "")),
        precision=m.get("precision", "fp32"),
        execution_provider=engine.bundle.model.provider,
        config_json=json.dumps(m.get("model_config", {}), sort_keys=True),
        parameters=int(m.get("parameters", 0)),
        src_vocab_size=int(m.get("src_vocab_size", 0)),
        tgt_vocab_size=int(m.get("tgt_vocab_size", 0)),
        max_source_tokens=engine.max_source_tokens,
        manifest_summary_json=json.dumps(summary, sort_keys=True, default=str),
        is_default=default,
        limits=limits,
    )
