#!/usr/bin/env bash
# Stages what scripts/gpu-check.sh runs into one small folder, for a GPU
# machine that has the same PyTorch (LibTorch) and CUDA but not sacplan's
# build dependencies (abseil, CLI11, nlohmann/json, Eigen, GoogleTest,
# Google Benchmark), so nothing has to be built there:
#
#   bash scripts/gpu-bundle.sh [DIR]        # default build-gpu-bundle
#   SACPLAN_GPU_CHECK_PREBUILT=DIR bash scripts/gpu-check.sh   # on the GPU
#
# It builds preset "default" with the CUDA profiler (CUPTI) on, then copies
# the sacplan CLI, the gpu-labelled test programs and bench_kernels into DIR
# at their paths under build/, and into DIR/lib every shared library they
# load that the GPU machine is not expected to have: all but the C and C++
# runtimes, LibTorch and the CUDA libraries, which gpu-check.sh finds there
# from its python3's torch. The binaries need glibc 2.34 at most.
#
# The PyTorch bridge's planner extension (sacplan_torch._planner) must match
# the GPU machine's Python, so it is built there: DIR/deps/usr holds the
# headers, CMake package files and abseil libraries its build needs
# (nlohmann/json, abseil, CLI11, Eigen), laid out as under /usr so that the
# package files find them relative to themselves.
set -euo pipefail
cd "$(dirname "$0")/.."

dest="${1:-build-gpu-bundle}"
programs=(cli/sacplan cli/sacplan-torch tests/kernels/sacplan_kernels_gpu_test
          tests/profiler/sacplan_cuda_profiler_test tests/executor/sacplan_cuda_offload_test
          bench/bench_kernels)

cmake --preset default -DSACPLAN_WITH_CUPTI=ON >/dev/null
cmake --build --preset default --target sacplan sacplan-torch sacplan_kernels_gpu_test \
  sacplan_cuda_profiler_test sacplan_cuda_offload_test bench_kernels
rm -rf "$dest"
mkdir -p "$dest/lib"
for program in "${programs[@]}"; do
  if [ ! -x "build/$program" ]; then
    echo "gpu-bundle: build/$program was not built (is CUDA found?)" >&2
    exit 2
  fi
  mkdir -p "$dest/$(dirname "$program")"
  cp "build/$program" "$dest/$program"
  # ldd lines read "name => path (address)"; keep the libraries to carry.
  ldd "build/$program" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}' |
    while read -r name path; do
      case "$name" in
        libc.so* | libm.so* | libdl.so* | librt.so* | libpthread.so* | libutil.so* | \
          libstdc++.so* | libgcc_s.so* | libgomp.so* | libtorch* | libc10* | \
          libcuda.so* | libcudart.so* | libcupti.so* | libnv* | libcu* | libnccl* | \
          libcudnn*) ;;
        *) cp -L "$path" "$dest/lib/$name" ;;
      esac
    done
done

deps="$dest/deps/usr"
arch_lib=lib/x86_64-linux-gnu
mkdir -p "$deps/include" "$deps/$arch_lib/cmake" "$deps/share/cmake" "$deps/share/eigen3"
for header_dir in absl nlohmann CLI eigen3; do
  cp -r "/usr/include/$header_dir" "$deps/include/"
done
cp -r "/usr/$arch_lib/cmake/absl" "$deps/$arch_lib/cmake/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$deps/share/cmake/"
cp -r /usr/share/eigen3/cmake "$deps/share/eigen3/"
# abseil's package files name each library by its versioned file.
cp -L /usr/$arch_lib/libabsl_*.so.* "$deps/$arch_lib/"

echo "gpu-bundle: wrote $dest ($(du -sh "$dest" | cut -f1)): ${programs[*]} and $(ls "$dest/lib" | wc -l) libraries"
