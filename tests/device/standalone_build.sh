#!/usr/bin/env bash
# Builds tests/device as its own project, exactly as scripts/device_check.sh does on the GPU
# machine (which has no time to spare for a broken source list), and fails on any compiler
# warning or link error. Usage: standalone_build.sh SOURCE_DIR BUILD_DIR DEPS_DIR NCCL_HOME
set -uo pipefail
src=$1 build=$2 deps=$3 nccl=$4
mkdir -p "$build"
if ! cmake -S "$src" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
     -DNCCL_HOME="$nccl" -DDMUON_DEVICE_DEPS="$deps" >"$build/configure.txt" 2>&1; then
  tail -20 "$build/configure.txt"; echo "FAILED: configure"; exit 1
fi
if ! cmake --build "$build" -j2 >"$build/build.txt" 2>&1; then
  grep -E "error|undefined reference" "$build/build.txt" | head -30; echo "FAILED: build"; exit 1
fi
if grep -E "warning" "$build/build.txt"; then echo "FAILED: compiler warnings"; exit 1; fi
echo "standalone device build OK: $(ls "$build"/dmuon_cuda_check "$build"/dmuon_device_engine_check)"
