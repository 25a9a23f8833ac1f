#!/usr/bin/env bash
# Installs what is missing, builds, and runs the built-in example under mpirun on 2 ranks: four
# small DLRM training jobs on a synthetic dataset, placed side by side by the co-location
# scheduler (recmix run --demo; docs/run.md); then writes the run's report (docs/report.md).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
# --force: the last demo's run directory, when there is one, is moved aside to runs/demo-run.<time>.
launch/recmix-mpirun -np 2 build/recmix run --demo --force
build/recmix report runs/demo-run -o runs/demo-run/report.html --force -q
echo "report: $(pwd)/runs/demo-run/report.html"
