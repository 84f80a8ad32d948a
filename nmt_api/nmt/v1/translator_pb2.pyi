from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Strategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    STRATEGY_UNSPECIFIED: _ClassVar[Strategy]
    STRATEGY_GREEDY: _ClassVar[Strategy]
    STRATEGY_BEAM: _ClassVar[Strategy]

class LengthPenaltyForm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LENGTH_PENALTY_FORM_UNSPECIFIED: _ClassVar[LengthPenaltyForm]
    LENGTH_PENALTY_AVERAGE: _ClassVar[LengthPenaltyForm]
    LENGTH_PENALTY_GNMT: _ClassVar[LengthPenaltyForm]

class FinishReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    FINISH_REASON_UNSPECIFIED: _ClassVar[FinishReason]
    FINISH_REASON_EOS: _ClassVar[FinishReason]
    FINISH_REASON_LENGTH: _ClassVar[FinishReason]
STRATEGY_UNSPECIFIED: Strategy
STRATEGY_GREEDY: Strategy
STRATEGY_BEAM: Strategy
LENGTH_PENALTY_FORM_UNSPECIFIED: LengthPenaltyForm
LENGTH_PENALTY_AVERAGE: LengthPenaltyForm
LENGTH_PENALTY_GNMT: LengthPenaltyForm
FINISH_REASON_UNSPECIFIED: FinishReason
FINISH_REASON_EOS: FinishReason
FINISH_REASON_LENGTH: FinishReason

class DecodeOptions(_message.Message):
    __slots__ = ("strategy", "beam_size", "n_best", "length_penalty", "max_length", "max_length_ratio", "return_attention", "return_scores", "coverage_penalty", "return_diagnostics", "ban_unk", "block_ngram_repeat", "ignore_when_blocking", "min_length", "replace_unk", "sampling_topk", "sampling_temperature", "seed", "sampling_topp", "return_token_scores", "diversity_rate", "length_penalty_form", "diverse_beam_groups", "diverse_beam_strength", "return_alignment")
    STRATEGY_FIELD_NUMBER: _ClassVar[int]
    BEAM_SIZE_FIELD_NUMBER: _ClassVar[int]
    N_BEST_FIELD_NUMBER: _ClassVar[int]
    LENGTH_PENALTY_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_LENGTH_RATIO_FIELD_NUMBER: _ClassVar[int]
    RETURN_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    RETURN_SCORES_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    RETURN_DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    BAN_UNK_FIELD_NUMBER: _ClassVar[int]
    BLOCK_NGRAM_REPEAT_FIELD_NUMBER: _ClassVar[int]
    IGNORE_WHEN_BLOCKING_FIELD_NUMBER: _ClassVar[int]
    MIN_LENGTH_FIELD_NUMBER: _ClassVar[int]
    REPLACE_UNK_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_TOPK_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_TEMPERATURE_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_TOPP_FIELD_NUMBER: _ClassVar[int]
    RETURN_TOKEN_SCORES_FIELD_NUMBER: _ClassVar[int]
    DIVERSITY_RATE_FIELD_NUMBER: _ClassVar[int]
    LENGTH_PENALTY_FORM_FIELD_NUMBER: _ClassVar[int]
    DIVERSE_BEAM_GROUPS_FIELD_NUMBER: _ClassVar[int]
    DIVERSE_BEAM_STRENGTH_FIELD_NUMBER: _ClassVar[int]
    RETURN_ALIGNMENT_FIELD_NUMBER: _ClassVar[int]
    strategy: Strategy
    beam_size: int
    n_best: int
    length_penalty: float
    max_length: int
    max_length_ratio: float
    return_attention: bool
    return_scores: bool
    coverage_penalty: float
    return_diagnostics: bool
    ban_unk: bool
    block_ngram_repeat: int
    ignore_when_blocking: _containers.RepeatedScalarFieldContainer[str]
    min_length: int
    replace_unk: bool
    sampling_topk: int
    sampling_temperature: float
    seed: int
    sampling_topp: float
    return_token_scores: bool
    diversity_rate: float
    length_penalty_form: LengthPenaltyForm
    diverse_beam_groups: int
    diverse_beam_strength: float
    return_alignment: bool
    def __init__(self, strategy: _Optional[_Union[Strategy, str]] = ..., beam_size: _Optional[int] = ..., n_best: _Optional[int] = ..., length_penalty: _Optional[float] = ..., max_length: _Optional[int] = ..., max_length_ratio: _Optional[float] = ..., return_attention: _Optional[bool] = ..., return_scores: _Optional[bool] = ..., coverage_penalty: _Optional[float] = ..., return_diagnostics: _Optional[bool] = ..., ban_unk: _Optional[bool] = ..., block_ngram_repeat: _Optional[int] = ..., ignore_when_blocking: _Optional[_Iterable[str]] = ..., min_length: _Optional[int] = ..., replace_unk: _Optional[bool] = ..., sampling_topk: _Optional[int] = ..., sampling_temperature: _Optional[float] = ..., seed: _Optional[int] = ..., sampling_topp: _Optional[float] = ..., return_token_scores: _Optional[bool] = ..., diversity_rate: _Optional[float] = ..., length_penalty_form: _Optional[_Union[LengthPenaltyForm, str]] = ..., diverse_beam_groups: _Optional[int] = ..., diverse_beam_strength: _Optional[float] = ..., return_alignment: _Optional[bool] = ...) -> None: ...

