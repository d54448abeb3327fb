#!/usr/bin/env bash
# The multi-rank GPU check, run by scripts/device_check.sh --multirank on the GPU machine from
# the pack scripts/device_mpi_pack.sh made here (dmuon_bench with CUDA, nccl_smoke, Debian's
# Open MPI relocated through OPAL_PREFIX, the library closure). Several ranks share the one
# GPU, each its own NCCL host (NCCL_HOSTID per rank, sockets on loopback, IB and NVLS off;
# DMUON_ALLOW_SHARED_GPU=1 lets dmuon_bench bind them to it). Stages, each under a limit:
#   smoke      nccl_smoke at 2 ranks: one all-reduce, checked element by element
#   cases      dmuon_bench --device cuda at 2 and 4 ranks (DMuon 1x2, DDP-DMuon, fsdp-muon,
#              TP 2, clipping, accumulation, bf16 reduce, EP 2 with the routed tokens' NCCL
#              all-to-alls on the compute stream; HSDP 2x2, DMuon 1x4, TP 2 x DP 2, EP 2 in
#              expert groups of 2), each --check'ed (one-process host recomputation), and the
#              same global batch at one rank on the GPU beside it (TP and EP cases: none, they
#              need their ranks)
#   fault      DMUON_INJECT_FAULT_STEP=2:1 at 2 ranks: every rank must be gone within 30 s, the
#              output naming rank 1's injected fault
# Stops starting cases when less than two case limits are left. Prints one line per run; each
# run's JSON and stderr go to a work directory, packed at the end into LOGDIR/runs.tar.xz (the
# device machine returns at most 8 files).
#
# Usage: device_multirank.sh PACK.tar.xz LOGDIR BUDGET_S
# Environment: DMUON_MULTIRANK_DEVICE (cuda; host runs the same cases on the host, to test this
#   script without a GPU), NCCL_HOME, DMUON_MULTIRANK_DIR (unpack dir, default /tmp/dmuon-mpi).
# Exit: 0 all passed, 3 a check failed or timed out, 77 no GPU (the smoke saw none), 2 set-up.
set -uo pipefail

pack="${1:?usage: device_multirank.sh PACK LOGDIR BUDGET_S}"
logs="${2:?usage}"
budget="${3:?usage}"
device="${DMUON_MULTIRANK_DEVICE:-cuda}"
dir="${DMUON_MULTIRANK_DIR:-/tmp/dmuon-mpi}"
readonly T_SMOKE=60 T_CASE=45 T_FAULT=30
deadline=$(($(date +%s) + budget))
mkdir -p "$logs" || exit 2
work="$(mktemp -d /tmp/dmuon-multirank-runs.XXXXXX)"
trap 'tar -C "$work" -cJf "$logs/runs.tar.xz" . 2>/dev/null; rm -rf "$work"' EXIT
say() { echo "$@"; }
# shellcheck source=cuda_root.sh
source "$(dirname "${BASH_SOURCE[0]}")/cuda_root.sh"

if [[ ! -x "$dir/bin/dmuon_bench" ]]; then
  mkdir -p "$(dirname "$dir")" &&
    xz -dc "$pack" | tar -C "$(dirname "$dir")" -xf - || { say "# unpack of $pack failed"; exit 2; }
  [[ "$(basename "$dir")" == dmuon-mpi ]] || mv "$(dirname "$dir")/dmuon-mpi" "$dir"
fi
say "# multirank: pack $(cat "$dir/PACKED" 2>/dev/null), device $device, budget $budget s"

# The relocated Open MPI and what the pack does not bring (CUDA runtime, cuBLAS, NCCL).
cuda="$(cuda_root)"
export OPAL_PREFIX="$dir" PMIX_PREFIX="$dir/pmix2" PATH="$dir/bin:$PATH"
export LD_LIBRARY_PATH="$dir/lib${NCCL_HOME:+:$NCCL_HOME/lib}:$cuda/lib64:$cuda/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_pml=ob1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
export OMPI_MCA_rmaps_base_oversubscribe=1 OPENBLAS_NUM_THREADS=2
export NCCL_SOCKET_IFNAME=lo NCCL_IB_DISABLE=1 NCCL_NVLS_ENABLE=0 NCCL_P2P_DISABLE=1
export NCCL_SHM_DISABLE=1 NCCL_DEBUG=WARN DMUON_ALLOW_SHARED_GPU=1 DMUON_NCCL_TIMEOUT_S=60
export CUDA_MODULE_LOADING=EAGER

# mpi N LIMIT LOG PROGRAM ARGS...: every rank through nccl_host_per_rank (its own NCCL_HOSTID).
mpi() {
  local n=$1 limit=$2 log=$3
  shift 3
  timeout -k 2 "$limit" mpirun -n "$n" --bind-to none "$dir/bin/nccl_host_per_rank" "$@" \
    >"$log.json" 2>"$log.err"
}

failed=0
start=$(date +%s)
if [[ "$device" == cuda ]]; then
  mpi 2 "$T_SMOKE" "$work/smoke" "$dir/bin/nccl_smoke"
  rc=$?
