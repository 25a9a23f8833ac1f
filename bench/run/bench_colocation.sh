#!/usr/bin/env bash
# Co-location benchmark: four batch-128 DLRM jobs of different shapes, run three ways on the same
# cores, side by side in one invocation:
#   colocated   recmix run (complementary policy), one thread per job, jobs sharing the ranks
#   exclusive   the jobs one after another with recmix train, each with every core
#   separate    the jobs as separate recmix train processes, one thread each, pinned one per core,
#               the next job starting on a core as soon as it is free (the ideal on a CPU)
# on 1 rank x 2 cores and on 2 ranks x 1 core; then two batch-2048 Kaggle-shape jobs, which fill
# the cores and must be left exclusive by the policy, against running them one after another.
# Prints makespan and total samples/s for each, and the ratios the targets are stated in.
#   bench/run/bench_colocation.sh [--device cpu|cuda|cpu-strict] <recmix binary> [work dir] [steps scale]
# --device cuda runs the GPU mixes of bench_colocation_gpu.sh instead (on one GPU, its own work dir
# by default), --device cpu-strict their dry run under the strict device emulator; cpu, the
# default, is this benchmark.
set -euo pipefail
if [[ ${1:-} == --device ]]; then
  case ${2:-} in
    cpu) shift 2 ;;
    cuda | cpu-strict) exec bash "$(dirname "$0")/bench_colocation_gpu.sh" "$2" "${@:3}" ;;
    *) echo "bench_colocation.sh: --device takes cpu, cuda or cpu-strict, got '${2:-}'" >&2; exit 2 ;;
  esac
fi
scale=${3:-1}
source "$(dirname "$0")/bench_env.sh"

# Datasets (generated once): 26 tables each (kaggle.h5 by bench_env.sh); the embedding-heavy one
# has 1M rows per table.
[[ -f heavy.h5 ]] || "$recmix" data synth -o heavy.h5 --rows 400k --tables 26 --table-rows 1000000 --seed 2 >/dev/null
[[ -f multihot.h5 ]] || "$recmix" data synth -o multihot.h5 --rows 200k --tables 26 --table-rows 100000 --multi-hot \
  --pooling 1 8 --seed 3 >/dev/null

# job <name> <data> <bottom> <top> <steps> <batch>: a recmix train spec.
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
batch_size = $6
steps = $(( $5 * scale ))
log_interval_s = 100
TOML
}
job kaggle kaggle.h5 "[512, 256, 64, 16]" "[512, 256, 1]" 1500 128
job heavy heavy.h5 "[64, 16]" "[512, 256, 1]" 3000 128
job multihot multihot.h5 "[512, 256, 64, 16]" "[512, 256, 1]" 1200 128
job small kaggle.h5 "[64, 16]" "[64, 1]" 6000 128
jobs=(kaggle heavy multihot small)

samples() {  # total samples of the listed jobs
  local total=0
  for j in "$@"; do total=$(( total + $(sed -n 's/^steps = //p' "$j.toml") * $(sed -n 's/^batch_size = //p' "$j.toml") )); done
  echo $total
}
report() {  # report <label> <seconds> <samples>
  awk -v l="$1" -v t="$2" -v s="$3" 'BEGIN { printf "%-34s makespan %7.2f s   %8.0f samples/s\n", l, t, s / t }'
}

jobs_file() {  # jobs_file <out> <ranks> <threads> <policy> <jobs...>
  local out=$1 ranks=$2 threads=$3 policy=$4; shift 4
  { printf '[scheduler]\npolicy = "%s"\nround_interval_s = 0.2\n' "$policy"
    for j in "$@"; do printf 'include = ["%s.run.toml"]\n' "$j" > /dev/null; done
    printf 'include = [%s]\n' "$(printf '"%s.run.toml",' "$@" | sed 's/,$//')"
  } > "$out.tmp"
  # include must precede the tables
  { grep '^include' "$out.tmp"; grep -v '^include' "$out.tmp"; } > "$out"; rm "$out.tmp"
  for j in "$@"; do
    { printf 'ranks = %s\n' "$ranks"; cat "$j.toml"; printf '[device]\nthreads = %s\n' "$threads"; } > "$j.run.toml"
  done
}

