#!/usr/bin/env bash
# Every GPU check and benchmark of recmix in one run of at most 8 minutes on one GPU, everything
# written under $OUT (suite.log, a section per step, and each step's raw output). Rerunnable at
# once: it keeps nothing between runs but the synthetic datasets in its work folder.
#   bench/device/gpu_suite.sh [bundle.tar.xz | build dir]
# On the build machine: scripts/build.sh, then bench/device/bundle.sh build (build/gpu-bundle.tar.xz);
# a GPU run carries that file and calls this script with it. Given a build folder instead, it runs
# the binaries there with the machine's own libraries.
# Steps, each time-boxed, and all of them within RECMIX_SUITE_SECONDS (default 470): a step gets
# at most what is left of that, and one that would get under 10 s is skipped and says so, so the
# whole fits in 8 minutes even when steps run to their limits (theirs add up to more):
#   1. the CUDA tests (every test binary's CUDA, cuBLAS and NCCL cases, one rank);
#   2. training throughput, Kaggle shape: fp32 (graphs on, device.graphs = auto) against the CPU backend (bench_gpu_train.sh),
#      then the step at batch 2048 and 16384 in fp32, tf32 and bf16 (bench_precision), and with CUDA graphs
#      where the build has them;
#   3. where a step's GPU time goes: the GPU-idle share of 1500 steps with graphs and without,
#      from CUPTI's records (libgpu_timeline.so, bench/device/timeline), its idle time split into
#      gaps inside graph launches and gaps between launches; then nsys's summary of 100 steps
#      where nsys works, else ncu's per-kernel times over about 7 steps;
#   4. the hot/cold tiers on the GPU: untiered against 10% hot rows;
#   5. the GPU kernels' A/B (bench_precision --kernels-ab): lanes, prefetch, GEMM epilogues, the
#      exchange stream and the L2 window each off in turn from the TF32 step with graphs, against
#      the eager fp32 step with none of them, at batch 2048 and 16384;
#   6. the L2 window on and off, tiered at 10% hot rows, on datasets of Zipf exponent 1.05 and 1.2;
#   7. the DLRM-DCNv2 step (bench_dcn --device cuda: the MLPerf benchmark's dense shape at batch
#      2048 and 16384) in fp32, TF32 and with bf16 GEMMs, against the 2048^3 GEMM in fp32, TF32, bf16;
#   8. co-location on one GPU (bench/run/bench_colocation.sh --device cuda): three mixes (four
#      small jobs; two Kaggle-shape jobs at batch 16384; an embedding-heavy job beside an MLP-heavy
#      one), each co-located by recmix run, one after another and each job alone, with the ratios
#      against their goals.
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
arg=${1:-$src/build/gpu-bundle.tar.xz}
OUT=${OUT:-/tmp/recmix-gpu-suite}
work=${RECMIX_SUITE_WORK:-/tmp/recmix-gpu-work}
mkdir -p "$OUT" "$work"
log=$OUT/suite.log
: > "$log"
say() { echo "$*" | tee -a "$log"; }
section() { say ""; say "== $* ($(date -u +%H:%M:%S), ${SECONDS}s into the suite)"; }
# step <seconds> <name> <command...>: runs a step under a time limit, its output to $OUT/<name>.txt
# (at most 8 files come back, so the raw outputs are few) and its tail to the log.
# RECMIX_SUITE_SKIP="train precision" leaves those steps out (a rerun after a partial run).
suite_seconds=${RECMIX_SUITE_SECONDS:-470}
step() {
  local limit=$1 name=$2; shift 2
  [[ " ${RECMIX_SUITE_SKIP:-} " == *" $name "* ]] && { say "($name: skipped)"; return 0; }
  local left=$((suite_seconds - SECONDS))
  if ((left < 10)); then
    say "($name: skipped, ${SECONDS}s of the suite's ${suite_seconds}s spent; RECMIX_SUITE_SKIP on a rerun leaves the steps already run out)"
    return 0
  fi
  ((limit > left)) && limit=$left
  if [[ $(type -t "$1") == function ]]; then  # a function of this script: run in a child bash
    export -f "$1"
    timeout --kill-after=5 "$limit" bash -c '"$@"' step "$@" > "$OUT/$name.txt" 2>&1
  else
    timeout --kill-after=5 "$limit" "$@" > "$OUT/$name.txt" 2>&1
  fi
  local rc=$?
  tail -n 60 "$OUT/$name.txt" >> "$log"
  [[ $rc == 124 || $rc == 137 ]] && say "($name stopped at its limit of ${limit}s)"
  say "($name: exit $rc)"
  return 0
}

