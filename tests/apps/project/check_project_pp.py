#!/usr/bin/env python3
"""dmuon_project --pp P on the tiny llm (4 blocks, h = 128) at 8 ranks, 64 tokens, 4 micro-batches.
Checked against what is known without the composition's code: the stages hold blocks 0-1 with the
embedding and 2-3 with the head (2 and 1 micro-batches in flight under 1F1B; interleaved with 2
chunks: blocks 0, 2 and 1, 3); tokens/s per GPU are the global batch of the 4 data-parallel
pipelines over the step; the FLOPs the stages' MFUs count add up to the whole model's (the same
global batch projected without --pp at 4 ranks: MFU x step x ranks equal); the span is the
1F1B formula of the stages' compute (hand-derived in project/pipeline_schedule.hpp); each stage
waits span - its compute; the step is the largest stage step plus its wait; interleaving shortens
the span; the same with TP 2 inside each stage (the mini preset: 2 key/value heads) and with EP 4
inside each stage (the tiny moe-llm); --pp-microbatches 2 fills and drains twice. Refusals: a
world P does not divide, too few blocks, --pp with --cp, --pp-microbatches not dividing --accum.
Exit 0 with
'OK' on success, 1 with the first failed check."""
import argparse
import json

from check_project import expect_refusal, fail, run

COMMON = ["--topology", "llm", "--machine", "h100-ndr", "--boundary", "default", "--method",
          "dmuon,fsdp-adamw", "--seq-len", "64", "--micro-batch", "1", "--accum", "4", "--json"]
WORK = ["--preset", "tiny", *COMMON]


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-12)


def pipeline(exe, *extra, model=WORK):
    return json.loads(run([exe, *model, "--world-size", "8", "--pp", "2", *extra]))


