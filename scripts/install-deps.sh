#!/usr/bin/env bash
# Installs the Debian 12 packages recmix builds, tests and runs with, when any is missing.
# Usage: scripts/install-deps.sh [--with-slurm]
set -euo pipefail
packages=(build-essential cmake pkg-config git
  openmpi-bin libopenmpi-dev libhdf5-openmpi-dev hdf5-tools libopenblas-dev libdnnl-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev libtomlplusplus-dev nlohmann-json3-dev libspdlog-dev libfmt-dev zlib1g-dev libxxhash-dev
  clang libclang-rt-14-dev lld libomp-dev python3-h5py python3-numpy
  libjs-chart.js chromium)  # recmix report: Chart.js inlined at build time; Chromium for its tests
if [[ "${1:-}" == "--with-slurm" ]]; then
  packages+=(slurm-wlm munge)
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get -o DPkg::Lock::Timeout=600 update -qq
  $SUDO apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}"
fi
