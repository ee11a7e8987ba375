#!/usr/bin/env bash
# The GPU check, in one go, on a fresh single-GPU box whose Python already has torch (no network,
# no fio, no DALI needed): install benchbench without touching torch, print the machine, run the
# GPU tests, a whole default run, the doctor and the bare-loop check, then the headline figures
# beside their references. Within 7 minutes on one H200; every step has its own timeout, and a
# step that fails or times out is reported and the next one runs.
#
#   scripts/gpu-validate.sh            # on the GPU box; results under $OUT (else runs/)
#   scripts/gpu-validate.sh --dry-run  # the same steps on the CPU with tiny sizes (a test)
#
# It never changes a GPU setting: nvidia-smi is only asked to list the GPUs.
set -u

cd "$(dirname "$0")/.."
DRY=0
[ "${1:-}" = "--dry-run" ] && DRY=1
OUT_ROOT="${OUT:-runs}"
RUN_DIR="$OUT_ROOT/gpu-validate-run"
LOG="$OUT_ROOT/gpu-validate.log"
mkdir -p "$OUT_ROOT"
: > "$LOG"
PY="${PYTHON:-python}"
failed=()

step() {  # step NAME SECONDS COMMAND...: run with a timeout, log everything, go on
    local name="$1" limit="$2"
    shift 2
    echo "=== $name (timeout ${limit}s) ===" | tee -a "$LOG"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    echo "--- $name: exit $rc after $((SECONDS - t0)) s" | tee -a "$LOG"
    [ "$rc" -eq 0 ] || failed+=("$name (exit $rc)")
    return 0
}

torch_version() { "$PY" -c 'import torch; print(torch.__version__)'; }

if [ "$DRY" = 1 ]; then
    DEVICE=cpu
    RUN_ARGS=(--quick --only matmul,memory_bandwidth,resnet50 --time-budget 4
              --set matmul.sizes=64 --set resnet50.batch_size=2 --set resnet50.image_size=32
              --set resnet50.precisions=fp32 --set memory_bandwidth.host_size_bytes=64M)
    PYTEST_TARGET=(tests/probes/test_probes.py)
    BARE_ARGS=(--device cpu --trials 1 --steps 2 --precision fp32)
    RUN_LIMIT=120
else
    DEVICE=cuda
    RUN_ARGS=()
    PYTEST_TARGET=()
    BARE_ARGS=(--device cuda --trials 2 --steps 10 --precision amp_bf16)
    RUN_LIMIT=330
fi

before=$(torch_version)
echo "torch before install: $before" | tee -a "$LOG"
if [ "$DRY" = 1 ]; then
    echo "pip install skipped (dry run): benchbench is already importable" | tee -a "$LOG"
else
    step "install benchbench (no dependencies)" 120 \
        "$PY" -m pip install --no-deps --no-build-isolation -q -e .
fi
after=$(torch_version)
echo "torch after install:  $after" | tee -a "$LOG"
[ "$before" = "$after" ] || failed+=("torch changed from $before to $after")

step "versions" 60 "$PY" -c 'import platform, torch, torchvision, benchbench
print("python", platform.python_version(), "| torch", torch.__version__, "CUDA", torch.version.cuda,
      "| torchvision", torchvision.__version__, "| benchbench", benchbench.__version__)'
if command -v nvidia-smi >/dev/null 2>&1; then
    step "nvidia-smi -L" 30 nvidia-smi -L
else
    echo "nvidia-smi -L skipped, because nvidia-smi is not installed here" | tee -a "$LOG"
fi
step "df -h /dev/shm" 10 df -h /dev/shm
step "GPU tests" 150 "$PY" -m pytest -q -m gpu -p no:cacheprovider "${PYTEST_TARGET[@]}"

rm -rf "$RUN_DIR"
t0=$SECONDS
step "benchbench run --device $DEVICE" "$RUN_LIMIT" \
    "$PY" -m benchbench run --device "$DEVICE" --out "$RUN_DIR" --label gpu-validate \
    "${RUN_ARGS[@]}"
wall=$((SECONDS - t0))
step "benchbench doctor" 60 "$PY" -m benchbench doctor "$RUN_DIR"
step "bare loops" 120 "$PY" scripts/bare_loops.py "${BARE_ARGS[@]}"

echo "=== headline figures ===" | tee -a "$LOG"
if [ -f "$RUN_DIR/results.json" ]; then
    "$PY" scripts/gpu_headline.py "$RUN_DIR" --wall-s "$wall" | tee "$OUT_ROOT/headline.md" \
        | tee -a "$LOG"
else
    echo "no results.json: the run wrote nothing" | tee -a "$LOG"
    failed+=("no results.json")
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu-validate: ${#failed[@]} step(s) failed: ${failed[*]}" | tee -a "$LOG"
    exit 1
fi
echo "gpu-validate: every step passed; results in $OUT_ROOT" | tee -a "$LOG"
