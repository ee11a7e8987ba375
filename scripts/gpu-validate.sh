#!/usr/bin/env bash
# The GPU check, in one go, on a fresh single-GPU box whose Python already has torch (no network,
# no fio, no DALI, no pip or setuptools needed): benchbench runs from this source tree (on
# PYTHONPATH, nothing is installed), so the script prints the versions and where benchbench comes
# from, installs the box kit where it came along (box-kit/, built by scripts/box_kit.py and
# carried with the tree: LoadGen and torchao beside the box's torch, never over it, and a
# static fio), runs the GPU tests, a quick run of every probe (the transformer at gpt2-124m),
# the doctor and the bare-loop check, then the ground truth (a minute of ResNet50 trained on the
# run's data through the real loader) and the headline figures beside their references, the
# verdict held against the ground truth among them. Every step's time limit comes from
# scripts/gpu_plan.py (the simulator's estimate of the run, stated estimates of the rest), and
# they add up to at most 7 minutes on one GPU; the ground truth runs in what they leave, where
# that is enough. A step that fails or times out is reported and the next one runs. Where the
# plan cannot run, the built-in limits below are used and the log says so: the script never
# stops before measuring. The ground truth's minute of real training is also what the loader
# alone against the loader inside the pipeline (scripts/loader_vs_pipeline.py, run by hand)
# asked, so the script ends after it and the pack, leaving the rest of the lent time unused.
#
#   scripts/gpu-validate.sh            # on the GPU box; results under $OUT (else runs/gpu-validate)
#   scripts/gpu-validate.sh --plan     # each step, its limit and estimate, and "total N s"
#   scripts/gpu-validate.sh --dry-run  # the same steps on the CPU with tiny sizes (a test
#                                      # rehearses it in a box-like environment, offline)
#
# Python: $PYTHON if set, else the first of python, python3 that has torch. The kit: $BOX_KIT
# if set, else box-kit/ in the tree.
# What comes back is at most 8 plain files, none in a folder: the log, the headline table, the
# plan, each step's exit and seconds (steps.tsv), the ground truth's JSON and the run folder
# packed as run.tar.gz.
# It never changes a GPU setting: nvidia-smi is only asked to list the GPUs.
set -u

cd "$(dirname "$0")/.."
ROOT=$(pwd -P)
# benchbench from the source tree, for this shell and every child (scripts run by path, the
# run's workers): a box may have no setuptools, or a system Python that refuses pip (PEP 668).
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
has_torch() {
    "$1" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' \
        >/dev/null 2>&1
}
if [ -n "${PYTHON:-}" ]; then
    PY=$PYTHON
else
    PY=python3  # a box may have no `python`
    for candidate in python python3; do
        if command -v "$candidate" >/dev/null 2>&1 && has_torch "$candidate"; then
            PY=$candidate
            break
        fi
    done
fi
DRY=0
case "${1:-}" in
    --plan) exec "$PY" scripts/gpu_plan.py ;;
    --dry-run) DRY=1 ;;
esac
# The first three steps' limits: they run before the plan can say them (gpu_plan.py's
# first_steps; a test keeps them equal).
VERSIONS_LIMIT=7
KIT_LIMIT=9
PLAN_LIMIT=60
# The files that hold the @pytest.mark.gpu tests, named so that a test-only package missing on
# the box (hypothesis, junitparser) cannot stop the collection (a test keeps the list whole).
GPU_TEST_FILES=(tests/probes/test_probes.py tests/probes/test_dataloader.py)

