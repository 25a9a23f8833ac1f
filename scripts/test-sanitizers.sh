#!/usr/bin/env bash
# Sanitizer stages (docs/reliability.md):
#   asan: build-asan/, clang with AddressSanitizer + UndefinedBehaviorSanitizer and libFuzzer's
#         coverage instrumentation (CUDA and benchmarks off); runs the unit tests and the MPI
#         tests. Any report fails the stage. The fuzz stage builds its binaries in the same tree,
#         so the layers both need (device, comm, mlp, embedding, data) are compiled once. clang
#         also compiles a sanitized file in about half of g++'s time.
#   tsan: build-tsan/, clang with ThreadSanitizer (faster to compile, as for asan): the threaded
#         parts at 1 and 2 ranks: the group, guarded and epoch communicators, the tiered
#         embedding (its staging thread), the data reader (its prefetch thread), the trainer with
#         two host threads and the background checkpoint writer; and `recmix run` (the scheduler
#         service, the executor and its job threads: the first part of
#         tests/runtime/run_end_to_end.sh), left out with --no-run.
#
#   fuzz: build-asan/ (as above): the libFuzzer binaries of the two parsers that read only
#         memory (the job spec and the Criteo line) and the structured checkpoint and dataset
#         targets (edits made through the HDF5 API to valid files), each run for
#         RECMIX_FUZZ_SECONDS (default 15) from its corpus; new inputs go to a scratch folder, a
#         crash's input is kept there and printed. The raw-bytes dataset and checkpoint fuzzers
#         are run by hand (docs/reliability.md): HDF5 1.10 itself crashes on some damaged files,
#         which a time-boxed run would report.
#
#   scripts/test-sanitizers.sh [asan|tsan|fuzz|all] [--reduced] [--no-run]
#
# --reduced (what scripts/test.sh runs, to stay within CI's time on 2 cores): asan builds only
# the layers below the scheduler and the runtime (device, mlp, embedding, comm, data) with their
# unit tests, the data fuzz corpora, and their MPI tests at 2 ranks; the scheduler, the trainer,
# the recmix binary's end-to-end tests and the 1- and 4-rank runs are left to the full stage.
# RECMIX_SANITIZE_JOBS sets the build and test parallelism (default: the number of cores).
# Suppressions for third-party code are in tests/sanitizers/.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=all reduced=0 with_run=1
for arg in "$@"; do
  case "$arg" in
    asan | tsan | fuzz | all) stage=$arg ;;
    --reduced) reduced=1 ;;
    --with-run) with_run=1 ;;  # the default; kept for old command lines
    --no-run) with_run=0 ;;
    *) echo "usage: $0 [asan|tsan|fuzz|all] [--reduced] [--no-run]" >&2; exit 2 ;;
  esac
done
jobs=${RECMIX_SANITIZE_JOBS:-$(nproc)}
supp=$PWD/tests/sanitizers

# Every report stops the process with a non-zero status, so that the test fails. ctest passes
# these to the test commands and mpiexec to the ranks it starts. Allocation stacks are unwound
# fully (slower): MPI_Finalize unloads Open MPI's components, and a leak of theirs is then
# attributed to Open MPI's libraries only through the frames above the unloaded code.
export ASAN_OPTIONS="halt_on_error=1:abort_on_error=1:detect_leaks=1:check_initialization_order=1:fast_unwind_on_malloc=0"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:suppressions=$supp/tsan.supp"

# -O1: the usual level for sanitizer builds (readable stacks, tests not too slow).
configure() {  # configure <dir> <sanitizers> [cmake arguments...]
  local dir=$1 sanitizers=$2
  shift 2
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
    -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g1" -DRECMIX_SANITIZE="$sanitizers" -DRECMIX_WITH_CUDA=OFF \
    -DRECMIX_BUILD_BENCH=OFF "$@" >/dev/null
}

# The ASan + UBSan tree the asan and fuzz stages share (clang, for libFuzzer).
configure_asan() {
  CC=clang CXX=clang++ configure build-asan address,undefined,fuzzer-no-link -DRECMIX_FUZZ=ON
}

# The reduced stage's test programs: gtest unit tests (run directly) and MPI tests (ctest).
reduced_units=(tests/device/test_device tests/mlp/test_mlp tests/embedding/test_embedding
               tests/data/test_criteo_parser tests/data/test_data_format tests/data/test_data_reader
               tests/data/test_data_converter tests/data/test_data_synth)
reduced_mpi=(test_mpi_communicator test_group_communicator test_guarded_communicator test_epoch_communicator
             test_embedding_mpi test_tiered_mpi test_data_reader_mpi)
reduced_replays=(fuzz_criteo_line_replay fuzz_dataset_replay)

