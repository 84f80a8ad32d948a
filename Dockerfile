# Serving image of rnn-nmt-serving: gRPC + ONNX Runtime, never torch.
#
#   docker build --target cpu -t rnn-nmt-serving:cpu .    # onnxruntime on python:3.11-slim
#   docker build --target gpu -t rnn-nmt-serving:gpu .    # onnxruntime-gpu on nvidia/cuda
#   docker run --rm -p 50051:50051 -p 8000:8000 -p 9464:9464 rnn-nmt-serving:cpu
#   docker run --rm --gpus all -p 50051:50051 -p 8000:8000 -p 9464:9464 rnn-nmt-serving:gpu
#
# gRPC on 50051, the HTTP/JSON API on 8000 (NMT_HTTP_PORT; -1 turns it off), /metrics on 9464.
#
# model_repository/ is baked in at /models (NMT_MODEL_REPOSITORY); serve other bundles by
# mounting a repository over it read-only: -v "$PWD/my-repo:/models:ro".
# Every nmt-serve flag is an NMT_<FLAG> environment variable (docker run -e NMT_MAX_QUEUE=64).
# The HEALTHCHECK asks grpc.health.v1 on 127.0.0.1:$NMT_PORT: healthy once warmed up.
# No `# syntax=` line: it makes BuildKit pull docker/dockerfile from Docker Hub first, and
# every build fails where Docker Hub cannot be reached. Without Docker Hub, build on the
# local stand-in bases of deploy/docker/standins.py:
#   docker build --target cpu --build-arg PYTHON_IMAGE=nmt-standin/python:3.11-bookworm \
#       -t rnn-nmt-serving:cpu-standin .
# (tests/deploy/docker/ builds and runs this image that way.)

ARG PYTHON_IMAGE=python:3.11-slim
ARG CUDA_IMAGE=nvidia/cuda:13.0.0-cudnn-runtime-ubuntu24.04
# The pin and the base image go together: PyPI's onnxruntime-gpu wheels follow one CUDA
# major per release (1.31.1's onnxruntime/capi/version_info.py says cuda_version 13.0), so
# an unpinned install could pair a CUDA 13 build with a CUDA 12 image. 1.31.1 with CUDA 13
# and cuDNN 9 is what the GPU tests and benchmarks ran on (H100). To move to another
# release, change both and check `cuda_version` in its version_info.py.
ARG ORT_GPU_SPEC="onnxruntime-gpu==1.31.1"
# The CPU image is pinned too, so that rebuilding it does not silently change the runtime
# under the bundles: 1.32.0 is the release the test suite, the export gates and the CPU
# benchmarks ran on. pyproject.toml's `onnxruntime>=1.18` is the range the package
# supports; this is the one release the image ships. Move it deliberately (and run the
# tests on the new release).
ARG ORT_CPU_SPEC="onnxruntime==1.32.0"
# Optional extras of the package, comma-separated, none by default: `onmt` adds pyonmttok,
# which bundles converted from Eole/OpenNMT-py models trained with the onmt_tokenize
# transform need (docker build --build-arg EXTRAS=onmt ...).
ARG EXTRAS=""

# ---------------------------------------------------------------- sources (shared)
# Files only, nothing runs here: `scratch` keeps these layers small (on the vfs storage
# driver every layer above a base is a full copy of it).
FROM scratch AS sources
WORKDIR /src
COPY pyproject.toml README.md ./
COPY models/ models/
COPY export/ export/
COPY service/ service/
COPY loadtest/ loadtest/
COPY nmt_api/ nmt_api/
COPY nmt_client/ nmt_client/

# ---------------------------------------------------------------- CPU build stage
FROM ${PYTHON_IMAGE} AS build-cpu
ARG ORT_CPU_SPEC
ARG EXTRAS
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 PATH=/opt/venv/bin:$PATH
COPY --from=sources /src /src
# The serving install: no extras but EXTRAS, so no torch, onnx, sacrebleu or locust;
# onnxruntime exactly ORT_CPU_SPEC.
# hadolint ignore=DL3013
RUN python -m venv /opt/venv \
    && pip install "/src${EXTRAS:+[$EXTRAS]}" "${ORT_CPU_SPEC}" \
    && python -c "import importlib.util as u, sys; sys.exit(bool(u.find_spec('torch')))" \
    && python -c "import onnxruntime, service.server"

# ---------------------------------------------------------------- CPU runtime: --target cpu
FROM ${PYTHON_IMAGE} AS cpu
RUN groupadd --system --gid 10001 nmt \
    && useradd --system --uid 10001 --gid nmt --create-home --home-dir /home/nmt \
        --shell /usr/sbin/nologin nmt
COPY --from=build-cpu /opt/venv /opt/venv
COPY model_repository/ /models/
COPY deploy/healthcheck.py /usr/local/bin/nmt-healthcheck
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    NMT_MODEL_REPOSITORY=/models \
    NMT_HOST=0.0.0.0 \
    NMT_PORT=50051 \
    NMT_HTTP_PORT=8000 \
    NMT_METRICS_PORT=9464 \
    NMT_PROVIDERS=cpu
USER 10001:10001
WORKDIR /tmp
EXPOSE 50051 8000 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "/usr/local/bin/nmt-healthcheck"]
ENTRYPOINT ["nmt-serve"]

# ---------------------------------------------------------------- GPU base (python on CUDA)
FROM ${CUDA_IMAGE} AS gpu-base
ENV DEBIAN_FRONTEND=noninteractive
# Ubuntu 24.04's python3 is 3.12 (the package needs >= 3.11); the base tag pins the release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*

# ---------------------------------------------------------------- GPU build stage
FROM gpu-base AS build-gpu
ARG ORT_GPU_SPEC
ARG EXTRAS
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
COPY --from=sources /src /src
# Same serving install, then swap onnxruntime for onnxruntime-gpu (both ship the
# `onnxruntime` module, so the CPU wheel must go first). ORT_GPU_SPEC is the pin.
# hadolint ignore=DL3013
RUN pip install "/src${EXTRAS:+[$EXTRAS]}" \
    && pip uninstall -y onnxruntime \
    && pip install "${ORT_GPU_SPEC}" \
    && python -c "import importlib.util as u, sys; sys.exit(bool(u.find_spec('torch')))" \
    && python -c "import onnxruntime as o; assert 'CUDAExecutionProvider' in o.get_available_providers()"

# ---------------------------------------------------------------- GPU runtime: --target gpu
FROM gpu-base AS gpu
RUN groupadd --system --gid 10001 nmt \
    && useradd --system --uid 10001 --gid nmt --create-home --home-dir /home/nmt \
        --shell /usr/sbin/nologin nmt
COPY --from=build-gpu /opt/venv /opt/venv
COPY model_repository/ /models/
COPY deploy/healthcheck.py /usr/local/bin/nmt-healthcheck
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    NMT_MODEL_REPOSITORY=/models \
    NMT_HOST=0.0.0.0 \
    NMT_PORT=50051 \
    NMT_HTTP_PORT=8000 \
    NMT_METRICS_PORT=9464 \
    NMT_PROVIDERS=cuda,cpu \
    NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility
USER 10001:10001
WORKDIR /tmp
EXPOSE 50051 8000 9464
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=10s --timeout=5s --start-period=90s --retries=3 \
    CMD ["python", "/usr/local/bin/nmt-healthcheck"]
ENTRYPOINT ["nmt-serve"]