def check_row(r, m, pipelines=4):
    if r["status"] != "ok":
        fail(f"{r['method']}: {r['status']} {r.get('error')}")
    stages = r["stages"]
    c = [s["compute_ms"] / m for s in stages]
    span = sum(c) - max(c) + m * max(c) + 2 * (len(stages) - 1) * r["send_ms"]
    if not close(r["span_ms"], span):
        fail(f"{r['method']}: span {r['span_ms']} ms, 1F1B gives {span}")
    for s in stages:
        if not close(s["bubble_ms"], span - s["compute_ms"]):
            fail(f"{r['method']} stage {s['stage']}: bubble {s['bubble_ms']}, expected "
                 f"{span - s['compute_ms']}")
    step = max(s["step_alone_ms"] + s["bubble_ms"] for s in stages)
    if not close(r["step_ms"], step):
        fail(f"{r['method']}: step {r['step_ms']} ms, the stages give {step}")
    # 8 ranks / 2 stages (/ TP) data-parallel pipelines x 64 tokens x 4 micro-batches
    tokens = pipelines * 64 * 4
    if not close(r["tokens_per_s"], tokens / (r["step_ms"] * 1e-3)):
        fail(f"{r['method']}: {r['tokens_per_s']} tokens/s, expected {tokens} a step")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    a = ap.parse_args()
    j = pipeline(a.project)
    if j["pipeline"]["holds"] != ["blocks 0-1 + embedding", "blocks 2-3 + head"]:
        fail(f"stages hold {j['pipeline']['holds']}")
    flat = {r["method"]: r for r in json.loads(run([a.project, *WORK, "--world-size", "4"]))["runs"]}
    for r in j["runs"]:
        check_row(r, 4)
        if [s["in_flight"] for s in r["stages"]] != [2, 1]:
            fail(f"{r['method']}: in flight {[s['in_flight'] for s in r['stages']]}, 1F1B: 2, 1")
        f = flat[r["method"]]
        if not close(r["mfu"] * r["step_ms"] * 8, f["mfu"] * f["step_ms"] * 4, 1e-4):
            fail(f"{r['method']}: the stages' FLOPs ({r['mfu']} x {r['step_ms']} ms x 8) are not "
                 f"the model's ({f['mfu']} x {f['step_ms']} ms x 4)")
    inter = pipeline(a.project, "--pp-chunks", "2")
    if inter["pipeline"]["holds"] != ["blocks 0, 2 + embedding", "blocks 1, 3 + head"]:
        fail(f"interleaved stages hold {inter['pipeline']['holds']}")
    for r, one in zip(inter["runs"], j["runs"]):
        c = [s["compute_ms"] / 4 for s in r["stages"]]
        span = (sum(c) - max(c)) / 2 + 4 * max(c) + 2 * 3 * r["send_ms"]
        if not close(r["span_ms"], span):
            fail(f"interleaved {r['method']}: span {r['span_ms']}, expected {span}")
        if not r["span_ms"] < one["span_ms"]:
            fail(f"interleaved {r['method']}: span {r['span_ms']} not below 1F1B's {one['span_ms']}")
    # With TP 2 inside each stage: the same checks, the FLOPs against TP 2 without --pp.
    mini = ["--preset", "mini", *COMMON]  # 2 key/value heads
    tp = ["--tp", "2", "--sequence-parallel"]
    j2 = pipeline(a.project, *tp, model=mini)
    flat2 = {r["method"]: r for r in
             json.loads(run([a.project, *mini, "--world-size", "4", *tp]))["runs"]}
    for r in j2["runs"]:
        check_row(r, 4, pipelines=2)
        f = flat2[r["method"]]
        if not close(r["mfu"] * r["step_ms"] * 8, f["mfu"] * f["step_ms"] * 4, 1e-4):
            fail(f"--tp 2 {r['method']}: the stages' FLOPs are not the model's")
    # --pp-microbatches 2: the 4 micro-batches in 2 runs of the schedule, each filling and
    # draining (2 runs x (the fill of the other stage + 2 sends) + 4 at the slowest).
    runs = pipeline(a.project, "--pp-microbatches", "2")
    if runs["pipeline"]["schedule_runs"] != 2:
        fail(f"--pp-microbatches 2: {runs['pipeline']['schedule_runs']} runs, expected 2")
    for r, one in zip(runs["runs"], j["runs"]):
        c = [s["compute_ms"] / 4 for s in r["stages"]]
        span = 2 * (sum(c) - max(c) + 2 * r["send_ms"]) + 4 * max(c)
        if not close(r["span_ms"], span):
            fail(f"--pp-microbatches 2 {r['method']}: span {r['span_ms']}, expected {span}")
        if not r["span_ms"] > one["span_ms"]:
            fail(f"--pp-microbatches 2 {r['method']}: span {r['span_ms']} not above one run's")
    # With EP 4 inside each stage (the tiny moe-llm: 8 experts, layers 1-3 MoE): the same
    # checks, the FLOPs against --ep 4 without --pp at 4 ranks.
    moe = ["--topology", "moe-llm", "--preset", "tiny", *COMMON[2:]]
    ep = ["--ep", "4"]
    j3 = pipeline(a.project, *ep, model=moe)
    flat3 = {r["method"]: r for r in
             json.loads(run([a.project, *moe, "--world-size", "4", *ep]))["runs"]}
    for r in j3["runs"]:
        check_row(r, 4)
        f = flat3[r["method"]]
        if not close(r["mfu"] * r["step_ms"] * 8, f["mfu"] * f["step_ms"] * 4, 1e-4):
            fail(f"--ep 4 {r['method']}: the stages' FLOPs are not the model's")
    base = [a.project, *WORK]
    expect_refusal([*base, "--world-size", "8", "--pp", "2", "--pp-microbatches", "3"],
                   "--pp-microbatches 3 does not divide --accum 4")
    expect_refusal([*base, "--world-size", "6", "--pp", "4"],
                   "--pp 4: world size 6 does not split into 4 stages (valid: a multiple of 4)")
    expect_refusal([*base, "--world-size", "8", "--pp", "8"], "has 4 blocks, fewer than the 8")
    expect_refusal([*base, "--world-size", "8", "--pp", "2", "--cp", "2"],
                   "--pp 2 with --cp: not modelled together yet")
    print("OK: pipeline stages, span, bubbles, tokens and FLOPs")


if __name__ == "__main__":
    main()
