#!/usr/bin/env bash
# Live runs against the simulator's prediction: one mix of seven jobs of the campaign's shapes
# (pair_shapes.sh), arriving over 8 s on 2 ranks, run live with recmix run under every policy and
# simulated with recmix sim on the same jobs, arrivals and ranks, with the campaign's pair file as
# the ground truth (never pairs measured from these live runs). Prints per policy the makespan,
# the average job completion time (JCT) and each job's slowdown (JCT / its solo run time), live
# against predicted, with the relative error of the prediction.
#   bench/run/live_vs_sim.sh <recmix binary> [work dir] [pair file] [policies]
# Work dir default /tmp/recmix-live-vs-sim; pair file default bench/run/data/measured_pairs_xeon.csv
# (bench/run/profile_pairs.sh); policies default: all six, comma-separated. REUSE_LIVE=1 keeps the
# live runs already in the work dir and simulates again.
#
# The simulator's input is built from the jobs file alone, plus the pair file:
#   - a recmix-format trace, one line per job: arrival_s (the job's arrival), duration_s = steps x
#     the measured solo step time of its type, gpus = its ranks, type = its shape, memory_gib =
#     the memory estimate of its spec (the analytic estimate recmix run books, read from the live
#     summary: it depends on the spec only);
#   - the cluster of the jobs file: 2 "GPUs" of 8 GiB on one node, 2 jobs at most on one, the
#     same slowdown limit; every shape is its own measured type (--pairs-type NAME=NAME).
# Settings: cores_per_rank = 2 lets two one-thread jobs share a one-core rank, as in the
# campaign, so co-location happens and the pair file matters; slowdown_limit = 100 keeps the live
# run from moving a slowed job apart (a live mechanism a trace simulation has no input for; the
# replay, recmix sim --replay, does).
set -euo pipefail
pairs=${3:-}
policies=${4:-fifo,memory-first,complementary,interference-aware,delay,las}
source "$(dirname "$0")/bench_env.sh" "$1" "${2:-/tmp/recmix-live-vs-sim}"
source "$src/bench/run/pair_shapes.sh"
pairs=$(realpath "${pairs:-$src/bench/run/data/measured_pairs_xeon.csv}")

# The mix: shape, job name, arrival (s), steps (twice the campaign's: about 10 s alone each).
mix_jobs=("large large.1 0" "small small.1 1" "medium medium.1 2" "heavy heavy.1 3" "multihot multihot.1 4"
          "small small.2 6" "medium medium.2 8")
mix() {  # mix <policy>
  printf '[scheduler]\npolicy = "%s"\nround_interval_s = 1.0\ncolocation_limit = 2\n' "$1"
  printf 'cores_per_rank = 2\nslowdown_limit = 100\nmemory_capacity = "8GiB"\n'
  for j in "${mix_jobs[@]}"; do
    read -r shape name arrival <<<"$j"
    job_table "$shape" "$name" "$arrival" $(( 2 * $(shape_field "$shape" steps) ))
  done
}

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; 2 ranks x 1 core; pair file: $pairs"
IFS=, read -r -a policy_list <<<"$policies"
for policy in "${policy_list[@]}"; do
  mix "$policy" > "mix-$policy.toml"
  [[ -n ${REUSE_LIVE:-} && -f live-$policy/summary.json ]] && continue
  rm -rf "live-$policy"
  echo "live: $policy (load $(cut -d' ' -f1-3 /proc/loadavg))"
  "${mpirun[@]}" -np 2 "$recmix" run "mix-$policy.toml" --run-dir "live-$policy" -q > "live-$policy.out" 2>&1 || {
    cat "live-$policy.out"; echo "policy $policy failed" >&2; exit 1; }
done