else
  echo "nccl_smoke: skipped (--device host)" >"$work/smoke.json" && : >"$work/smoke.err"
  rc=0
fi
say "# smoke: exit $rc in $(($(date +%s) - start)) s: $(grep -h nccl_smoke "$work/smoke.json" "$work/smoke.err" | head -2 | tr '\n' ' ')"
if [[ $rc -eq 77 ]]; then exit 77; fi
if [[ $rc -ne 0 ]]; then
  tail -5 "$work/smoke.err" 
  say "# smoke failed: the cases would not start; see smoke.err"
  exit 3
fi

# name|ranks|dp ranks|arguments
cases=(
  "dmuon-1x2|2|2|--method dmuon"
  "ddp-dmuon|2|2|--method ddp-dmuon"
  "fsdp-muon|2|2|--method fsdp-muon"
  "tp2|2|1|--method dmuon --tp 2"
  "clip|2|2|--method dmuon --clip-norm 0.5"
  "accum|2|2|--method dmuon --accum 2"
  "bf16-reduce|2|2|--method dmuon --reduce-dtype bf16"
  "hsdp-2x2|4|4|--method dmuon --replicate 2"
  "dmuon-1x4|4|4|--method dmuon"
  "tp2-dp2|4|2|--method dmuon --tp 2"
  "ep2-tokens|2|2|--topology moe-llm --method dmuon --ep 2 --seq-len 16 --micro-batch 1"
  "ep2-groups|4|4|--topology moe-llm --method fsdp-adamw --ep 2 --seq-len 16 --micro-batch 1"
)
readonly TOKENS=32
common=(--boundary default --warmup 0 --check --json --device "$device")
[[ "$device" == cuda ]] && common+=(--ns-dtype fp32)

# verdict LOG: "OK err E (tol T)" or "FAILED ..." from a run's JSON.
verdict() {
  python3 - "$1.json" <<'PY'
import json, sys
try:
    j = json.load(open(sys.argv[1]))
    c = j["runs"][0]["check"]
    print(("OK" if j["passed"] and c["passed"] else "FAILED") +
          f" err {c['max_rel_error']:.3g} (tol {c['tolerance']:.3g})")
except Exception as e:  # no JSON: the run failed before printing it
    print(f"FAILED (no result: {type(e).__name__})")
PY
}

for c in "${cases[@]}"; do
  IFS='|' read -r name n dp args <<<"$c"
  if (($(date +%s) + 2 * T_CASE > deadline)); then
    say "case $name np$n: NOT RUN (stage time left under $((2 * T_CASE)) s)"
    failed=1
    continue
  fi
  # The llm unless the case names its model; --tokens unless its --seq-len sets the batch.
  model=(--topology llm)
  [[ "$args" == *--topology* ]] && model=()
  batch=(--tokens "$TOKENS")
  [[ "$args" == *--seq-len* ]] && batch=()
  # shellcheck disable=SC2086
  start=$(date +%s)
  mpi "$n" "$T_CASE" "$work/case_${name}_np$n" "$dir/bin/dmuon_bench" "${common[@]}" \
    "${model[@]}" $args "${batch[@]}" --steps 2
  rc=$?
  line="case $name np$n: exit $rc, $(verdict "$work/case_${name}_np$n"), $(($(date +%s) - start)) s"
  [[ $rc -eq 0 && "$line" != *FAILED* ]] || failed=1
  if [[ "$args" == *--tp* || "$args" == *--ep* ]]; then
    say "$line; one rank: n/a (TP and EP need their ranks)"
    continue
  fi
  # The same global batch (tokens x DP ranks) at one rank, without the layout's options.
  one="${args/--replicate 2/}"
  start=$(date +%s)
  # shellcheck disable=SC2086
  mpi 1 "$T_CASE" "$work/case_${name}_np1" "$dir/bin/dmuon_bench" "${common[@]}" \
    "${model[@]}" $one --tokens $((TOKENS * dp)) --steps 2
  rc=$?
  v1="$(verdict "$work/case_${name}_np1")"
  [[ $rc -eq 0 && "$v1" != FAILED* ]] || failed=1
  say "$line; one rank: exit $rc, $v1, $(($(date +%s) - start)) s"
done

# The abort: rank 1 fails in step 2 with its collectives in flight; all must end at once.
start=$(date +%s)
DMUON_INJECT_FAULT_STEP=2:1 mpi 2 "$T_FAULT" "$work/fault" "$dir/bin/dmuon_bench" \
  "${common[@]}" --method dmuon --tokens "$TOKENS" --steps 3
rc=$?
secs=$(($(date +%s) - start))
if [[ $rc -ne 0 && $rc -ne 124 && $rc -ne 137 ]] &&
   grep -q "rank 1: failed mid-step: injected fault (DMUON_INJECT_FAULT_STEP=2:1)" "$work/fault.err"; then
  say "fault: OK, every rank gone in $secs s (exit $rc) with rank 1's message"
else
  say "fault: FAILED (exit $rc after $secs s; want a prompt non-zero exit naming rank 1's fault)"
  failed=1
fi
say "# multirank: $([[ $failed -eq 0 ]] && echo 'all passed' || echo 'FAILED')"
exit $((failed ? 3 : 0))
