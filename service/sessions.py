"""How the ONNX Runtime sessions of a bundle are configured and opened: the
:class:`RuntimeConfig` every process derives its flags from, the providers this build
really has, one session per graph with a one-line error for a graph ORT cannot load, and
:class:`RunStats`, the counters every run of them adds to. :mod:`service.runtime` holds the
sessions of one bundle and runs them."""

from __future__ import annotations

import functools
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path

import onnxruntime as ort

log = logging.getLogger(__name__)

_OPT_LEVELS = {
    "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
GRAPH_OPTIMIZATION_LEVELS = tuple(_OPT_LEVELS)
IO_BINDING_MODES = ("auto", "on", "off")
# Steps a greedy call may run: each is a copy of the decoder's nodes in one graph.
MAX_GREEDY_STEPS = 16
# What greedy_steps 0 (auto) runs on host arrays; with IO binding auto stays at 1 step a
# call until the device path is measured (README, "Several greedy steps a call").
HOST_GREEDY_STEPS = 4
CUDA_GRAPH_MODES = ("auto", "on", "off")
CHUNKED_TOPK_MODES = ("auto", "on", "off")
PROVIDER_ALIASES = {"cuda": "CUDAExecutionProvider", "cpu": "CPUExecutionProvider"}
# The provider of sessions captured as CUDA graphs (decoder steps, encoder calls); TF32 off
# as for every CUDA session (see OnnxModel).
CUDA_GRAPH_PROVIDER = ("CUDAExecutionProvider", {"use_tf32": "0", "enable_cuda_graph": "1"})


class BundleRuntimeError(RuntimeError):
    """The bundle's graphs cannot run here (missing provider, wrong graph I/O)."""


@dataclass(frozen=True)
class RuntimeConfig:
    """How to build the ORT sessions. ``providers`` in preference order.

    On the CPU provider with more than one intra-op thread, every graph gets a second,
    single-threaded session: decoder steps with fewer than ``parallel_rows`` rows (and
    encoder batches of fewer sentences) run there. Splitting a few rows' GEMMs across
    cores costs more in hand-offs than it saves, and the other core is busy with the
    gRPC threads; large steps (beam search, many clients) do gain from it. Pool threads
    do not spin between kernels unless ``allow_spinning``: spinning threads took the
    cores the Python threads needed and halved the service's throughput on 2 cores.

    ``io_binding`` ("auto", "on", "off"; auto = on for CUDA) keeps the decode state on the
    execution device through ONNX Runtime IO binding: encoder outputs, the memory pool
    and the decoder states stay there (:mod:`service.devicepool`); per step only top-k
    ids/log-probs, EOS log-probs and attention come to the host.

    ``greedy_steps``: decoder steps one call runs when every sentence of a step is plain
    greedy (:mod:`service.greedysteps`; 1: one step a call; 0, auto: 4 on host arrays,
    1 with IO binding, where several steps run too, bound and through the CUDA graphs'
    fixed buffers, but are not measured on a GPU yet). A stream then gets its tokens in
    bursts of up to that many, and a request admitted mid-call waits for the call to end.

    ``cuda_graphs`` ("auto", "on", "off"; auto = on with CUDA and IO binding) replays
    decoder steps from CUDA graphs on fixed, bucketed buffers (:mod:`service.cudagraphs`),
    and encoder calls on sessions of fixed shape buckets (:mod:`service.encodergraphs`).
    "on" elsewhere runs the same buffers without capturing (how CI tests that path).

    ``chunked_topk`` ("auto", "on", "off"; auto = on for the CPU provider) rewrites the
    decoder's top-k over the vocabulary into two levels at load time
    (:mod:`service.topk`): the same values, ids and order, at a fraction of one TopK's
    cost on a CPU. On CUDA it is neither measured nor tested, hence off in auto.
    """

    providers: tuple[str, ...] = ("cuda", "cpu")
    intra_op_threads: int = 0
    inter_op_threads: int = 1
    optimization: str = "all"
    require_gpu: bool = False
    parallel_rows: int = 32
    allow_spinning: bool = False
    io_binding: str = "auto"
    cuda_graphs: str = "auto"
    greedy_steps: int = 0
    chunked_topk: str = "auto"

    def __post_init__(self) -> None:
        unknown = [p for p in self.providers if p not in PROVIDER_ALIASES]
        if unknown or not self.providers:
            raise ValueError(
                f"providers must be a non-empty list of {sorted(PROVIDER_ALIASES)}, got "
                f"{list(self.providers)}"
            )
        if self.optimization not in _OPT_LEVELS:
            raise ValueError(f"optimization must be one of {sorted(_OPT_LEVELS)}")
        if self.intra_op_threads < 0 or self.inter_op_threads < 0:
            raise ValueError("thread counts must be >= 0 (0 lets ONNX Runtime choose)")
        if self.io_binding not in IO_BINDING_MODES:
            raise ValueError(f"io_binding must be one of {list(IO_BINDING_MODES)}")
        if self.cuda_graphs not in CUDA_GRAPH_MODES:
            raise ValueError(f"cuda_graphs must be one of {list(CUDA_GRAPH_MODES)}")
        if self.chunked_topk not in CHUNKED_TOPK_MODES:
            raise ValueError(f"chunked_topk must be one of {list(CHUNKED_TOPK_MODES)}")
        if self.parallel_rows < 0:
            raise ValueError("parallel_rows must be >= 0 (0: always the multi-threaded session)")
        if not 0 <= self.greedy_steps <= MAX_GREEDY_STEPS:
            raise ValueError(
                f"greedy_steps must be 0..{MAX_GREEDY_STEPS} (1: one step a decoder call, 0: auto)"
            )

    def check_threads(self) -> None:
        """Refuse thread counts above this machine's CPU count (``ValueError``). Every
        session of every model (and lane) starts its own pool: 100,000 asked for started
        threads until the machine refused new processes, the server stuck in its start
        (helper-89); more threads than CPUs only take turns on them. Checked when the
        sessions are made, not with the flags: a manifest meant for a larger machine
        (deploy/k8s, checked on CI's 2 cores) is no error there."""
        cpus = os.cpu_count() or 1
        for name in ("intra_op_threads", "inter_op_threads"):
            if getattr(self, name) > cpus:
                flag = "--" + name.replace("_", "-")
                raise ValueError(
                    f"{flag} {getattr(self, name)} exceeds this machine's {cpus} CPUs: "
                    f"use at most {cpus} (0 lets ONNX Runtime choose)"
                )

    def session_options(self, *, threads: int | None = None) -> ort.SessionOptions:
        """Options of one session; ``threads`` overrides ``intra_op_threads``."""
        opts = ort.SessionOptions()
        opts.graph_optimization_level = _OPT_LEVELS[self.optimization]
        if threads is None:
            # 0: ORT's own choice, one thread per core of the machine, unless this process
            # may use fewer (a container's CPU limit, an affinity mask): then as many
            threads = self.intra_op_threads or restricted_cpus()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = self.inter_op_threads
        opts.log_severity_level = 3
        if not self.allow_spinning:
            opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
            opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
        return opts


CGROUP = Path("/sys/fs/cgroup")


def usable_cpus(cgroup: Path = CGROUP) -> int:
    """The cores this process may use: its CPU affinity (taskset, cpusets), capped by its
    cgroup's CPU quota rounded up (Kubernetes' ``limits.cpu``, ``docker --cpus``), where
    ``os.cpu_count()`` counts the whole machine's: in a 2-CPU pod on a 64-core node ONNX
    Runtime started 64 threads and the decode lanes took that many cores as theirs."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cores = os.cpu_count() or 1
    quota = cgroup_quota(cgroup)
    return max(1, min(cores, math.ceil(quota)) if quota is not None else cores)


def restricted_cpus() -> int:
    """:func:`usable_cpus` when fewer than the machine has, else 0 (ONNX Runtime's own
    choice: its physical cores)."""
    usable = usable_cpus()
    return usable if usable < (os.cpu_count() or 1) else 0


def cgroup_quota(cgroup: Path = CGROUP) -> float | None:
    """The CPU quota of this process's cgroup in cores (cgroup v2 ``cpu.max``, else v1
    ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), or None: no quota, or none readable."""
    try:
        quota, period = (cgroup / "cpu.max").read_text().split()[:2]
        return None if quota == "max" else int(quota) / int(period)
    except (OSError, ValueError):
        pass
    try:
        quota_us = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period_us = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota_us / period_us if quota_us > 0 and period_us > 0 else None


@dataclass
class RunStats:
    """Cumulative work and wall time inside ONNX Runtime (read by benchmarks; cheap to keep).

    ``decoder_rows`` counts hypothesis rows over all steps (generated tokens, and with
    several greedy steps a call the steps a row computes after its EOS) and
    ``decoder_row_positions`` the source positions they attended over, padding included;
    ``decoder_steps`` the steps the ``decoder_calls`` ran (several a call with
    ``greedy_steps``).
    """

    encoder_calls: int = 0
    encoder_seconds: float = 0.0
    sentences_encoded: int = 0
    source_tokens: int = 0
    decoder_calls: int = 0
    decoder_steps: int = 0
    decoder_seconds: float = 0.0
    decoder_rows: int = 0
    decoder_row_positions: int = 0
    # decoder calls run on the fixed buffers (replayed on CUDA; service.cudagraphs), and
    # where their time went: uploading the index vectors, the run, outputs to the host
    graph_steps: int = 0
    graph_upload_seconds: float = 0.0
    graph_run_seconds: float = 0.0
    graph_download_seconds: float = 0.0
    # encoder calls run on a fixed-shape session (replayed on CUDA; service.encodergraphs)
    graph_encodes: int = 0


def open_session(
    path: Path | bytes, opts: ort.SessionOptions, providers: list, name: Path | None = None
) -> ort.InferenceSession:
    """An ORT session of ``path`` (or of a serialized graph named ``name``); a graph ORT
    cannot load is one line naming the file."""
    if isinstance(path, bytes):
        data, path = path, name
    else:
        data = str(path)
    try:
        return ort.InferenceSession(data, opts, providers=providers)
    except Exception as exc:  # ORT raises its own Fail/InvalidGraph/... types, or RuntimeError
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BundleRuntimeError(
            f"ONNX Runtime cannot load {path.name}: {first[:300]}; re-export the model"
        ) from None


def check_io(session: ort.InferenceSession, path: Path, inputs: list[str], outputs: list[str]):
    have_in = [i.name for i in session.get_inputs()]
    have_out = [o.name for o in session.get_outputs()]
    if sorted(have_in) != sorted(inputs) or sorted(have_out) != sorted(outputs):
        raise BundleRuntimeError(
            f"{path.name} does not have the graph inputs/outputs this service expects "
            f"(inputs {have_in} vs {inputs}; outputs {have_out} vs {outputs}); "
            "re-export the model with this version's `nmt-export`"
        )


@functools.cache
def _preload_cuda_libraries() -> None:
    """Load CUDA/cuDNN from pip's ``nvidia-*`` packages when they are installed, so the
    CUDA provider works without LD_LIBRARY_PATH (a CUDA base image has them system-wide,
    where this finds nothing to do)."""
    preload = getattr(ort, "preload_dlls", None)
    if preload is None:
        return
    try:
        preload()
    except Exception as exc:  # a failed preload only means the system's libraries are used
        log.debug("onnxruntime.preload_dlls() failed: %s", exc)


def usable_providers(config: RuntimeConfig) -> list[str]:
    """The configured execution providers this ONNX Runtime build really has, in order."""
    available = ort.get_available_providers()
    wanted = [PROVIDER_ALIASES[p] for p in config.providers]
    providers = [p for p in wanted if p in available]
    if "CUDAExecutionProvider" in providers:
        _preload_cuda_libraries()
    if config.require_gpu and "CUDAExecutionProvider" not in wanted:
        raise BundleRuntimeError(
            f"--require-gpu is set but --providers {','.join(config.providers)} leaves out "
            "CUDA; add cuda to --providers"
        )
    if config.require_gpu and "CUDAExecutionProvider" not in providers:
        raise BundleRuntimeError(
            "--require-gpu is set but ONNX Runtime has no CUDA execution provider here "
            f"(available: {available}); install onnxruntime-gpu and check the CUDA driver"
        )
    if not providers:
        raise BundleRuntimeError(f"none of the providers {wanted} is available ({available})")
    return providers