builtin_plan() {  # the plan's limits, for when it cannot run (a test keeps them equal)
    if [ "$DRY" = 1 ]; then
        cat <<'PLAN'
LIMIT_SMI=4
LIMIT_DF=4
LIMIT_GPU_TESTS=80
LIMIT_RUN=118
LIMIT_DOCTOR=30
LIMIT_BARE=80
LIMIT_PACK=18
LIMIT_GROUND_TRUTH=55
GROUND_TRUTH_MIN=37
RUN_ARGS=(--quick --set transformer.preset=gpt2-124m --set matmul.sizes=64 --set memory_bandwidth.host_size_bytes=64M --set stability.duration_s=1 --set resnet50.batch_size=2 --set resnet50.image_size=32 --set transformer.n_layers=1 --set transformer.vocab_size=1024 --set transformer.seq_len=32 --set transformer.batch_size=1 --set dataloader.batch_size=8 --set dataloader.image_size=32 --set storage.size=16M --set storage.max_runtime=0.5 --set pipeline.batch_size=2 --set pipeline.image_size=32 --set allreduce.sizes=1024,65536)
PLAN
    else
        # The run gets what the other steps leave of the 420 s.
        cat <<'PLAN'
LIMIT_SMI=4
LIMIT_DF=3
LIMIT_GPU_TESTS=37
LIMIT_RUN=226
LIMIT_DOCTOR=9
LIMIT_BARE=55
LIMIT_PACK=10
LIMIT_GROUND_TRUTH=105
GROUND_TRUTH_MIN=55
RUN_ARGS=(--quick --set transformer.preset=gpt2-124m)
PLAN
    fi
}

OUT_ROOT="${OUT:-runs/gpu-validate}"
LOG="$OUT_ROOT/gpu-validate.log"
STEPS="$OUT_ROOT/steps.tsv"
PLAN_FILE="$OUT_ROOT/plan.txt"
mkdir -p "$OUT_ROOT"
: > "$LOG"
printf 'step\texit\tseconds\tlimit\n' > "$STEPS"
# The run folder lives outside $OUT and comes back packed: one file, not a tree.
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
RUN_DIR="$WORK/run"
failed=()

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

echo "python: $(command -v "$PY" || echo "$PY"); PYTHONPATH=$PYTHONPATH" | tee -a "$LOG"
step "versions" "$VERSIONS_LIMIT" "$PY" -c '
import importlib.metadata as md, os, platform, sys
print("python", platform.python_version(), sys.executable, "| torch", md.version("torch"),
      "| torchvision", md.version("torchvision"))
import benchbench
where = os.path.dirname(os.path.dirname(os.path.abspath(benchbench.__file__)))
print("benchbench", benchbench.__version__, "from", where)
if not os.path.samefile(where, sys.argv[1]):
    sys.exit(f"benchbench comes from {where}, not from the source tree {sys.argv[1]}")
' "$ROOT"

# The box kit, where it came with the tree: its wheels into a folder of their own on
# PYTHONPATH (after the source tree, so benchbench stays the tree's), its fio on PATH.
KIT="${BOX_KIT:-$ROOT/box-kit}"
KIT_SITE="$WORK/kit-site"
if [ -f "$KIT/MANIFEST.json" ]; then
    step "box kit" "$KIT_LIMIT" "$PY" scripts/box_kit_install.py "$KIT" "$KIT_SITE"
    export PYTHONPATH="$PYTHONPATH:$KIT_SITE"
    if [ -x "$KIT/bin/fio" ] && "$KIT/bin/fio" --version >/dev/null 2>&1; then
        export PATH="$KIT/bin:$PATH"
    fi
else
    echo "box kit: none at $KIT, so LoadGen, torchao and fio are what the box has (build one" \
        "with scripts/box_kit.py and carry box-kit); DALI cannot travel: it installs about" \
        "476 MB, over the 64 MiB that comes with the check" | tee -a "$LOG"
fi
# The box has no network to install LoadGen: without the kit's, the server part falls back.
"$PY" -c 'import importlib.util
print("mlperf_loadgen:", "installed, LoadGen drives the inference Offline and Server parts"
      if importlib.util.find_spec("mlperf_loadgen") else "not installed, so the inference "
      "server part is the simulated server (LoadGen not installed), not the MLPerf LoadGen")' \
    2>&1 | tee -a "$LOG"

plan_args=(--shell)
[ "$DRY" = 1 ] && plan_args+=(--dry-run)
step "plan" "$PLAN_LIMIT" bash -c 'out=$1; shift; "$@" > "$out"' _ "$PLAN_FILE" \
    "$PY" scripts/gpu_plan.py "${plan_args[@]}"
if grep -q '^LIMIT_RUN=' "$PLAN_FILE" && grep -q '^RUN_ARGS=' "$PLAN_FILE"; then
    sed -n 's/^# //p' "$PLAN_FILE" | tee -a "$LOG"
