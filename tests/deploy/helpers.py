"""Helpers of the deployment tests: ports, child processes, HTTP, PromQL and the configs
(prometheus.yml, nginx.conf) rewritten for 127.0.0.1. No fixtures here."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
PROMETHEUS_YML = ROOT / "deploy" / "prometheus" / "prometheus.yml"
NGINX_CONF = ROOT / "deploy" / "nginx" / "nginx.conf"
HEALTHCHECK = ROOT / "deploy" / "healthcheck.py"
GRAFANA = ROOT / "deploy" / "grafana"
DASHBOARD = GRAFANA / "dashboards" / "nmt.json"
LOCUSTFILE = ROOT / "loadtest" / "locustfile.py"
SERVICE = "nmt.v1.Translator"
# Labels Prometheus adds to every scraped series (not exported by the service).
TARGET_LABELS = frozenset({"instance", "job"})


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(predicate: Callable[[], bool], timeout: float, every: float = 0.2) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(every)
    return predicate()


def http_get(url: str, timeout: float = 5.0) -> tuple[int, str]:
    """``(status, body)``; connection errors come back as status 0."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as reply:  # noqa: S310 - 127.0.0.1
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def is_serving(port: int, timeout: float = 2.0) -> bool:
    """The gRPC health service on 127.0.0.1:``port`` says SERVING for the translator."""
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=SERVICE), timeout=timeout
            )
        except grpc.RpcError:
            return False
    return reply.status == health_pb2.HealthCheckResponse.SERVING


# -- /metrics ---------------------------------------------------------------------------


@dataclass
class Scrape:
    """One scrape of a /metrics page: family types and every sample's name and labels."""

    family_types: dict[str, str] = field(default_factory=dict)
    sample_labels: dict[str, set[str]] = field(default_factory=dict)
    values: list[tuple[str, dict[str, str], float]] = field(default_factory=list)

    def value(self, name: str, **labels: str) -> float:
        """Sum of the samples called ``name`` whose labels include ``labels``."""
        return sum(
            v
            for n, sample_labels, v in self.values
            if n == name and all(sample_labels.get(k) == x for k, x in labels.items())
        )


def scrape(port: int) -> Scrape:
    status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200, f"/metrics on port {port} answered {status}"
    out = Scrape()
    for family in text_string_to_metric_families(body):
        out.family_types[family.name] = family.type
        for sample in family.samples:
            out.sample_labels.setdefault(sample.name, set()).update(sample.labels)
            out.values.append((sample.name, dict(sample.labels), sample.value))
    return out


# -- PromQL -----------------------------------------------------------------------------

PROMQL_WORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or"}
    | {"unless", "offset", "inf", "nan"}
)
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")


def _strip_strings(expr: str) -> str:
    return re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'', '""', expr)


def promql_metric_names(expr: str) -> set[str]:
    """Metric names an expression selects: identifiers that are not functions, keywords,
    label names (in ``{...}`` or grouping clauses) or durations (in ``[...]``)."""
    s = _strip_strings(expr)
    s = re.sub(r"\{[^}]*\}", " ", s)
    s = re.sub(r"\[[^\]]*\]", " ", s)
    s = GROUPING.sub(" ", s)
    names = set()
    for m in re.finditer(r"(?<![\w.$])[A-Za-z_:][A-Za-z0-9_:]*", s):
        if s[m.end() :].lstrip().startswith("(") or m.group().lower() in PROMQL_WORDS:
            continue
        names.add(m.group())
    return names


