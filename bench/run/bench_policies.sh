#!/usr/bin/env bash
# Each scheduling policy of recmix run on the same mix of jobs on 2 ranks (makespan, average job
# completion time, co-located jobs), and what the run's machinery costs a job: one job under
# recmix run against the same job under recmix train, side by side, with the scheduler's round
# latency and message count from the run's summary.
#   bench/run/bench_policies.sh <recmix binary> [work dir]
# Uses the datasets bench_colocation.sh generates in the same work dir (generated here if absent).
set -euo pipefail
source "$(dirname "$0")/../lib.sh"
source "$(dirname "$0")/bench_env.sh"

# The mix: six jobs of three shapes on 1 or 2 ranks, arriving over 4 seconds.
mix() {  # mix <policy>
  printf '[scheduler]\npolicy = "%s"\nround_interval_s = 0.2\nlas_threshold_s = 10\nlas_lease_s = 2\n' "$1"
  local i=0
  for spec in "big 2 [512,256,64,16] [512,256,1] 256 600" "mid 1 [128,64,16] [128,64,1] 128 2000" \
              "small 1 [64,16] [64,1] 128 4000" "big2 2 [512,256,64,16] [512,256,1] 512 200" \
              "mid2 1 [128,64,16] [128,64,1] 128 1500" "small2 1 [64,16] [64,1] 64 6000"; do
    read -r name ranks bottom top batch steps <<<"$spec"
    printf '\n[[job]]\nname = "%s"\nranks = %s\narrival = %s\nmodel = { embedding_dim = 16, bottom_mlp = %s, top_mlp = %s }\n' \
      "$name" "$ranks" "$(awk -v i=$i 'BEGIN { print 0.8 * i }')" "$bottom" "$top"
    printf 'data = { train = "kaggle.h5" }\ntrain = { batch_size = %s, steps = %s, log_interval_s = 100 }\n' "$batch" "$steps"
    i=$((i + 1))
  done
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; 2 ranks x 1 core"
printf '%-20s %10s %12s %10s %12s\n' policy makespan "avg JCT" colocated "round (ms)"
for policy in exclusive-fifo memory-first complementary interference-aware delay las; do
  mix "$policy" > "mix-$policy.toml"
  rm -rf "pol-$policy"
  "${mpirun[@]}" -np 2 "$recmix" run "mix-$policy.toml" --run-dir "pol-$policy" -q > "pol-$policy.out" 2>&1 || {
    cat "pol-$policy.out"; echo "policy $policy failed"; exit 1; }
  /usr/bin/python3 - "pol-$policy/summary.json" "$policy" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
jobs = s["jobs"]
assert all(j["state"] == "finished" for j in jobs), [(j["name"], j["state"]) for j in jobs]
jct = sum(j["jct_s"] for j in jobs) / len(jobs)
shared = sum(1 for j in jobs if j["partners"])
print(f"{sys.argv[2]:20s} {s['makespan_s']:9.2f}s {jct:11.2f}s {shared:10d} {s['control_plane']['mean_round_ms']:12.3f}")
PY
done

# One job alone: recmix run (control plane, samples, the per-step status word) vs recmix train.
kaggle_job alone kaggle.h5 128 2000 100 > alone.toml
printf 'include = ["alone-run.toml"]\n[scheduler]\nround_interval_s = 1.0\n' > alone-jobs.toml
{ printf 'ranks = 2\n'; cat alone.toml; } > alone-run.toml
echo "--- one Kaggle-shape job, batch 128, 2000 steps on 2 ranks x 1 thread (3 alternating pairs)"
for rep in 1 2 3; do
  rm -rf alone-run alone-train
  t0=$(now); "${mpirun[@]}" -np 2 "$recmix" run alone-jobs.toml --run-dir alone-run -q > alone-run.out 2>&1; t1=$(now)
  "${mpirun[@]}" -np 2 "$recmix" train alone.toml --run-dir alone-train > alone-train.out 2>&1; t2=$(now)
  /usr/bin/python3 - alone-run/jobs/alone/train.log alone-train/train.log alone-run/summary.json <<'PY'
import json, re, sys
def rate(log):
    return float(re.findall(r"done after .*: ([0-9.]+) samples/s", open(log).read())[-1])
run, train = rate(sys.argv[1]), rate(sys.argv[2])
s = json.load(open(sys.argv[3]))
c = s["control_plane"]
print(f"recmix run {run:8.0f} samples/s   recmix train {train:8.0f} samples/s   run/train {run / train:.3f}   "
      f"rounds {c['rounds']}, mean {c['mean_round_ms']:.3f} ms, max {c['max_round_ms']:.3f} ms, {c['messages_received']} messages")
PY
done
