#!/usr/bin/env bash
# App contract tests for dmuon_compare, scripts/plot_results.py and scripts/scaling_study.sh
# (exit codes, one-line errors, differences named in the output). Usage: contract.sh CASE
# Environment: COMPARE, TESTGEN, REFERENCE, PLOT, SCALING, PROJECT, PYTHON, WORK (set by CMakeLists.txt).
set -u
case_name=$1
work="$WORK/$case_name"
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAILED: $*"; exit 1; }

# run CMD...: captures stdout/stderr/exit code in $work.
run() {
  "$@" >"$work/out" 2>"$work/err"
  rc=$?
  echo "+ $* -> exit $rc"
}
expect_rc() { [ "$rc" -eq "$1" ] || { cat "$work/out" "$work/err"; fail "exit $rc, expected $1"; }; }
expect_out() { grep -qF -- "$1" "$work/out" || { cat "$work/out"; fail "stdout lacks '$1'"; }; }
expect_one_line_err() {
  [ "$(wc -l <"$work/err")" -eq 1 ] || { cat "$work/err"; fail "stderr is not one line"; }
  grep -qF -- "$1" "$work/err" || { cat "$work/err"; fail "stderr lacks '$1'"; }
}

case $case_name in
  compare_self)
    run "$COMPARE" "$REFERENCE" "$REFERENCE"
    expect_rc 0; expect_out "# regressions: 0"; expect_out "# deterministic mismatches: 0"
    expect_out "# OK"; expect_out "rejected"
    ;;
  compare_regenerated)
    # The shipped reference (a real 8-rank dmuon_bench run) still matches what today's planner
    # and engine produce: every deterministic quantity (statuses, sites, owners, hook calls,
    # collective calls and bytes per rank) must be equal; timings vary run to run, so the time
    # tolerance is huge (only the deterministic part is gated here).
    [ -n "${BENCH:-}" ] && [ -n "${MPIEXEC:-}" ] || { echo "no dmuon_bench/mpiexec: skipped"; exit 77; }
    run "$MPIEXEC" "$NPFLAG" 8 "$BENCH" --topology moe --steps 1 --warmup 0 --tokens 4 \
      --output "$work/regen.h5"
    expect_rc 0
    run "$COMPARE" "$REFERENCE" "$work/regen.h5" --time-tolerance 1000
    expect_rc 0; expect_out "# OK"; expect_out "# deterministic mismatches: 0"
    ;;
  compare_collective_mismatch)
    run "$TESTGEN" mutate "$REFERENCE" "$work/b.h5" collective; expect_rc 0
    run "$COMPARE" "$REFERENCE" "$work/b.h5"
    expect_rc 3; expect_out "MISMATCH"; expect_out "mismatch: broadcast calls/step rank 0: A"
    expect_out "# deterministic mismatches: 1"; expect_out "# FAILED"
    ;;
  compare_owner_mismatch)
    run "$TESTGEN" mutate "$REFERENCE" "$work/b.h5" owner; expect_rc 0
    run "$COMPARE" "$REFERENCE" "$work/b.h5"
    expect_rc 3; expect_out "mismatch: owner of "
    ;;
  compare_timing)
    run "$TESTGEN" mutate "$REFERENCE" "$work/slow.h5" slower=1.5; expect_rc 0
    run "$COMPARE" "$REFERENCE" "$work/slow.h5"
    expect_rc 3; expect_out "SLOWER"; expect_out "regression: step_ms"; expect_out "# regressions: 5"  # 5 measured runs
    run "$COMPARE" "$REFERENCE" "$work/slow.h5" --time-tolerance 0.6
    expect_rc 0; expect_out "# regressions: 0"
    run "$TESTGEN" mutate "$REFERENCE" "$work/bit.h5" slower=1.05; expect_rc 0
    run "$COMPARE" "$REFERENCE" "$work/bit.h5"
    expect_rc 0
    run "$COMPARE" "$work/slow.h5" "$REFERENCE"
    expect_rc 0; expect_out "FASTER"
    run "$COMPARE" "$REFERENCE" "$work/slow.h5" --json
    expect_rc 3; expect_out '"regressions": 5'
    ;;
  compare_bad_input)
    run "$COMPARE" "$REFERENCE" "$work/missing.h5"
    expect_rc 2; expect_one_line_err "$work/missing.h5"
    echo "not hdf5" >"$work/garbage.h5"
    run "$COMPARE" "$work/garbage.h5" "$REFERENCE"
    expect_rc 2; expect_one_line_err "$work/garbage.h5"
    run "$COMPARE" "$REFERENCE" "$REFERENCE" --time-tolerance -1
    expect_rc 2; expect_one_line_err "tolerance"
    run "$COMPARE" "$REFERENCE"
    expect_rc 2
    ;;
  plot)
    if ! "$PYTHON" -c "import h5py, matplotlib" 2>/dev/null; then
      echo "h5py/matplotlib not available for $PYTHON: skipped"; exit 77
    fi
    run "$TESTGEN" reference "$work/world4.h5" --world 4; expect_rc 0
    run "$PYTHON" "$PLOT" "$REFERENCE" "$work/world4.h5" -o "$work/png"
    expect_rc 0
    for f in step_breakdown.png hook_collective_counts.png rank_loads.png scaling.png; do
      [ -s "$work/png/$f" ] || { ls -l "$work/png"; cat "$work/err"; fail "missing or empty $f"; }
    done
    run "$PYTHON" "$PLOT" "$REFERENCE" -o "$work/single"
    expect_rc 0
    [ -s "$work/single/step_breakdown.png" ] || fail "missing step_breakdown.png"
    [ ! -e "$work/single/scaling.png" ] || fail "scaling.png with one world size"
    run "$PYTHON" "$PLOT" "$work/missing.h5" -o "$work/x"
    [ "$rc" -ne 0 ] || fail "missing file accepted"
    expect_one_line_err "$work/missing.h5"
    echo "garbage" >"$work/garbage.h5"
    run "$PYTHON" "$PLOT" "$work/garbage.h5" -o "$work/x"
    [ "$rc" -ne 0 ] || fail "garbage file accepted"
    expect_one_line_err "$work/garbage.h5"
    ;;
  scaling)
    # scripts/scaling_study.sh: one results file per rank count, plotted together.
    if ! "$PYTHON" -c "import h5py, matplotlib" 2>/dev/null; then
      echo "h5py/matplotlib not available for $PYTHON: skipped"; exit 77
    fi
    export DMUON_BENCH="$BENCH" MPIEXEC NPFLAG PYTHON
    run bash "$SCALING" --ranks "1 2" --out "$work/study" -- --topology moe \
      --boundary recommended --method dmuon,fsdp-adamw --compute none --steps 1 --warmup 0
    expect_rc 0; expect_out "2 ranks -> $work/study/n2.h5"
    for f in n1.h5 n2.h5 plots/scaling.png plots/step_breakdown.png; do
      [ -s "$work/study/$f" ] || { cat "$work/out" "$work/err"; fail "missing or empty $f"; }
    done
    # Repetitions and the projection of the same arguments on a machine model, on one plot.
    export DMUON_PROJECT="$PROJECT"
    run bash "$SCALING" --ranks "1 2" --repeat 2 --project h100-ndr --out "$work/study2" -- \
      --topology moe --boundary recommended --method dmuon --global-tokens 8 --steps 1 --warmup 0
    expect_rc 0; expect_out "2 ranks, repetition 2 -> $work/study2/n2_r2.h5"
    for f in n1_r1.h5 n2_r2.h5 projected.h5 plots/scaling.png; do
      [ -s "$work/study2/$f" ] || { cat "$work/out" "$work/err"; fail "missing or empty $f"; }
    done
    run bash "$SCALING" --ranks "1 x" --out "$work/bad" -- --topology moe
    expect_rc 2; expect_one_line_err "--ranks item 'x' is not a positive integer"
    run bash "$SCALING" --out "$work/bad" -- --topology moe --output x.h5
    expect_rc 2; expect_one_line_err "use --out DIR"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "OK $case_name"
