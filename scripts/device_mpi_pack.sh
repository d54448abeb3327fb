#!/usr/bin/env bash
# Packs what the multi-rank GPU check needs and the GPU machine lacks (it has the CUDA toolkit,
# cuBLAS, NCCL and a newer glibc/libstdc++, but no MPI, HDF5, Kokkos or BLAS): dmuon_bench built
# here with CUDA for sm_90, dmuon_cuda_check (kernels/cuda/standalone: the kernel checks and the
# Newton-Schulz ratios), nccl_smoke (tests/device/nccl_smoke.cpp), Debian's Open MPI runtime
# laid out under one prefix so it relocates through OPAL_PREFIX (its plugins and help files
# from there; PMIx's three optional plugins are not found there, which only costs a warning), and
# the shared-library closure of all of them, less what the GPU machine brings (glibc,
# libstdc++/libgcc, CUDA runtime, cuBLAS, NCCL). One xz tarball, <deps>/mpi-pack.tar.xz.
#
# Usage: scripts/device_mpi_pack.sh DEPS_DIR
# Environment: DMUON_DEVICE_BENCH_BUILD (the CUDA build of dmuon_bench, default build-device/ in
#   the source tree: configured and built here when missing), DMUON_DEVICE_CUDA_CHECK_BUILD
#   (kernels/cuda/standalone's build, default build-cuda-check/, likewise), DMUON_CUDA_ARCH
#   (default 90).
# Exit 0 packed (prints its size), 2 anything missing or failing.
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
deps="${1:?usage: device_mpi_pack.sh DEPS_DIR}"
build="${DMUON_DEVICE_BENCH_BUILD:-$root/build-device}"
check_build="${DMUON_DEVICE_CUDA_CHECK_BUILD:-$root/build-cuda-check}"
arch="${DMUON_CUDA_ARCH:-90}"
ompi_lib=/usr/lib/x86_64-linux-gnu/openmpi/lib
pmix=/usr/lib/x86_64-linux-gnu/pmix2
# shellcheck source=cuda_root.sh
source "$root/scripts/cuda_root.sh"
cuda="$(cuda_root)"
nccl="${NCCL_HOME:-$cuda}"

die() { echo "device_mpi_pack: $*" >&2; exit 2; }

for f in /usr/bin/orterun "$ompi_lib/openmpi3" /usr/share/openmpi "$pmix/lib/libpmix.so.2" \
         "$nccl/include/nccl.h"; do
  [[ -e "$f" ]] || die "$f is missing (Debian's openmpi-bin and libopenmpi-dev, the CUDA toolkit with NCCL)"
done

# dmuon_bench with CUDA kernels for the GPU's architecture (the tests need not be built).
if [[ ! -x "$build/bin/dmuon_bench" ]]; then
  echo "# device_mpi_pack: building dmuon_bench with CUDA (sm_$arch) in $build"
  cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    -DDMUON_ENABLE_CUDA=ON -DDMUON_ENABLE_TESTS=OFF -DDMUON_ENABLE_BENCHMARKS=OFF >/dev/null ||
    die "configuring $build failed"
  cmake --build "$build" --target dmuon_bench -j 1 >/dev/null || die "building dmuon_bench failed"
fi
grep -q "^CMAKE_CUDA_ARCHITECTURES:[A-Z]*=$arch\$" "$build/CMakeCache.txt" &&
  [[ "$(ldd "$build/bin/dmuon_bench")" == *libnccl* ]] ||
  die "$build is not a CUDA + NCCL build for sm_$arch"

if [[ ! -x "$check_build/dmuon_cuda_check" ]]; then
  echo "# device_mpi_pack: building dmuon_cuda_check (sm_$arch) in $check_build"
  cmake -S "$root/kernels/cuda/standalone" -B "$check_build" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_ARCHITECTURES="$arch" >/dev/null &&
    cmake --build "$check_build" --target dmuon_cuda_check -j 1 >/dev/null ||
    die "building dmuon_cuda_check failed"
