#!/usr/bin/env bash
# Co-location benchmark on one GPU: three mixes of DLRM jobs, each run four ways side by side in
# one invocation, on one rank:
#   co-located         recmix run, complementary policy: the jobs share the GPU where the policy
#                      places them together
#   one after another  the same jobs file under recmix run --policy exclusive-fifo: each job alone
#                      with the whole GPU in turn, in one process like the co-located run
#   alone              each job by itself with recmix train, one after another: its samples/s with
#                      the whole GPU, measured directly
#   at once            every job at the same time as a recmix train process of its own: separate
#                      CUDA contexts, which the GPU time-slices (no MPS), where recmix run's jobs
#                      share one process and its context
# The mixes, and the goal printed beside each ratio (co-located throughput / one after another):
#   1. four small jobs: batch 256, MLPs 64-256 wide, 26 tables of 100k rows; goal >= 2.5
#   2. two Kaggle-shape jobs at batch 16384, which fill the GPU: the policy leaves them apart or
#      loses nothing, goal >= 0.95; whether they were co-located is printed
#   3. an embedding-heavy job (26 tables of 4M rows, small MLPs) beside an MLP-heavy one (MLPs
#      1024-1024-512, 26 tables of 100k rows), batch 2048; goal >= 1.3
# Prints makespan and total samples/s of each way, the ratios with their goals, and per job its
# samples/s alone (recmix train, and recmix run's own samples taken alone) and co-located. The
# makespans are wall times, start-up and every job's final checkpoint included (the
# embedding-heavy job's is 6.6 GB); the jobs' outputs are removed once read.
# At steps scale 1 the steps are chosen, from the GPU step times in bench/RESULTS.md, for about
# 150 s in all on an H100 or H200 (106 s measured on an H200, bench/RESULTS.md "Co-location on a GPU").
# --device cpu-strict is a dry run of the same mixes under the strict device emulator on the CPU:
# steps scale 0.01 unless given (at least 3 steps a job), batches / 16, tables of 1/1000 the rows,
# 20k-row datasets; about a minute on two cores. Its figures say nothing of a GPU.
#   bench/run/bench_colocation_gpu.sh <cuda|cpu-strict> <recmix binary> [work dir] [steps scale]
# (bench/run/bench_colocation.sh --device cuda|cpu-strict ... calls this script.)
set -euo pipefail
(( $# >= 2 )) || { echo "usage: bench_colocation_gpu.sh <cuda|cpu-strict> <recmix binary> [work dir] [steps scale]" >&2; exit 2; }
device=$1
case $device in
  cuda) scale=${4:-1} batch_div=1 rows_div=1 dataset_rows=400k ;;
  cpu-strict) scale=${4:-0.01} batch_div=16 rows_div=1000 dataset_rows=20k ;;
  *) echo "bench_colocation_gpu.sh: device must be cuda or cpu-strict, got '$device'" >&2; exit 2 ;;
esac
recmix=$(realpath "$2")
work=${3:-/tmp/recmix-bench-colocation-$device}
mkdir -p "$work"
cd "$work"
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { print b - a }'; }

# dataset <table rows>: the name of the synthetic dataset of 26 such tables (divided by rows_div),
# generated once.
dataset() {
  local rows=$(( $1 / rows_div ))
  [[ -f d$rows.h5 ]] || "$recmix" data synth -o "d$rows.h5" --rows "$dataset_rows" --tables 26 --table-rows "$rows" \
    --seed 1 >/dev/null
  echo "d$rows.h5"
}

# job <name> <dataset> <bottom> <top> <steps> <batch>: a recmix train spec on the benchmark's
# device, one host thread, steps scaled (at least 3) and the batch divided by batch_div.
job() {
  cat > "$1.toml" <<TOML
name = "$1"
[model]
embedding_dim = 16
bottom_mlp = $3
top_mlp = $4
[data]
train = "$2"
[train]
batch_size = $(( $6 / batch_div ))
steps = $(awk -v n="$5" -v k="$scale" 'BEGIN { n = int(n * k + 0.5); print n < 3 ? 3 : n }')
log_interval_s = 100
[device]
kind = "$device"
TOML
}

samples() {  # total samples of the listed jobs
  local total=0 j
  for j in "$@"; do total=$(( total + $(sed -n 's/^steps = //p' "$j.toml") * $(sed -n 's/^batch_size = //p' "$j.toml") )); done
  echo $total
}
report() {  # report <label> <seconds> <samples>
  awk -v l="$1" -v t="$2" -v s="$3" 'BEGIN { printf "%-38s makespan %7.2f s   %9.0f samples/s\n", l, t, s / t }'
}

