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
stage bash -c 'cd build && ctest --output-on-failure -j "$(nproc)" --timeout 600'
stage scripts/test-sanitizers.sh asan --reduced
stage scripts/test-sanitizers.sh tsan
stage scripts/test-sanitizers.sh fuzz
echo "test.sh: every stage passed in ${SECONDS} s"
