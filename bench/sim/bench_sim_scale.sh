#!/usr/bin/env bash
# recmix sim at 10 times Philly scale: the Philly trace (82,247 jobs) played 10 times in a row
# (--repeat-trace 10, each copy shifted by the trace's span) with arrivals compressed 10 times
# (--arrival-scale 10): 822,470 jobs over Philly's own 109 days on 20,480 GPUs, so each GPU sees
# the load of Philly on 2,048 GPUs. Each policy runs alone (one process, one core) under
# /usr/bin/time -v; prints per policy the jobs, the simulation's own seconds, the whole process's
# seconds (reading the trace and building the jobs included) and its peak RSS. Fails when a
# policy's process takes longer than LIMIT_S. Builds nothing: build the recmix target first.
#   bench/sim/bench_sim_scale.sh [build dir] [recmix sim options...]
# Environment: REPEAT (10), ARRIVAL_SCALE (10), GPUS (20480), LIMIT_S (60), POLICIES (every
# policy, comma-separated), TRACES_DIR ($RECMIX_SHARED_DIR/traces), JSON_DIR (keep each
# policy's metrics there as POLICY.json, e.g. to compare two builds).
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build
if [[ $# -gt 0 && $1 != -* ]]; then build=$1; shift; fi
recmix="$build/recmix"
[[ -x "$recmix" ]] || { echo "bench_sim_scale.sh: $recmix not found (cmake --build $build --target recmix)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "bench_sim_scale.sh: /usr/bin/time not found (apt-get install time)" >&2; exit 1; }
command -v jq >/dev/null || { echo "bench_sim_scale.sh: jq not found (apt-get install jq)" >&2; exit 1; }
repeat=${REPEAT:-10}
scale=${ARRIVAL_SCALE:-10}
gpus=${GPUS:-20480}
limit=${LIMIT_S:-60}
traces=${TRACES_DIR:-${RECMIX_SHARED_DIR:-$src/../shared}/traces}
[[ -f "$traces/philly_jobs.csv" ]] || { echo "bench_sim_scale.sh: no philly_jobs.csv in $traces (set TRACES_DIR or RECMIX_SHARED_DIR)" >&2; exit 1; }
if [[ -n ${POLICIES:-} ]]; then
  policies=${POLICIES//,/ }
else
  # The policy list as recmix knows it: the error for an unknown name lists them.
  policies=$({ "$recmix" sim --trace philly --policy '?' 2>&1 || true; } | sed -n 's/.*(known: \(.*\), all).*/\1/p' | tr -d ',')
  [[ -n $policies ]] || { echo "bench_sim_scale.sh: could not read the policy names from $recmix" >&2; exit 1; }
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
json_dir=${JSON_DIR:-$work}
mkdir -p "$json_dir"

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores"
args=(sim --trace philly --traces-dir "$traces" --repeat-trace "$repeat" --arrival-scale "$scale" --gpus "$gpus" --quiet "$@")
echo "command: $recmix ${args[*]} --policy P --json P.json"
printf '%-20s %9s %8s %8s %10s %13s\n' policy jobs sim_s wall_s peak_MiB avg_queue_h
over=()
for p in $policies; do
  /usr/bin/time -v -o "$work/$p.time" "$recmix" "${args[@]}" --policy "$p" --json "$json_dir/$p.json" >/dev/null 2>"$work/$p.err" ||
    { cat "$work/$p.err" "$work/$p.time" >&2; echo "bench_sim_scale.sh: $p failed" >&2; exit 1; }
  jobs=$(jq '.policies[0].jobs' "$json_dir/$p.json")
  sim_s=$(jq '.policies[0].wall_s' "$json_dir/$p.json")
  queue_h=$(jq '.policies[0].avg_queueing_s / 3600' "$json_dir/$p.json")
  # "Elapsed (wall clock) time (h:mm:ss or m:ss): 1:02.34" -> seconds
  wall_s=$(sed -n 's/.*Elapsed (wall clock) time.*: //p' "$work/$p.time" |
           awk -F: '{ s = 0; for (i = 1; i <= NF; ++i) s = s * 60 + $i; print s }')
  rss_kib=$(sed -n 's/.*Maximum resident set size (kbytes): //p' "$work/$p.time")
  printf '%-20s %9d %8.2f %8.2f %10.0f %13.2f\n' "$p" "$jobs" "$sim_s" "$wall_s" "$((rss_kib / 1024))" "$queue_h"
  awk -v w="$wall_s" -v l="$limit" 'BEGIN { exit !(w > l) }' && over+=("$p")
done
if [[ ${#over[@]} -gt 0 ]]; then
  echo "over ${limit} s: ${over[*]}" >&2
  exit 1
fi
