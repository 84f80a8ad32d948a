#!/usr/bin/env bash
# The GPU measurements of docs/performance.md on a lent GPU machine that receives a copy of
# this working tree with each command, capped at 64 MiB (tracked and untracked-not-ignored
# files plus the ignored paths a call carries), and that cannot reach PyPI.
#
# Two things do not fit: the tree itself (~114 MB: two demo models, their bundles, the
# converters' fixtures) and onnxruntime-gpu (~255 MB). So, with the work committed:
#   loadtest/lent_gpu.sh wheels   # here: .whl/small (what the device lacks), ORT in 60 MB parts
#   loadtest/lent_gpu.sh empty    # here: delete every tracked file but .gitignore and this one
# then one device call a part, back to back (a warm machine keeps ignored files between
# calls; it is given back after ~30 s idle), command `true`, carrying in turn
#   [".whl/small", ".whl/ort-gpu.part-ae"], [".whl/ort-gpu.part-aa"], ... part-ad
# then here
#   loadtest/lent_gpu.sh restore  # every tracked file back (git checkout)
#   loadtest/lent_gpu.sh slim     # delete what the GPU checks never read; prints the size
# and the checks in one call carrying nothing (results under $OUT, ~7 minutes at most):
#   command: bash loadtest/lent_gpu.sh device-checks
#   loadtest/lent_gpu.sh restore
# `loadtest/lent_gpu.sh size` prints what would travel now (exit 2 when over the cap).
set -euo pipefail
cd "$(dirname "$0")/.."

ORT_GPU=${ORT_GPU:-onnxruntime-gpu==1.31.1}  # built for CUDA 13, as the device image's torch
PART_BYTES=${PART_BYTES:-60000000}
LIMIT_BYTES=$((64 * 1024 * 1024))
# Read by no GPU check: the Luong demo (model and bundle), the CPU's int8 bundle (CUDA
# picks en-es/7), the converters' fixtures.
SLIM=(model_repository/en-es-luong models/pretrained/en-es-luong model_repository/en-es/8
    tests/fixtures/eole tests/fixtures/onmt_py tests/fixtures/onmt_py1 tests/fixtures/onmt_py2)

die() { echo "lent_gpu.sh: $*" >&2; exit 2; }

travelling_bytes() {  # what the device tool sends: tracked and untracked-not-ignored files
    { git ls-files -co --exclude-standard -z | xargs -0 -r stat -c %s 2>/dev/null || true; } |
        awk '{s += $1} END {print s + 0}'  # a deleted tracked file does not travel
}

report_size() {  # "check": fail when over the limit
    local bytes
    bytes=$(travelling_bytes)
    echo "travels: $((bytes / 1000000)) MB of $((LIMIT_BYTES / 1000000)) MB; room to carry $(((LIMIT_BYTES - bytes) / 1000000)) MB"
    [ "${1:-}" != check ] || [ "$bytes" -le "$LIMIT_BYTES" ] ||
        die "over the device tool's 64 MiB: it would refuse the call"
}

need_clean() {
    [ -z "$(git status --porcelain --untracked-files=normal)" ] ||
        die "commit or stash first: '$1' deletes tracked files and 'restore' brings back HEAD's"
}

case "${1:-}" in
wheels)
    # The device has Python 3.12, an older protobuf than the generated code needs, and no
    # cryptography (the TLS fixtures the test modules' conftest imports).
    mkdir -p .whl/small
    grep -qx '/.whl/' .gitignore || die ".whl/ must be ignored (.gitignore)"
    pins=$(python3 -m pip list --format=freeze 2>/dev/null |
        grep -iE '^(grpcio|grpcio-health-checking|grpcio-reflection|protobuf|prometheus[-_]client|cryptography|cffi|pycparser)==' || true)
    [ -n "$pins" ] || die "run it from the project's virtual environment (. .venv/bin/activate)"
    platforms=()
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
        platforms+=(--platform "$p")
    done
    # shellcheck disable=SC2086  # one requirement a word
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d .whl/small $pins
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d .whl/ort "$ORT_GPU"
    wheel=$(ls .whl/ort/*.whl)
    rm -f .whl/ort-gpu.part-*
    split -b "$PART_BYTES" "$wheel" .whl/ort-gpu.part-
    basename "$wheel" >.whl/small/ORT_WHEEL
    ls -l .whl/small .whl/ort-gpu.part-*
    ;;
empty)
    need_clean empty
    git ls-files -z | grep -zvxE '\.gitignore|loadtest/lent_gpu\.sh' | xargs -0 rm -f
    report_size check
    ;;
slim)
    need_clean slim
    rm -rf "${SLIM[@]}"
    report_size check
    ;;
restore)
    git checkout -- .
    git status --short
    report_size
    ;;
size)
    report_size check
    ;;
device-install)  # on the device
    [ -f .whl/small/ORT_WHEEL ] || die "no .whl/small: carry it first"
    ls .whl/ort-gpu.part-* >/dev/null || die "no parts of onnxruntime-gpu: carry them first"
    mkdir -p /tmp/ortw
    cat .whl/ort-gpu.part-* >"/tmp/ortw/$(cat .whl/small/ORT_WHEEL)"
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/small/*.whl /tmp/ortw/*.whl
    PYTHONPATH=/tmp/site:$PWD python3 -c \
        "import onnxruntime as o; print(o.__version__, o.get_available_providers())"
    ;;
device-checks)  # on the device; each part bounded so a stuck one leaves time for the rest
    out=${OUT:-/tmp/out}
    mkdir -p "$out"
    [ -d /tmp/site/onnxruntime ] || bash "$0" device-install
    export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
    nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv >"$out/gpu.txt" || true
    timeout 120 python3 -m pytest -q -p no:cacheprovider tests/service/test_gpu.py \
        tests/service/test_io_binding.py tests/service/test_devicepool.py \
        tests/loadtest/test_stepbench.py >"$out/pytest.log" 2>&1 || echo "pytest: rc $?"
    timeout 60 python3 -m loadtest.hops --device cuda --passes 2 \
        --json "$out/hops-cuda.json" >"$out/hops.log" 2>&1 || echo "hops: rc $?"
    timeout 240 python3 -m loadtest.bench --device cuda --connections client \
        --client-processes 8 --clients 1,64,256 --sentences 1000 --parts torch,service \
        --ab-flags='--engine-process off' --out "$out/bench-gpu" >"$out/bench.log" 2>&1 ||
        echo "bench: rc $?"
    tail -n 3 "$out"/*.log
    ;;
*)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
