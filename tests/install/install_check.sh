#!/usr/bin/env bash
# The installed tree works on its own: `cmake --install` into a fresh prefix, then
#  * every header is under include/dmuon/ (nothing else at the top of include/), and each of
#    their #include "..." names a file of the installed tree;
#  * a separate, C++-only CMake project finds the package (find_package(dmuon)), links
#    dmuon::dmuon and includes "dmuon/..." headers, the kernels' among them; the same project
#    with C enabled configures too (the package config's other branch);
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
# One include root: include/dmuon/ (a top-level include/kernels/ would clash in a shared prefix).
top=$(ls -A "$prefix/include" | tr '\n' ' ')
[[ "$top" == "dmuon " ]] || fail "include/ holds '$top', not only dmuon/"
unresolved=$(cd "$prefix/include" && find dmuon -name '*.hpp' -exec grep -HoE '^#include "[^"]+"' {} + |
  sed -E 's/:#include "(.*)"$/ \1/' | while read -r file inc; do
    [[ -f "$inc" || -f "$(dirname "$file")/$inc" ]] || echo "$file: $inc"
  done)
[[ -z "$unresolved" ]] || fail "installed headers include what include/ lacks: $unresolved"
cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "consumer configure"; }
cmake -S "$src/tests/install/consumer" -B "$work/consumer_c" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCONSUMER_ENABLE_C=ON >"$work/consumer_c.log" 2>&1 ||
  { cat "$work/consumer_c.log"; fail "consumer configure with C enabled"; }
cmake --build "$work/consumer" -j2 >>"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "consumer build"; }
"$work/consumer/consumer" || fail "the consumer's plan is wrong"
cd "$work" || exit 1  # not the source tree
"$prefix/bin/dmuon_bench" --help >"$work/help" 2>&1 || fail "dmuon_bench --help"
grep -q "Usage" "$work/help" || fail "no usage text"
"$prefix/bin/dmuon_compare" --version | grep -q "git commit" || fail "dmuon_compare --version"
# The default sweep comes from the installed configs/sweeps/moe.yaml (the source tree is moved away
# from the binary's view by DMUON_CONFIG_DIR being unset and the prefix being elsewhere).
unset DMUON_CONFIG_DIR
"$MPIEXEC" "$NPFLAG" 1 "$prefix/bin/dmuon_bench" --topology moe --method dmuon --steps 1 \
  --warmup 0 --compute none --tokens 2 >"$work/bench" 2>&1 || { cat "$work/bench"; fail "installed dmuon_bench"; }
real_prefix=$(cd "$prefix" && pwd -P)
grep -q "boundary sweep: $real_prefix/share/dmuon/configs/sweeps/moe.yaml" "$work/bench" ||
  { head -3 "$work/bench"; fail "the configs were not found next to the installed binary"; }
"${PYTHON:-python3}" "$prefix/share/dmuon/scripts/partition_quality.py" --help >/dev/null ||
  fail "installed partition_quality.py --help"
echo "OK: installed to $prefix, consumer built, configs found at $real_prefix/share/dmuon/configs"