if [[ -f $arg ]]; then
  rm -rf "$work/gpu-bundle"
  tar -C "$work" -xJf "$arg"
  # shellcheck disable=SC1091
  source "$work/gpu-bundle/env.sh"
  bin=$work/gpu-bundle/bin
  recmix=$bin/recmix
  precision=$bin/bench_precision
  dcn=$bin/bench_dcn
  timeline_lib=$work/gpu-bundle/lib/libgpu_timeline.so
  tests=("$bin"/test_*)
else
  build=$(realpath "$arg")
  recmix=$build/recmix
  precision=$build/bench/train/bench_precision
  dcn=$build/bench/train/bench_dcn
  timeline_lib=$build/bench/device/libgpu_timeline.so
  mapfile -t tests < <(find "$build/tests" -maxdepth 2 -type f -executable -name 'test_*' | sort)
fi

section "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader 2>&1 | tee -a "$log" ||
  { say "no GPU: skipped"; exit 77; }
say "cpu: $(lscpu | sed -n 's/^Model name: *//p'), $(nproc) threads"
say "recmix: $("$recmix" --version 2>&1 | head -1)"
# A CUDA library the loader does not find is looked for where this machine's toolkit and Python
# wheels keep theirs, and its folder added.
# cuBLAS is opened when the first CUDA backend is made (device/cuda/cublas_library.hpp), so ldd
# does not list it: it is looked for too unless it lies beside the CUDA runtime or on the loader's
# cache (the build's major version is the runtime's).
missing=$(ldd "$recmix" | awk '/not found/ { print $1 }')
cudart=$(ldd "$recmix" | awk '/libcudart\.so/ { print $3 }')
major=$(ldd "$recmix" | sed -n 's/.*libcudart\.so\.\([0-9]*\).*/\1/p' | head -1)
for lib in ${major:+libcublasLt.so.$major libcublas.so.$major}; do
  [[ -n $cudart && -e $(dirname "$cudart")/$lib ]] || ldconfig -p | grep -q "$lib" || missing+=" $lib"
done
for lib in $missing; do
  found=$(find /usr/local /opt /usr/lib -name "$lib" 2>/dev/null | head -1)
  say "$lib: not on the library path; ${found:-not found on this machine}"
  [[ -n $found ]] && export LD_LIBRARY_PATH="$(dirname "$found"):$LD_LIBRARY_PATH"
done
ldd "$recmix" | grep -E 'cublas|nccl|cudart|not found' >> "$log"

export recmix work tests_list="${tests[*]}"
section "1. CUDA tests"
export cuda_filter='*Cuda*:*cuda*:*CUDA*:*Nccl*:*Gpu*:*gpu*:*DeviceGrouping*'
run_cuda_tests() {
  local t n fails=0
  for t in $tests_list; do
    n=$("$t" --gtest_list_tests --gtest_filter="$cuda_filter" 2>/dev/null | grep -c '^  ' || true)
    [[ $n == 0 ]] && continue
    echo "--- $(basename "$t"): $n cases"
    "$t" --gtest_filter="$cuda_filter" --gtest_brief=1 2>&1 | grep -v '^\[       OK \]' || true
    "$t" --gtest_filter="$cuda_filter" --gtest_brief=1 >/dev/null 2>&1 || fails=$((fails + 1))
  done
  echo "test binaries with failures: $fails"
}
step 100 tests run_cuda_tests

section "2. training throughput"
step 100 train bash "$src/bench/device/bench_gpu_train.sh" "$recmix" "$work/train" "$(nproc)"
# What the host asked of the GPU per step (metrics.jsonl's device_per_step, docs/device.md): the
# last record of each CUDA run above.
counts() {
  local f
  for f in "$work"/train/r-*-cuda*/metrics.jsonl; do
    echo "$(basename "$(dirname "$f")"): $(grep '"type":"train"' "$f" | tail -1 | grep -o '"device_per_step":{[^}]*}')"
  done
}
step 10 counts counts
if "$recmix" train --help 2>&1 | grep -q -- '--graphs'; then
  graphs=(--graphs-ab)
else
  graphs=()
  say "(this build has no CUDA graphs: eager steps only)"
fi
if [[ -x $precision ]]; then
  step 45 precision "$precision" --device cuda --batch 2048 --batch 16384 --reps 3 --min-seconds 0.3 "${graphs[@]}"
fi

section "3. where a step's GPU time goes"
# Steps 3, 4 and 6 read step 2's dataset and config (a rerun may skip step 2 once it has run here).
if ! cd "$work/train" 2>/dev/null; then
  say "steps 3, 4 and 6 need step 2's dataset in $work/train: run it first (skipped)"
  RECMIX_SUITE_SKIP="${RECMIX_SUITE_SKIP:-} timeline profile tiers l2"
