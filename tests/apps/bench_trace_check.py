#!/usr/bin/env python3
"""dmuon_bench --trace as a product: under mpiexec -n 2 the file is Chrome trace-event JSON
(Perfetto): one process per rank labelled "measured rank R", phases / compute / stream tracks,
every stream span with its payload and communicator, no overlap on one track, every step
recorded (warm-up included). Exit 0 with 'OK', 1 with the first failed check."""
import argparse
import json
import os
import subprocess
import sys


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


ap = argparse.ArgumentParser()
ap.add_argument("--bench", required=True)
ap.add_argument("--mpiexec", required=True)
ap.add_argument("--npflag", default="-n")
ap.add_argument("--workdir", required=True)
a = ap.parse_args()
os.makedirs(a.workdir, exist_ok=True)
path = os.path.join(a.workdir, "moe.json")
if os.path.exists(path):
    os.remove(path)
cmd = [a.mpiexec, a.npflag, "2", a.bench, "--topology", "moe", "--boundary", "default",
       "--method", "dmuon", "--steps", "2", "--warmup", "1", "--trace", path]
p = subprocess.run(cmd, capture_output=True, text=True)
if p.returncode != 0:
    fail(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
events = json.load(open(path))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events
         if e["ph"] == "M" and e["name"] == "process_name"}
if sorted(names) != [0, 1] or not all(names[r].startswith(f"measured rank {r} (dmuon")
                                      for r in (0, 1)):
    fail(f"process names {names}")
spans = [e for e in events if e["ph"] == "X"]
by_track = {}
for e in spans:
    if e["dur"] < 0 or e["ts"] < 0:
        fail(f"negative span {e}")
    by_track.setdefault((e["pid"], e["tid"]), []).append((e["ts"], e["dur"]))
    if e["tid"] % 5 >= 2 and not (e["args"]["payload_bytes"] > 0 and e["args"]["communicator"]):
        fail(f"stream span without bytes {e}")
for r in (0, 1):
    for tid in (0, 1, 2):  # phases, compute, weights stream
        if (r, tid) not in by_track:
            fail(f"rank {r}: nothing on track {tid}")
    steps = {e["args"]["step"] for e in spans if e["pid"] == r and e["tid"] == 1}
    if steps != {1, 2, 3}:
        fail(f"rank {r}: steps {sorted(steps)} (expected the warm-up and 2 measured)")
for key, ss in by_track.items():
    ss.sort()
    for (t0, d0), (t1, _) in zip(ss, ss[1:]):
        if t1 < t0 + d0 - 1e-3:
            fail(f"overlap on rank {key[0]} track {key[1]}: {t0}+{d0} > {t1}")
print(f"OK: measured trace of 2 ranks: {len(spans)} spans, "
      f"{sum(1 for e in spans if e['tid'] % 5 >= 2)} collectives with bytes")