class TranslateRequest(_message.Message):
    __slots__ = ("texts", "model", "options", "target_prefix", "constraints", "split_sentences")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TARGET_PREFIX_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    SPLIT_SENTENCES_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    model: str
    options: DecodeOptions
    target_prefix: _containers.RepeatedScalarFieldContainer[str]
    constraints: _containers.RepeatedCompositeFieldContainer[TargetConstraints]
    split_sentences: bool
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., model: _Optional[str] = ..., options: _Optional[_Union[DecodeOptions, _Mapping]] = ..., target_prefix: _Optional[_Iterable[str]] = ..., constraints: _Optional[_Iterable[_Union[TargetConstraints, _Mapping]]] = ..., split_sentences: _Optional[bool] = ...) -> None: ...

class TargetConstraints(_message.Message):
    __slots__ = ("phrases", "ordered")
    PHRASES_FIELD_NUMBER: _ClassVar[int]
    ORDERED_FIELD_NUMBER: _ClassVar[int]
    phrases: _containers.RepeatedScalarFieldContainer[str]
    ordered: bool
    def __init__(self, phrases: _Optional[_Iterable[str]] = ..., ordered: _Optional[bool] = ...) -> None: ...

class ScoreOptions(_message.Message):
    __slots__ = ("length_penalty", "coverage_penalty", "return_attention", "return_diagnostics", "length_penalty_form", "return_alignment")
    LENGTH_PENALTY_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_PENALTY_FIELD_NUMBER: _ClassVar[int]
    RETURN_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    RETURN_DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    LENGTH_PENALTY_FORM_FIELD_NUMBER: _ClassVar[int]
    RETURN_ALIGNMENT_FIELD_NUMBER: _ClassVar[int]
    length_penalty: float
    coverage_penalty: float
    return_attention: bool
    return_diagnostics: bool
    length_penalty_form: LengthPenaltyForm
    return_alignment: bool
    def __init__(self, length_penalty: _Optional[float] = ..., coverage_penalty: _Optional[float] = ..., return_attention: _Optional[bool] = ..., return_diagnostics: _Optional[bool] = ..., length_penalty_form: _Optional[_Union[LengthPenaltyForm, str]] = ..., return_alignment: _Optional[bool] = ...) -> None: ...

class ScoreRequest(_message.Message):
    __slots__ = ("texts", "targets", "model", "options")
    TEXTS_FIELD_NUMBER: _ClassVar[int]
    TARGETS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    texts: _containers.RepeatedScalarFieldContainer[str]
    targets: _containers.RepeatedScalarFieldContainer[str]
    model: str
    options: ScoreOptions
    def __init__(self, texts: _Optional[_Iterable[str]] = ..., targets: _Optional[_Iterable[str]] = ..., model: _Optional[str] = ..., options: _Optional[_Union[ScoreOptions, _Mapping]] = ...) -> None: ...

class ScoreResponse(_message.Message):
    __slots__ = ("translations", "model", "model_version", "timing")
    TRANSLATIONS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    translations: _containers.RepeatedCompositeFieldContainer[Translation]
    model: str
    model_version: str
    timing: Timing
    def __init__(self, translations: _Optional[_Iterable[_Union[Translation, _Mapping]]] = ..., model: _Optional[str] = ..., model_version: _Optional[str] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ...) -> None: ...

