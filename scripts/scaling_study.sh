#!/usr/bin/env bash
# Scaling study: runs dmuon_bench at each rank count (several repetitions each), optionally
# projects the same arguments on a machine model with dmuon_project at the same counts, and
# plots everything together (scaling.png: measured and projected step time against world size
# on one axis with the ideal-scaling line, and the parallel efficiency; strong or weak scaling
# and the global batch in the title).
#
#   scripts/scaling_study.sh [--ranks "1 2 4 8"] [--repeat K] [--project MACHINE] [--out DIR]
#                            -- DMUON_BENCH_ARGS...
#
# e.g. scripts/scaling_study.sh --ranks "2 4 8" --repeat 3 --project h100-ndr \
#        --out results/scaling-moe -- --topology moe --boundary recommended --global-tokens 128
# (--global-tokens keeps the global batch fixed: strong scaling; --tokens N, or --seq-len and
# --micro-batch with dmuon_project, scale it with the ranks: weak.)
#
# The launcher is "$MPIEXEC $NPFLAG N" (default: mpiexec -n N); on a cluster e.g.
# MPIEXEC="srun --mpi=pmix" NPFLAG=-n (scripts/slurm/scaling_study.sbatch does this). Under a
# scheduler every results file records its job id and node list (scheduler_job) and hosts.
# DMUON_BENCH / DMUON_PROJECT override the executables (default: the source tree's build, else
# the install prefix's bin/, else PATH). Writes DIR/n<N>.h5 (with --repeat K: DIR/n<N>_r<k>.h5),
# DIR/projected.h5 and DIR/plots/*.png. Works from any directory. Exit codes like the tools: 0
# OK, 2 bad usage or bad input (a run's own exit 2), 3 a run failed its audit or check, 1 a run
# or the plotting could not complete (its output is shown).
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
ranks="1 2 4 8"
repeat=1
machine=""
out="scaling"
die() { echo "scaling_study.sh: error: $*" >&2; exit 2; }

while [[ $# -gt 0 ]]; do
  case "$1" in
    --ranks) [[ $# -ge 2 ]] || die "--ranks needs a value"; ranks="$2"; shift 2 ;;
    --repeat) [[ $# -ge 2 ]] || die "--repeat needs a value"; repeat="$2"; shift 2 ;;
    --project) [[ $# -ge 2 ]] || die "--project needs a machine"; machine="$2"; shift 2 ;;
    --out) [[ $# -ge 2 ]] || die "--out needs a value"; out="$2"; shift 2 ;;
    --) shift; break ;;
    -h|--help) sed -n '2,/^[^#]/{/^#/p}' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$1' (valid: --ranks \"N ...\", --repeat K, --project MACHINE, --out DIR, -- then dmuon_bench arguments)" ;;
  esac
done
for n in $ranks; do
  [[ "$n" =~ ^[1-9][0-9]*$ ]] || die "--ranks item '$n' is not a positive integer"
done
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat '$repeat' is not a positive integer"
for a in "$@"; do
  [[ "$a" != --output && "$a" != --output=* ]] || die "--output is set per rank count; use --out DIR"
done

# An executable: $2 if set, else the source tree's build, else the install prefix's bin/ (this
# script installs to <prefix>/share/dmuon/scripts), else PATH.
find_tool() {
  local name="$1" given="$2" c
  if [[ -n "$given" ]]; then echo "$given"; return; fi
  for c in "$root/build/bin/$name" "$root/../../bin/$name"; do
    [[ -x "$c" ]] && { echo "$c"; return; }
  done
  command -v "$name" || true
}
bench="$(find_tool dmuon_bench "${DMUON_BENCH:-}")"
[[ -n "$bench" && -x "$bench" ]] || die "dmuon_bench not found (run scripts/setup.sh, or set DMUON_BENCH)"
project=""
if [[ -n "$machine" ]]; then
  project="$(find_tool dmuon_project "${DMUON_PROJECT:-}")"
  [[ -n "$project" && -x "$project" ]] || die "dmuon_project not found (set DMUON_PROJECT)"
fi
launcher="${MPIEXEC:-mpiexec}"
npflag="${NPFLAG:--n}"
python="${PYTHON:-/usr/bin/python3}"
mkdir -p "$out" || die "cannot create '$out'"

# Split the arguments: --seq-len/--micro-batch are dmuon_project's (dmuon_bench takes their
# product as --tokens); --device, --steps, --warmup, --seed, --check... only a measured run has.
bench_args=()
project_args=()
seq=""
mb=""
pending=""  # where the value of the previous flag goes: seq, mb, bench or both
for a in "$@"; do
  case "$pending" in
    seq) seq="$a"; project_args+=("$a"); pending=""; continue ;;
    mb) mb="$a"; project_args+=("$a"); pending=""; continue ;;
    bench) bench_args+=("$a"); pending=""; continue ;;
  esac
  case "$a" in
    --seq-len) project_args+=("$a"); pending=seq ;;
    --seq-len=*) seq="${a#*=}"; project_args+=("$a") ;;
    --micro-batch) project_args+=("$a"); pending=mb ;;
    --micro-batch=*) mb="${a#*=}"; project_args+=("$a") ;;
    --device|--steps|--warmup|--seed|--check-tolerance|--inject-nan-step)
      bench_args+=("$a"); pending=bench ;;
    --device=*|--steps=*|--warmup=*|--seed=*|--check-tolerance=*|--inject-nan-step=*|--check)
      bench_args+=("$a") ;;
    *) bench_args+=("$a"); project_args+=("$a") ;;
  esac
