#!/usr/bin/env bash
# Tensor-parallel runs in results files (issue 11 part 7). Usage: bench_tp_results.sh CASE
# Environment: BENCH, COMPARE, MPIEXEC, NPFLAG, WORK (set by CMakeLists.txt).
#   self     --tp 2 at 4 ranks writes a file that matches itself (exit 0, one matched run)
#   no_match the same run with --tp 1 at the same world never matches it (exit 3, only in A: 1,
#            only in B: 1), because the run key holds T
set -u
case_name=$1
work="$WORK/$case_name"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAILED: $*"; exit 1; }
run() {
  timeout 150 "$@" >"$work/out" 2>"$work/err"
  rc=$?
  echo "+ $* -> exit $rc"
}
expect_rc() { [ "$rc" -eq "$1" ] || { cat "$work/out" "$work/err"; fail "exit $rc, expected $1"; }; }
expect_out() { grep -qF -- "$1" "$work/out" || { cat "$work/out"; fail "stdout lacks '$1'"; }; }
bench=(--topology llm --boundary default --method dmuon --steps 2 --warmup 0)

run "$MPIEXEC" "$NPFLAG" 4 "$BENCH" "${bench[@]}" --tp 2 --output "$work/tp2.h5"
expect_rc 0
[ -f "$work/tp2.h5" ] || fail "no results file"
case $case_name in
  self)
    run "$COMPARE" "$work/tp2.h5" "$work/tp2.h5" --deterministic-only
    expect_rc 0
    expect_out "# matched runs: 1   only in A: 0   only in B: 0"
    expect_out "# deterministic mismatches: 0"
    ;;
  no_match)
    run "$MPIEXEC" "$NPFLAG" 4 "$BENCH" "${bench[@]}" --tp 1 --output "$work/tp1.h5"
    expect_rc 0
    run "$COMPARE" "$work/tp2.h5" "$work/tp1.h5" --deterministic-only
    expect_rc 3
    expect_out "# matched runs: 0   only in A: 1   only in B: 1"
    expect_out "T=2"
    expect_out "T=1"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASSED $case_name"
