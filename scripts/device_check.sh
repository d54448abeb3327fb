#!/usr/bin/env bash
# The GPU check of dmuon-bench, in one command on a machine with one NVIDIA GPU, the CUDA
# toolkit, CMake and Python (NCCL from PyTorch's nvidia-nccl package or the system) but no MPI,
# HDF5 or Kokkos. It builds out of the source tree and runs, within about 8 minutes on an H200:
#   (a) dmuon_cuda_check: every CUDA kernel against an fp64 CPU oracle, then Newton-Schulz
#       TFLOP/s (direct-form FLOP count) against a cuBLAS bf16 GEMM at 4096x4096 and 4096x14336;
#   (b) dmuon_device_engine_check: the CUDA engine (--device cuda, NCCL at one rank) for every
#       method on moe/vla/llm, each with --check against the host's one-process reference.
# What the GPU machine lacks is prepared here first:
#   scripts/device_check.sh --prepare   (after ./scripts/setup.sh) copies the header-only fmt,
#       nlohmann-json and CLI11 into .device/include and writes the references into
#       .device/references (a few MB; .device/ is git-ignored and travels as a carried path).
#
# Usage: scripts/device_check.sh [--prepare] [--help] [-- extra args for dmuon_cuda_check]
# Environment: DMUON_DEVICE_BUILD (build dir, default /tmp/dmuon-device-build),
#   DMUON_CUDA_ARCH (default 90), NCCL_HOME (dir with include/nccl.h and lib/libnccl.so*),
#   OUT (if set, logs and the summary are copied there).
# Works from any directory. Exit codes like the tools: 0 every check passed, 3 a check failed
# (or timed out), 2 usage or build error, 77 no GPU.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="$root/.device"

usage() { sed -n '2,/^[^#]/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

prepare() {
  local build="${DMUON_BUILD_DIR:-$root/build}"
  local tool="$build/bin/dmuon_device_engine_check"
  if [[ ! -x "$tool" ]]; then
    echo "device_check --prepare: $tool is missing: run ./scripts/setup.sh first" >&2
    return 2
  fi
  rm -rf "$deps" && mkdir -p "$deps/include" "$deps/references" || return 2
  local d
  for d in fmt nlohmann CLI; do
    if [[ ! -d "/usr/include/$d" ]]; then
      echo "device_check --prepare: /usr/include/$d is missing (libfmt-dev, nlohmann-json3-dev, libcli11-dev)" >&2
      return 2
    fi
    cp -r "/usr/include/$d" "$deps/include/" || return 2
  done
  "$tool" --write-references "$deps/references" || return 2
  echo "# device_check --prepare: $(du -sh "$deps" | cut -f1) in $deps (carry .device)"
}

find_nccl() {
  if [[ -n "${NCCL_HOME:-}" ]]; then echo "$NCCL_HOME"; return; fi
  local cuda
  cuda="$(dirname "$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")")"
  if [[ -f "$cuda/include/nccl.h" ]]; then echo "$cuda"; return; fi
  if [[ -f /usr/include/nccl.h ]]; then echo /usr; return; fi
  python3 - <<'PY' 2>/dev/null
import os
try:
    import nvidia.nccl as n
    print(list(n.__path__)[0])
except Exception:
    pass
PY
}

case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --prepare) prepare; exit $? ;;
  --) shift ;;
  "") ;;
  *) echo "device_check: unknown argument '$1' (valid: --prepare, --help, -- ARGS)" >&2; exit 2 ;;
esac

build="${DMUON_DEVICE_BUILD:-/tmp/dmuon-device-build}"
arch="${DMUON_CUDA_ARCH:-90}"
jobs="$(nproc 2>/dev/null || echo 4)"
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [[ ! -f "$deps/include/fmt/format.h" || ! -f "$deps/references/moe-muon.ref" ]]; then
  echo "device_check: $deps is not prepared: run scripts/device_check.sh --prepare where the" \
       "full build is, and carry .device" >&2
  exit 2
fi
nccl="$(find_nccl)"
if [[ -z "$nccl" ]]; then
  echo "device_check: NCCL not found (set NCCL_HOME, or install PyTorch's nvidia-nccl package)" >&2
  exit 2
fi
# pip's NCCL ships lib/libnccl.so.2 only: the loader needs its directory.
export LD_LIBRARY_PATH="$nccl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

mkdir -p "$build"
log="$build/device_check.log"
: >"$log"
say() { echo "$@" | tee -a "$log"; }
finish() {
  if [[ -n "${OUT:-}" && -d "${OUT:-}" ]]; then cp "$log" "$build"/*.txt "$OUT"/ 2>/dev/null; fi
  exit "$1"
}

say "# device_check: configuring $build (CUDA arch $arch, NCCL $nccl)"
if ! cmake -S "$root/tests/device" -B "$build" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_CUDA_ARCHITECTURES="$arch" -DNCCL_HOME="$nccl" -DDMUON_DEVICE_DEPS="$deps" \
     >"$build/configure.txt" 2>&1; then
  tail -30 "$build/configure.txt" | tee -a "$log" >&2
  say "device_check: FAILED to configure tests/device"
  finish 2
fi
say "# device_check: building with -j$jobs"
start=$(date +%s)
if ! timeout 330 cmake --build "$build" -j"$jobs" >"$build/build.txt" 2>&1; then
  grep -m 20 -E "error|Error" "$build/build.txt" | tee -a "$log" >&2
  tail -20 "$build/build.txt" | tee -a "$log" >&2
  say "device_check: FAILED to build (see $build/build.txt)"
  finish 2
fi
say "# device_check: built in $(( $(date +%s) - start )) s"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$log"
fi

say "# (a) kernels against an fp64 oracle, Newton-Schulz against cuBLAS"
timeout 180 "$build/dmuon_cuda_check" "$@" 2>&1 | tee "$build/kernels.txt" | tee -a "$log"
rc_kernels=${PIPESTATUS[0]}
if [[ $rc_kernels -eq 77 ]]; then
  say "# device_check: NO GPU present; nothing was checked"
  finish 77
fi
say "# (b) the CUDA engine at one rank, every method, --check against host references"
timeout 150 "$build/dmuon_device_engine_check" --references "$deps/references" 2>&1 \
  | tee "$build/engine.txt" | tee -a "$log"
rc_engine=${PIPESTATUS[0]}

rc=0
for pair in "kernels:$rc_kernels" "engine:$rc_engine"; do
  name=${pair%%:*}; code=${pair##*:}
  case $code in
    0) say "# device_check: $name OK" ;;
    124) say "# device_check: $name FAILED: timed out"; rc=3 ;;
    77) say "# device_check: $name: no GPU"; [[ $rc -eq 0 ]] && rc=77 ;;
    *) say "# device_check: $name FAILED (exit $code)"; rc=3 ;;
  esac
done
finish $rc