done
if [[ -n "$seq" || -n "$mb" ]]; then
  [[ "$seq" =~ ^[1-9][0-9]*$ && "$mb" =~ ^[1-9][0-9]*$ ]] ||
    die "--seq-len and --micro-batch go together, as positive integers"
  bench_args+=(--tokens "$((seq * mb))")
fi

status=0
files=()
for n in $ranks; do
  for ((k = 1; k <= repeat; ++k)); do
    name="n${n}"
    [[ "$repeat" == 1 ]] || name="n${n}_r${k}"
    file="$out/$name.h5"
    echo "# scaling_study: $n ranks$([[ "$repeat" == 1 ]] || echo ", repetition $k") -> $file"
    # shellcheck disable=SC2086 # the launcher may carry its own flags (srun --mpi=pmix)
    $launcher "$npflag" "$n" "$bench" "${bench_args[@]}" --output "$file" >"$out/$name.txt" 2>&1
    rc=$?
    case "$rc" in
      0) ;;
      3) echo "# scaling_study: $n ranks: an audit or check FAILED (see $out/$name.txt)"; status=3 ;;
      2) cat "$out/$name.txt" >&2; die "the run on $n ranks rejected its input (exit 2)" ;;
      *) cat "$out/$name.txt" >&2; echo "scaling_study.sh: error: the run on $n ranks exited $rc" >&2
         exit 1 ;;
    esac
    grep -E "^# Failed audits" "$out/$name.txt" || true
    files+=("$file")
  done
done
if [[ -n "$machine" ]]; then
  worlds="$(echo $ranks | tr ' ' ',')"
  echo "# scaling_study: projecting on $machine at $worlds ranks -> $out/projected.h5"
  "$project" --machine "$machine" --world-size "$worlds" "${project_args[@]}" \
    --output "$out/projected.h5" >"$out/projected.txt" 2>&1
  rc=$?
  [[ "$rc" == 0 ]] || { cat "$out/projected.txt" >&2; die "dmuon_project exited $rc"; }
  files+=("$out/projected.h5")
fi
MPLBACKEND="${MPLBACKEND:-Agg}" "$python" "$root/scripts/plot_results.py" "${files[@]}" \
  -o "$out/plots" || { echo "scaling_study.sh: error: plotting failed" >&2; exit 1; }
exit "$status"
