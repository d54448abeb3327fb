#!/usr/bin/env bash
# The installed tree works on its own: `cmake --install` into a fresh prefix, then
#  * a separate CMake project finds the package (find_package(dmuon)) and links dmuon::dmuon;
#  * the installed dmuon_bench finds its configs relative to itself (share/dmuon/configs),
#    not in the source tree, and --help/--version work;
#  * the installed scripts run from another directory.
# Usage: install_check.sh BUILD_DIR WORK_DIR SOURCE_DIR   (MPIEXEC, NPFLAG, PYTHON from the env)
set -u
build=$1 work=$2 src=$3
fail() { echo "FAILED: $*"; exit 1; }
rm -rf "$work" && mkdir -p "$work" || exit 1
prefix="$work/prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "install"; }
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "consumer configure"; }
cmake --build "$work/consumer" -j2 >>"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "consumer build"; }
"$work/consumer/consumer" || fail "the consumer's plan is wrong"
cd "$work" || exit 1  # not the source tree
"$prefix/bin/dmuon_bench" --help >"$work/help" 2>&1 || fail "dmuon_bench --help"
grep -q "Usage" "$work/help" || fail "no usage text"
"$prefix/bin/dmuon_compare" --version | grep -q "git commit" || fail "dmuon_compare --version"
# The default sweep comes from the installed configs/moe.yaml (the source tree is moved away
# from the binary's view by DMUON_CONFIG_DIR being unset and the prefix being elsewhere).
unset DMUON_CONFIG_DIR
"$MPIEXEC" "$NPFLAG" 1 "$prefix/bin/dmuon_bench" --topology moe --method dmuon --steps 1 \
  --warmup 0 --compute none --tokens 2 >"$work/bench" 2>&1 || { cat "$work/bench"; fail "installed dmuon_bench"; }
real_prefix=$(cd "$prefix" && pwd -P)
grep -q "boundary sweep: $real_prefix/share/dmuon/configs/moe.yaml" "$work/bench" ||
  { head -3 "$work/bench"; fail "the configs were not found next to the installed binary"; }
"${PYTHON:-python3}" "$prefix/share/dmuon/scripts/partition_quality.py" --help >/dev/null ||
  fail "installed partition_quality.py --help"
echo "OK: installed to $prefix, consumer built, configs found at $real_prefix/share/dmuon/configs"
