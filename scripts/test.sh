#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, MPI at 1/2/4 ranks, end to end,
# Slurm launch), then the sanitizer stages: the reduced ASan + UBSan stage (the layers below the
# scheduler and the runtime, their unit tests and MPI tests at 2 ranks), the TSan stage (the
# threaded communicators and the tiered embedding's staging thread) and a time-boxed libFuzzer
# run of the job-spec and Criteo-line parsers (scripts/test-sanitizers.sh; its `asan` stage
# without --reduced runs every test). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# stage <command...>: runs it and says how long it took (CI's time budget is spent here).
stage() {
  local t0=$SECONDS
  "$@"
  echo "test.sh: '$*' took $((SECONDS - t0)) s"
}
stage scripts/install-deps.sh --with-slurm
# The benchmarks are not built here: no test runs them, and they were about a seventh of the
# build's compile time (scripts/build.sh builds them; bench/RESULTS.md says how each is run).
stage scripts/build.sh -DRECMIX_BUILD_BENCH=OFF
# The sanitizer trees are built while the main tests run, at the lowest priority (nice 19): the
# end-to-end tests spend much of their time waiting on runs, and leave about half of the two cores
# idle, which the builds take. The sanitizer stages then find their trees built (or finish them).
# Its own session (setsid), so that the builds end with this script whatever happens.
setsid bash -c 'for s in "asan --reduced" fuzz tsan; do nice -n 19 scripts/test-sanitizers.sh $s --build-only || exit 1; done' \
  > build/sanitizer-builds.log 2>&1 &
prebuild_pid=$!
trap 'kill -- -"$prebuild_pid" 2>/dev/null || true' EXIT
stage bash -c 'cd build && ctest --output-on-failure -j "$(nproc)" --timeout 600'
wait_prebuild() {
  wait "$prebuild_pid" || { tail -50 build/sanitizer-builds.log; echo "test.sh: the sanitizer builds failed" >&2; return 1; }
  grep -E "built in" build/sanitizer-builds.log
}
stage wait_prebuild
trap - EXIT
stage scripts/test-sanitizers.sh asan --reduced
stage scripts/test-sanitizers.sh tsan
stage scripts/test-sanitizers.sh fuzz
echo "test.sh: every stage passed in ${SECONDS} s"