run_asan() {
  local t0=$SECONDS
  configure_asan
  if ((reduced)); then
    local targets=("${reduced_mpi[@]}" "${reduced_replays[@]}") u
    for u in "${reduced_units[@]}"; do targets+=("$(basename "$u")"); done
    cmake --build build-asan -j "$jobs" --target "${targets[@]}"
  else
    cmake --build build-asan -j "$jobs"
  fi
  echo "asan: built in $((SECONDS - t0)) s"
  local t1=$SECONDS
  if ((reduced)); then
    local names replays
    # The unit programs, $jobs at a time (the main stage's ctest runs them side by side too), each
    # one's output printed whole when it ends; any failure fails the stage once all have run.
    printf '%s\n' "${reduced_units[@]}" |
      RECMIX_SHARED_DIR=${RECMIX_SHARED_DIR:-$PWD/../shared} xargs -P "$jobs" -I{} bash -c \
        'out=$("build-asan/$1" --gtest_brief=1 2>&1); rc=$?; printf "asan: %s\n%s\n" "$1" "$out"; exit $((rc ? 1 : 0))' _ {} ||
      { echo "asan: a unit test program failed (above)" >&2; return 1; }
    names=$(IFS='|'; echo "${reduced_mpi[*]}")
    replays=$(IFS='|'; echo "${reduced_replays[*]}")
    (cd build-asan && ctest --output-on-failure -j "$jobs" --timeout 900 -R "^((${names})\.2ranks|${replays})$")
  else
    # Unit tests: everything but the MPI, end-to-end and Slurm tests; then the MPI tests.
    (cd build-asan && ctest --output-on-failure -j "$jobs" --timeout 900 -LE 'mpi|e2e|slurm')
    (cd build-asan && ctest --output-on-failure -j "$jobs" --timeout 900 -L mpi)
  fi
  echo "asan: tests ran in $((SECONDS - t1)) s"
}

run_tsan() {
  local t0=$SECONDS mpi=(test_group_communicator test_guarded_communicator test_epoch_communicator test_tiered_mpi
                         test_data_reader_mpi test_trainer test_checkpoint_integrity)
  CC=clang CXX=clang++ configure build-tsan thread
  local extra=()
  ((with_run)) && extra=(recmix)
  cmake --build build-tsan -j "$jobs" --target "${mpi[@]}" test_data_reader "${extra[@]}"
  local names
  names=$(IFS='|'; echo "${mpi[*]}")
  # As for recmix run below: the libraries that are not instrumented are not watched (one run
  # reported the writer thread of a background checkpoint, inside Open MPI, reading the main
  # thread's stack, where the main thread's own all-reduce had its buffer; docs/reliability.md).
  (cd build-tsan && TSAN_OPTIONS="$TSAN_OPTIONS:ignore_noninstrumented_modules=1" \
    ctest --output-on-failure -j "$jobs" --timeout 900 -R "^(${names})\.(1rank|2ranks)$")
  echo "tsan: test_data_reader"
  RECMIX_SHARED_DIR=${RECMIX_SHARED_DIR:-$PWD/../shared} build-tsan/tests/data/test_data_reader --gtest_brief=1
  if ((with_run)); then
    echo "tsan: recmix run (tests/runtime/run_end_to_end.sh co-location)"
    # Interceptor calls made by the libraries that are not instrumented (Open MPI, HDF5, oneDNN,
    # OpenBLAS, libgomp, libstdc++) are ignored here: with them, a 1-byte atomic read by a running
    # job's thread, of memory that later became a new job thread's stack, was reported, and no
    # 1-byte atomic of recmix lives on a stack (docs/reliability.md).
    TSAN_OPTIONS="$TSAN_OPTIONS:ignore_noninstrumented_modules=1" RECMIX_UNDER_SANITIZER=1 \
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1 \
      tests/runtime/run_end_to_end.sh "$PWD/build-tsan/recmix" "$PWD" co-location
  fi
  echo "tsan: built and ran in $((SECONDS - t0)) s"
}

run_fuzz() {
  local t0=$SECONDS seconds=${RECMIX_FUZZ_SECONDS:-15} scratch target
  local targets=(job_spec criteo_line checkpoint_edits dataset_edits)
  local cmake_targets=("${targets[@]}")
  configure_asan
  cmake --build build-asan -j "$jobs" --target "${cmake_targets[@]/#/fuzz_}"
  scratch=$(mktemp -d "${TMPDIR:-/tmp}/recmix-fuzz-XXXXXX")
  # The checkpoint target runs one MPI rank in-process. The fuzzers never finalise MPI (nothing of
  # Open MPI is unloaded), so allocation stacks can be unwound the fast way: 4-5x the inputs a
  # second of full unwinding.
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  local ASAN_OPTIONS=${ASAN_OPTIONS/fast_unwind_on_malloc=0/fast_unwind_on_malloc=1}
  export ASAN_OPTIONS
  for target in "${targets[@]}"; do
    local flags=() out="$scratch/$target"
    [[ -f fuzz/$target.dict ]] && flags=(-dict="fuzz/$target.dict")
    [[ $target == *_edits ]] && flags+=(-max_len=256)  # room for a few dozen edits
    mkdir -p "$out"
    echo "fuzz: $target for $seconds s"
    if ! "build-asan/fuzz/fuzz_$target" "${flags[@]}" -max_total_time="$seconds" -seed=1 -print_final_stats=1 \
         -artifact_prefix="$out/" "$out" "fuzz/corpus/$target" > "$out.log" 2>&1; then
      tail -40 "$out.log"
      echo "fuzz: $target found a crash; its input is in $out (kept)" >&2
      return 1
    fi
    grep -E "stat::number_of_executed_units" "$out.log" | sed "s/^/fuzz: $target: /"
  done
  rm -rf "$scratch"
  echo "fuzz: built and ran in $((SECONDS - t0)) s"
}

case "$stage" in
  asan) run_asan ;;
  tsan) run_tsan ;;
  fuzz) run_fuzz ;;
  all) run_asan; run_tsan; run_fuzz ;;
esac
