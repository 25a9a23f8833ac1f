#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (unit, MPI at 1/2/4 ranks, end to end,
# Slurm launch). This is what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --with-slurm
scripts/build.sh
cd build
ctest --output-on-failure -j "$(nproc)" --timeout 600
