#!/usr/bin/env python3
"""dmuon_project --dmuon-schedule: `overlapped` reproduces the figures the main branch projected
before the reference's schedule existed (commit cdf8fe4, recorded here as literals: step, every
phase and the peak memory, bit for bit up to 1e-12 relative), and the default `reference`
schedule leaves the baselines' figures alone while it has no barrier (step_sync 0) and waits
for late owners in the forward instead. The three Z3 runs were re-recorded when FSDP2's root unit
started staying gathered from forward to backward on a GPU (StepLayout::stays_gathered): one
all-gather of the FSDP unit fewer (backward_comm, exposed_comm and the step lower by exactly
it; every other phase the main branch's to 1e-15) and its gathered weights live through
backward (the peak higher by them). The --seq-len run was re-recorded when the input embedding
stopped running a synthetic Linear beside its lookup (StepSpec::compute_of, 2026-12-07): its
forward_compute 5.81 µs and backward_compute 24.70 µs lower (the embedding's GEMMs, less its
gradient fill), the step lower by their sum, every other phase and the peak the main branch's.
Exit 0 with 'OK', 1 with the first failed check."""
import argparse
import json
import subprocess
import sys

# (flags, method, step ms, phases ms, peak bytes) from the main branch's dmuon_project.
MAIN = [
    ("--topology llm --world-size 8 --machine a800 --method dmuon,fsdp-adamw "
     "--boundary recommended --reshard z2 --comm-dtype bf16", [
         ("dmuon", 1.2890182133336483,
          {"backward_comm": 0.02078313431420637, "backward_compute": 0.3288429386268514,
           "exposed_comm": 0.06182382302451607, "forward_comm": 0.04349602302451596,
           "forward_compute": 0.16245879498966728, "optimizer_ns": 0.6837676760376086,
           "optimizer_other": 0.05212498065500508, "step": 1.2890182133336483,
           "step_sync": 0.7134372351896986}, 4306656),
         ("fsdp-adamw", 0.6745870532273472,
          {"backward_comm": 0.018327800000000113, "backward_compute": 0.3301595679691349,
           "exposed_comm": 0.10252671108484945, "forward_comm": 0.08419891108484934,
           "forward_compute": 0.16245879498966717, "optimizer_ns": 0.0,
           "optimizer_other": 0.0794419791836957, "step": 0.6745870532273472,
           "step_sync": 0.0}, 3331808)]),
    ("--topology moe --world-size 16 --replicate 2 --machine h100-ndr --method dmuon "
     "--boundary default --reshard z3", [
         ("dmuon", 2.645881565514293,
          {"backward_comm": 0.12321255784254662, "backward_compute": 0.5806878117235996,
           "exposed_comm": 0.21011093487391733, "forward_comm": 0.09033299593684324,
           "forward_compute": 0.29067816092498944, "optimizer_ns": 1.4840960463831636,
           "optimizer_other": 0.08030861160862297, "step": 2.645881565514293,
           "step_sync": 1.6184608652617438}, 19488768)]),
    ("--topology llm --world-size 8 --machine a800 --method dmuon --boundary recommended "
     "--reshard z3 --seq-len 256 --micro-batch 1 --comm-dtype bf16 --clip-norm 1", [
         ("dmuon", 2.043094161483047,
          {"backward_comm": 0.04080620294261844, "backward_compute": 0.8098306750520304,
           "exposed_comm": 0.09517884475766271, "forward_comm": 0.04349602302451552,
           "forward_compute": 0.3977833315013651, "optimizer_ns": 0.6837676760376084,
           "optimizer_other": 0.0698655872391151, "step": 2.043094161483047,
           "step_sync": 0.7137407913991691}, 8650464)]),
    ("--topology vla --world-size 16 --machine h200 --method dmuon --grad-reduce packed "
     "--replicate 2 --boundary default", [
         ("dmuon", 1.121960799445234,
          {"backward_comm": 0.04622538790142474, "backward_compute": 0.3774434065612728,
           "exposed_comm": 0.08604930047329701, "forward_comm": 0.03982391257187226,
           "forward_compute": 0.18934685957370362, "optimizer_ns": 0.4321191587628864,
           "optimizer_other": 0.037002074074074305, "step": 1.121960799445234,
           "step_sync": 0.4531204032073308}, 7222272)]),
]


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


def close(a, b):
    return abs(a - b) <= 1e-12 * max(1.0, abs(b))


def runs(project, flags, schedule):
    cmd = [project] + flags.split() + ["--json", "--dmuon-schedule", schedule]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}\n{p.stderr}")
    return json.loads(p.stdout)["runs"]


ap = argparse.ArgumentParser()
ap.add_argument("--project", required=True)
a = ap.parse_args()
checked = 0
for flags, expected in MAIN:
    got = runs(a.project, flags, "overlapped")
    if [r["method"] for r in got] != [e[0] for e in expected]:
        fail(f"{flags}: methods {[r['method'] for r in got]}")
    for r, (method, step, phases, peak) in zip(got, expected):
        if not close(r["step_ms"], step):
            fail(f"{flags} {method}: overlapped step {r['step_ms']!r} ms, main {step!r}")
        for k, v in phases.items():
            if not close(r["phases_ms"][k], v):
                fail(f"{flags} {method}: overlapped {k} {r['phases_ms'][k]!r} ms, main {v!r}")
        if r["memory"]["peak_bytes"] != peak:
            fail(f"{flags} {method}: overlapped peak {r['memory']['peak_bytes']}, main {peak}")
        checked += 1
    for r, (method, step, phases, peak) in zip(runs(a.project, flags, "reference"), expected):
        if method != "dmuon":  # the schedule is dmuon's: a baseline's figures do not move
            if not close(r["step_ms"], step) or r["memory"]["peak_bytes"] != peak:
                fail(f"{flags} {method}: the reference schedule moved a baseline")
            continue
        if r["phases_ms"]["step_sync"] != 0:
            fail(f"{flags}: the reference schedule has no barrier, step_sync "
                 f"{r['phases_ms']['step_sync']}")
        # The owners' lead is waited in the next forward (publish at the next forward).
        if r["phases_ms"]["forward_comm"] <= phases["forward_comm"]:
            fail(f"{flags}: reference forward_comm {r['phases_ms']['forward_comm']} not above "
                 f"the overlapped {phases['forward_comm']}")
print(f"OK: {checked} overlapped runs reproduce the main branch's figures")
