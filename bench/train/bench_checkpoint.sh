#!/usr/bin/env bash
# Checkpoint cost on training speed: one rank, one thread, batch 512, 8 tables x 2M rows of dim 16
# (a 1 GiB checkpoint), the Kaggle MLPs; samples/s without mid-run checkpoints, with a synchronous
# checkpoint every N steps and with asynchronous ones (checkpoint.async), the three run in turn
# R times. Also each run's wall time (including the final checkpoint, whose write every run has)
# and peak RSS (the asynchronous writer's host snapshot shows there).
#   bench/train/bench_checkpoint.sh [build dir] [N=500] [steps=1500] [R=2]
# RUNS="none async" leaves the synchronous run out (more repeats of the pair in the same time).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$src/build}
interval=${2:-500}
steps=${3:-1500}
repeats=${4:-2}
recmix="$build/recmix"
[[ -x "$recmix" ]] || { echo "bench_checkpoint.sh: $recmix not found (build the recmix target)" >&2; exit 1; }
work=$(mktemp -d "${TMPDIR:-/tmp}/recmix-bench-ckpt-XXXXXX")
trap 'rm -rf "$work"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
echo "command: ${RUNS:+RUNS=\"$RUNS\" }$0 $build $interval $steps $repeats"
"$recmix" data synth -o "$work/data.h5" --rows $((steps * 512 + 512)) --tables 8 --table-rows 2000000 \
  --dense 13 --seed 3 > /dev/null
job() {  # name interval async
  cat > "$work/$1.toml" <<TOML
name = "$1"
run_dir = "$work/$1"
seed = 1
[model]
embedding_dim = 16
bottom_mlp = [512, 256, 64, 16]
top_mlp = [512, 256, 1]
[optimizer]
lr = 0.05
[data]
train = "$work/data.h5"
[train]
batch_size = 512
steps = $steps
log_interval_s = 1000
[device]
threads = 1
[checkpoint]
interval = $2
keep = 1
async = $3
TOML
}
job none 0 false
job sync "$interval" false
job async "$interval" true
printf '%-6s %6s %12s %10s %12s\n' run repeat samples/s wall_s peak_rss_MiB
for r in $(seq 1 "$repeats"); do
  for name in ${RUNS:-none sync async}; do
    rm -rf "${work:?}/$name"
    start=$(date +%s%N)
    /usr/bin/time -f '%M' -o "$work/rss" "$recmix" train "$work/$name.toml" > "$work/$name.log" 2>&1 \
      || { cat "$work/$name.log"; exit 1; }
    wall_ms=$(( ($(date +%s%N) - start) / 1000000 ))
    sps=$(sed -n 's/.*: \([0-9]*\) samples\/s, peak.*/\1/p' "$work/$name.log")
    printf '%-6s %6d %12s %10s %12d\n' "$name" "$r" "$sps" "$((wall_ms / 1000)).$(( wall_ms % 1000 / 100 ))" $(( $(cat "$work/rss") / 1024 ))
  done
  grep -h "copied to host\|written in the background\|training waited" "$work/async.log" | sed 's/^/  async: /' | cut -c1-160
done
