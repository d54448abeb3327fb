#!/usr/bin/env python3
"""dmuon_project --trace as a product: the file is JSON that Perfetto / chrome://tracing read
(a traceEvents array; metadata naming one process per traced rank and its five tracks; X spans
with ts/dur in µs), only the chosen ranks appear, every stream span carries its bytes, and
without --trace no file is written. Exit 0 with 'OK', 1 with the first failed check."""
import argparse
import json
import os
import subprocess
import sys


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


ap = argparse.ArgumentParser()
ap.add_argument("--project", required=True)
ap.add_argument("--workdir", required=True)
a = ap.parse_args()
os.makedirs(a.workdir, exist_ok=True)
path = os.path.join(a.workdir, "moe.json")
if os.path.exists(path):
    os.remove(path)
cmd = [a.project, "--topology", "moe", "--machine", "h100-ndr", "--world-size", "8",
       "--boundary", "default", "--method", "dmuon", "--trace", path, "--trace-ranks", "0,5"]
p = subprocess.run(cmd, capture_output=True, text=True)
if p.returncode != 0:
    fail(f"{' '.join(cmd)} exited {p.returncode}\n{p.stderr}")
if os.path.exists(path + ".tmp"):
    fail("the temporary trace file was left behind")
doc = json.load(open(path))
events = doc["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
if set(names) != {0, 5} or not names[5].startswith("projected rank 5 (dmuon"):
    fail(f"process names {names}")
tracks = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
          if e["ph"] == "M" and e["name"] == "thread_name"}
want = ["phases", "compute", "weights stream", "reduce stream", "replicate stream"]
for pid in (0, 5):
    if [tracks.get((pid, t)) for t in range(5)] != want:
        fail(f"rank {pid} tracks {tracks}")
spans = [e for e in events if e["ph"] == "X"]
if {e["pid"] for e in spans} != {0, 5}:
    fail(f"spans of ranks {sorted({e['pid'] for e in spans})}")
used = {(e["pid"], e["tid"]) for e in spans}
for pid in (0, 5):
    for t in (0, 1, 2, 3):  # phases, compute, weights and reduce streams carry a step's work
        if (pid, t) not in used:
            fail(f"rank {pid}: no span on track {want[t]}")
for e in spans:
    if e["dur"] < 0 or e["ts"] < 0:
        fail(f"negative span {e}")
    if e["tid"] >= 2 and not (e["args"]["payload_bytes"] > 0 and "communicator" in e["args"]):
        fail(f"stream span without bytes {e}")
# No --trace: nothing written.
os.remove(path)
p = subprocess.run(cmd[:-4], capture_output=True, text=True)
if p.returncode != 0 or os.path.exists(path):
    fail("a run without --trace wrote a trace or failed")
# An empty path (a config's `trace: ""` or `--trace ''`) is bad input, not "no trace".
p = subprocess.run(cmd[:-4] + ["--trace", ""], capture_output=True, text=True)
if p.returncode != 2 or "--trace has an empty value" not in p.stderr:
    fail(f"--trace '' exited {p.returncode}: {p.stderr}")
print(f"OK: trace of ranks 0 and 5: {len(spans)} spans, "
      f"{sum(1 for e in spans if e['tid'] >= 2)} collectives with bytes")
