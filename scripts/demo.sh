#!/usr/bin/env bash
# Installs what is missing, builds, and trains a small DLRM on 2 ranks under mpirun on a
# synthetic dataset (the embedded default job), then evaluates it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh
exec launch/recmix-mpirun -np 2 build/recmix train --demo
