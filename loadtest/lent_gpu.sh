#!/usr/bin/env bash
# The GPU checks of docs/performance.md on a lent GPU machine that receives a copy of this
# working tree with each command, capped at 64 MiB (tracked and untracked-not-ignored
# files plus the ignored paths a call carries), keeps ignored files between calls only
# while it stays warm (~30 s idle), and cannot reach PyPI.
#
# Neither the tree (~114 MB) nor onnxruntime-gpu (~255 MB) fits one call, so one payload
# carries both: the tree as committed, less what the checks never read, and the wheels
# the device lacks, in 60 MB parts. With the work committed, from the virtual environment:
#   loadtest/lent_gpu.sh pack     # .whl/payload.part-*, .whl/payload.sha256; prints the calls
#   loadtest/lent_gpu.sh empty    # delete every tracked file but .gitignore and this one
# then device calls back to back, each carrying one part (the first also the .sha256),
# command `true`, and the last part's call with the command
#   bash loadtest/lent_gpu.sh device-checks      (timeout_s 590; results under $OUT)
# and here
#   loadtest/lent_gpu.sh restore  # every tracked file back (git checkout)
# `loadtest/lent_gpu.sh size` prints what would travel now (exit 2 when over the cap).
set -euo pipefail
self=$(realpath "$0")
cd "$(dirname "$self")/.."

ORT_GPU=${ORT_GPU:-onnxruntime-gpu==1.31.1}  # built for CUDA 13, as the device image's torch
PART_BYTES=60000000
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
        die "commit or stash first: '$1' reads HEAD and 'restore' brings back HEAD's files"
}

download() {  # the wheels the device lacks, for its Python 3.12, into $1
    local pins platforms=()
    # an older protobuf than the generated code needs there, and no cryptography (the TLS
    # fixtures that the test modules' conftest imports)
    pins=$(python3 -m pip list --format=freeze 2>/dev/null |
        grep -iE '^(grpcio|grpcio-health-checking|grpcio-reflection|protobuf|prometheus[-_]client|cryptography|cffi)==' || true)
    [ -n "$pins" ] || die "run it from the project's virtual environment (. .venv/bin/activate)"
    for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64; do
        platforms+=(--platform "$p")
    done
    # shellcheck disable=SC2086  # one requirement a word
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp "${platforms[@]}" -d "$1" $pins "$ORT_GPU"
}

case "${1:-}" in
pack)  # LENT_GPU_WHEELS=0: the tree alone (what the tests check)
    need_clean pack
    grep -qx '/.whl/' .gitignore || die ".whl/ must be ignored (.gitignore)"
    rm -rf .whl/build .whl/payload.*
    mkdir -p .whl/build/payload/wheels
    excludes=()
    for path in "${SLIM[@]}"; do excludes+=(":(exclude)$path"); done
    git archive --format=tar.gz --prefix=tree/ -o .whl/build/payload/tree.tar.gz HEAD -- . \
        "${excludes[@]}"
    [ "${LENT_GPU_WHEELS:-1}" = 0 ] || download .whl/build/payload/wheels
    tar -C .whl/build/payload -cf .whl/build/payload.tar .
    sha256sum .whl/build/payload.tar | cut -d' ' -f1 >.whl/payload.sha256
    split -b "$PART_BYTES" .whl/build/payload.tar .whl/payload.part-
    rm -rf .whl/build
    parts=(.whl/payload.part-*)
    echo "payload: ${#parts[@]} parts of at most $((PART_BYTES / 1000000)) MB; device calls, back to back:"
    for i in "${!parts[@]}"; do
        extra=""
        [ "$i" -gt 0 ] || extra='".whl/payload.sha256", '
        command=true
        [ "$i" -lt $((${#parts[@]} - 1)) ] || command="bash loadtest/lent_gpu.sh device-checks"
        echo "  carry: [$extra\"${parts[$i]}\"]  command: $command"
    done
    ;;
empty)
    need_clean empty
    git ls-files -z | grep -zvxE '\.gitignore|loadtest/lent_gpu\.sh' | xargs -0 rm -f
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
device-checks)  # on the device: unpack, install, then each check bounded in time
    out=${OUT:-/tmp/out}
    mkdir -p "$out"
    log=$out/checks.log
    [ -f .whl/payload.sha256 ] || die "no .whl/payload.sha256: carry it with the first part"
    work=/tmp/lent
    rm -rf "$work" && mkdir -p "$work"
    cat .whl/payload.part-* >"$work/payload.tar"
    [ "$(sha256sum "$work/payload.tar" | cut -d' ' -f1)" = "$(cat .whl/payload.sha256)" ] ||
        die "the parts do not make the payload packed here: one missing or stale? (ls .whl)"
    tar -C "$work" -xf "$work/payload.tar" && tar -C "$work" -xzf "$work/tree.tar.gz"
    if ls "$work"/wheels/*.whl >/dev/null 2>&1; then
        python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site "$work"/wheels/*.whl >>"$log" 2>&1 || die "pip install failed: $log"
    fi
    export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1
    cd "$work/tree"
    failed=()
    check() {  # NAME SECONDS COMMAND...: its output into the log, its failure remembered
        local name=$1 seconds=$2
        shift 2
        echo "== $name: $*" >>"$log"
        timeout "$seconds" "$@" >>"$log" 2>&1 || { echo "== $name: rc $?" >>"$log"; failed+=("$name"); }
    }
    check gpu 10 nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv
    check ort 60 python3 -c "
import onnxruntime as o, google.protobuf as p, grpc
o.preload_dlls()
s = o.InferenceSession('model_repository/en-es/7/decoder.onnx', providers=['CUDAExecutionProvider'])
print(o.__version__, s.get_providers(), 'protobuf', p.__version__, 'grpc', grpc.__version__)
assert s.get_providers()[0] == 'CUDAExecutionProvider'"
    check pytest 120 python3 -m pytest -q -p no:cacheprovider tests/service/test_gpu.py \
        tests/service/test_io_binding.py tests/service/test_devicepool.py \
        tests/loadtest/test_stepbench.py
    check stepbench 60 python3 -m loadtest.stepbench --device cuda --rows 1,8,64,256 \
        --json "$out/stepbench-cuda.json"
    check hops 100 python3 -m loadtest.hops --device cuda --passes 2 --json "$out/hops-cuda.json"
    check bench 200 python3 -m loadtest.bench --device cuda --connections client \
        --client-processes 8 --clients 1,64,256 --sentences 1000 --parts torch,service \
        --max-inflight 512 --max-queue 512 --ab-flags='--greedy-steps 4' --out "$out/bench-gpu"
    grep '^== ' "$log"
    [ ${#failed[@]} -eq 0 ] || { echo "failed: ${failed[*]}"; exit 1; }
    ;;
*)
    sed -n '2,17p' "$self" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