class AttentionMatrix(_message.Message):
    __slots__ = ("rows", "cols", "values", "source_tokens", "target_tokens")
    ROWS_FIELD_NUMBER: _ClassVar[int]
    COLS_FIELD_NUMBER: _ClassVar[int]
    VALUES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    TARGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    rows: int
    cols: int
    values: _containers.RepeatedScalarFieldContainer[float]
    source_tokens: _containers.RepeatedScalarFieldContainer[str]
    target_tokens: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, rows: _Optional[int] = ..., cols: _Optional[int] = ..., values: _Optional[_Iterable[float]] = ..., source_tokens: _Optional[_Iterable[str]] = ..., target_tokens: _Optional[_Iterable[str]] = ...) -> None: ...

class Hypothesis(_message.Message):
    __slots__ = ("text", "tokens", "score", "log_prob", "attention", "diagnostics", "token_log_probs", "alignment", "finish_reason")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    LOG_PROB_FIELD_NUMBER: _ClassVar[int]
    ATTENTION_FIELD_NUMBER: _ClassVar[int]
    DIAGNOSTICS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_LOG_PROBS_FIELD_NUMBER: _ClassVar[int]
    ALIGNMENT_FIELD_NUMBER: _ClassVar[int]
    FINISH_REASON_FIELD_NUMBER: _ClassVar[int]
    text: str
    tokens: _containers.RepeatedScalarFieldContainer[str]
    score: float
    log_prob: float
    attention: AttentionMatrix
    diagnostics: AttentionDiagnostics
    token_log_probs: _containers.RepeatedScalarFieldContainer[float]
    alignment: _containers.RepeatedScalarFieldContainer[int]
    finish_reason: FinishReason
    def __init__(self, text: _Optional[str] = ..., tokens: _Optional[_Iterable[str]] = ..., score: _Optional[float] = ..., log_prob: _Optional[float] = ..., attention: _Optional[_Union[AttentionMatrix, _Mapping]] = ..., diagnostics: _Optional[_Union[AttentionDiagnostics, _Mapping]] = ..., token_log_probs: _Optional[_Iterable[float]] = ..., alignment: _Optional[_Iterable[int]] = ..., finish_reason: _Optional[_Union[FinishReason, str]] = ...) -> None: ...

class AttentionDiagnostics(_message.Message):
    __slots__ = ("entropy_mean", "entropy_max", "coverage_deficit", "over_attention", "unk_share")
    ENTROPY_MEAN_FIELD_NUMBER: _ClassVar[int]
    ENTROPY_MAX_FIELD_NUMBER: _ClassVar[int]
    COVERAGE_DEFICIT_FIELD_NUMBER: _ClassVar[int]
    OVER_ATTENTION_FIELD_NUMBER: _ClassVar[int]
    UNK_SHARE_FIELD_NUMBER: _ClassVar[int]
    entropy_mean: float
    entropy_max: float
    coverage_deficit: float
    over_attention: float
    unk_share: float
    def __init__(self, entropy_mean: _Optional[float] = ..., entropy_max: _Optional[float] = ..., coverage_deficit: _Optional[float] = ..., over_attention: _Optional[float] = ..., unk_share: _Optional[float] = ...) -> None: ...

class Translation(_message.Message):
    __slots__ = ("hypotheses", "source_tokens", "source_pieces")
    HYPOTHESES_FIELD_NUMBER: _ClassVar[int]
    SOURCE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SOURCE_PIECES_FIELD_NUMBER: _ClassVar[int]
    hypotheses: _containers.RepeatedCompositeFieldContainer[Hypothesis]
    source_tokens: int
    source_pieces: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, hypotheses: _Optional[_Iterable[_Union[Hypothesis, _Mapping]]] = ..., source_tokens: _Optional[int] = ..., source_pieces: _Optional[_Iterable[str]] = ...) -> None: ...

class Timing(_message.Message):
    __slots__ = ("queue_ms", "encode_ms", "decode_ms", "total_ms")
    QUEUE_MS_FIELD_NUMBER: _ClassVar[int]
    ENCODE_MS_FIELD_NUMBER: _ClassVar[int]
    DECODE_MS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_MS_FIELD_NUMBER: _ClassVar[int]
    queue_ms: float
    encode_ms: float
    decode_ms: float
    total_ms: float
    def __init__(self, queue_ms: _Optional[float] = ..., encode_ms: _Optional[float] = ..., decode_ms: _Optional[float] = ..., total_ms: _Optional[float] = ...) -> None: ...

class TranslateResponse(_message.Message):
    __slots__ = ("translations", "model", "model_version", "timing")
    TRANSLATIONS_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    translations: _containers.RepeatedCompositeFieldContainer[Translation]
    model: str
    model_version: str
    timing: Timing
    def __init__(self, translations: _Optional[_Iterable[_Union[Translation, _Mapping]]] = ..., model: _Optional[str] = ..., model_version: _Optional[str] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ...) -> None: ...

