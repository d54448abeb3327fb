#!/usr/bin/env python3
"""dmuon_project --cp C with --seq-len: the CP collectives of Llama-3-8B (32 blocks, 32 heads of
128 over 8 kv heads, K and V expanded to the 32 query heads before SDPA) per rank and step
against the hand count of docs/STEP-WORK.md "Context parallelism", S = 2048, micro-batch 1:
  per block, kv = S/C x 32 x 256 elements per rank;
  forward one all-gather of kv (bf16: (C-1) x kv x 2 bytes sent per rank), backward the same
  all-gather again and C ring permutes of the fp32 kv (kv x 4 bytes each); --ac full reruns the
  forward's all-gather, --ac selective none of the ring.
Under --tp 2 --sequence-parallel as well, with 16 heads per rank (the TP group shares the rank's
tokens: world / 2 x S/C per step).
Each rank holds S/C tokens of every sequence: the world's tokens per step are world x S/C, and
the activations (peak memory) fall. Refusals (exit 2, one line): a world whose shard group is
not a multiple of C, vision stacks, a CPU machine.
Exit 0 with 'OK' on success, 1 with the first failed check."""
import argparse
import json

from check_project import expect_refusal, fail, run

S = 2048
BLOCKS = 32
WORLD = 16


def project(exe, *extra):
    j = json.loads(run([exe, "--topology", "llm", "--preset", "llama3-8b", "--machine", "h100-ndr",
                        "--world-size", str(WORLD), "--seq-len", str(S), "--micro-batch", "1",
                        "--boundary", "default", "--method", "dmuon", "--json", *extra]))
    if not j.get("passed") or len(j["runs"]) != 1:
        fail(f"{extra}: passed {j.get('passed')}, {len(j['runs'])} runs (expected one)")
    return j, j["runs"][0]


def expect_volume(j, extra, C, gathers, permutes, heads=32):
    got = j["step_work"].get("cp_activation")
    if got is None:
        fail(f"{extra}: step_work has no cp_activation: {j['step_work']}")
    kv = S // C * heads * 256
    calls = BLOCKS * (gathers + permutes)
    sent = BLOCKS * (gathers * (C - 1) * kv * 2 + permutes * kv * 4)
    if got["cp"] != C or got["calls_per_step"] != calls or got["bytes_per_rank_per_step"] != sent:
        fail(f"{extra}: {got}, expected {calls} calls and {sent} B")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    ap.add_argument("--host-machine", required=True, help="a CPU machine file")
    a = ap.parse_args()
    base, base_run = project(a.project)
    if "cp_activation" in base["step_work"]:
        fail(f"no --cp, yet cp_activation: {base['step_work']}")
    cp2, cp2_run = project(a.project, "--cp", "2")
    expect_volume(cp2, "cp 2", 2, 2, 2)
    cp4, cp4_run = project(a.project, "--cp", "4")
    expect_volume(cp4, "cp 4", 4, 2, 4)
    full, _ = project(a.project, "--cp", "2", "--ac", "full")
    expect_volume(full, "cp 2 full", 2, 3, 2)
    sel, _ = project(a.project, "--cp", "2", "--ac", "selective")
    expect_volume(sel, "cp 2 selective", 2, 2, 2)
    # Under TP 2 as well: 16 heads per rank, its TP group shares the rank's S/C tokens.
    tp, tp_run = project(a.project, "--cp", "2", "--tp", "2", "--sequence-parallel")
    expect_volume(tp, "cp 2 tp 2", 2, 2, 2, heads=16)
    if "tp_activation" not in tp["step_work"]:
        fail(f"cp 2 tp 2: no tp_activation: {tp['step_work']}")
    for C, T, run_ in ((1, 1, base_run), (2, 1, cp2_run), (4, 1, cp4_run), (2, 2, tp_run)):
        tokens = run_["tokens_per_s"] * run_["step_ms"] / 1e3
        if abs(tokens - WORLD / T * S / C) > 1e-6 * tokens:
            fail(f"cp {C} tp {T}: {tokens} tokens per step, expected {WORLD // T * S // C}")
    peaks = [r["memory"]["peak_GB"] for r in (base_run, cp2_run, cp4_run)]
    if not peaks[0] > peaks[1] > peaks[2]:
        fail(f"peak memory not falling with C: {peaks} GB")
    if not any(n.startswith("--cp 2:") for n in cp2["notes"]):
        fail(f"no CP note: {cp2['notes']}")
    common = ["--seq-len", "64", "--micro-batch", "1"]
    for args, want in ((["--topology", "llm", "--world-size", "12", "--cp", "8", "--machine",
                         "h200"],
                        "--cp 8: world size 12 gives shard groups of 12 ranks, not a multiple of "
                        "8"),
                       (["--topology", "vla", "--world-size", "4", "--cp", "2", "--machine",
                         "h200"],
                        "context parallelism is modelled for text stacks only"),
                       (["--topology", "llm", "--world-size", "2", "--cp", "2", "--machine",
                         a.host_machine],
                        "context parallelism runs on GPUs")):
        expect_refusal([a.project, *args, *common], want)
    print(f"OK: CP collectives as counted by hand (step {base_run['step_ms']:.1f} ms at "
          f"{base_run['tokens_per_s'] / WORLD:.0f} tok/s/GPU -> cp 2 {cp2_run['step_ms']:.1f} ms "
          f"at {cp2_run['tokens_per_s'] / WORLD:.0f}, cp 4 {cp4_run['step_ms']:.1f} ms at "
          f"{cp4_run['tokens_per_s'] / WORLD:.0f}; peak {peaks[0]:.2f} -> {peaks[1]:.2f} -> "
          f"{peaks[2]:.2f} GB)")


if __name__ == "__main__":
    main()
