#!/usr/bin/env bash
# dmuon_bench contract tests that need more than one command (a working directory to inspect,
# a per-rank wrapper, a resource limit). Usage: bench_contract.sh CASE
# Environment: BENCH, MPIEXEC, NPFLAG, WORK (set by CMakeLists.txt).
set -u
case_name=$1
work="$WORK/$case_name"
rm -rf "$work" && mkdir -p "$work" && cd "$work" || exit 1
fail() { echo "FAILED: $*"; exit 1; }
run() {
  timeout "${LIMIT:-120}" "$@" >"$work/out" 2>"$work/err"
  rc=$?
  echo "+ $* -> exit $rc"
}
expect_rc() { [ "$rc" -eq "$1" ] || { cat "$work/out" "$work/err"; fail "exit $rc, expected $1"; }; }
expect_out() { grep -qF -- "$1" "$work/out" || { cat "$work/out"; fail "stdout lacks '$1'"; }; }
# exactly one line of ours on stderr (mpiexec adds its own banner lines)
expect_one_error() {
  [ "$(grep -c "^dmuon_bench: error:" "$work/err")" -eq 1 ] || { cat "$work/err"; fail "not one error line"; }
  grep -qF -- "$1" "$work/err" || { cat "$work/err"; fail "stderr lacks '$1'"; }
}
base=(--topology moe --boundary default --method dmuon --warmup 0 --tokens 4)
small=("${base[@]}" --steps 1 --compute none)

case $case_name in
  output_empty_value)
    # "--output=" followed by "--check" once wrote results to a file named --check and skipped
    # the check.
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" "${small[@]}" --output= --check
    expect_rc 2; expect_one_error "--output has an empty value"
    [ ! -e "$work/--check" ] || fail "a file named --check was written"
    [ -z "$(ls -A "$work" | grep -v '^out$\|^err$')" ] || { ls -la "$work"; fail "files left"; }
    ;;
  setup_error_one_rank)
    # The topology file exists for rank 0 only (a file missing on one node): every rank must
    # leave with rank 1's message, exit 2, within seconds, instead of hanging in a collective.
    cat >"$work/per_rank.sh" <<EOS
#!/bin/sh
if [ "\${OMPI_COMM_WORLD_RANK:-\${PMI_RANK:-0}}" = 1 ]; then
  exec "$BENCH" --topology-file "$work/missing.json" "\$@"
fi
exec "$BENCH" --topology moe "\$@"
EOS
    chmod +x "$work/per_rank.sh"
    LIMIT=60 run "$MPIEXEC" "$NPFLAG" 2 "$work/per_rank.sh" --steps 1 --warmup 0 --compute none
    [ "$rc" -ne 124 ] || fail "the job hung (killed after 60 s)"
    expect_rc 2; expect_one_error "rank 1: cannot read topology file '$work/missing.json'"
    ;;
  failed_write)
    # The results file cannot be written (a file-size limit: EFBIG, like a full disk's
    # ENOSPC): the table is printed first, the error names the cause, nothing is left behind,
    # exit 1 (not a bad input, not a failed check).
    run "$MPIEXEC" "$NPFLAG" 1 sh -c "trap '' XFSZ; ulimit -f 40; exec \"$BENCH\" ${small[*]} --output big.h5"
    expect_rc 1
    expect_out "# Failed audits and checks : 0 OK"
    expect_one_error "cannot write results file 'big.h5': "
    grep -qF "File too large" "$work/err" || { cat "$work/err"; fail "the cause is not named"; }
    ls "$work" | grep -q "big.h5" && { ls -la "$work"; fail "a results file or temporary was left"; }
    ;;
  check_failed)
    # A failed --check: the table says FAILED and the exit code is 3.
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" "${base[@]}" --steps 1 --check --check-tolerance 1e-30
    expect_rc 3; expect_out "# Failed audits and checks : 1 FAILED"; expect_out "# check FAILED"
    ;;
  repeats)
    # --repeats: every measured step of every repeat is a sample (2 x 3 here), in the table,
    # the JSON and the results file (timings/seconds is samples x ranks x phases).
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" "${base[@]}" --compute none --steps 3 --repeats 2 --output r.h5
    expect_rc 0; expect_out "steps 3 (+0 warmup) x 2 repeats"; expect_out "6 per row"
    h5dump -H -d /runs/0/timings/seconds r.h5 >"$work/h5" 2>&1 && ! grep -q "( 6, 2, 6 )" "$work/h5" &&
      { cat "$work/h5"; fail "timings/seconds is not 6 samples x 2 ranks x 6 phases"; }
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" "${base[@]}" --compute none --steps 3 --repeats 2 --json
    expect_rc 0; expect_out '"samples": 6'
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" "${small[@]}" --repeats 0
    expect_rc 2; expect_one_error "--repeats '0' is invalid (valid: an integer 1..1000)"
    ;;
  cli)
    # --help and --version on the MPI tool and the planner: exit 0, text on stdout.
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" --help
    expect_rc 0; expect_out "Usage:"; expect_out "--repeats"
    [ "$(grep -c '^Usage:' "$work/out")" -eq 1 ] || fail "usage printed by more than one rank"
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" --version
    expect_rc 0; expect_out "git commit"; expect_out "Kokkos"; expect_out "MPI"; expect_out "NCCL"
    run "$INSPECT" --help
    expect_rc 0; expect_out "Usage:"
    run "$INSPECT" --version
    expect_rc 0; expect_out "git commit"; expect_out "HDF5"; expect_out "build type"
    run "$INSPECT" --topology moe --machine=
    expect_rc 2; grep -q "has an empty value" "$work/err" || fail "empty value accepted"
    # An empty dtype as its own argument reaches the parser: named with the valid ones.
    run "$MPIEXEC" "$NPFLAG" 2 "$BENCH" "${small[@]}" --reduce-dtype ""
    expect_rc 2; expect_one_error "--reduce-dtype has an empty value (valid: fp32, bf16)"
    ;;
  *) fail "unknown case $case_name" ;;
esac
echo "OK $case_name"
