#!/usr/bin/env bash
# Scaling study: runs dmuon_bench once per rank count with the same arguments, one results file
# per count, then plots them together (scaling.png: median step time against world size for
# every configuration that ran at two or more sizes).
#
#   scripts/scaling_study.sh [--ranks "1 2 4 8"] [--out DIR] -- DMUON_BENCH_ARGS...
#
# e.g. scripts/scaling_study.sh --ranks "2 4 8" --out results/scaling-moe -- \
#        --topology moe --boundary recommended --owner-strategy lpt,lpt_refine \
#        --global-tokens 128
# (--global-tokens keeps the global batch fixed: strong scaling; --tokens N scales it: weak.)
#
# The launcher is "$MPIEXEC $NPFLAG N" (default: mpiexec -n N); on a cluster set e.g.
# MPIEXEC=srun NPFLAG=-n. DMUON_BENCH overrides the executable (default: build/bin/dmuon_bench).
# Writes DIR/n<N>.h5 and DIR/plots/*.png. Works from any directory. Exit codes like the tools:
# 0 OK, 2 bad usage or bad input (a run's own exit 2), 3 a run failed its audit or check, 1 a
# run or the plotting could not complete (its output is shown).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ranks="1 2 4 8"
out="scaling"
die() { echo "scaling_study.sh: error: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) [[ $# -ge 2 ]] || die "--ranks needs a value"; ranks="$2"; shift 2 ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a value"; out="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (valid: --ranks \"N ...\", --out DIR, -- then dmuon_bench arguments)" ;;
  esac
done
for n in $ranks; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--ranks item '$n' is not a positive integer"
done
for a in "$@"; do
  [[ "$a" != --output && "$a" != --output=* ]] || die "--output is set per rank count; use --out DIR"
done

# dmuon_bench: $DMUON_BENCH, else the source tree's build, else the install prefix's bin/
# (this script installs to <prefix>/share/dmuon/scripts), else PATH.
bench="${DMUON_BENCH:-}"
if [[ -z "$bench" ]]; then
  for c in "$root/build/bin/dmuon_bench" "$root/../../bin/dmuon_bench"; do
    [[ -x "$c" ]] && { bench="$c"; break; }
  done
  [[ -n "$bench" ]] || bench="$(command -v dmuon_bench || true)"
fi
[[ -n "$bench" && -x "$bench" ]] || die "dmuon_bench not found (run scripts/setup.sh, or set DMUON_BENCH)"
launcher="${MPIEXEC:-mpiexec}"
npflag="${NPFLAG:--n}"
python="${PYTHON:-/usr/bin/python3}"
mkdir -p "$out" || die "cannot create '$out'"

status=0
files=()
for n in $ranks; do
  file="$out/n$n.h5"
  echo "# scaling_study: $n ranks -> $file"
  "$launcher" "$npflag" "$n" "$bench" "$@" --output "$file" >"$out/n$n.txt" 2>&1
  rc=$?
  case "$rc" in
    0) ;;
    3) echo "# scaling_study: $n ranks: an audit or check FAILED (see $out/n$n.txt)"; status=3 ;;
    2) cat "$out/n$n.txt" >&2; die "the run on $n ranks rejected its input (exit 2)" ;;
    *) cat "$out/n$n.txt" >&2; echo "scaling_study.sh: error: the run on $n ranks exited $rc" >&2
       exit 1 ;;
  esac
  grep -E "^# Failed audits" "$out/n$n.txt" || true
  files+=("$file")
done
MPLBACKEND="${MPLBACKEND:-Agg}" "$python" "$root/scripts/plot_results.py" "${files[@]}" \
  -o "$out/plots" || { echo "scaling_study.sh: error: plotting failed" >&2; exit 1; }
exit "$status"
