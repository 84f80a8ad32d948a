"""Static checks of the deployment files: compose (compose-spec schema and structure),
Prometheus (promtool), nginx (nginx -t), Grafana provisioning and the Dockerfile."""

from __future__ import annotations

import fnmatch
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.deploy.helpers import (
    COMPOSE_FILE,
    DASHBOARD,
    DOCKERFILE,
    DOCKERIGNORE,
    GRAFANA,
    NGINX_CONF,
    PROMETHEUS_YML,
    ROOT,
    free_port,
    local_nginx_conf,
    local_prometheus_config,
)

TRANSLATOR_PROFILES = {
    "translator-cpu": "cpu",
    "translator-gpu": "gpu",
    "translator-replica": "scale",
}


def run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess:
    assert shutil.which(cmd[0]), f"{cmd[0]} is not on PATH (make apt / make install-dev)"
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120, **kwargs)


@pytest.fixture(scope="module")
def compose() -> dict:
    return yaml.safe_load(COMPOSE_FILE.read_text())


def test_compose_file_matches_the_compose_spec_schema():
    result = run(["check-jsonschema", "--builtin-schema", "vendor.compose-spec", str(COMPOSE_FILE)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_compose_profiles_pick_one_translator_and_monitoring_always_runs(compose):
    services = compose["services"]
    for name, profile in TRANSLATOR_PROFILES.items():
        assert services[name]["profiles"] == [profile]
    assert services["lb"]["profiles"] == ["scale"]
    for name in ("prometheus", "grafana"):
        assert "profiles" not in services[name], f"{name} must start with every profile"
    targets = {services[n]["build"]["target"] for n in TRANSLATOR_PROFILES}
    assert targets == {"cpu", "gpu"}
    assert services["translator-replica"]["deploy"]["replicas"]


def test_gpu_service_reserves_an_nvidia_gpu_and_requires_it(compose):
    gpu = compose["services"]["translator-gpu"]
    devices = gpu["deploy"]["resources"]["reservations"]["devices"]
    assert any(d["driver"] == "nvidia" and "gpu" in d["capabilities"] for d in devices)
    assert gpu["build"]["target"] == "gpu"
    assert gpu["environment"]["NMT_PROVIDERS"].startswith("cuda")
    assert gpu["environment"]["NMT_REQUIRE_GPU"] == "1"
    for name in ("translator-cpu", "translator-replica"):
        assert "resources" not in compose["services"][name].get("deploy", {})


def test_translators_mount_the_model_repository_read_only(compose):
    for name in TRANSLATOR_PROFILES:
        (volume,) = compose["services"][name]["volumes"]
        assert volume["target"] == "/models" and volume["read_only"] is True
        assert volume["source"].endswith("./model_repository}")


def test_every_bind_mounted_deploy_file_exists(compose):
    for name, service in compose["services"].items():
        for volume in service.get("volumes", []):
            if isinstance(volume, str) and volume.startswith("./"):
                source = volume.split(":")[0]
                assert (ROOT / source).exists(), f"{name} mounts missing {source}"


def test_prometheus_discovers_every_translator_through_their_network_alias(compose):
    config = yaml.safe_load(PROMETHEUS_YML.read_text())
    (job,) = [j for j in config["scrape_configs"] if j["job_name"] == "nmt"]
    (sd,) = job["dns_sd_configs"]
    assert sd["port"] == 9464 and sd["type"] == "A"
    for name in TRANSLATOR_PROFILES:
        aliases = compose["services"][name]["networks"]["default"]["aliases"]
        assert set(sd["names"]) <= set(aliases), name
    mount = "./deploy/prometheus/prometheus.yml:/etc/prometheus/prometheus.yml:ro"
    assert mount in compose["services"]["prometheus"]["volumes"]
    # the rule files it names are mounted beside it
    for rules in config["rule_files"]:
        mount = f"./deploy/prometheus/{rules}:/etc/prometheus/{rules}:ro"
        assert mount in compose["services"]["prometheus"]["volumes"]


def test_the_alerting_rules_pass_promtool_and_their_unit_tests(tmp_path):
    rules = PROMETHEUS_YML.parent / "alerts.yml"
    for argv in (["check", "rules", str(rules)], ["test", "rules", "alerts_test.yml"]):
        result = run(["promtool", *argv], cwd=PROMETHEUS_YML.parent)
        assert result.returncode == 0, result.stdout + result.stderr
    # the unit tests can fail: a server-error alert that counts the clients' mistakes
    # pages on the replica whose clients send bad requests
    (tmp_path / "alerts.yml").write_text(
        rules.read_text().replace('INTERNAL|UNKNOWN|DATA_LOSS"', 'INTERNAL|INVALID_ARGUMENT"')
    )
    shutil.copy(PROMETHEUS_YML.parent / "alerts_test.yml", tmp_path)
    result = run(["promtool", "test", "rules", "alerts_test.yml"], cwd=tmp_path)
    assert result.returncode != 0 and "NmtServerErrors" in result.stdout + result.stderr


def test_the_alerting_rules_read_only_metrics_the_server_exports():
    from prometheus_client import CollectorRegistry

    from service.metrics import create_metrics

    registry = CollectorRegistry()
    create_metrics(registry)
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum")}
    exported = {"up"} | {
        family.name + suffix
        for family in registry.collect()
        for suffix in suffixes.get(family.type, ("",))
    }
    rules = yaml.safe_load((PROMETHEUS_YML.parent / "alerts.yml").read_text())
    exprs = [r["expr"] for group in rules["groups"] for r in group["rules"]]
    assert len(exprs) == 5
    for expr in exprs:
        for name in re.findall(r"\b(nmt_\w+|up)\{", expr):
            assert name in exported, (name, expr)


def test_promtool_accepts_prometheus_config(tmp_path):
    result = run(["promtool", "check", "config", str(PROMETHEUS_YML)])
    assert result.returncode == 0, result.stdout + result.stderr
    local = tmp_path / "prometheus.yml"
    config = local_prometheus_config(yaml.safe_load(PROMETHEUS_YML.read_text()), "127.0.0.1:1")
    local.write_text(yaml.safe_dump(config))
    result = run(["promtool", "check", "config", str(local)])
    assert result.returncode == 0, result.stdout + result.stderr


def test_nginx_accepts_the_load_balancer_config(tmp_path, compose):
    assert "grpc_pass grpc://backends;" in NGINX_CONF.read_text()
    # least_conn over one count shared by the workers, for gRPC and HTTP alike
    upstreams = re.findall(r"upstream\s+(\w+)\s*\{([^}]*)\}", NGINX_CONF.read_text())
    assert sorted(name for name, _ in upstreams) == ["backends", "http_backends"]
    for name, body in upstreams:
        assert re.search(rf"^\s*zone\s+{name}\s+\d+k;", body, re.M), name
        assert re.search(r"^\s*least_conn;", body, re.M), name
    conf = tmp_path / "nginx.conf"
    conf.write_text(local_nginx_conf(NGINX_CONF.read_text(), [free_port()], free_port(), tmp_path))
    result = run(["nginx", "-t", "-c", str(conf), "-p", str(tmp_path)])
    assert result.returncode == 0, result.stdout + result.stderr
    lb = compose["services"]["lb"]
    assert "./deploy/nginx/nginx.conf:/etc/nginx/nginx.conf:ro" in lb["volumes"]
    assert lb["depends_on"]["translator-replica"]["condition"] == "service_healthy"


def test_grafana_provisioning_matches_the_compose_mounts_and_dashboard(compose):
    grafana = compose["services"]["grafana"]
    mounts = dict(v.split(":")[:2] for v in grafana["volumes"] if v.startswith("./"))
    datasources = yaml.safe_load((GRAFANA / "provisioning/datasources/prometheus.yml").read_text())
    (source,) = datasources["datasources"]
    assert source["type"] == "prometheus" and source["url"] == "http://prometheus:9090"
    providers = yaml.safe_load((GRAFANA / "provisioning/dashboards/nmt.yml").read_text())
    (provider,) = providers["providers"]
    assert mounts["./deploy/grafana/dashboards"] == provider["options"]["path"]
    assert mounts["./deploy/grafana/provisioning"] == "/etc/grafana/provisioning"
    home = grafana["environment"]["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
    assert home == f"{provider['options']['path']}/{DASHBOARD.name}"
    dashboard = json.loads(DASHBOARD.read_text())
    uids = {p["datasource"]["uid"] for p in dashboard["panels"]}
    uids |= {t["datasource"]["uid"] for p in dashboard["panels"] for t in p["targets"]}
    assert uids == {source["uid"]}


# The real images by default; tests/deploy/docker/ sets local stand-ins through these.
IMAGE_VARIABLES = {
    "lb": ("NGINX_IMAGE", "nginx:"),
    "prometheus": ("PROMETHEUS_IMAGE", "prom/prometheus:"),
    "grafana": ("GRAFANA_IMAGE", "grafana/grafana-oss:"),
}
# Host ports of the loopback-only services: variables defaulting to the documented ports.
HOST_PORTS = {
    "translator-cpu": ("NMT_METRICS_HOST_PORT", "9464"),
    "translator-gpu": ("NMT_METRICS_HOST_PORT", "9464"),
    "prometheus": ("PROMETHEUS_PORT", "9090"),
    "grafana": ("GRAFANA_PORT", "3000"),
}


def test_compose_images_and_host_ports_come_from_variables_with_real_defaults(compose):
    services = compose["services"]
    for name, (variable, default) in IMAGE_VARIABLES.items():
        m = re.fullmatch(rf"\$\{{{variable}:-([^}}]+)\}}", services[name]["image"])
        assert m and m.group(1).startswith(default), (name, services[name]["image"])
    python = services["translator-cpu"]["build"]["args"]["PYTHON_IMAGE"]
    assert python == "${PYTHON_IMAGE:-python:3.11-slim}"
    for name, (variable, port) in HOST_PORTS.items():
        loopback = [p for p in services[name]["ports"] if p.startswith("127.0.0.1:")]
        assert loopback == [f"127.0.0.1:${{{variable}:-{port}}}:{port}"], (name, loopback)


# -- Dockerfile --------------------------------------------------------------------------


def dockerfile_stages() -> dict[str, list[str]]:
    """``{stage: [instruction lines]}`` with line continuations joined."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text())
    stages: dict[str, list[str]] = {"": []}
    current = ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"FROM\s+(\S+)\s+AS\s+(\S+)", line, re.I)
        if m:
            current = m.group(2)
            stages[current] = [line]
        else:
            stages[current].append(line)
    return stages


def test_dockerfile_has_slim_cpu_and_cuda_gpu_targets_running_as_non_root():
    stages = dockerfile_stages()
    args = dict(re.findall(r"ARG\s+(\w+)=(\S+)", " ".join(stages[""])))
    assert args["PYTHON_IMAGE"] == "python:3.11-slim"
    assert args["CUDA_IMAGE"].startswith("nvidia/cuda:") and "runtime" in args["CUDA_IMAGE"]
    assert stages["cpu"][0].split()[1] == "${PYTHON_IMAGE}"
    assert stages["gpu-base"][0].split()[1] == "${CUDA_IMAGE}"
    for target in ("cpu", "gpu"):
        lines = stages[target]
        (user,) = [x.split()[1] for x in lines if x.startswith("USER ")]
        assert user.split(":")[0] not in ("0", "root")
        assert any(x.startswith("HEALTHCHECK ") and "nmt-healthcheck" in x for x in lines)
        assert 'ENTRYPOINT ["nmt-serve"]' in lines
        assert any(re.match(r"COPY model_repository/ /models/?$", x) for x in lines)
        assert any("NMT_MODEL_REPOSITORY=/models" in x for x in lines)
        assert any(x == "COPY deploy/healthcheck.py /usr/local/bin/nmt-healthcheck" for x in lines)


def test_dockerfile_installs_the_package_without_extras_or_torch():
    stages = dockerfile_stages()
    installs = [x for lines in stages.values() for x in lines if "pip install" in x]
    assert installs
    for line in installs:
        # extras only through EXTRAS, whose default is none
        bare = line.replace("${EXTRAS:+[$EXTRAS]}", "")
        assert not re.search(r"pip install[^&]*\[", bare), f"extras installed: {line}"
        assert not re.search(r"pip install[^&]*torch", line), line
    assert any('pip install "/src' in x for x in stages["build-cpu"])
    gpu = " ".join(stages["build-gpu"])
    assert "pip uninstall -y onnxruntime" in gpu and "ORT_GPU_SPEC" in gpu
    assert "onnxruntime-gpu" in " ".join(stages[""])
    # Each onnxruntime-gpu release is built for one CUDA major: the spec is an exact pin
    # that goes with CUDA_IMAGE, never a range that a new release could move under it.
    args = dict(re.findall(r"ARG\s+(\w+)=(\S+)", " ".join(stages[""])))
    assert re.fullmatch(r'"?onnxruntime-gpu==\d+\.\d+\.\d+"?', args["ORT_GPU_SPEC"])
    # The CPU image is pinned the same way (one release, the one the tests ran on).
    assert re.fullmatch(r'"?onnxruntime==\d+\.\d+\.\d+"?', args["ORT_CPU_SPEC"])
    assert any(
        'pip install "/src${EXTRAS:+[$EXTRAS]}" "${ORT_CPU_SPEC}"' in x for x in stages["build-cpu"]
    )
    assert args["EXTRAS"] == '""'  # no extras unless the build asks


def test_dockerfile_needs_no_registry_but_its_base_images():
    # `# syntax=docker/dockerfile:1` makes BuildKit pull a frontend image from Docker Hub
    # first: every build failed where only the package mirrors could be reached.
    assert not re.search(r"^#\s*syntax\s*=", DOCKERFILE.read_text(), re.M | re.I)


def dockerignored(path: str, patterns: list[str]) -> bool:
    ignored = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pattern = pattern.lstrip("!").rstrip("/")
        parts = Path(path).parts
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(
            fnmatch.fnmatch(p, pattern) or fnmatch.fnmatch(p, f"**/{pattern}") for p in prefixes
        ):
            ignored = not negate
    return ignored


def test_dockerignore_keeps_the_build_context_small_but_complete():
    patterns = [
        x.strip() for x in DOCKERIGNORE.read_text().splitlines() if x.strip() and x[0] != "#"
    ]
    for excluded in ("data/x", "runs/en-es/best.pt", ".git/HEAD", "a.whl", ".whl/b.whl"):
        assert dockerignored(excluded, patterns), excluded
    copied = [
        src
        for lines in dockerfile_stages().values()
        for line in lines
        if line.startswith("COPY ") and "--from" not in line
        for src in line.split()[1:-1]
    ]
    assert "model_repository/" in copied
    for src in copied:
        assert not dockerignored(src.rstrip("/"), patterns), f".dockerignore drops {src}"
        if src != "model_repository/":  # exported bundles, committed separately
            assert (ROOT / src).exists(), src
