#!/usr/bin/env bash
# Measured-pairs campaign: the five DLRM shapes of pair_shapes.sh (small, medium, large,
# multihot, heavy), each alone and each pair of them (a shape beside itself included) co-located
# on 2 ranks with recmix run, each one-rank shape alone on its rank beside a busy rank, then recmix
# pairs over the 24 run directories: the pair file that recmix sim --pairs reads (each shape's solo
# step time and its parts, each pair's slowdown, each shape's slowdown beside a busy rank).
#   bench/run/profile_pairs.sh [--device cuda|cpu-strict] <recmix binary> [work dir] [pairs csv]
#   bench/run/profile_pairs.sh --specs-only <recmix binary> [work dir]   # datasets only (live_vs_sim.sh)
# --device cuda measures the pairs on one GPU: every job on the device (recmix run --device), one
# rank (one GPU holds one rank), so the one-rank shapes only and no busy-neighbour runs. cpu-strict
# is its dry run.
# Work dir default /tmp/recmix-profile-pairs; the pair file default <work dir>/pairs.csv. The
# shipped file bench/run/data/measured_pairs_xeon.csv is this output (bench/run/data/README.md).
#
# How a pair is forced: both jobs arrive at 0 under memory-first (it puts a job on the busiest
# rank that holds it), with cores_per_rank = 2 so that two one-thread jobs may share a one-core
# rank (time-sharing its core) and slowdown_limit = 100 so that neither is moved apart. A
# two-rank job (large) comes first in its jobs file, since memory-first puts a two-rank job on
# two busy ranks only: a one-rank job beside it shares one of its ranks; two large jobs share
# both. Samples every 0.5 s (round_interval_s).
# The jobs of a pair take about as long alone, so they overlap for most of the run; whatever
# runs after its partner finished is sampled alone.
set -euo pipefail
specs_only=0 device=cpu
if [[ ${1:-} == --specs-only ]]; then specs_only=1; shift; fi
if [[ ${1:-} == --device ]]; then device=$2; shift 2; fi
case $device in cpu|cuda|cpu-strict) ;; *) echo "--device: cpu, cuda or cpu-strict, not '$device'" >&2; exit 2 ;; esac
out=${3:-}
source "$(dirname "$0")/bench_env.sh" "$1" "${2:-/tmp/recmix-profile-pairs}"
source "$src/bench/run/pair_shapes.sh"
(( specs_only )) && exit 0
out=${out:-$work/pairs.csv}
ranks=2 device_args=()
if [[ $device != cpu ]]; then
  ranks=1 device_args=(--device "$device")
  [[ $device == cuda ]] && { nvidia-smi -L > /dev/null 2>&1 || { echo "no GPU: skipped"; exit 77; }; }
  one_rank=()
  for a in "${shapes[@]}"; do (( $(shape_field "$a" ranks) == 1 )) && one_rank+=("$a"); done
  shapes=("${one_rank[@]}")
fi

header() {
  printf '[scheduler]\npolicy = "memory-first"\nround_interval_s = 0.5\ncolocation_limit = 2\n'
  printf 'cores_per_rank = 2\nslowdown_limit = 100\n'
}
run() {  # run <name>: runs <name>.toml into pp-<name>
  rm -rf "pp-$1"
  local t0 t1; t0=$(now)
  "${mpirun[@]}" -np "$ranks" "$recmix" run "$1.toml" --run-dir "pp-$1" -q "${device_args[@]}" > "pp-$1.out" 2>&1 || {
    cat "pp-$1.out"; echo "run $1 failed" >&2; exit 1; }
  t1=$(now)
  awk -v n="$1" -v a="$t0" -v b="$t1" 'BEGIN { printf "  %-20s %6.1f s\n", n, b - a }'
  dirs+=("pp-$1")
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; $ranks rank(s) x 1 core; device $device; load: $(cut -d' ' -f1-3 /proc/loadavg)"
[[ $device == cuda ]] && echo "GPU: $(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"
start=$(now)
dirs=()
for a in "${shapes[@]}"; do
  { header; job_table "$a" "$a.1" 0; } > "solo-$a.toml"
  run "solo-$a"
done
n=${#shapes[@]}
for ((i = 0; i < n; i++)); do
  for ((j = i; j < n; j++)); do
    a=${shapes[i]} b=${shapes[j]}
    # The wider job first: memory-first puts a two-rank job on two busy ranks only.
    if (( $(shape_field "$b" ranks) > $(shape_field "$a" ranks) )); then
      { header; job_table "$b" "$b.2" 0; job_table "$a" "$a.1" 0; } > "pair-$a-$b.toml"
    else
      { header; job_table "$a" "$a.1" 0; job_table "$b" "$b.2" 0; } > "pair-$a-$b.toml"
    fi
    run "pair-$a-$b"
  done
done
# Each one-rank shape alone on its rank while the other rank is busy: the shape twice, one job a
# rank (cores_per_rank = 1); recmix pairs gives its "*" line (slowdown beside a busy rank).
for a in "${shapes[@]}"; do
  (( ranks == 2 && $(shape_field "$a" ranks) == 1 )) || continue
  { header | sed -e 's/^cores_per_rank = 2$/cores_per_rank = 1/' -e 's/^colocation_limit = 2$/colocation_limit = 1/'; job_table "$a" "$a.1" 0; job_table "$a" "$a.2" 0; } \
    > "busy-$a.toml"
  run "busy-$a"
done
"$recmix" pairs "${dirs[@]}" -o "$out"
# Each type's time outside its steps in its solo run (data, model build, final checkpoint).
/usr/bin/python3 "$src/bench/run/job_overheads.py" "${dirs[@]}" > "${out%.csv}-overheads.csv"
awk -v a="$start" -v b="$(now)" 'BEGIN { printf "campaign: %.0f s\n", b - a }'
echo "pair file: $out; overheads: ${out%.csv}-overheads.csv"
