#!/usr/bin/env bash
# Configures and builds recmix in build/ (Release), the benchmarks included. Extra arguments go
# to cmake's configure step, after these (scripts/test.sh leaves the benchmarks out with
# -DRECMIX_BUILD_BENCH=OFF; a later plain build.sh builds them again).
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DRECMIX_BUILD_BENCH=ON "$@"
cmake --build build -j "$jobs"
