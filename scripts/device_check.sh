#!/usr/bin/env bash
# The GPU check of dmuon-bench, in one command on a machine with one NVIDIA GPU, the CUDA
# toolkit, CMake and Python (NCCL from PyTorch's nvidia-nccl package or the system) but no MPI,
# HDF5 or Kokkos. It builds tests/device out of the source tree and runs, within 8 minutes:
#   (a) dmuon_cuda_check: every CUDA kernel against an fp64 CPU oracle (Newton-Schulz also on
#       ill-conditioned and the engine's own step-1 inputs), then Newton-Schulz TFLOP/s
#       (direct-form FLOP count) against a cuBLAS bf16 GEMM at 4096x4096 and 4096x14336;
#   (b) dmuon_device_engine_check: the CUDA engine (--device cuda, NCCL at one rank) for every
#       method on moe/vla/llm, with --clip-norm, --accum and --route dtypes on llm, each with
#       --check against the host's one-process reference file; then one case with --trace (CUDA
#       events in stream order): every step present, no overlap per track, batches with bytes.
# Each stage has its own time limit (configure 25 s, build 230 s, kernels 90 s, engine 125 s:
# 470 s, under the 600 s a device command may run, so the summary is always written). Logs go
# straight into $OUT (else into the build directory), line-buffered, so a killed run still
# leaves what it printed: device_check.log, configure.txt, build.txt, kernels.txt, engine.txt
# and summary.txt (the one-screen summary, also printed at the end).
# What the GPU machine lacks is prepared here first:
#   scripts/device_check.sh --prepare   (after ./scripts/setup.sh) copies the header-only fmt,
#       nlohmann-json and CLI11 into .device/include and writes the references into
#       .device/references (about 55 MB; .device/ is git-ignored and travels as a carried
#       path; --prepare refuses a tree and .device over the 64 MiB that may travel).
#
# Multi-rank (--multirank, one call of at most 470 s that needs no build on the GPU machine):
#   scripts/device_check.sh --prepare-multirank   packs dmuon_bench built here with CUDA for
#       sm_90, dmuon_cuda_check, nccl_smoke, Debian's Open MPI (relocated through OPAL_PREFIX)
#       and their library closure into .device-mpi/mpi-pack.tar.xz (scripts/device_mpi_pack.sh;
#       about 21 MB: the one-rank references do not fit beside it in 64 MiB, so this is a call
#       of its own; carry .device-mpi);
#   scripts/device_check.sh --multirank   on the GPU machine: (a) dmuon_cuda_check from the pack
#       (kernel checks, the Newton-Schulz ratios) and (m) scripts/device_multirank.sh: a
#       two-process NCCL all-reduce smoke test, dmuon_bench --device cuda at 2 and 4 ranks on
#       the one GPU (each rank its own NCCL host), each case --check'ed with its one-rank run
#       beside it, and the fault-injection abort (every rank gone within 30 s). Logs in $OUT:
#       device_check.log, kernels.txt, multirank.txt, runs.tar.xz (each run's JSON and
#       stderr), summary.txt.
#
# Usage: scripts/device_check.sh [--prepare | --prepare-multirank | --multirank] [--help]
#        [-- extra args for dmuon_cuda_check]
# Environment: DMUON_DEVICE_MPI (the multi-rank pack's directory, default .device-mpi),
#   DMUON_DEVICE_BUILD (build dir, default /tmp/dmuon-device-build),
#   DMUON_DEVICE_DEPS (the prepared directory, default .device in the source tree),
#   DMUON_BUILD_DIR (--prepare: the full build, default build/), DMUON_CUDA_ARCH (default 90),
#   NCCL_HOME (dir with include/nccl.h and lib/libnccl.so*), OUT (the log directory, if set).
#   It sets NCCL_DEBUG=WARN and CUDA_MODULE_LOADING=EAGER for the checks.
# Works from any directory. Exit codes like the tools: 0 every check passed, 3 a check failed
# (or timed out), 2 usage or build error, 77 no GPU.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
# shellcheck source=cuda_root.sh
source "$root/scripts/cuda_root.sh"
deps="${DMUON_DEVICE_DEPS:-$root/.device}"
# Stage limits in seconds (sum 470 <= 480; `timeout -k 2` adds at most 2 s each).
readonly T_CONFIGURE=25 T_BUILD=230 T_KERNELS=90 T_ENGINE=125
# --multirank: the kernels from the pack, then the multi-rank stages (sum 470 <= 480).
readonly T_MR_KERNELS=90 T_MULTIRANK=380
mdeps="${DMUON_DEVICE_MPI:-$root/.device-mpi}"
readonly TRAVEL_LIMIT=$((64 * 1024 * 1024))

