#!/usr/bin/env bash
# The GPU step of this build against a baseline build's, side by side in one call, and the GPU's
# idle share of the step. Kaggle shape, one rank (bench_precision's model).
#   bench/device/step_vs_baseline.sh <bundle.tar.xz> <baseline bench_precision>
# The baseline is bench_precision built from an earlier commit on the build machine (same Debian
# libraries as the bundle, so the bundle's env.sh serves both). Writes under $OUT:
#   ab.txt    the baseline's fp32 eager step and this build's fp32/tf32 steps, eager and with
#             graphs, batch 2048 and 16384, alternated twice (medians of 3 repetitions each);
#   idle.txt  the kernels' time a step against the step's time at batch 2048, fp32 with graphs:
#             nsys where this machine has it, else the sum of ncu's per-kernel durations (caches
#             and clocks as in the run, not flushed or locked) over 7 steps. ncu serialises
#             kernels, so overlapping kernels count twice and the idle share it gives is a floor.
set -uo pipefail
source "$(dirname "$0")/../lib.sh"
bundle=$(realpath "$1")
baseline=$(realpath "$2")
OUT=${OUT:-/tmp/recmix-step-vs-baseline}
work=${RECMIX_SUITE_WORK:-/tmp/recmix-gpu-work}
mkdir -p "$OUT" "$work"
rm -rf "$work/gpu-bundle"
tar -C "$work" -xJf "$bundle"
# shellcheck disable=SC1091
source "$work/gpu-bundle/env.sh"
bin=$work/gpu-bundle/bin
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader | tee "$OUT/machine.txt" ||
  { echo "no GPU: skipped"; exit 77; }
common=(--device cuda --batch 2048 --batch 16384 --reps 3 --min-seconds 0.3)
{
  for round in $(seq "${RECMIX_AB_ROUNDS:-2}"); do
    echo "--- round $round: baseline (fp32 eager, and bf16 GEMMs eager)"
    timeout 60 "$baseline" "${common[@]}" --only "bf16 GEMMs" 2>&1 | grep -E '^\| (fp32|bf16)|batch|rank'
    echo "--- round $round: this build (fp32 and tf32, eager and with graphs)"
    timeout 90 "$bin/bench_precision" "${common[@]}" --graphs-ab 2>&1 | grep -E '^\| (fp32|tf32)|batch|rank'
  done
} > "$OUT/ab.txt" 2>&1

cd "$work"
[[ -f i.h5 ]] || "$bin/recmix" data synth -o i.h5 --rows 400000 --tables 26 --table-rows 100000 | tail -1
kaggle_job idle i.h5 2048 600 5.0 > i.toml
rm -rf idle-run1 idle-run2 idle-nsys idle-ncu  # the last invocation's (recmix train refuses a run directory in use)
{
  echo "the step alone (recmix train, fp32, graphs auto = on):"
  for r in 1 2; do
    "$bin/recmix" train i.toml --device cuda --run-dir "idle-run$r" 2>&1 | grep 'done after'
  done
  nsys=$(command -v nsys || find /usr/local /opt -name nsys -type f -perm -u+x 2>/dev/null | head -1)
  if [[ -n $nsys ]]; then
    echo "nsys ($nsys), 300 steps: the kernels' summary (every kernel of the run, start-up included)"
    timeout 90 "$nsys" profile -o "$work/p" --force-overwrite true --stats=true \
      "$bin/recmix" train i.toml --device cuda --steps 300 --run-dir idle-nsys > "$OUT/nsys.txt" 2>&1
    grep 'done after' "$OUT/nsys.txt"
    grep -A 12 'cuda_gpu_kern_sum' "$OUT/nsys.txt" | head -14
  fi
  if command -v ncu >/dev/null; then
    echo "ncu over launches 1000-1499 (caches and clocks left as they run)"
    timeout 120 ncu --clock-control none --cache-control none --metrics gpu__time_duration.sum \
      --print-summary per-kernel --launch-skip 1000 --launch-count 500 \
      "$bin/recmix" train i.toml --device cuda --steps 60 --run-dir idle-ncu > ncu.txt 2>&1
    # Steps: the invocations of the one-hot CSR build, one launch a step.
    awk '/Invocations/ { match($0, /Invocations [0-9]+/); n = substr($0, RSTART + 12, RLENGTH - 12) + 0
                         if ($0 ~ /OneHotCsr/) steps = n; next }
         /gpu__time_duration.sum/ && n { total += n * $NF; launches += n; n = 0 }
         END { if (steps) printf "%d launches, %.1f us of kernels: %.1f us a step over %d steps\n",
                             launches, total, total / steps, steps }' ncu.txt
  fi
} > "$OUT/idle.txt" 2>&1
cat "$OUT/machine.txt" "$OUT/ab.txt" "$OUT/idle.txt"