def promql_label_names(expr: str) -> set[str]:
    """Label names used in matchers ``{l="v"}`` and grouping clauses ``by (l, ...)``."""
    s = _strip_strings(expr)
    labels = set()
    for matchers in re.findall(r"\{([^}]*)\}", s):
        labels.update(re.findall(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)", matchers))
    for grouping in GROUPING.findall(s):
        labels.update(x.strip() for x in grouping.split(",") if x.strip())
    return labels


def dashboard_exprs(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(panel title, expr)`` of every target of every panel (rows included)."""
    out = []
    stack = list(dashboard.get("panels", []))
    while stack:
        panel = stack.pop(0)
        stack.extend(panel.get("panels", []))
        for t in panel.get("targets", []):
            out.append((panel.get("title", "?"), t.get("expr", "")))
    return out


def prometheus_query(port: int, query: str) -> list[dict[str, Any]]:
    """The result vector of an instant query through Prometheus's HTTP API."""
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    status, body = http_get(url)
    if status != 200:
        return []
    reply = json.loads(body)
    assert reply["status"] == "success", reply
    return reply["data"]["result"]


# -- configs rewritten for 127.0.0.1 ----------------------------------------------------


def local_prometheus_config(config: dict[str, Any], target: str) -> dict[str, Any]:
    """The compose prometheus.yml with its `nmt` job scraping ``target`` every second
    (static target instead of DNS discovery) and no other job."""
    jobs = [job for job in config["scrape_configs"] if job["job_name"] == "nmt"]
    assert len(jobs) == 1, "prometheus.yml must have exactly one job named nmt"
    job = {k: v for k, v in jobs[0].items() if not k.endswith("_sd_configs")}
    job["static_configs"] = [{"targets": [target]}]
    job["scrape_interval"] = "1s"
    job["scrape_timeout"] = "1s"
    out = dict(config)
    out["global"] = {**config.get("global", {}), "scrape_interval": "1s", "scrape_timeout": "1s"}
    out["scrape_configs"] = [job]
    # the rule files beside the compose file, wherever the rewritten config is written
    out["rule_files"] = [str(PROMETHEUS_YML.parent / f) for f in config.get("rule_files", [])]
    return out


def _sub_once(pattern: str, replacement: str, text: str) -> str:
    new, count = re.subn(pattern, replacement, text, flags=re.M)
    assert count == 1, f"deploy/nginx/nginx.conf: expected one match of {pattern!r}, got {count}"
    return new


def local_nginx_conf(
    template: str,
    backends: Sequence[int],
    listen: int,
    prefix: Path,
    *,
    http_backends: Sequence[int] = (),
    http_listen: int = 0,
) -> str:
    """deploy/nginx/nginx.conf for 127.0.0.1: the replica upstream becomes ``backends``,
    the listener 127.0.0.1:``listen``, and pid, logs and temp files live under ``prefix``;
    the HTTP upstream ``http_backends`` (default: port 9, which nobody serves) and its
    listener 127.0.0.1:``http_listen`` (default: any free port)."""
    conf = _sub_once(r"^pid\s+[^;]*;", f"pid {prefix / 'nginx.pid'};", template)
    conf = _sub_once(r"^error_log\s+[^;]*;", f"error_log {prefix / 'error.log'} notice;", conf)
    temp = "".join(
        f"\n    {kind}_temp_path {prefix / kind};"
        for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    conf = _sub_once(
        r"^(\s*)access_log\s+\S+\s+(\w+);", rf"\1access_log {prefix / 'access.log'} \2;{temp}", conf
    )
    conf = _sub_once(
        r"^(\s*)server\s+translator-replica:50051([^;]*);",
        "".join(rf"\1server 127.0.0.1:{port}\2;" + "\n" for port in backends).rstrip("\n"),
        conf,
    )
    conf = _sub_once(r"^(\s*)listen\s+50051\s+http2;", rf"\1listen 127.0.0.1:{listen} http2;", conf)
    conf = _sub_once(
        r"^(\s*)server\s+translator-replica:8000([^;]*);",
        "".join(rf"\1server 127.0.0.1:{port}\2;" + "\n" for port in http_backends or [9]).rstrip(
            "\n"
        ),
        conf,
    )
    conf = _sub_once(
        r"^(\s*)listen\s+8000;", rf"\1listen 127.0.0.1:{http_listen or free_port()};", conf
    )
    conf = _sub_once(r"^worker_processes\s+[^;]*;", "worker_processes 1;", conf)
    if os.geteuid() == 0:  # workers as root can use the test's private tmp dir
        conf = "user root;\n" + re.sub(r"^user\s+[^;]*;\n", "", conf, flags=re.M)
    return conf


# -- child processes --------------------------------------------------------------------


@dataclass
class Child:
    name: str
    proc: subprocess.Popen
    log_path: Path
    log_file: IO[bytes]

    def log(self) -> str:
        if not self.log_file.closed:  # stop() closes it: the file holds everything then
            self.log_file.flush()
        return self.log_path.read_text(errors="replace")[-4000:]

    def alive(self) -> bool:
        return self.proc.poll() is None


class Processes:
    """Child processes of one test, each logging to ``<log_dir>/<name>.log``."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.children: list[Child] = []

    def start(self, name: str, cmd: Sequence[str], **kwargs: Any) -> Child:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        log_file = log_path.open("wb")
        proc = subprocess.Popen(
            list(cmd), stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, **kwargs
        )
        child = Child(name, proc, log_path, log_file)
        self.children.append(child)
        return child

    def stop(self, child: Child, timeout: float = 15.0) -> int:
        """SIGTERM, then SIGKILL after ``timeout`` seconds: the exit code."""
        if child.alive():
            child.proc.send_signal(signal.SIGTERM)
            try:
                child.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                child.proc.kill()
                child.proc.wait(10)
        child.log_file.close()
        return child.proc.returncode

    def close(self) -> None:
        for child in reversed(self.children):
            self.stop(child)


def start_serve(processes: Processes, name: str, repo: Path, *extra: str) -> tuple[Child, int, int]:
    """``nmt-serve`` on 127.0.0.1 free ports (CPU, one ORT thread): ``(child, port, metrics)``,
    returned once its health service says SERVING."""
    port, metrics = free_port(), free_port()
    cmd = [
        sys.executable,
        "-m",
        "service.server",
        "--model-repository",
        str(repo),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--metrics-port",
        str(metrics),
        "--providers",
        "cpu",
        "--intra-op-threads",
        "1",
        "--shutdown-grace",
        "1",
        *extra,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    child = processes.start(name, cmd, cwd=ROOT, env=env)
    ready = wait_until(lambda: not child.alive() or is_serving(port), timeout=120, every=0.5)
    assert ready and child.alive(), f"{name} did not become SERVING:\n{child.log()}"
    return child, port, metrics
