#!/usr/bin/env bash
# Packs what bench/device/gpu_suite.sh needs on a GPU machine that has the NVIDIA driver, CUDA's
# runtime libraries (cuBLAS, NCCL) and glibc, but none of recmix's Debian libraries: the CUDA build's
# binaries, every shared library they load from the Debian system except glibc's, the C++ runtime and
# CUDA's own (those of the GPU machine are used), and Open MPI's and PMIx's plugin folders with the
# files they read at start-up. The plugins are found through Open MPI's and PMIx's relocation
# variables (env.sh in the bundle), so nothing is written outside the bundle's folder there.
#   bench/device/bundle.sh [build dir] [output .tar.xz]
# The output (default <build>/gpu-bundle.tar.xz) is what a GPU run carries; gpu_suite.sh unpacks it.
set -euo pipefail
build=$(realpath "${1:-build}")
out=${2:-$build/gpu-bundle.tar.xz}
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
b=$stage/gpu-bundle
mkdir -p "$b/bin" "$b/lib" "$b/etc"

# The binaries: recmix, the GPU benchmarks and the test binaries that hold CUDA, cuBLAS or NCCL
# tests (some instantiate them only where a GPU is visible, so they are named here, not listed).
bins=(recmix bench/train/bench_precision bench/train/bench_train_step bench/train/bench_dcn
  tests/device/test_device tests/comm/test_nccl_communicator tests/comm/test_device_capture
  tests/mlp/test_mlp tests/embedding/test_embedding
  tests/runtime/test_strict_trainer tests/runtime/test_tiered_trainer tests/runtime/test_precision_trainer
  tests/runtime/test_graph_steps)
for rel in "${bins[@]}"; do
  [[ -x $build/$rel ]] || { echo "bundle: $build/$rel missing (scripts/build.sh builds it, benchmarks included; scripts/test.sh leaves them out)" >&2; exit 1; }
  cp "$build/$rel" "$b/bin/"
done

# Libraries the loader must find outside the GPU machine's system: everything ldd resolves under
# the Debian library folders, less glibc, the C++ runtime and anything of CUDA or the driver.
skip='^(ld-linux|libc|libm|libdl|libpthread|librt|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libnvidia|libcublas|libcudart|libnccl|libnvrtc|libnvJitLink)\.'
ompi=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
pmix=/usr/lib/x86_64-linux-gnu/pmix2/lib/pmix
collect() {  # collect <file>...: copy the Debian libraries these files need into lib/
  ldd "$@" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// { print $3 }' | sort -u | while IFS= read -r lib; do
    name=$(basename "$lib")
    [[ $name =~ $skip ]] && continue
    [[ $lib == /usr/local/* ]] && continue
    [[ -e $b/lib/$name ]] || cp -L "$lib" "$b/lib/$name"
  done
}
collect "$b"/bin/*
# The CUPTI timeline (gpu_suite.sh step 3) and the CUPTI it was built against: its records are
# read with that version's layouts.
timeline=$build/bench/device/libgpu_timeline.so
if [[ -f $timeline ]]; then
  cp "$timeline" "$b/lib/"
  cupti=$(ldd "$timeline" | awk '/libcupti\.so/ { print $3 }')
  [[ -n $cupti ]] && cp -L "$cupti" "$b/lib/"
fi
mkdir -p "$b/openmpi3" "$b/pmix"
cp -L "$ompi"/*.so "$b/openmpi3/"
cp -L "$pmix"/*.so "$b/pmix/"
collect "$b"/openmpi3/*.so "$b"/pmix/*.so
mkdir -p "$b/share"
cp -r /usr/share/openmpi "$b/share/openmpi"
[[ -d /usr/lib/x86_64-linux-gnu/pmix2/share ]] && cp -r /usr/lib/x86_64-linux-gnu/pmix2/share "$b/share/pmix"
cp /etc/openmpi/*.conf "$b/etc/" 2>/dev/null || true

cat > "$b/env.sh" <<'ENV'
# Sourced by gpu_suite.sh: the bundle's libraries first, then the GPU machine's CUDA libraries
# (its toolkit's lib64, and the pip wheels of PyTorch's environment where the toolkit lacks one).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
cuda_libs=/usr/local/cuda/lib64:/usr/local/cuda/lib
for d in /opt/torch/.venv/lib/python3*/site-packages/nvidia/*/lib; do
  [[ -d $d ]] && cuda_libs+=":$d"
done
export LD_LIBRARY_PATH="$here/lib:$cuda_libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PATH="$here/bin:$PATH"
# Open MPI 4.1 and PMIx relocated into the bundle; one rank, started without mpirun.
export OPAL_PKGLIBDIR="$here/openmpi3" OPAL_PKGDATADIR="$here/share/openmpi" OPAL_SYSCONFDIR="$here/etc"
export OMPI_MCA_mca_base_component_path="$here/openmpi3"
export PMIX_PKGLIBDIR="$here/pmix" PMIX_MCA_mca_base_component_path="$here/pmix"
export OMPI_MCA_ess_singleton_isolated=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
ENV
tar -C "$stage" -cf - gpu-bundle | xz -T0 -6 > "$out"
echo "bundle: $out ($(du -h "$out" | cut -f1), ${#bins[@]} binaries, $(ls "$b/lib" | wc -l) libraries)"
