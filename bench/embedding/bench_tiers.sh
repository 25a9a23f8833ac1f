#!/usr/bin/env bash
# The embedding layer's hot/cold tiers against untiered tables (bench/embedding/bench_tiers.cpp),
# with its default settings: one rank, CPU backend, 26 tables x 1M rows, dim 16, batch 2048, Zipf
# 0.8 / 1.05 / 1.2, one-hot and multi-hot, hot fractions 1-20%, and the 4x device-memory case.
# Builds nothing: build the bench_tiers target first. Extra arguments go to the bench.
#   bench/embedding/bench_tiers.sh [build dir] [bench options...]
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
build=$src/build
if [[ $# -gt 0 && $1 != -* ]]; then build=$1; shift; fi
bench="$build/bench/embedding/bench_tiers"
[[ -x "$bench" ]] || { echo "bench_tiers.sh: $bench not found (cmake --build $build --target bench_tiers)" >&2; exit 1; }
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
echo "command: $bench $*"
exec "$bench" "$@"