separate() {  # separate <jobs...>: two pinned one-thread workers taking jobs in order
  local queue=("$@") i=0
  local -a pids=()
  local lock=$work/queue.lock
  echo 0 > "$work/queue.next"
  worker() {
    local core=$1
    while true; do
      local k
      k=$(flock "$lock" bash -c 'k=$(cat "'"$work"'/queue.next"); echo $((k + 1)) > "'"$work"'/queue.next"; echo $k')
      (( k < ${#queue[@]} )) || break
      OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 taskset -c "$core" "$recmix" train "${queue[$k]}.toml" --threads 1 \
        --run-dir "sep-${queue[$k]}" > /dev/null 2>&1
    done
  }
  worker 0 & pids+=($!)
  worker 1 & pids+=($!)
  wait "${pids[@]}"
}

total=$(samples "${jobs[@]}")
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) cores; steps scale $scale; $total samples in all"
for layout in "1x2" "2x1"; do
  ranks=${layout%x*}
  rm -rf colo-* excl-* sep-*
  # Co-located: one-rank jobs, one thread each, placed by the complementary policy.
  jobs_file colo.toml 1 1 complementary "${jobs[@]}"
  t0=$(now)
  if [[ $layout == 1x2 ]]; then
    "${mpirun[@]}" -np 1 --threads 2 "$recmix" run colo.toml --run-dir "colo-$layout" -q > colo.out 2>&1
  else
    "${mpirun[@]}" -np 2 --threads 1 "$recmix" run colo.toml --run-dir "colo-$layout" -q > colo.out 2>&1
  fi
  t_colo=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  python3 -c 'import json, sys; print(sum(j["state"] == "finished" for j in json.load(open(sys.argv[1]))["jobs"]))' \
    "colo-$layout/summary.json" | grep -qx 4 || { cat colo.out; echo "co-located run failed"; exit 1; }
  # Exclusive: each job alone with every core (2 threads on 1 rank, or 1 thread on each of 2 ranks).
  t0=$(now)
  for j in "${jobs[@]}"; do
    if [[ $layout == 1x2 ]]; then
      "${mpirun[@]}" -np 1 --threads 2 "$recmix" train "$j.toml" --threads 2 --run-dir "excl-$j" > /dev/null 2>&1
    else
      "${mpirun[@]}" -np 2 --threads 1 "$recmix" train "$j.toml" --threads 1 --run-dir "excl-$j" > /dev/null 2>&1
    fi
  done
  t_excl=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  t0=$(now)
  separate "${jobs[@]}"
  t_sep=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
  echo "--- $ranks rank(s) x $(( 2 / ranks )) core(s): four batch-128 jobs"
  report "co-located (recmix run)" "$t_colo" "$total"
  report "exclusive, one after another" "$t_excl" "$total"
  report "separate pinned processes" "$t_sep" "$total"
  awk -v c="$t_colo" -v e="$t_excl" -v s="$t_sep" \
    'BEGIN { printf "co-located / separate ideal: %.3f (target >= 0.95)   co-located / exclusive: %.3f (target >= 1.15)\n", s / c, e / c }'
  /usr/bin/python3 - "colo-$layout/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
for j in s["jobs"]:
    print(f"  {j['name']:10s} ranks {j['ranks']} partners {','.join(j['partners']) or '-':22s} "
          f"alone {j['samples_per_s_alone']:8.0f}/s  co-located {j['samples_per_s_colocated']:8.0f}/s")
PY
done

# Two batch-2048 Kaggle-shape jobs with two threads each fill a 2-core rank: the policy must not
# co-locate them, and the run must lose nothing against running them one after another.
job big1 kaggle.h5 "[512, 256, 64, 16]" "[512, 256, 1]" 120 2048
job big2 kaggle.h5 "[512, 256, 64, 16]" "[512, 256, 1]" 120 2048
jobs_file big.toml 1 2 complementary big1 big2
rm -rf colo-big excl-big*
t0=$(now)
"${mpirun[@]}" -np 1 --threads 2 "$recmix" run big.toml --run-dir colo-big -q > big.out 2>&1
t_colo=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
t0=$(now)
for j in big1 big2; do "${mpirun[@]}" -np 1 --threads 2 "$recmix" train "$j.toml" --threads 2 --run-dir "excl-$j" > /dev/null 2>&1; done
t_excl=$(awk -v a="$t0" -v b="$(now)" 'BEGIN { print b - a }')
total=$(samples big1 big2)
echo "--- 1 rank x 2 cores: two batch-2048 Kaggle-shape jobs with 2 threads each"
report "recmix run (complementary)" "$t_colo" "$total"
report "one after another" "$t_excl" "$total"
/usr/bin/python3 - colo-big/summary.json "$t_colo" "$t_excl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
shared = [j["name"] for j in s["jobs"] if j["partners"]]
print(f"co-located pairs: {shared or 'none'} (expected none);  run / one after another: {float(sys.argv[3]) / float(sys.argv[2]):.3f}")
PY