else
    echo "gpu-validate: the plan could not run (see its step above); the built-in limits are" \
        "used" | tee -a "$LOG"
    { echo "# built-in limits: the plan could not run"; builtin_plan; } > "$PLAN_FILE"
fi
. "$PLAN_FILE"

if [ "$DRY" = 1 ]; then
    DEVICE=cpu
    BARE_ARGS=(--device cpu --trials 1 --steps 2 --precision fp32)
else
    DEVICE=cuda
    BARE_ARGS=(--device cuda --trials 2 --steps 10 --transformer-steps 100 --precision amp_bf16)
fi

if [ "$DRY" = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
    step "nvidia-smi -L" "$LIMIT_SMI" nvidia-smi -L
else
    echo "nvidia-smi -L skipped, because nvidia-smi is not installed here" | tee -a "$LOG"
fi
step "df -h /dev/shm" "$LIMIT_DF" df -h /dev/shm
step "GPU tests" "$LIMIT_GPU_TESTS" "$PY" -m pytest -q -m gpu -p no:cacheprovider \
    "${GPU_TEST_FILES[@]}"

step "benchbench run --device $DEVICE" "$LIMIT_RUN" \
    "$PY" -m benchbench run --device "$DEVICE" --out "$RUN_DIR" --label gpu-validate \
    "${RUN_ARGS[@]}"
step "benchbench doctor" "$LIMIT_DOCTOR" "$PY" -m benchbench doctor "$RUN_DIR"
step "bare loops" "$LIMIT_BARE" "$PY" scripts/bare_loops.py "${BARE_ARGS[@]}"

# The ground truth, in what the planned steps leave of the seven minutes less the pack's
# limit (the pack comes after it): a minute of ResNet50 trained on the run's data through the
# real loader, which the headline holds the verdict against.
TRUTH="$OUT_ROOT/ground-truth.json"
SEVEN_MIN=420
left=$((SEVEN_MIN - SECONDS - LIMIT_PACK))
truth_limit=$((left < LIMIT_GROUND_TRUTH ? left : LIMIT_GROUND_TRUTH))
if [ ! -f "$RUN_DIR/results.json" ]; then
    echo "ground truth skipped, because the run wrote no results.json" | tee -a "$LOG"
elif [ "$truth_limit" -ge "$GROUND_TRUTH_MIN" ]; then
    if [ "$DRY" = 1 ]; then
        TRUTH_ARGS=(--device cpu --precision fp32 --batch 2 --image-size 32 --seconds 2
                    --window 0.5 --min-seconds 1 --warmup-s 0)
    else
        TRUTH_ARGS=(--device cuda)
    fi
    step "ground truth" "$truth_limit" "$PY" scripts/ground_truth.py "$RUN_DIR" \
        "${TRUTH_ARGS[@]}" --budget $((truth_limit - 5)) --out "$TRUTH"
else
    echo "ground truth skipped, because $left s of the $SEVEN_MIN s are left before the pack," \
        "under the $GROUND_TRUTH_MIN s it needs" | tee -a "$LOG"
fi

if [ -f "$RUN_DIR/results.json" ]; then
    # The headline reads steps.tsv as it stands: every step but its own. The run folder is
    # packed whether or not the headline succeeds: it is what the one try measured.
    step "headline and pack" "$LIMIT_PACK" bash -c 'set -o pipefail
"$1" scripts/gpu_headline.py "$2/run/results.json" --steps "$3" --ground-truth "$6" | tee "$4"
rc=$?
tar -czf "$5" -C "$2" run && echo "run folder packed: $5" || rc=1
exit $rc' _ "$PY" "$WORK" "$STEPS" "$OUT_ROOT/headline.md" "$OUT_ROOT/run.tar.gz" "$TRUTH"
else
    echo "no results.json: the run wrote nothing" | tee -a "$LOG"
    failed+=("no results.json")
    [ -d "$RUN_DIR" ] && tar -czf "$OUT_ROOT/run.tar.gz" -C "$WORK" run
fi

if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu-validate: ${#failed[@]} step(s) failed: ${failed[*]}" | tee -a "$LOG"
    exit 1
fi
echo "gpu-validate: every step passed in $SECONDS s; results in $OUT_ROOT" | tee -a "$LOG"
