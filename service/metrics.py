"""Prometheus metrics of the service, declared in one place for an injected registry."""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Millisecond-scale latency buckets (seconds): a CPU decoder step is ~1 ms, a long
# beam request several seconds.
LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
)
ROW_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
TOKEN_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096)
# Attention entropy in nats: 0 (one-hot) to ln(max source tokens) (~4.9 for 128).
ENTROPY_BUCKETS = (0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 4.0, 5.0)
# A share of source tokens, 0 to 1.
SHARE_BUCKETS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5, 0.75, 1.0)
# Collector passes (seconds): microseconds for a young generation on an idle core, up to
# a quarter of a second for a full pass on cores the load oversubscribes
# (loadtest/results/soak-6min-gcpauses-processes.md).
GC_PAUSE_BUCKETS = (
    0.00001,
    0.000025,
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
)


# Values of nmt_rejected_requests_total's ``reason`` label.
REJECT_REASONS = ("queue_full", "too_many_inflight", "unavailable")


@dataclass(frozen=True)
class Metrics:
    request_latency: Histogram
    queue_wait: Histogram
    encoder_latency: Histogram
    decoder_step_latency: Histogram
    rows_per_step: Histogram
    target_tokens: Histogram
    attention_entropy: Histogram
    coverage_deficit: Histogram
    gc_pause: Histogram
    requests: Counter
    http_answers: Counter
    generated_tokens: Counter
    source_tokens: Counter
    rejected: Counter
    response_cache: Counter
    inflight: Gauge
    live_rows: Gauge
    queue_depth: Gauge
    model: Gauge


def create_metrics(registry: CollectorRegistry, prefix: str = "nmt") -> Metrics:
    """All metrics registered on ``registry`` (never the global default registry)."""

    def name(n: str) -> str:
        return f"{prefix}_{n}"

    metrics = Metrics(
        request_latency=Histogram(
            name("request_duration_seconds"),
            "Request latency from arrival to response, by gRPC method, strategy and code.",
            ["method", "strategy", "code"],
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        queue_wait=Histogram(
            name("queue_wait_seconds"),
            "Time a request waited before its first sentence was admitted to decoding.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        encoder_latency=Histogram(
            name("encoder_duration_seconds"),
            "Encoder run time per admitted batch.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        decoder_step_latency=Histogram(
            name("decoder_step_duration_seconds"),
            "Run time of one batched decoder step over all live rows.",
            buckets=LATENCY_BUCKETS,
            registry=registry,
        ),
        rows_per_step=Histogram(
            name("decoder_step_rows"),
            "Rows (hypotheses) in one decoder step: batch occupancy.",
            buckets=ROW_BUCKETS,
            registry=registry,
        ),
        target_tokens=Histogram(
            name("request_target_tokens"),
            "Target tokens generated per request (best hypotheses, EOS included).",
            buckets=TOKEN_BUCKETS,
            registry=registry,
        ),
        attention_entropy=Histogram(
            name("attention_entropy"),
            "Mean attention entropy (nats) of returned best hypotheses, by model.",
            ["model"],
            buckets=ENTROPY_BUCKETS,
            registry=registry,
        ),
        coverage_deficit=Histogram(
            name("coverage_deficit"),
            "Share of source tokens with total attention < 0.5 in returned best "
            "hypotheses, by model.",
            ["model"],
            buckets=SHARE_BUCKETS,
            registry=registry,
        ),
        gc_pause=Histogram(
            name("gc_pause_seconds"),
            "Passes of CPython's cyclic garbage collector, which stop every Python thread "
            "of their process, by process and generation (service/heap.py).",
            ["process", "generation"],
            buckets=GC_PAUSE_BUCKETS,
            registry=registry,
        ),
        requests=Counter(
            name("requests_total"),
            "Finished requests by gRPC method and status code.",
            ["method", "code"],
            registry=registry,
        ),
        http_answers=Counter(
            name("http_responses_total"),
            "Answers of the HTTP/JSON API (--http-port) by route (other: no such route; "
            "malformed: a request that could not be parsed) and HTTP status.",
            ["route", "status"],
            registry=registry,
        ),
        generated_tokens=Counter(
            name("generated_tokens_total"),
            "Target tokens produced by decoder steps (all hypotheses).",
            registry=registry,
        ),
        source_tokens=Counter(
            name("source_tokens_total"), "Source tokens encoded.", registry=registry
        ),
        rejected=Counter(
            name("rejected_requests_total"),
            "Requests rejected before decoding, by reason.",
            ["reason"],
            registry=registry,
        ),
        response_cache=Counter(
            name("response_cache_sentences_total"),
            "Sentences of Translate requests looked up in the response cache "
            "(--response-cache), by result: hit (answered from it) or miss (decoded).",
            ["result"],
            registry=registry,
        ),
        inflight=Gauge(
            name("inflight_requests"), "Requests being served right now.", registry=registry
        ),
        live_rows=Gauge(
            name("live_rows"), "Hypothesis rows currently being decoded.", registry=registry
        ),
        queue_depth=Gauge(
            name("queue_depth"), "Requests waiting for admission.", registry=registry
        ),
        # A gauge, not an Info: an Info has one label set, and a server may load several
        # models (one series each).
        model=Gauge(
            name("model_info"),
            "1 per loaded model: name, version and execution provider.",
            ["model", "version", "provider"],
            registry=registry,
        ),
    )
    # Every reason exported as 0 from the start: rate() and alerts need the series to
    # exist before the first rejection. So do the server-error series of the translation
    # methods (NmtServerErrors missed the first burst of INTERNAL answers: helper-89).
    for reason in REJECT_REASONS:
        metrics.rejected.labels(reason)
    for method in ("Translate", "TranslateStream", "Score"):
        for code in ("OK", "INTERNAL"):
            metrics.requests.labels(method, code)
    return metrics
