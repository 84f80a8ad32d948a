"""service/forwarding.py: the engine processes' and the front ends' metrics, summed into
the main process's /metrics."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from service.forwarding import (
    ENGINE_METRICS,
    FRONTEND_METRICS,
    forward_metrics,
    samples_of,
    zero_gauges,
)
from service.metrics import create_metrics


class _Source:
    """What the collector reads of another process: its latest samples."""

    def __init__(self, samples) -> None:
        self.samples = samples


def _created_at(samples, created: float):
    return {
        name: [(n, labels, created if n.endswith("_created") else v) for n, labels, v in rows]
        for name, rows in samples.items()
    }


def _engine(steps: int, depth: float, created: float) -> _Source:
    metrics = create_metrics(CollectorRegistry())
    for _ in range(steps):
        metrics.decoder_step_latency.observe(0.002)
    metrics.queue_depth.set(depth)
    metrics.rejected.labels("queue_full").inc()
    return _Source(_created_at(samples_of(metrics, ENGINE_METRICS), created))


def test_engine_metrics_sum_the_children_and_the_parent():
    registry = CollectorRegistry()
    parent = create_metrics(registry)
    parent.rejected.labels("unavailable").inc()
    parent.rejected.labels("too_many_inflight").inc(2)
    forward_metrics(registry, parent, ENGINE_METRICS, [_engine(3, 2, 10.0), _engine(4, 5, 5.0)])
    value = registry.get_sample_value
    assert value("nmt_decoder_step_duration_seconds_count") == 7
    assert value("nmt_decoder_step_duration_seconds_bucket", {"le": "0.0025"}) == 7
    assert value("nmt_decoder_step_duration_seconds_bucket", {"le": "0.001"}) == 0
    assert value("nmt_queue_depth") == 7
    assert value("nmt_rejected_requests_total", {"reason": "queue_full"}) == 2
    assert value("nmt_rejected_requests_total", {"reason": "unavailable"}) == 1
    assert value("nmt_rejected_requests_total", {"reason": "too_many_inflight"}) == 2
    assert value("nmt_rejected_requests_created", {"reason": "queue_full"}) == 5.0
    # calls are no engine metric: the parent's own series, at its initial 0
    assert value("nmt_requests_total", {"method": "Translate", "code": "OK"}) == 0.0


def test_frontend_calls_are_summed_and_the_model_info_is_not():
    registry = CollectorRegistry()
    main = create_metrics(registry)
    main.requests.labels("Translate", "OK").inc(2)
    main.inflight.set(1)
    main.model.labels("tiny", "1", "CPUExecutionProvider").set(1)
    front = create_metrics(CollectorRegistry())
    front.requests.labels("Translate", "OK").inc(5)
    front.requests.labels("Translate", "INVALID_ARGUMENT").inc()
    front.inflight.set(3)
    front.request_latency.labels("Translate", "greedy", "OK").observe(0.01)
    front.model.labels("tiny", "1", "CPUExecutionProvider").set(1)
    assert "model" not in FRONTEND_METRICS
    sources = [_Source(samples_of(front, FRONTEND_METRICS)), _engine(2, 0, 1.0)]
    forward_metrics(registry, main, FRONTEND_METRICS, sources)
    value = registry.get_sample_value
    assert value("nmt_requests_total", {"method": "Translate", "code": "OK"}) == 7
    assert value("nmt_requests_total", {"method": "Translate", "code": "INVALID_ARGUMENT"}) == 1
    assert value("nmt_inflight_requests") == 4
    assert value("nmt_decoder_step_duration_seconds_count") == 2
    labels = {"model": "tiny", "version": "1", "provider": "CPUExecutionProvider"}
    assert value("nmt_model_info", labels) == 1


def test_a_dead_process_keeps_its_counts_and_drops_its_gauges():
    metrics = create_metrics(CollectorRegistry())
    metrics.inflight.set(4)
    metrics.live_rows.set(9)
    metrics.requests.labels("Translate", "OK").inc(3)
    samples = samples_of(metrics, FRONTEND_METRICS)
    zero_gauges(samples)
    registry = CollectorRegistry()
    forward_metrics(registry, create_metrics(registry), FRONTEND_METRICS, [_Source(samples)])
    value = registry.get_sample_value
    assert value("nmt_inflight_requests") == 0
    assert value("nmt_live_rows") == 0
    assert value("nmt_requests_total", {"method": "Translate", "code": "OK"}) == 3
