"""The Grafana dashboard asks only for series that a live server really exports."""

from __future__ import annotations

import http.client
import json

import pytest

from nmt_api.nmt.v1 import translator_pb2 as pb
from tests.deploy.helpers import (
    DASHBOARD,
    TARGET_LABELS,
    dashboard_exprs,
    promql_label_names,
    promql_metric_names,
    scrape,
)
from tests.service.server_helpers import TIMEOUT, stub_for

REQUIRED_METRICS = {
    "nmt_requests_total",
    "nmt_request_duration_seconds_bucket",
    "nmt_queue_wait_seconds_bucket",
    "nmt_decoder_step_rows_bucket",
    "nmt_generated_tokens_total",
    "nmt_inflight_requests",
    "nmt_model_info",
    "nmt_attention_entropy_bucket",
    "nmt_coverage_deficit_bucket",
    "nmt_http_responses_total",
}
HISTOGRAM_SUFFIXES = ("_bucket", "_count", "_sum")


@pytest.fixture(scope="module")
def live_scrape(server_factory, tiny_bundle):
    """/metrics of a real server after greedy, beam and streaming requests, and one over
    the HTTP/JSON API."""
    server = server_factory(server={"http_port": 0})
    conn = http.client.HTTPConnection("127.0.0.1", server.http_port, timeout=TIMEOUT)
    conn.request("GET", "/v1/health/ready")
    assert conn.getresponse().status == 200
    conn.close()
    channel, stub = stub_for(server.port)
    with channel:
        text = tiny_bundle.sentences[1]
        stub.Translate(pb.TranslateRequest(texts=[text]), timeout=TIMEOUT)
        beam = pb.DecodeOptions(strategy=pb.STRATEGY_BEAM, beam_size=3, return_attention=True)
        stub.Translate(pb.TranslateRequest(texts=[text], options=beam), timeout=TIMEOUT)
        list(stub.TranslateStream(pb.TranslateStreamRequest(text=text), timeout=TIMEOUT))
        diagnostics = pb.DecodeOptions(return_diagnostics=True)
        stub.Translate(pb.TranslateRequest(texts=[text], options=diagnostics), timeout=TIMEOUT)
    return scrape(server.metrics_port)


def family_of(name: str, family_types: dict[str, str]) -> tuple[str, str]:
    """``(family, type)`` of a sample name: histogram suffixes, ``_total`` and ``_info``
    are removed only where the family really is a histogram, counter or info."""
    for suffix in HISTOGRAM_SUFFIXES:
        base = name.removesuffix(suffix)
        if base != name and family_types.get(base) == "histogram":
            return base, "histogram"
    for suffix, kind in (("_total", "counter"), ("_info", "info")):
        base = name.removesuffix(suffix)
        if base != name and family_types.get(base) == kind:
            return base, kind
    return name, family_types.get(name, "missing")


def test_dashboard_parses_and_has_the_required_panels():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["title"]
    exprs = dashboard_exprs(dashboard)
    assert len(dashboard["panels"]) >= 7
    for panel in dashboard["panels"]:
        assert panel["targets"], f"panel {panel['title']!r} has no query"
    used = set().union(*(promql_metric_names(e) for _, e in exprs))
    assert used >= REQUIRED_METRICS, REQUIRED_METRICS - used
    quantiles = [e for _, e in exprs if "nmt_request_duration_seconds_bucket" in e]
    for q in ("0.5", "0.95", "0.99"):
        assert any(e.startswith(f"histogram_quantile({q},") for e in quantiles), q


def test_promql_name_extraction():
    expr = (
        'histogram_quantile(0.95, sum by (le, strategy) (rate(nmt_a_bucket{code="OK", '
        'method=~"x|y"}[$__rate_interval]))) / on (instance) group_left sum(nmt_b_total[5m])'
    )
    assert promql_metric_names(expr) == {"nmt_a_bucket", "nmt_b_total"}
    assert promql_label_names(expr) == {"le", "strategy", "code", "method", "instance"}
    assert promql_metric_names("count by (model, provider) (nmt_model_info)") == {"nmt_model_info"}


def test_every_dashboard_query_uses_only_exported_metrics_and_labels(live_scrape):
    exported = live_scrape.sample_labels
    assert set(exported) >= REQUIRED_METRICS
    for title, expr in dashboard_exprs(json.loads(DASHBOARD.read_text())):
        names = promql_metric_names(expr)
        assert names, f"{title}: no metric in {expr!r}"
        for name in names:
            assert name in exported, f"{title}: {name} is not exported by the service"
            family, kind = family_of(name, live_scrape.family_types)
            assert kind != "missing", f"{title}: {name} belongs to no exported family"
            if name.endswith("_bucket"):
                assert kind == "histogram", f"{title}: {name} is not a histogram bucket"
        known = set(TARGET_LABELS).union(*(exported[n] for n in names))
        unknown = promql_label_names(expr) - known
        assert not unknown, f"{title}: labels {unknown} not on {sorted(names)}"