# simulate <label> <pair file> [overheads file]: the trace of the jobs file (the first policy's:
# every policy's has the same jobs) and recmix sim on it; sim-<label>.json, sim-<label>-jobs.csv.
simulate() {
  /usr/bin/python3 "$src/bench/run/jobs_to_trace.py" "mix-${policy_list[0]}.toml" "$2" \
    --summary "live-${policy_list[0]}/summary.json" ${3:+--overheads "$3"} > "trace-$1.csv"
  local aliases=() s
  for s in "${shapes[@]}"; do aliases+=(--pairs-type "$s=$s"); done
  "$recmix" sim --trace "trace-$1.csv" --mix trace --traces-dir "$work" --machine cpu-zen3-2vcpu --gpus 2 \
    --gpus-per-node 2 --gpu-mem-gib 8 --max-jobs-per-gpu 2 --slowdown-limit 100 --policy "$policies" \
    --pairs "$2" "${aliases[@]}" --jobs-csv "sim-$1-jobs.csv" --json "sim-$1.json" --quiet > "sim-$1.out" 2>&1 || {
    cat "sim-$1.out"; exit 1; }
}
# The prediction: the campaign's pair file, duration = steps x solo step.
simulate steps "$pairs"
grep -A6 '^job type' sim-steps.out
# The same with each type's time outside its steps (model build, data, final checkpoint) measured
# in the campaign's solo runs, when the campaign's overheads file is there.
overheads=${pairs%.csv}-overheads.csv
[[ -f $overheads ]] && simulate overheads "$pairs" "$overheads"
# Diagnostic, not a prediction: pairs and overheads measured from these live runs themselves. What
# error is left then is the simulator's; the rest came from measuring on another day (or load).
"$recmix" pairs live-*/ -o live-pairs.csv 2> /dev/null
/usr/bin/python3 "$src/bench/run/job_overheads.py" live-*/ > live-overheads.csv
simulate aposteriori live-pairs.csv live-overheads.csv

/usr/bin/python3 - "$policies" <<'PY'
import csv, json, os, sys
policies = sys.argv[1].split(",")
labels = [l for l in ("steps", "overheads", "aposteriori") if os.path.exists(f"sim-{l}.json")]
sim = {l: {p["policy"]: p for p in json.load(open(f"sim-{l}.json"))["policies"]} for l in labels}
sim_jobs = list(csv.DictReader(open("sim-steps-jobs.csv")))
trace = list(csv.DictReader(open("trace-steps.csv")))
# The simulator numbers the jobs in trace order (by arrival): the live job names in that order.
arrival = {}
for l in open(f"live-{policies[0]}/events.jsonl"):
    e = json.loads(l)
    if e["event"] == "submitted": arrival[e["job"]] = e["arrival_s"]
names = sorted(arrival, key=lambda n: arrival[n])
work = {n: float(trace[i]["duration_s"]) for i, n in enumerate(names)}
def err(pred, live): return f"{100 * (pred - live) / live:+6.1f}%"
title = {"steps": "predicted: steps x solo step", "overheads": "predicted: + start-up and checkpoint",
         "aposteriori": "diagnostic: pairs of these live runs"}
rows = []
for p in policies:
    live = json.load(open(f"live-{p}/summary.json"))
    jobs = {j["name"]: j for j in live["jobs"]}
    assert all(j["state"] == "finished" for j in jobs.values()), [(n, j["state"]) for n, j in jobs.items()]
    rows.append((p, live, jobs, sum(j["jct_s"] for j in jobs.values()) / len(jobs)))
for l in labels:
    print(f"\n{title[l]}")
    print(f"{'policy':20s} {'makespan live':>13s} {'predicted':>9s} {'error':>7s}   {'avg JCT live':>12s} {'predicted':>9s} {'error':>7s}   co-located live / predicted")
    for p, live, jobs, jct in rows:
        s = sim[l][p]
        shared = sum(1 for j in jobs.values() if j["partners"])
        print(f"{p:20s} {live['makespan_s']:12.2f}s {s['makespan_s']:8.2f}s {err(s['makespan_s'], live['makespan_s'])}   "
              f"{jct:11.2f}s {s['avg_jct_s']:8.2f}s {err(s['avg_jct_s'], jct)}   {shared} / {s['colocated_jobs']}")
print(f"\nslowdown = JCT / solo run time (steps x the campaign's solo step), live / predicted (steps x solo step)")
print(f"{'job':12s}" + "".join(f" {p:>19s}" for p in policies))
for i, n in enumerate(names):
    line = f"{n:12s}"
    for p, live, jobs, jct in rows:
        sj = next(r for r in sim_jobs if r["policy"] == p and int(r["job"]) == i)
        line += f" {jobs[n]['jct_s'] / work[n]:9.2f} / {float(sj['slowdown']):5.2f}  "
    print(line)
PY
