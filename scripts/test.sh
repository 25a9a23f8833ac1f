#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, MPI at 1/2/4 ranks, end to end,
# Slurm launch), then the reduced sanitizer stage: ASan + UBSan over the layers below the
# scheduler and the runtime, their unit tests and MPI tests at 2 ranks
# (scripts/test-sanitizers.sh runs the full stages). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --with-slurm
scripts/build.sh
(cd build && ctest --output-on-failure -j "$(nproc)" --timeout 600)
scripts/test-sanitizers.sh asan --reduced
