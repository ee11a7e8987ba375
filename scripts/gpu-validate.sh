#!/usr/bin/env bash
# The GPU check, in one go, on a fresh single-GPU box whose Python already has torch (no network,
# no fio, no DALI needed): install benchbench without touching torch, print the machine, run the
# GPU tests, a quick run of every probe (the transformer at gpt2-124m), the doctor and the
# bare-loop check, then the headline figures beside their references. Every step's time limit
# comes from scripts/gpu_plan.py (the simulator's estimate of the run, stated estimates of the
# rest), and they add up to at most 7 minutes on one H200; a step that fails or times out is
# reported and the next one runs.
#
#   scripts/gpu-validate.sh            # on the GPU box; results under $OUT (else runs/gpu-validate)
#   scripts/gpu-validate.sh --plan     # each step, its limit and estimate, and "total N s"
#   scripts/gpu-validate.sh --dry-run  # the same steps on the CPU with tiny sizes (a test)
#
# What comes back is at most 8 plain files, none in a folder: the log, the headline table, the
# plan, each step's exit and seconds (steps.tsv) and the run folder packed as run.tar.gz.
# It never changes a GPU setting: nvidia-smi is only asked to list the GPUs.
set -u

cd "$(dirname "$0")/.."
PY="${PYTHON:-python}"
DRY=0
case "${1:-}" in
    --plan) exec "$PY" scripts/gpu_plan.py ;;
    --dry-run) DRY=1 ;;
esac
OUT_ROOT="${OUT:-runs/gpu-validate}"
LOG="$OUT_ROOT/gpu-validate.log"
STEPS="$OUT_ROOT/steps.tsv"
mkdir -p "$OUT_ROOT"
: > "$LOG"
printf 'step\texit\tseconds\tlimit\n' > "$STEPS"
# The run folder lives outside $OUT and comes back packed: one file, not a tree.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN_DIR="$WORK/run"
failed=()

plan_args=(--shell)
[ "$DRY" = 1 ] && plan_args+=(--dry-run)
# 15 s: the plan's own LIMIT_PLAN, which it cannot hand over before it has run.
timeout 15 "$PY" scripts/gpu_plan.py "${plan_args[@]}" > "$OUT_ROOT/plan.txt" \
    || echo "warning: the plan's limits exceed the lent time (see plan.txt)" | tee -a "$LOG"
grep -q '^LIMIT_RUN=' "$OUT_ROOT/plan.txt" || { echo "gpu-validate: no plan" >&2; exit 2; }
. "$OUT_ROOT/plan.txt"
sed -n 's/^# //p' "$OUT_ROOT/plan.txt" | tee -a "$LOG"

step() {  # step NAME SECONDS COMMAND...: run with a timeout, log everything, go on
    local name="$1" limit="$2"
    shift 2
    echo "=== $name (timeout ${limit}s) ===" | tee -a "$LOG"
    local t0=$SECONDS
    timeout --kill-after=10 "$limit" "$@" 2>&1 | tee -a "$LOG"
    local rc=${PIPESTATUS[0]}
    local took=$((SECONDS - t0))
    echo "--- $name: exit $rc after $took s" | tee -a "$LOG"
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$took" "$limit" >> "$STEPS"
    if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
        failed+=("$name (timed out at ${limit} s)")
    elif [ "$rc" -ne 0 ]; then
        failed+=("$name (exit $rc)")
    fi
    return 0
}

torch_version() { "$PY" -c 'import torch; print(torch.__version__)'; }

if [ "$DRY" = 1 ]; then
    DEVICE=cpu
    PYTEST_TARGET=(tests/probes/test_probes.py)
    BARE_ARGS=(--device cpu --trials 1 --steps 2 --precision fp32)
else
    DEVICE=cuda
    PYTEST_TARGET=()
    BARE_ARGS=(--device cuda --trials 2 --steps 10 --precision amp_bf16)
fi

before=$(torch_version)
echo "torch before install: $before" | tee -a "$LOG"
if [ "$DRY" = 1 ]; then
    echo "pip install skipped (dry run): benchbench is already importable" | tee -a "$LOG"
else
    step "install benchbench (no dependencies)" "$LIMIT_INSTALL" \
        "$PY" -m pip install --no-deps --no-build-isolation -q -e .
fi
after=$(torch_version)
echo "torch after install:  $after" | tee -a "$LOG"
[ "$before" = "$after" ] || failed+=("torch changed from $before to $after")

step "versions" "$LIMIT_VERSIONS" "$PY" -c 'import platform, torch, torchvision, benchbench
print("python", platform.python_version(), "| torch", torch.__version__, "CUDA", torch.version.cuda,
      "| torchvision", torchvision.__version__, "| benchbench", benchbench.__version__)'
if [ "$DRY" = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    step "nvidia-smi -L" "$LIMIT_SMI" nvidia-smi -L
else
    echo "nvidia-smi -L skipped, because nvidia-smi is not installed here" | tee -a "$LOG"
fi
step "df -h /dev/shm" "$LIMIT_DF" df -h /dev/shm
step "GPU tests" "$LIMIT_GPU_TESTS" "$PY" -m pytest -q -m gpu -p no:cacheprovider \
    "${PYTEST_TARGET[@]}"

step "benchbench run --device $DEVICE" "$LIMIT_RUN" \
    "$PY" -m benchbench run --device "$DEVICE" --out "$RUN_DIR" --label gpu-validate \
    "${RUN_ARGS[@]}"
step "benchbench doctor" "$LIMIT_DOCTOR" "$PY" -m benchbench doctor "$RUN_DIR"
step "bare loops" "$LIMIT_BARE" "$PY" scripts/bare_loops.py "${BARE_ARGS[@]}"

echo "=== headline figures ===" | tee -a "$LOG"
if [ -f "$RUN_DIR/results.json" ]; then
    timeout "$LIMIT_PACK" "$PY" scripts/gpu_headline.py "$RUN_DIR" --steps "$STEPS" \
        | tee "$OUT_ROOT/headline.md" | tee -a "$LOG"
    tar -czf "$OUT_ROOT/run.tar.gz" -C "$WORK" run
    echo "run folder packed: $OUT_ROOT/run.tar.gz" | tee -a "$LOG"
else
    echo "no results.json: the run wrote nothing" | tee -a "$LOG"
    failed+=("no results.json")
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu-validate: ${#failed[@]} step(s) failed: ${failed[*]}" | tee -a "$LOG"
    exit 1
fi
echo "gpu-validate: every step passed in $SECONDS s; results in $OUT_ROOT" | tee -a "$LOG"