fi

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
p="$stage/dmuon-mpi"
mkdir -p "$p/bin" "$p/lib" "$p/share/dmuon" "$p/lib/x86_64-linux-gnu/openmpi/lib" \
         "$p/share" "$p/pmix2/lib" "$p/pmix2/share" || die "cannot write $stage"
cp "$build/bin/dmuon_bench" "$check_build/dmuon_cuda_check" "$p/bin/" ||
  die "cannot copy the programs"
cp -rL "$root/configs" "$p/share/dmuon/configs"
# shellcheck disable=SC2046
g++ -O2 -std=c++17 -Wall -Wextra -DOMPI_SKIP_MPICXX -o "$p/bin/nccl_smoke" "$root/tests/device/nccl_smoke.cpp" \
  -I"$cuda/include" -I"$nccl/include" $(mpicxx --showme:compile) -L"$nccl/lib" -L"$cuda/lib" \
  -L"$cuda/lib64" -lnccl -lcudart \
  $(mpicxx --showme:link) || die "building nccl_smoke failed"
# Open MPI under its configured layout, relative to the prefix (/usr -> $p).
cp /usr/bin/orterun "$p/bin/" && ln -s orterun "$p/bin/mpirun"
cp -r "$ompi_lib/openmpi3" "$p/lib/x86_64-linux-gnu/openmpi/lib/"
cp -r /usr/share/openmpi "$p/share/"
cp -r "$pmix/lib/pmix" "$p/pmix2/lib/"
[[ -d "$pmix/share/pmix" ]] && cp -r "$pmix/share/pmix" "$p/pmix2/share/"

# The closure: every library the programs and plugins load, less the GPU machine's own.
brought='^(linux-vdso|ld-linux|libc|libm|libdl|librt|libpthread|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libnccl|libnvidia)\.'
objects=("$p/bin/dmuon_bench" "$p/bin/dmuon_cuda_check" "$p/bin/nccl_smoke" "$p/bin/orterun")
while IFS= read -r -d '' so; do objects+=("$so"); done < <(find "$p/lib" "$p/pmix2" -name '*.so' -print0)
missing=$(ldd "${objects[@]}" 2>/dev/null | grep 'not found' | sort -u)
# Plugins of transports nobody runs here (verbs, UCX, libfabric, PSM) may lack their libraries:
# Open MPI skips a plugin it cannot open. Anything else missing is an error.
[[ -n "$(grep -v -E 'libucp|libucs|libuct|libfabric|libpsm|libibverbs|librdmacm|libjvm|libjava' <<<"$missing")" ]] &&
  die "unresolved libraries: $missing"
ldd "${objects[@]}" 2>/dev/null | awk '/=> \//{print $1, $3}' | sort -u |
  while read -r name path; do
    [[ "$name" =~ $brought ]] && continue
    [[ -e "$p/lib/$name" ]] || cp -L "$path" "$p/lib/$name"
  done
# The runner the device check starts every rank through: its own NCCL "host" per rank.
cat >"$p/bin/nccl_host_per_rank" <<'SH'
#!/bin/sh
# One NCCL host per rank (several ranks on one GPU): NCCL tells hosts apart by NCCL_HOSTID.
NCCL_HOSTID="dmuon-rank-${OMPI_COMM_WORLD_RANK:-0}" exec "$@"
SH
chmod +x "$p/bin/nccl_host_per_rank"
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $(git -C "$root" rev-parse --short HEAD 2>/dev/null) sm_$arch" \
  >"$p/PACKED"

mkdir -p "$deps" || die "cannot create $deps"
# xz -2 on every core: ~25 MB in ~6 s on 2 cores (-6: 21.5 MB in ~55 s); 64 MiB may travel.
tar -C "$stage" -cf - dmuon-mpi | xz -T0 -2 >"$deps/mpi-pack.tar.xz" || die "tar/xz failed"
echo "# device_mpi_pack: $(du -sh "$p" | cut -f1) packed into" \
     "$(du -h "$deps/mpi-pack.tar.xz" | cut -f1) ($deps/mpi-pack.tar.xz)"
