#!/usr/bin/env bash
# Training throughput on a GPU against the CPU backend of the same machine, side by side: one
# rank, a Kaggle-shaped model (26 tables of 100k rows, dim 16, bottom MLP 512-256-64-16, top MLP
# 512-256-1, dot interaction, SGD) on a 2M-row synthetic dataset, batch 2048 and 16384, about
# 3 epochs per run; the CUDA run twice around the CPU run. Prints each run's samples/s (the
# trainer's own "done after" line: the whole run, start-up included) and cuda / cpu. Then
# bench_precision on the GPU (fp32, 16-bit tables, bf16 GEMMs, both) when it is built.
#   bench/device/bench_gpu_train.sh <recmix binary> [work dir] [cpu threads]
# Needs a build with the CUDA backend and a visible GPU; exits 77 (skipped) without one.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
recmix=$(realpath "$1")
work=${2:-/tmp/recmix-bench-gpu}
threads=${3:-$(nproc)}
mkdir -p "$work"
cd "$work"
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader ||
  { echo "no GPU: skipped"; exit 77; }
echo "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $threads threads"
[[ -f d.h5 ]] || "$recmix" data synth -o d.h5 --rows 2M --tables 26 --table-rows 100000 | tail -1

rate() { sed -n 's/^done after .*: \([0-9]*\) samples\/s.*/\1/p' "$1"; }
for batch in 2048 16384; do
  steps=$((6000000 / batch))
  kaggle_job "k$batch" d.h5 "$batch" "$steps" 5.0 > "k$batch.toml"
  for run in cuda cpu cuda2; do
    device=${run%2}
    rm -rf "r-$batch-$run"
    "$recmix" train "k$batch.toml" --device "$device" --threads "$threads" --run-dir "r-$batch-$run" > "$run-$batch.out" 2>&1 ||
      { tail -5 "$run-$batch.out"; exit 1; }
    echo "batch $batch $run: $(rate "$run-$batch.out") samples/s ($(grep -o 'loss [0-9.]*' "$run-$batch.out" | tail -1))"
  done
  awk -v a="$(rate cuda-$batch.out)" -v b="$(rate cuda2-$batch.out)" -v c="$(rate cpu-$batch.out)" -v n="$batch" \
    'BEGIN { printf "batch %s: cuda / cpu %.1f and %.1f\n", n, a / c, b / c }'
done

# Mixed precision on the GPU ([precision], docs/math.md): the step in fp32, with 16-bit tables,
# with bf16 GEMMs (cublasGemmEx) and both, side by side, with the pool peaks.
bench_precision=$(dirname "$recmix")/bench/train/bench_precision
if [[ -x "$bench_precision" ]]; then
  "$bench_precision" --device cuda --batch 2048 --batch 16384 --reps 5 --min-seconds 0.5
fi
