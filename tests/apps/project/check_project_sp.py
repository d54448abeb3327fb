#!/usr/bin/env python3
"""dmuon_project --tp 8 [--sequence-parallel] with --seq-len: the TP activation collectives of
Llama-3-8B (32 blocks, h 4096) per rank and step against the hand count of docs/STEP-WORK.md
"Tensor parallelism": N = 2048 x 4096 bf16 elements per region, T = 8.
  TP:      4 all-reduces per block (forward 2, backward 2), each 2 x 7/8 x N x 2 bytes;
  TP + SP: 8 all-gathers / reduce-scatters per block plus the head's all-gather, 7/8 x N x 2
           bytes each; --ac full reruns the 4 forward ones per block, selective the 2 gathers.
Sequence parallelism splits the norms, residuals and their saved activations and keeps the
bytes: its peak memory is lower. Refusals: without --tp, an MoE model under SP (exit 2, one line).
Exit 0 with 'OK' on success, 1 with the first failed check."""
import argparse
import json

from check_project import expect_refusal, fail, run

N = 2048 * 4096
BLOCKS = 32


def project(exe, *extra):
    j = json.loads(run([exe, "--topology", "llm", "--preset", "llama3-8b", "--machine", "h100-ndr",
                        "--world-size", "16", "--tp", "8", "--seq-len", "2048", "--micro-batch",
                        "1", "--boundary", "default", "--json", *extra]))
    methods = sorted(r["method"] for r in j["runs"])
    if not j.get("passed") or methods != ["dmuon", "fsdp-adamw"]:
        fail(f"{extra}: passed {j.get('passed')}, runs {methods} (expected dmuon and its AdamW "
             f"baseline)")
    return j, next(r for r in j["runs"] if r["method"] == "dmuon")


def expect_volume(j, extra, calls, bytes_per_call):
    got = j["step_work"].get("tp_activation")
    if got is None:
        fail(f"{extra}: step_work has no tp_activation: {j['step_work']}")
    if got["calls_per_step"] != calls or got["bytes_per_rank_per_step"] != calls * bytes_per_call:
        fail(f"{extra}: {got}, expected {calls} calls of {bytes_per_call} B")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    a = ap.parse_args()
    all_reduce = 2 * 7 / 8 * N * 2
    gather = 7 / 8 * N * 2
    tp, tp_run = project(a.project)
    expect_volume(tp, "tp", 4 * BLOCKS, all_reduce)
    sp, sp_run = project(a.project, "--sequence-parallel")
    expect_volume(sp, "sp", 8 * BLOCKS + 1, gather)
    full, _ = project(a.project, "--sequence-parallel", "--ac", "full")
    expect_volume(full, "sp full", 12 * BLOCKS + 1, gather)
    sel, _ = project(a.project, "--sequence-parallel", "--ac", "selective")
    expect_volume(sel, "sp selective", 10 * BLOCKS + 1, gather)
    if not sp_run["memory"]["peak_GB"] < tp_run["memory"]["peak_GB"]:
        fail(f"SP peak {sp_run['memory']['peak_GB']} GB not below TP's "
             f"{tp_run['memory']['peak_GB']} GB")
    if not any("--tp 8 --sequence-parallel" in n for n in sp["notes"]):
        fail(f"no TP note: {sp['notes']}")
    common = ["--world-size", "4", "--machine", "h200", "--sequence-parallel", "--seq-len", "64",
              "--micro-batch", "1"]
    for args, want in ((["--topology", "llm"], "--sequence-parallel needs --tp T > 1"),
                       (["--topology", "moe-llm", "--set", "kv=64", "--tp", "2"],
                        "an MoE layer under tensor parallelism is not modelled")):
        expect_refusal([a.project, *args, *common], want)
    print(f"OK: TP and SP activation collectives as counted by hand (step {tp_run['step_ms']:.1f} "
          f"-> {sp_run['step_ms']:.1f} ms, peak {tp_run['memory']['peak_GB']:.2f} -> "
          f"{sp_run['memory']['peak_GB']:.2f} GB)")


if __name__ == "__main__":
    main()
