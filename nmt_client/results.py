"""What the server answers, as small frozen dataclasses (no protobuf in callers' code)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal

from nmt_api.nmt.v1 import translator_pb2 as pb

EOS = "</s>"


@dataclass(frozen=True)
class Attention:
    """One hypothesis's attention: ``rows`` target tokens (its pieces, then ``</s>``) by
    ``cols`` source pieces; ``values`` row-major; every row sums to 1."""

    rows: int
    cols: int
    values: tuple[float, ...]
    source_tokens: tuple[str, ...]
    target_tokens: tuple[str, ...]

    def __post_init__(self) -> None:
        if len(self.values) != self.rows * self.cols:
            raise ValueError(f"{len(self.values)} values for a {self.rows}x{self.cols} matrix")
        if len(self.source_tokens) != self.cols or len(self.target_tokens) != self.rows:
            raise ValueError(
                f"{len(self.target_tokens)} target / {len(self.source_tokens)} source labels "
                f"for a {self.rows}x{self.cols} matrix"
            )

    @property
    def matrix(self) -> list[list[float]]:
        """Nested lists, ``matrix[target][source]``."""
        c = self.cols
        return [list(self.values[r * c : (r + 1) * c]) for r in range(self.rows)]

    def weight(self, target: int, source: int) -> float:
        return self.values[target * self.cols + source]

    def to_numpy(self):
        """A ``(rows, cols)`` float32 array (needs numpy)."""
        import numpy as np

        return np.asarray(self.values, dtype=np.float32).reshape(self.rows, self.cols)

    @classmethod
    def from_proto(cls, msg: pb.AttentionMatrix) -> Attention | None:
        if not msg.rows:
            return None
        return cls(
            msg.rows,
            msg.cols,
            tuple(msg.values),
            tuple(msg.source_tokens),
            tuple(msg.target_tokens),
        )


@dataclass(frozen=True)
class Diagnostics:
    """How a hypothesis attended to its source: mean / max entropy of its attention rows
    (nats; 0 = one source token, ln(n) = spread over n), ``coverage_deficit`` (share of
    source tokens with total attention < 0.5: dropped words?), ``over_attention`` (share
    > 1.5: repetition?), ``unk_share`` (source pieces the model does not know).
    ``None``: no usable attention."""

    entropy_mean: float | None
    entropy_max: float | None
    coverage_deficit: float | None
    over_attention: float | None
    unk_share: float

    @classmethod
    def from_proto(cls, msg: pb.AttentionDiagnostics) -> Diagnostics:
        def opt(name: str) -> float | None:
            return getattr(msg, name) if msg.HasField(name) else None

        return cls(
            opt("entropy_mean"),
            opt("entropy_max"),
            opt("coverage_deficit"),
            opt("over_attention"),
            msg.unk_share,
        )


FinishReason = Literal["eos", "length"]
_FINISH_REASONS: dict[int, FinishReason] = {
    pb.FINISH_REASON_EOS: "eos",
    pb.FINISH_REASON_LENGTH: "length",
}


@dataclass(frozen=True)
class Hypothesis:
    """One translation of a sentence: ``text``, its target pieces (``tokens``, no
    ``</s>``), ``score`` (log-prob / length**length_penalty) and ``log_prob`` (``None``
    unless scores were asked for), ``attention`` and ``diagnostics`` (``None`` unless
    asked for); ``token_log_probs``: from :meth:`Translator.score`, or with
    ``return_token_scores``, each token's log-prob, then ``</s>``'s (``len(tokens) + 1``;
    ``len(tokens)`` for a hypothesis a search stopped at its length limit without
    scoring one), adding up to ``log_prob``; ``alignment`` (``None`` unless asked for):
    per token of ``tokens``, the index in :attr:`Result.source_pieces` of the source
    token its step attended to most (:meth:`pharaoh` writes it as fairseq prints it);
    ``finish_reason``: ``"eos"`` (the model ended it), ``"length"`` (it reached the length
    limit, where the end is forced: it may be cut short; allow a higher ``max_length``
    or ``max_length_ratio``), ``None`` for a scored target."""

    text: str
    tokens: tuple[str, ...]
    score: float | None = None
    log_prob: float | None = None
    attention: Attention | None = None
    diagnostics: Diagnostics | None = None
    token_log_probs: tuple[float, ...] | None = None
    alignment: tuple[int, ...] | None = None
    finish_reason: FinishReason | None = None

    def pharaoh(self) -> str:
        """The alignment as ``source-target`` index pairs (``"0-0 2-1 1-2"``), the format
        of fairseq's ``--print-alignment`` and Marian's ``--alignment``; raises
        ``ValueError`` when it was not asked for."""
        if self.alignment is None:
            raise ValueError("no alignment: translate with return_alignment=True")
        return " ".join(f"{s}-{t}" for t, s in enumerate(self.alignment))

    @classmethod
    def from_proto(
        cls,
        msg: pb.Hypothesis,
        *,
        scores: bool,
        token_scores: bool = False,
        alignment: bool = False,
    ) -> Hypothesis:
        """``token_scores``, ``alignment``: they were asked for (an empty list is then
        ``()``: a hypothesis of no tokens stopped at a length limit without an EOS, a
        source of no tokens of its own)."""
        return cls(
            msg.text,
            tuple(msg.tokens),
            msg.score if scores else None,
            msg.log_prob if scores else None,
            Attention.from_proto(msg.attention) if msg.HasField("attention") else None,
            Diagnostics.from_proto(msg.diagnostics) if msg.HasField("diagnostics") else None,
            tuple(msg.token_log_probs) if token_scores or msg.token_log_probs else None,
            tuple(msg.alignment) if alignment or msg.alignment else None,
            _FINISH_REASONS.get(msg.finish_reason),
        )


@dataclass(frozen=True)
class Timing:
    """Server-side milliseconds of one request (all its sentences together)."""

    queue_ms: float = 0.0
    encode_ms: float = 0.0
    decode_ms: float = 0.0
    total_ms: float = 0.0

    @classmethod
    def from_proto(cls, msg: pb.Timing) -> Timing:
        return cls(msg.queue_ms, msg.encode_ms, msg.decode_ms, msg.total_ms)


@dataclass(frozen=True)
class Result:
    """The translation of one sentence: ``hypotheses`` best first, ``source_tokens``
    the number of source pieces (the tokenizer's markers counted); ``source_pieces``
    (with alignments) the source as the model's tokenizer split it, markers left out.
    ``model``, ``model_version``, ``timing`` and ``request_id`` belong to the request it
    was part of. ``error``: why the server refused this sentence (``translate_many``
    with ``skip_refused``; it then has no hypotheses)."""

    source: str
    hypotheses: tuple[Hypothesis, ...]
    source_tokens: int = 0
    model: str = ""
    model_version: str = ""
    timing: Timing | None = None
    request_id: str | None = None
    source_pieces: tuple[str, ...] = ()
    error: str | None = None

    @property
    def best(self) -> Hypothesis:
        """The best hypothesis (``IndexError`` for a result without any: a refused
        sentence, or a search whose every hypothesis scored -inf)."""
        return self.hypotheses[0]

    @property
    def text(self) -> str:
        """The best hypothesis's text ("" when there is none)."""
        return self.hypotheses[0].text if self.hypotheses else ""


@dataclass(frozen=True)
class StreamUpdate:
    """One message of :meth:`Translator.stream`: the stable target ``text`` so far and
    what this message added (``delta``); the ``final`` one carries the whole ``result``."""

    text: str
    delta: str
    final: bool = False
    result: Result | None = None


@dataclass(frozen=True)
class RequestLimits:
    """What one request to a model may ask (the server's ``--max-*`` flags): at most
    ``max_sentences`` texts and ``max_live_rows`` sentences x beam size, a beam of
    ``max_beam_size``, ``max_n_best`` hypotheses, ``max_length`` up to
    ``max_target_length`` (also the longest scored target), ``sampling_topk`` up to
    ``max_sampling_topk``, and ``max_message_bytes`` a request or reply."""

    max_sentences: int
    max_live_rows: int
    max_beam_size: int
    max_n_best: int
    max_target_length: int
    max_sampling_topk: int
    max_message_bytes: int

    def sentences_per_request(self, beam_size: int = 1) -> int:
        """The most sentences one request may carry at this beam size."""
        return max(1, min(self.max_sentences, self.max_live_rows // max(1, beam_size)))

    @classmethod
    def from_proto(cls, msg: pb.RequestLimits) -> RequestLimits | None:
        if not msg.max_sentences:  # a server older than the field
            return None
        return cls(
            msg.max_sentences,
            msg.max_live_rows,
            msg.max_beam_size,
            msg.max_n_best,
            msg.max_target_length,
            msg.max_sampling_topk,
            msg.max_message_bytes,
        )


@dataclass(frozen=True)
class ModelInfo:
    """A model the server has loaded (``ListModels``). ``config``: the model's
    architecture; ``summary``: its manifest's parity, versions, provenance and own
    decoding defaults (``summary["decoding"]``); ``limits``: what one request may ask."""

    name: str
    version: str
    precision: str
    execution_provider: str
    parameters: int
    src_vocab_size: int
    tgt_vocab_size: int
    max_source_tokens: int
    is_default: bool
    config: dict[str, Any]
    summary: dict[str, Any]
    limits: RequestLimits | None = None

    @classmethod
    def from_proto(cls, msg: pb.ModelInfo) -> ModelInfo:
        return cls(
            name=msg.name,
            version=msg.version,
            precision=msg.precision,
            execution_provider=msg.execution_provider,
            parameters=msg.parameters,
            src_vocab_size=msg.src_vocab_size,
            tgt_vocab_size=msg.tgt_vocab_size,
            max_source_tokens=msg.max_source_tokens,
            is_default=msg.is_default,
            config=_json(msg.config_json),
            summary=_json(msg.manifest_summary_json),
            limits=RequestLimits.from_proto(msg.limits),
        )


def _json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def results_from_proto(
    sources: list[str],
    reply: pb.TranslateResponse | pb.ScoreResponse,
    *,
    scores: bool,
    token_scores: bool = False,
    request_id: str | None = None,
    alignment: bool = False,
) -> list[Result]:
    """One :class:`Result` per sentence of a ``TranslateResponse`` (or ``ScoreResponse``)."""
    timing = Timing.from_proto(reply.timing)
    return [
        result_from_proto(
            source,
            t,
            scores=scores,
            token_scores=token_scores,
            alignment=alignment,
            model=reply.model,
            version=reply.model_version,
            timing=timing,
            request_id=request_id,
        )
        for source, t in zip(sources, reply.translations, strict=True)
    ]


def result_from_proto(
    source: str,
    msg: pb.Translation,
    *,
    scores: bool,
    token_scores: bool = False,
    alignment: bool = False,
    model: str = "",
    version: str = "",
    timing: Timing | None = None,
    request_id: str | None = None,
) -> Result:
    return Result(
        source=source,
        hypotheses=tuple(
            Hypothesis.from_proto(h, scores=scores, token_scores=token_scores, alignment=alignment)
            for h in msg.hypotheses
        ),
        source_tokens=msg.source_tokens,
        model=model,
        model_version=version,
        timing=timing,
        request_id=request_id,
        source_pieces=tuple(msg.source_pieces),
    )
