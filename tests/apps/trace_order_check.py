#!/usr/bin/env python3
"""The host executor's --trace and the projection's --trace of the same run show the same order:
under mpiexec -n 2, dmuon_bench runs the reference's DMuon step (--trace); dmuon_project replays
the same flags on a modelled 2-GPU world (--trace-ranks 0,1). Per rank, step and communicator
the batches (issue op and group) are listed in the order they started: the host starts a batch
where it issues it, the replay where its communicator runs it (in issue order, whatever its
stream: NCCL's rule); the lists must be equal, and every rank's first Newton-Schulz must come
after all of its sites' reduce batches in both. Exit 0 with 'OK', 1 with the first failed check."""
import argparse
import json
import os
import subprocess
import sys


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")


def orders(path):
    """{(rank, step, communicator): [batch names in start order]} and the stream spans."""
    spans = [e for e in json.load(open(path))["traceEvents"] if e["ph"] == "X"]
    out = {}
    for e in sorted(spans, key=lambda e: (e["ts"], e["name"])):
        a = e["args"]
        if e["tid"] >= 2:
            out.setdefault((e["pid"], a["step"], a["communicator"]), []).append(e["name"])
    return out, spans


def ns_after_reduces(spans, ns_name, what):
    for rank in (0, 1):
        for step in (1, 2):
            mine = [e for e in spans if e["pid"] == rank and e["args"]["step"] == step]
            # The sites' reduces: group 0 is the FSDP unit of the parameters no site holds
            # (the layout puts it first), whose AdamW runs after the sites' Newton-Schulz.
            reduces = [e["ts"] + e["dur"] for e in mine
                       if e["name"].startswith("issue_reduce") and e["name"] != "issue_reduce g0"]
            ns = [e["ts"] for e in mine if e["tid"] == 1 and e["name"].startswith(ns_name)]
            if ns and reduces and min(ns) < max(reduces) - 1e-3:
                fail(f"{what} rank {rank} step {step}: Newton-Schulz at {min(ns)} µs before the "
                     f"last reduce ended at {max(reduces)} µs")


ap = argparse.ArgumentParser()
ap.add_argument("--bench", required=True)
ap.add_argument("--project", required=True)
ap.add_argument("--mpiexec", required=True)
ap.add_argument("--npflag", default="-n")
ap.add_argument("--workdir", required=True)
a = ap.parse_args()
os.makedirs(a.workdir, exist_ok=True)
host, projected = (os.path.join(a.workdir, f) for f in ("host.json", "projected.json"))
flags = ["--topology", "moe", "--boundary", "default", "--method", "dmuon", "--reshard", "z3",
         "--tokens", "4"]
# One warm-up and one measured step: the two steps the projection replays.
run([a.mpiexec, a.npflag, "2", a.bench] + flags + ["--warmup", "1", "--steps", "1", "--trace", host])
run([a.project] + flags + ["--machine", "h200", "--world-size", "2", "--trace", projected,
                           "--trace-ranks", "0,1"])
h, h_spans = orders(host)
p, p_spans = orders(projected)
# One known difference: on a GPU the projection runs FSDP groups as FSDP2 does, whose root unit
# (group 0: the parameters no site holds) stays gathered from forward to backward (PyTorch's
# FSDPState._lazy_init; docs/PROJECTION.md); the host engine re-gathers it for backward. So the
# host issues group 0's weights twice per step and the projection once: the host's second one
# is left out of the comparison, and everything else must agree.
ROOT = "issue_weights g0"
for key in sorted(h):
    hn, pn = h[key].count(ROOT), p.get(key, []).count(ROOT)
    if (hn, pn) not in ((0, 0), (2, 1)):
        fail(f"rank {key[0]} step {key[1]} {key[2]}: the root unit's weights issued {hn} times "
             f"on the host, {pn} projected (want 2 and 1: FSDP2 keeps it gathered)")
    if hn == 2:
        second = [i for i, n in enumerate(h[key]) if n == ROOT][1]
        del h[key][second]
if not h or set(h) != set(p):
    fail(f"(rank, step, communicator) keys differ: host {sorted(h)}, projected {sorted(p)}")
for key in sorted(h):
    if h[key] != p[key]:
        fail(f"rank {key[0]} step {key[1]} {key[2]}: host {h[key]}, projected {p[key]}")
ns_after_reduces(h_spans, "newton_schulz", "host")
ns_after_reduces(p_spans, "optimizer_ns", "projected")
print(f"OK: trace order: {len(h)} (rank, step, communicator) batch orders agree, "
      f"{sum(len(v) for v in h.values())} batches")