usage() { sed -n '2,/^[^#]/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

# Bytes of what travels to the device machine: the tracked tree plus the prepared directory
# ($1, default $deps).
travel_bytes() {
  local tree=0
  if git -C "$root" rev-parse >/dev/null 2>&1; then
    tree=$(git -C "$root" ls-files -z | (cd "$root" && du -cb --files0-from=- 2>/dev/null) |
           tail -1 | cut -f1)
  fi
  echo $((tree + $(du -sb "${1:-$deps}" | cut -f1)))
}

prepare() {
  local build="${DMUON_BUILD_DIR:-$root/build}"
  local tool="$build/tests/bin/dmuon_device_engine_check"  # a test helper: tests/bin, not bin/
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
    cp -a "/usr/include/$d" "$deps/include/" || return 2
  done
  "$tool" --write-references "$deps/references" || return 2
  local bytes
  bytes=$(travel_bytes)
  if ((bytes > TRAVEL_LIMIT)); then
    echo "device_check --prepare: the tree and $deps hold $((bytes / 1048576)) MiB, over the" \
         "64 MiB that may travel to the device machine" >&2
    return 2
  fi
  echo "# device_check --prepare: $(du -sh "$deps" | cut -f1) in $deps, $((bytes / 1048576)) MiB" \
       "travel with the tree (limit 64; carry .device)"
}

prepare_multirank() {
  rm -rf "$mdeps" || return 2
  bash "$root/scripts/device_mpi_pack.sh" "$mdeps" || return 2
  local bytes
  bytes=$(travel_bytes "$mdeps")
  if ((bytes > TRAVEL_LIMIT)); then
    echo "device_check --prepare-multirank: the tree and $mdeps hold $((bytes / 1048576)) MiB," \
         "over the 64 MiB that may travel to the device machine" >&2
    return 2
  fi
  echo "# device_check --prepare-multirank: $((bytes / 1048576)) MiB travel with the tree" \
       "(limit 64; carry .device-mpi)"
}

find_nccl() {
  if [[ -n "${NCCL_HOME:-}" ]]; then echo "$NCCL_HOME"; return; fi
  local cuda
  cuda="$(cuda_root)"
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

mode=single
case "${1:-}" in
  -h|--help) usage; exit 0 ;;
  --prepare) prepare; exit $? ;;
  --prepare-multirank) prepare_multirank; exit $? ;;
  --multirank) mode=multirank; shift; [[ "${1:-}" == -- ]] && shift ;;
  --) shift ;;
  "") ;;
  *) echo "device_check: unknown argument '$1' (valid: --prepare, --prepare-multirank, --multirank, --help, -- ARGS)" >&2; exit 2 ;;
esac

build="${DMUON_DEVICE_BUILD:-/tmp/dmuon-device-build}"
arch="${DMUON_CUDA_ARCH:-90}"
jobs="$(nproc 2>/dev/null || echo 4)"
if ! command -v nvcc >/dev/null 2>&1 && [[ -x /usr/local/cuda/bin/nvcc ]]; then
  export PATH="/usr/local/cuda/bin:$PATH"
fi
if [[ $mode == multirank && ! -f "$mdeps/mpi-pack.tar.xz" ]]; then
  echo "device_check: $mdeps is not prepared: run scripts/device_check.sh --prepare-multirank" \
       "here and carry .device-mpi" >&2
  exit 2
fi
if [[ $mode == single && ( ! -f "$deps/include/fmt/format.h" ||
      ! -f "$deps/references/moe-muon.ref" ) ]]; then
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
export NCCL_DEBUG=WARN CUDA_MODULE_LOADING=EAGER

