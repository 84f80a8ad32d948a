"""Translate or score with a bundle in this process, without a server (``nmt-eval
--bundle``, ``nmt-score --bundle``): the serving decoder on ONNX Runtime's CPU provider,
a request's options applied as the server applies them (over the bundle's own decoding
defaults)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path

from models.options import Hypothesis
from nmt_api.nmt.v1 import translator_pb2 as pb
from service.alignment import hard_alignment, replace_unknowns, source_span
from service.bundle import load_bundle
from service.front import check_forcing
from service.limits import EngineConfig, validate_constraints, validate_request, validate_targets
from service.loop import decode
from service.messages import to_options, to_score_options
from service.sessions import RuntimeConfig


def translate_with_bundle(
    bundle_dir: Path,
    lines: list[str],
    request: pb.DecodeOptions | None = None,
    *,
    batch: int | None = None,
    on_done: Callable[[int], None] | None = None,
    constraints: Sequence[Sequence[str]] | None = None,
) -> list[str]:
    """Best translations of ``lines`` with the options of ``request`` (None: the
    bundle's defaults, greedy), decoded ``batch`` sentences at a time (None: all at
    once) as if each batch were one request (what a seeded ``sampling_topk`` draws
    depends on a sentence's index in its request; nothing else depends on the batch);
    ``on_done(n)`` after every ``n`` sentences translated; ``constraints``: each line's
    target phrases its translation must hold (:mod:`service.constraints`).
    Raises :class:`service.errors.InvalidRequest` for what a server with the default
    limits would refuse, with the same message (``texts[i]``: ``lines[i]``): an
    ``ignore_when_blocking`` token the model does not have, a sentence over the source
    length limit or with no tokens, ..."""
    bundle = load_bundle(Path(bundle_dir), RuntimeConfig(providers=("cpu",)))
    limits = EngineConfig().for_device(gpu=False)  # a default server's on the CPU
    options = to_options(
        request or pb.DecodeOptions(),
        default_max_length=limits.default_max_length,  # as the server's
        defaults=bundle.decoding,
        target_index=bundle.target_index,
    )
    options = dataclasses.replace(options, n_best=1)
    src_tok, tgt_tok, unk = bundle.src_tokenizer, bundle.tgt_tokenizer, bundle.config.unk_id
    if constraints is not None:
        check_forcing(bundle)
    sources: list[list[int]] = []
    nbest = []
    step = batch or max(1, len(lines))
    for first in range(0, len(lines), step):
        # the server's checks of a request, tokenising included; texts[i] names lines[i]
        chunk = validate_request(
            lines[first : first + step],
            options,
            limits,
            src_tok,
            max_source_tokens=bundle.max_source_tokens,
            first_index=first,
        )
        sources += chunk
        phrases = None
        if constraints is not None:
            asked = [(list(c), False) for c in constraints[first : first + step]]
            phrases = validate_constraints(
                asked, chunk, options, tgt_tok, bundle.special, first_index=first
            )
        nbest += decode(
            bundle.model, chunk, options=options, special=bundle.special, constraints=phrases
        )
        if on_done is not None:
            on_done(len(chunk))
    out = []
    for line, ids, hyps in zip(lines, sources, nbest, strict=True):
        best = hyps[0]
        surface = src_tok.surface(line) if options.replace_unk and unk in best.tokens else None
        if surface is not None and len(surface) == len(ids):
            out.append(
                tgt_tok.detokenize(
                    replace_unknowns(
                        tgt_tok.pieces(best.tokens),
                        best,
                        surface,
                        unk,
                        bundle.source_marks,
                        bundle.source_pad,
                    )
                )
            )
        else:
            out.append(tgt_tok.decode(best.tokens))
    return out


def score_with_bundle(
    bundle_dir: Path,
    pairs: list[tuple[str, str]],
    request: pb.ScoreOptions | None = None,
    *,
    batch: int = 32,
    on_done: Callable[[int], None] | None = None,
) -> list[tuple[list[str], Hypothesis, list[str], list[int] | None]]:
    """Each ``(source, target)`` pair scored as the ``Score`` RPC scores it (the options of
    ``request``, the model's defaults under them), ``batch`` pairs a request: the target's
    pieces and its :class:`~models.options.Hypothesis` (``token_log_probs`` set); with
    ``request.return_alignment`` also the source's pieces (markers left out) and the
    target's hard alignment to them (:mod:`service.alignment`), else ``[]`` and None.
    ``on_done(n)`` after every ``n`` pairs. Raises
    :class:`service.errors.InvalidRequest` for what a server with the default limits
    would refuse, in its words (``texts[i]``/``targets[i]``: ``pairs[i]``)."""
    bundle = load_bundle(Path(bundle_dir), RuntimeConfig(providers=("cpu",)))
    limits = EngineConfig().for_device(gpu=False)  # a default server's on the CPU
    options = to_score_options(
        request or pb.ScoreOptions(), max_length=limits.max_target_length, defaults=bundle.decoding
    )
    src_tok, tgt_tok, special = bundle.src_tokenizer, bundle.tgt_tokenizer, bundle.special
    aligned = request is not None and request.return_alignment
    marks, pad = bundle.source_marks, bundle.source_pad
    out: list[tuple[list[str], Hypothesis, list[str], list[int] | None]] = []
    for first in range(0, len(pairs), batch):
        chunk = pairs[first : first + batch]
        texts, targets = [s for s, _ in chunk], [t for _, t in chunk]
        sources = validate_request(
            texts, options, limits, src_tok, max_source_tokens=bundle.max_source_tokens,
            first_index=first,
        )  # fmt: skip
        forced = validate_targets(targets, sources, options, tgt_tok, special, first_index=first)
        scored = decode(bundle.model, sources, options=options, special=special, prefixes=forced)
        for ids, (h,) in zip(sources, scored, strict=True):
            if not aligned:
                out.append((tgt_tok.pieces(h.tokens), h, [], None))
                continue
            pieces = src_tok.pieces(ids)
            span = source_span(pieces, marks, pad)
            alignment = hard_alignment(h.attention, span, len(h.tokens))
            out.append((tgt_tok.pieces(h.tokens), h, pieces[span[0] : span[1]], alignment))
        if on_done is not None:
            on_done(len(chunk))
    return out


def status_name(exc: BaseException) -> str | None:
    """The gRPC status a server answers ``exc`` with (``INVALID_ARGUMENT``...), by the
    servicer's own table, so that a ``--bundle`` CLI reports it in the server's words;
    ``None`` for an error no server would send."""
    from service.servicer import STATUS  # the gRPC server's modules: only when asked

    return next((code.name for kind, code in STATUS.items() if isinstance(exc, kind)), None)
