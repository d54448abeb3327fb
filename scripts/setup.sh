#!/usr/bin/env bash
# Idempotent set-up: install the Debian packages dmuon-bench needs (only those missing), then
# configure and build into ./build (or $DMUON_BUILD_DIR). Safe to run again at any time.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${DMUON_BUILD_DIR:-$here/build}"
build_type="${DMUON_BUILD_TYPE:-Release}"

packages=(
  build-essential cmake g++ git pkg-config
  libopenmpi-dev openmpi-bin
  libhdf5-dev hdf5-tools
  libopenblas-dev liblapacke-dev
  libtrilinos-kokkos-dev libtrilinos-kokkos-kernels-dev
  libcli11-dev libyaml-cpp-dev nlohmann-json3-dev libfmt-dev libre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3 python3-h5py python3-matplotlib python3-numpy
  python3-torch  # CPU torch 1.13 for /usr/bin/python3: the exporter's torch test
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

jobs="${DMUON_BUILD_JOBS:-$(nproc)}"
cmake -S "$here" -B "$build_dir" -DCMAKE_BUILD_TYPE="$build_type" ${DMUON_CMAKE_ARGS:-}
cmake --build "$build_dir" -j "$jobs"
echo "setup: built into $build_dir (source scripts/env.sh to put its bin/ on PATH)"