logs="${OUT:-$build}"
mkdir -p "$build" "$logs" || exit 2
log="$logs/device_check.log"
: >"$log"
say() { echo "$@" | tee -a "$log"; }
# Line-buffered output of the checks (their stdio would buffer blocks into a file).
linebuf=()
if command -v stdbuf >/dev/null 2>&1; then linebuf=(stdbuf -oL -eL); fi
# run NAME LIMIT CMD...: CMD's output line-buffered into $logs/NAME.txt, under a time limit;
# sets rc_NAME and sec_NAME.
run() {
  local name=$1 limit=$2 start
  shift 2
  start=$(date +%s)
  timeout -k 2 "$limit" "${linebuf[@]}" "$@" >"$logs/$name.txt" 2>&1
  printf -v "rc_$name" %d $?
  printf -v "sec_$name" %d $(($(date +%s) - start))
}
status_of() {  # exit code -> word
  case $1 in 0) echo OK ;; 124|137) echo TIMEOUT ;; 77) echo "NO GPU" ;; skip) echo skipped ;;
    *) echo "FAILED($1)" ;; esac
}

rc_configure=skip rc_build=skip rc_kernels=skip rc_engine=skip
sec_configure=0 sec_build=0 sec_kernels=0 sec_engine=0
gpu="none visible"
summary() {
  local rc=$1 f="$logs/summary.txt"
  {
    echo "# ==== dmuon device check: $(date -u +%Y-%m-%dT%H:%M:%SZ) ===="
    echo "# GPU: $gpu; NCCL $nccl; NCCL_DEBUG=$NCCL_DEBUG CUDA_MODULE_LOADING=$CUDA_MODULE_LOADING"
    printf '# %-9s %-10s %4s s (limit %3d s)\n' configure "$(status_of "$rc_configure")" \
      "$sec_configure" "$T_CONFIGURE"
    printf '# %-9s %-10s %4s s (limit %3d s)\n' build "$(status_of "$rc_build")" "$sec_build" \
      "$T_BUILD"
    printf '# %-9s %-10s %4s s (limit %3d s)  %s\n' kernels "$(status_of "$rc_kernels")" \
      "$sec_kernels" "$T_KERNELS" "$(grep -m1 '^# checks:' "$logs/kernels.txt" 2>/dev/null)"
    printf '# %-9s %-10s %4s s (limit %3d s)  %s\n' engine "$(status_of "$rc_engine")" \
      "$sec_engine" "$T_ENGINE" "$(grep -m1 'cases passed' "$logs/engine.txt" 2>/dev/null)"
    grep -h '^# ratio' "$logs/kernels.txt" 2>/dev/null | head -4
    local failures
    failures=$(grep -h 'FAILED' "$logs/kernels.txt" "$logs/engine.txt" 2>/dev/null |
               grep -v '^# ' | head -10)
    if [[ -n "$failures" ]]; then echo "# first failures:"; echo "$failures"; fi
    case $rc in
      0) echo "# result: OK (exit 0)" ;;
      77) echo "# result: NO GPU: nothing was checked (exit 77)" ;;
      2) echo "# result: ERROR before the checks (exit 2): see configure.txt / build.txt" ;;
      *) echo "# result: FAILED (exit $rc)" ;;
    esac
    echo "# logs: $logs/{device_check.log,configure.txt,build.txt,kernels.txt,engine.txt}"
  } | sed 's/[[:space:]]*$//' >"$f"
  tee -a "$log" <"$f"
  exit "$rc"
}

