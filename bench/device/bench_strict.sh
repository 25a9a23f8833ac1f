#!/usr/bin/env bash
# The strict device emulator's cost: the same training job on the CPU backend and under
# cpu-strict (device.kind), side by side, at 1 and 2 ranks, on a Kaggle-shaped model (26 tables
# of 100k rows, dim 16, batch 128 and 2048). Prints training samples/s of each and the ratio
# cpu-strict / cpu. cpu-strict is a test backend: it takes the CUDA code paths (no fused CPU
# kernels, no dense replicas, the staged embedding exchange) and pays two mprotect calls per
# kernel, GEMM and copy.
#   bench/device/bench_strict.sh <recmix binary> [work dir] [steps]
set -euo pipefail
recmix=$(realpath "$1")
work=${2:-/tmp/recmix-bench-strict}
steps=${3:-300}
src=$(cd "$(dirname "$0")/../.." && pwd)
mkdir -p "$work"
cd "$work"
[[ -f kaggle.h5 ]] || "$recmix" data synth -o kaggle.h5 --rows 400k --tables 26 --table-rows 100000 --seed 1 >/dev/null

spec() {  # spec <name> <batch>
  cat > "$1.toml" <<TOML
name = "$1"
[model]
embedding_dim = 16
bottom_mlp = [512, 256, 16]
top_mlp = [512, 256, 1]
[data]
train = "kaggle.h5"
[train]
batch_size = $2
steps = $steps
log_interval_s = 1000
TOML
}

rate() {  # rate <ranks> <kind> <spec>: training samples/s from the final line
  local out dir="run-$2-$1-${3%.toml}"
  rm -rf "$dir"  # the last invocation's (recmix train refuses a run directory in use)
  if [[ $1 == 1 ]]; then
    out=$("$recmix" train "$3" --device "$2" --run-dir "$dir" 2>&1)
  else
    out=$("$src/launch/recmix-mpirun" -np "$1" "$recmix" train "$3" --device "$2" --run-dir "$dir" 2>&1)
  fi
  sed -n 's/.*done after .* steps in .*: \([0-9.]*\) samples\/s.*/\1/p' <<< "$out" | tail -1
}

printf '%-6s %-6s %14s %14s %8s\n' batch ranks cpu cpu-strict ratio
for batch in 128 2048; do
  spec "strict-$batch" "$batch"
  for ranks in 1 2; do
    cpu=$(rate "$ranks" cpu "strict-$batch.toml")
    strict=$(rate "$ranks" cpu-strict "strict-$batch.toml")
    printf '%-6s %-6s %14s %14s %8.2f\n' "$batch" "$ranks" "$cpu" "$strict" "$(awk -v s="$strict" -v c="$cpu" 'BEGIN { print s / c }')"
  done
done