fi
# The idle share from CUPTI's records, graphs on and off, over the records from 20% to 90% of the
# run (the data's loading, the first steps and the closing checkpoint left out).
timeline() {
  local graphs
  [[ -f ${timeline_lib:-} ]] || { echo "no libgpu_timeline.so in this build (it needs CUPTI)"; return 0; }
  for graphs in true false; do
    rm -rf "$work/timeline-run" "$work/timeline-$graphs.txt"
    CUDA_INJECTION64_PATH=$timeline_lib RECMIX_TIMELINE_OUT=$work/timeline-$graphs.txt \
      "$recmix" train k2048.toml --device cuda --steps 1500 --graphs "$graphs" --run-dir "$work/timeline-run" \
      > "$work/timeline-train.txt" 2>&1 || tail -5 "$work/timeline-train.txt"
    echo "--- graphs $graphs: $(grep -o 'samples/s[^,]*' "$work/timeline-train.txt" | tail -1)"
    cat "$work/timeline-$graphs.txt" 2>/dev/null || echo "no timeline written"
    grep -E '"device_per_step"' "$work/timeline-run/metrics.jsonl" 2>/dev/null | tail -1 | grep -o '"device_per_step":{[^}]*}'
  done
}
step 60 timeline timeline
profile() {
  rm -rf "$work/nsys-run" "$work/ncu-run"  # a run directory holding a run is refused (recmix train --force)
  if command -v nsys >/dev/null && nsys profile -o "$work/p" --force-overwrite true --stats=true \
      "$recmix" train k2048.toml --device cuda --steps 130 --run-dir "$work/nsys-run" > "$work/nsys.txt" 2>&1; then
    cat "$work/nsys.txt"
  elif command -v ncu >/dev/null; then
    echo "nsys unavailable or failed; ncu per-kernel times of launches 500-999 (about 7 steps)"
    ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \
      --launch-skip 500 --launch-count 500 "$recmix" train k2048.toml --device cuda --steps 40 \
      --run-dir "$work/ncu-run" 2>&1 | grep -E 'gpu__time_duration|^  [A-Za-z_].*\(|Invocations|done after' | head -150
  else
    echo "neither nsys nor ncu here"
  fi
}
step 60 profile profile

section "4. hot and cold tiers"
tiers() {
  local hot
  for hot in 0 0.1 0 0.1; do
    sed "s/^steps = .*/steps = 1500/" k2048.toml > "tier.toml"
    [[ $hot != 0 ]] && printf '[embedding]\nhot_fraction = %s\n' "$hot" >> tier.toml
    rm -rf "$work/tier-$hot"
    "$recmix" train tier.toml --device cuda --run-dir "$work/tier-$hot" 2>&1 |
      sed -n "s/^\(done after .*\)/hot $hot: \1/p; s/^\(.*hit rate.*\)/hot $hot: \1/p" | tail -2
  done
}
step 50 tiers tiers

section "5. GPU kernels, each off in turn"
if [[ -x $precision ]]; then
  step 65 kernels "$precision" --device cuda --kernels-ab --batch 2048 --batch 16384 --reps 3 --min-seconds 0.25 --no-gemms
fi

section "6. the L2 window over the hot rows, by Zipf exponent"
l2() {
  local z w run
  for z in 1.05 1.2; do
    [[ -f z$z.h5 ]] || "$recmix" data synth -o "z$z.h5" --rows 500k --tables 26 --table-rows 100000 --zipf "$z" | tail -1
    for run in 1-true 1-false; do
      w=${run#*-}
      sed "s/^steps = .*/steps = 600/; s/^train = .*/train = \"z$z.h5\"/" k2048.toml > l2.toml
      printf '[embedding]\nhot_fraction = 0.1\n' >> l2.toml
      rm -rf "$work/l2-$z-$run"
      "$recmix" train l2.toml --device "${RECMIX_SUITE_DEVICE:-cuda}" --run-dir "$work/l2-$z-$run" --l2-window "$w" 2>&1 |
        sed -n "s/^\(done after .*\)/zipf $z, l2_window $w: \1/p; s/^.*\(L2 window: .*\)/zipf $z: \1/p" | tail -2
    done
  done
}
step 45 l2 l2

section "7. the DLRM-DCNv2 step"
if [[ -x $dcn ]]; then
  dcn_step() {
    local b
    for b in 2048 16384; do "$dcn" --device cuda --batch "$b" --reps 2 --min-seconds 0.3; done
  }
  export dcn
  step 45 dcn dcn_step
fi

section "8. co-location on one GPU"
# Its own datasets in $work/colocation (about 150 MB, made once).
step 170 colocation bash "$src/bench/run/bench_colocation.sh" --device "${RECMIX_SUITE_DEVICE:-cuda}" "$recmix" \
  "$work/colocation"

section "done"
say "suite finished in ${SECONDS}s"