# --multirank: its two stages and its one-screen summary (exits).
rc_multirank=skip sec_multirank=0
summary_multirank() {
  local rc=$1 f="$logs/summary.txt"
  {
    echo "# ==== dmuon multi-rank device check: $(date -u +%Y-%m-%dT%H:%M:%SZ) ===="
    echo "# GPU: $gpu; NCCL $nccl; NCCL_DEBUG=$NCCL_DEBUG CUDA_MODULE_LOADING=$CUDA_MODULE_LOADING"
    printf '# %-9s %-10s %4s s (limit %3d s)  %s\n' kernels "$(status_of "$rc_kernels")" \
      "$sec_kernels" "$T_MR_KERNELS" "$(grep -m1 '^# checks:' "$logs/kernels.txt" 2>/dev/null)"
    printf '# %-9s %-10s %4s s (limit %3d s)\n' multirank "$(status_of "$rc_multirank")" \
      "$sec_multirank" "$T_MULTIRANK"
    grep -h '^# ratio' "$logs/kernels.txt" 2>/dev/null | head -4
    grep -v '^# multirank' "$logs/multirank.txt" 2>/dev/null | head -13
    case $rc in
      0) echo "# result: OK (exit 0)" ;;
      77) echo "# result: NO GPU: nothing was checked (exit 77)" ;;
      2) echo "# result: ERROR before the checks (exit 2): see device_check.log" ;;
      *) echo "# result: FAILED (exit $rc)" ;;
    esac
    echo "# logs: $logs/{device_check.log,kernels.txt,multirank.txt,runs.tar.xz}"
  } | sed 's/[[:space:]]*$//' >"$f"
  tee -a "$log" <"$f"
  exit "$rc"
}
if [[ $mode == multirank ]]; then
  dir=/tmp/dmuon-mpi  # the pack's own top directory; unpacked afresh (never a stale one)
  rm -rf "$dir" && xz -dc "$mdeps/mpi-pack.tar.xz" | tar -C /tmp -xf - ||
    { say "# unpacking $mdeps/mpi-pack.tar.xz failed"; summary_multirank 2; }
  export NCCL_HOME="$nccl" DMUON_MULTIRANK_DIR="$dir"
  cuda_home="$(cuda_root)"
  if command -v nvidia-smi >/dev/null 2>&1; then
    gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 |
          head -1)
  fi
  say "# device_check --multirank: pack $(cat "$dir/PACKED"); GPU: $gpu; logs in $logs"
  say "# (a) kernels against an fp64 oracle, Newton-Schulz against cuBLAS (from the pack)"
  LD_LIBRARY_PATH="$cuda_home/lib64:$cuda_home/lib:$LD_LIBRARY_PATH" \
    run kernels "$T_MR_KERNELS" "$dir/bin/dmuon_cuda_check" "$@"
  if [[ $rc_kernels -eq 77 ]]; then summary_multirank 77; fi
  say "# (m) NCCL smoke, dmuon_bench --device cuda at 2 and 4 ranks, the fault abort"
  run multirank "$T_MULTIRANK" bash "$root/scripts/device_multirank.sh" \
    "$mdeps/mpi-pack.tar.xz" "$logs" $((T_MULTIRANK - 15))
  rc=0
  for code in "$rc_kernels" "$rc_multirank"; do
    if [[ $code -eq 77 ]]; then
      [[ $rc -eq 0 ]] && rc=77
    elif [[ $code -ne 0 ]]; then
      rc=3
    fi
  done
  summary_multirank $rc
fi

say "# device_check: configuring $build (CUDA arch $arch, NCCL $nccl, logs in $logs)"
run configure "$T_CONFIGURE" cmake -S "$root/tests/device" -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CUDA_ARCHITECTURES="$arch" -DNCCL_HOME="$nccl" -DDMUON_DEVICE_DEPS="$deps"
if [[ $rc_configure -ne 0 ]]; then
  tail -20 "$logs/configure.txt" | tee -a "$log" >&2
  summary 2
fi
say "# device_check: building with -j$jobs"
run build "$T_BUILD" cmake --build "$build" -j"$jobs"
if [[ $rc_build -ne 0 ]]; then
  grep -m 20 -E "error|Error" "$logs/build.txt" | tee -a "$log" >&2
  summary 2
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  gpu=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 |
        head -1)
fi
say "# device_check: built in $sec_build s; GPU: $gpu"
say "# (a) kernels against an fp64 oracle, Newton-Schulz against cuBLAS"
run kernels "$T_KERNELS" "$build/dmuon_cuda_check" "$@"
if [[ $rc_kernels -eq 77 ]]; then summary 77; fi
say "# (b) the CUDA engine at one rank, every case, --check against host reference files"
run engine "$T_ENGINE" "$build/dmuon_device_engine_check" --references "$deps/references"
rc=0
for code in "$rc_kernels" "$rc_engine"; do
  if [[ $code -eq 77 ]]; then
    [[ $rc -eq 0 ]] && rc=77
  elif [[ $code -ne 0 ]]; then
    rc=3
  fi
done
summary $rc
