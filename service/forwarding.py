"""Metrics of other processes exported through this one's registry.

With the engine in a child process (``--engine-process``) the engine-side metrics
(:data:`ENGINE_METRICS`) are written in the child; with several front ends
(``--frontends``) each front-end process counts its own calls. Every such process sends
its samples to the main process every heartbeat (:func:`samples_of`), and
:func:`forward_metrics` replaces the main process's metrics of those names with a
collector that exports the sum of its own samples and every source's latest ones
(``_created`` samples: the earliest). prometheus_client's multiprocess mode is not used:
it is process-global (an environment variable read at import) and would change every
metric of the server. Each other process's own CPU time, memory and file descriptors
are exported as ``nmt_engine_process_*{model}`` and ``nmt_frontend_process_*{frontend}``;
``process_*`` remain the main process's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Protocol

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from service.metrics import Metrics

# Metrics (attributes of service.metrics.Metrics) written by the engine: in its process.
ENGINE_METRICS = (
    "queue_wait",
    "encoder_latency",
    "decoder_step_latency",
    "rows_per_step",
    "target_tokens",
    "generated_tokens",
    "source_tokens",
    "rejected",
    "live_rows",
    "queue_depth",
    "gc_pause",
)
# Gauges zeroed when their process dies: nothing waits there any more.
GAUGES = ("live_rows", "queue_depth", "inflight")
# Every metric a front-end process writes (requests, latencies, what it refuses itself)
# but the model info, which the main process sets for all.
FRONTEND_METRICS = tuple(f.name for f in fields(Metrics) if f.name != "model")

Samples = dict[str, list[tuple[str, dict[str, str], float]]]


class Source(Protocol):
    """Another process's latest samples (from its last heartbeat)."""

    samples: Samples


@dataclass(frozen=True)
class ProcessSource:
    """Another process whose ``process_*`` metrics are exported as
    ``<prefix>process_*{label=value}``; ``pid()``: its pid, 0 once it is gone."""

    prefix: str
    label: str
    value: str
    pid: Callable[[], int]


def samples_of(metrics: Metrics, names: Iterable[str]) -> Samples:
    """This process's samples of the metrics ``names`` (what a heartbeat carries)."""
    return {
        name: [
            (s.name, s.labels, s.value)
            for family in getattr(metrics, name).collect()
            for s in family.samples
        ]
        for name in names
    }


def zero_gauges(samples: Samples) -> None:
    """Set the gauges of a dead process's last samples to 0."""
    for name in GAUGES:
        if name in samples:
            samples[name] = [(n, labels, 0.0) for n, labels, _ in samples[name]]


def merge(parts: Iterable[Iterable[tuple[str, dict[str, str], float]]]) -> dict[tuple, float]:
    """``{(sample name, sorted labels): value}`` summed over ``parts``; ``_created``
    samples take the earliest."""
    merged: dict[tuple, float] = {}
    for part in parts:
        for sample, labels, value in part:
            key = (sample, tuple(sorted(labels.items())))
            if key not in merged:
                merged[key] = value
            elif sample.endswith("_created"):
                merged[key] = min(merged[key], value)
            else:
                merged[key] += value
    return merged


class _Forwarded(Collector):
    def __init__(
        self,
        metrics: Metrics,
        names: Sequence[str],
        sources: Sequence[Source],
        processes: Sequence[ProcessSource],
    ) -> None:
        self.metrics = metrics
        self.names = tuple(names)
        self.sources = list(sources)
        self._processes = [
            (p, ProcessCollector(namespace="", pid=p.pid, registry=None)) for p in processes
        ]

    def describe(self):
        for name in self.names:
            yield from getattr(self.metrics, name).describe()

    def collect(self):
        for name in self.names:
            for family in getattr(self.metrics, name).collect():
                parts = [[(s.name, s.labels, s.value) for s in family.samples]]
                parts += [source.samples.get(name, ()) for source in self.sources]
                out = Metric(family.name, family.documentation, family.type, family.unit)
                for (sample, labels), value in merge(parts).items():
                    out.add_sample(sample, dict(labels), value)
                yield out
        families: dict[str, Metric] = {}
        for process, collector in self._processes:
            for family in collector.collect():  # nothing once the process is gone
                name = f"{process.prefix}{family.name}"
                out = families.setdefault(
                    name, Metric(name, f"{family.documentation} ({process.label})", family.type)
                )
                for sample in family.samples:
                    labels = sample.labels | {process.label: process.value}
                    out.add_sample(f"{process.prefix}{sample.name}", labels, sample.value)
        yield from families.values()


def forward_metrics(
    registry: CollectorRegistry,
    metrics: Metrics,
    names: Sequence[str],
    sources: Sequence[Source],
    processes: Sequence[ProcessSource] = (),
) -> None:
    """Export the metrics ``names`` of ``registry`` as this process's own samples plus
    those of ``sources``, and the ``process_*`` metrics of ``processes``."""
    for name in names:
        registry.unregister(getattr(metrics, name))
    registry.register(_Forwarded(metrics, names, sources, processes))