class TranslateStreamRequest(_message.Message):
    __slots__ = ("text", "model", "options", "target_prefix", "constraints")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    TARGET_PREFIX_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    text: str
    model: str
    options: DecodeOptions
    target_prefix: str
    constraints: TargetConstraints
    def __init__(self, text: _Optional[str] = ..., model: _Optional[str] = ..., options: _Optional[_Union[DecodeOptions, _Mapping]] = ..., target_prefix: _Optional[str] = ..., constraints: _Optional[_Union[TargetConstraints, _Mapping]] = ...) -> None: ...

class TranslateStreamResponse(_message.Message):
    __slots__ = ("text", "delta", "final", "translation", "timing", "model", "model_version")
    TEXT_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    FINAL_FIELD_NUMBER: _ClassVar[int]
    TRANSLATION_FIELD_NUMBER: _ClassVar[int]
    TIMING_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    MODEL_VERSION_FIELD_NUMBER: _ClassVar[int]
    text: str
    delta: str
    final: bool
    translation: Translation
    timing: Timing
    model: str
    model_version: str
    def __init__(self, text: _Optional[str] = ..., delta: _Optional[str] = ..., final: _Optional[bool] = ..., translation: _Optional[_Union[Translation, _Mapping]] = ..., timing: _Optional[_Union[Timing, _Mapping]] = ..., model: _Optional[str] = ..., model_version: _Optional[str] = ...) -> None: ...

class ListModelsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ModelInfo(_message.Message):
    __slots__ = ("name", "version", "precision", "execution_provider", "config_json", "parameters", "src_vocab_size", "tgt_vocab_size", "max_source_tokens", "manifest_summary_json", "is_default", "limits")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PRECISION_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    CONFIG_JSON_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    SRC_VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    TGT_VOCAB_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_SOURCE_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_SUMMARY_JSON_FIELD_NUMBER: _ClassVar[int]
    IS_DEFAULT_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: str
    precision: str
    execution_provider: str
    config_json: str
    parameters: int
    src_vocab_size: int
    tgt_vocab_size: int
    max_source_tokens: int
    manifest_summary_json: str
    is_default: bool
    limits: RequestLimits
    def __init__(self, name: _Optional[str] = ..., version: _Optional[str] = ..., precision: _Optional[str] = ..., execution_provider: _Optional[str] = ..., config_json: _Optional[str] = ..., parameters: _Optional[int] = ..., src_vocab_size: _Optional[int] = ..., tgt_vocab_size: _Optional[int] = ..., max_source_tokens: _Optional[int] = ..., manifest_summary_json: _Optional[str] = ..., is_default: _Optional[bool] = ..., limits: _Optional[_Union[RequestLimits, _Mapping]] = ...) -> None: ...

class RequestLimits(_message.Message):
    __slots__ = ("max_sentences", "max_live_rows", "max_beam_size", "max_n_best", "max_target_length", "max_sampling_topk", "max_message_bytes")
    MAX_SENTENCES_FIELD_NUMBER: _ClassVar[int]
    MAX_LIVE_ROWS_FIELD_NUMBER: _ClassVar[int]
    MAX_BEAM_SIZE_FIELD_NUMBER: _ClassVar[int]
    MAX_N_BEST_FIELD_NUMBER: _ClassVar[int]
    MAX_TARGET_LENGTH_FIELD_NUMBER: _ClassVar[int]
    MAX_SAMPLING_TOPK_FIELD_NUMBER: _ClassVar[int]
    MAX_MESSAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    max_sentences: int
    max_live_rows: int
    max_beam_size: int
    max_n_best: int
    max_target_length: int
    max_sampling_topk: int
    max_message_bytes: int
    def __init__(self, max_sentences: _Optional[int] = ..., max_live_rows: _Optional[int] = ..., max_beam_size: _Optional[int] = ..., max_n_best: _Optional[int] = ..., max_target_length: _Optional[int] = ..., max_sampling_topk: _Optional[int] = ..., max_message_bytes: _Optional[int] = ...) -> None: ...

class ListModelsResponse(_message.Message):
    __slots__ = ("models",)
    MODELS_FIELD_NUMBER: _ClassVar[int]
    models: _containers.RepeatedCompositeFieldContainer[ModelInfo]
    def __init__(self, models: _Optional[_Iterable[_Union[ModelInfo, _Mapping]]] = ...) -> None: ...
