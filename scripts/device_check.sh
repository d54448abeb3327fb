#!/usr/bin/env bash
# GPU check for the CUDA kernels: builds the CUDA-only standalone target
# (kernels/cuda/standalone: needs only the CUDA toolkit + CMake) and runs dmuon_cuda_check,
# which compares every CUDA kernel with an fp64 CPU oracle and benchmarks bf16 Newton–Schulz
# on 4096x4096 and 4096x14336 against cuBLAS GEMM. Runs in well under 5 minutes on an H100/H200.
#
# Exit codes: 0 OK, 1 a check failed, 2 build or unexpected error, 77 no GPU present.
# Environment: DMUON_CUDA_BUILD (build dir, default build-cuda-standalone),
#              DMUON_CUDA_ARCH (default 90), extra arguments go to dmuon_cuda_check (--iters N).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${DMUON_CUDA_BUILD:-$root/build-cuda-standalone}"
arch="${DMUON_CUDA_ARCH:-90}"
jobs="$(nproc 2>/dev/null || echo 4)"

if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi

mkdir -p "$build"
echo "# device_check: configuring $build (CUDA arch $arch)"
if ! cmake -S "$root/kernels/cuda/standalone" -B "$build" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" >"$build/configure.log" 2>&1; then
  cat "$build/configure.log" >&2
  echo "device_check: FAILED to configure the CUDA standalone build" >&2
  exit 2
fi
echo "# device_check: building with -j$jobs"
if ! timeout 200 cmake --build "$build" -j"$jobs" >"$build/build.log" 2>&1; then
  tail -50 "$build/build.log" >&2
  echo "device_check: FAILED to build the CUDA standalone target" >&2
  exit 2
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
fi

timeout 240 "$build/dmuon_cuda_check" "$@"
rc=$?
case $rc in
  0) echo "# device_check: OK" ;;
  77) echo "# device_check: NO GPU present (cudaGetDeviceCount failed or returned 0); nothing was checked" >&2 ;;
  124) echo "# device_check: FAILED: dmuon_cuda_check timed out" >&2 ;;
  *) echo "# device_check: FAILED (exit $rc)" >&2 ;;
esac
exit $rc