# mix_file <mix> <colocation limit> <jobs...>: the jobs file <mix>.toml, one rank, complementary
# policy. Each job has one thread, and cores_per_rank admits them all even on a small host; the
# memory booked per rank is 64 GiB (an H100 has 80).
mix_file() {
  local mix=$1 limit=$2 cores
  shift 2
  cores=$(nproc)
  (( cores < $# )) && cores=$#
  { printf 'include = [%s]\n' "$(printf '"%s.toml", ' "$@" | sed 's/, $//')"
    printf '[scheduler]\npolicy = "complementary"\nround_interval_s = 0.2\ncolocation_limit = %s\n' "$limit"
    printf 'cores_per_rank = %s\nmemory_capacity = "64GiB"\n' "$cores"
  } > "$mix.toml"
}

# finished_jobs <summary.json>: how many of its jobs finished (the run has a state of its own).
finished_jobs() { python3 -c 'import json, sys; print(sum(j["state"] == "finished" for j in json.load(open(sys.argv[1]))["jobs"]))' "$1"; }

# run_mix <mix> <policy> <job count>: recmix run of <mix>.toml under <policy>; sets t (wall
# seconds) and keeps of run-<mix>-<policy> its summary.json and events (the jobs' outputs go).
run_mix() {
  local dir=run-$1-$2 t0
  rm -rf "$dir"
  t0=$(now)
  "$recmix" run "$1.toml" --policy "$2" --run-dir "$dir" -q > "$dir.out" 2>&1 ||
    { tail -20 "$dir.out"; echo "recmix run of $1 ($2) failed"; exit 1; }
  t=$(since "$t0")
  [[ $(finished_jobs "$dir/summary.json") == "$3" ]] ||
    { tail -20 "$dir.out"; echo "recmix run of $1 ($2): not every job finished"; exit 1; }
  rm -rf "$dir/jobs"  # the jobs' checkpoints
}

# alone <jobs...>: each job by itself with recmix train, one after another; sets t (wall seconds
# of them all) and rates ("name=samples/s ...", from each run's final line).
alone() {
  local j t0 rate
  rates=""
  t0=$(now)
  for j in "$@"; do
    rm -rf "alone-$j"
    "$recmix" train "$j.toml" --run-dir "alone-$j" > "alone-$j.out" 2>&1 ||
      { tail -20 "alone-$j.out"; echo "recmix train $j failed"; exit 1; }
    rate=$(sed -n 's/^done after .*: \([0-9.]*\) samples\/s.*/\1/p' "alone-$j.out" | tail -1)
    rates+="$j=${rate:-0} "
    rm -rf "alone-$j"
  done
  t=$(since "$t0")
}

# at_once <jobs...>: every job at the same time, each a recmix train process of its own (on a GPU
# each process has its own CUDA context, which the GPU time-slices unless MPS runs); sets t.
at_once() {
  local j t0 pids=() names=() i
  t0=$(now)
  for j in "$@"; do
    rm -rf "once-$j"
    "$recmix" train "$j.toml" --run-dir "once-$j" > "once-$j.out" 2>&1 &
    pids+=("$!")
    names+=("$j")
  done
  for i in "${!pids[@]}"; do
    wait "${pids[$i]}" || { tail -20 "once-${names[$i]}.out"; echo "recmix train ${names[$i]} (at once) failed"; exit 1; }
  done
  t=$(since "$t0")
  for j in "$@"; do rm -rf "once-$j"; done
}

# per_job <summary.json>: each job's samples/s alone (recmix train, from $rates), alone and
# co-located in the run (its summary; 0 when it took no such samples: "-"), and its partners.
per_job() {
  awk -v rates="$rates" '
    BEGIN { n = split(rates, kv, " "); for (i = 1; i <= n; i++) { split(kv[i], p, "="); alone[p[1]] = p[2] } }
    function value(s) { gsub(/[",]/, "", s); return s }
    function rate(x) { return x > 0 ? sprintf("%9.0f/s", x) : sprintf("%11s", "-") }
    /^  "jobs": \[/ { jobs = 1 }
    /^  "makespan_s"/ { jobs = 0 }
    !jobs { next }
    in_partners && /\]/ { in_partners = 0; next }
    in_partners { partners = partners (partners == "" ? "" : ",") value($1); next }
    /"name":/ { name = value($2) }
    /"partners": \[\]/ { partners = "" }
    /"partners": \[$/ { partners = ""; in_partners = 1 }
    /"samples_per_s_alone":/ { run_alone = value($2) + 0 }
    /"samples_per_s_colocated":/ { shared = value($2) + 0 }
    /"steps":/ {
      printf "  %-10s alone %s   in the run: alone %s, co-located %s   partners %s\n", name, rate(alone[name] + 0),
        rate(run_alone), rate(shared), partners == "" ? "-" : partners
    }' "$1"
}

# mix <n> <title> <goal> <colocation limit> <jobs...>: the four ways, their report, and the ratio
# against its goal.
mix() {
  local n=$1 title=$2 goal=$3 limit=$4 t_colo t_excl t_alone t_once total
  shift 4
  mix_file "mix$n" "$limit" "$@"
  total=$(samples "$@")
  run_mix "mix$n" complementary $#
  t_colo=$t
  run_mix "mix$n" exclusive-fifo $#
  t_excl=$t
  alone "$@"
  t_alone=$t
  at_once "$@"
  t_once=$t
  echo "--- mix $n: $title"
  report "co-located (recmix run)" "$t_colo" "$total"
  report "one after another (exclusive-fifo)" "$t_excl" "$total"
  report "alone, recmix train one by one" "$t_alone" "$total"
  report "at once, a recmix train process each" "$t_once" "$total"
  awk -v c="$t_colo" -v e="$t_excl" -v a="$t_alone" -v o="$t_once" -v g="$goal" 'BEGIN {
    printf "co-located / one after another: %.3f (goal >= %s: %s)   co-located / recmix train one by one: %.3f\n",
      e / c, g, (e / c >= g ? "met" : "missed"), a / c
    printf "co-located / processes at once: %.3f (above 1: sharing one process beats separate contexts)\n", o / c }'
  if [[ $n == 2 ]]; then
    if grep -q '"partners": \[$' "run-mix$n-complementary/summary.json"; then
      echo "co-located: yes, the policy put the two jobs on the GPU together"
    else
      echo "co-located: no, the policy left them apart"
    fi
  fi
  per_job "run-mix$n-complementary/summary.json" > "mix$n.jobs"
  cat "mix$n.jobs"
  [[ $(wc -l < "mix$n.jobs") == "$#" ]] || { echo "mix $n: summary.json lacks jobs or is read wrongly"; exit 1; }
}

if [[ $device == cuda ]]; then
  gpu=$(nvidia-smi --query-gpu=name,memory.total --format=csv,noheader 2>/dev/null | head -1) || true
  [[ -n $gpu ]] || { echo "no GPU: skipped"; exit 77; }
  echo "GPU: $gpu"
else
  echo "cpu-strict: a dry run of the GPU mixes under the strict device emulator (batches / $batch_div, tables / $rows_div rows);"
  echo "its figures say nothing of a GPU"
fi
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; steps scale $scale"
small=$(dataset 100000)
heavy=$(dataset 4000000)

# Mix 1: four small jobs of different shapes; host-bound alone, so sharing the GPU should overlap them.
job small1 "$small" "[128, 64, 16]" "[256, 64, 1]" 4000 256
job small2 "$small" "[256, 128, 16]" "[128, 64, 1]" 4000 256
job small3 "$small" "[64, 16]" "[256, 128, 1]" 4000 256
job small4 "$small" "[256, 64, 16]" "[256, 1]" 4000 256
mix 1 "four small jobs, batch $(( 256 / batch_div )), MLPs 64-256 wide, 26 tables of $(( 100000 / rows_div )) rows" \
  2.5 4 small1 small2 small3 small4

# Mix 2: two Kaggle-shape jobs at batch 16384, each enough to fill the GPU.
job big1 "$small" "[512, 256, 64, 16]" "[512, 256, 1]" 800 16384
job big2 "$small" "[512, 256, 64, 16]" "[512, 256, 1]" 800 16384
mix 2 "two Kaggle-shape jobs, batch $(( 16384 / batch_div ))" 0.95 2 big1 big2

# Mix 3: lookups in large tables beside wide GEMMs.
job embedding "$heavy" "[64, 16]" "[64, 1]" 4000 2048
job dense "$small" "[1024, 1024, 512, 16]" "[1024, 1024, 512, 1]" 2000 2048
mix 3 "embedding-heavy (26 tables of $(( 4000000 / rows_div )) rows) beside MLP-heavy (1024-wide), batch $(( 2048 / batch_div ))" \
  1.3 2 embedding dense
