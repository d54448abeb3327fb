#!/usr/bin/env python3
"""dmuon_project as a product: the issue's reference command prints per-method projected step
times, MFU and phases for both world sizes; the results file has dmuon_bench's layout, marked
projected with the machine model embedded, and plot_results.py and dmuon_compare accept it.
Exit 0 with 'OK' on success, 1 with the first failed check."""
import argparse
import json
import os
import subprocess
import sys


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


def run_process(cmd, env=None, expect=0):
    """The finished process (stdout and stderr), or FAILED when its exit status is not expect."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != expect:
        fail(f"{' '.join(cmd)} exited {p.returncode} (expected {expect})\n{p.stdout}\n{p.stderr}")
    return p


def run(cmd, env=None, expect=0):
    return run_process(cmd, env, expect).stdout


def expect_refusal(cmd, want):
    """FAILED unless cmd exits 2 with one line on stderr that contains want."""
    p = run_process(cmd, expect=2)
    lines = p.stderr.strip().splitlines()
    if len(lines) != 1 or want not in lines[0]:
        fail(f"{cmd}: expected one line with '{want}', got {p.stderr!r}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    ap.add_argument("--compare", required=True)
    ap.add_argument("--plot", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    out = os.path.join(a.workdir, "projected.h5")
    if os.path.exists(out):
        os.remove(out)
    cmd = [a.project, "--topology", "llm", "--preset", "llama3-8b", "--machine", "a800",
           "--world-size", "8,128", "--method", "dmuon,fsdp-adamw,fsdp-muon", "--boundary",
           "recommended", "--seq-len", "2048", "--micro-batch", "2", "--comm-dtype", "bf16",
           "--json", "--output", out]
    j = json.loads(run(cmd))
    if j.get("projected") is not True or j.get("machine", {}).get("name") != "a800":
        fail("the JSON is not marked projected on a800")
    if j.get("world_sizes") != [8, 128] or not j.get("passed"):
        fail(f"world_sizes {j.get('world_sizes')}, passed {j.get('passed')}")
    seen = set()
    for r in j["runs"]:
        seen.add((r["method"], r["world_size"]))
        for key in ("step_ms", "mfu", "tokens_per_s", "phases_ms", "collectives"):
            if key not in r:
                fail(f"run {r['method']} n={r['world_size']} has no '{key}'")
        if not (r["step_ms"] > 0 and 0 < r["mfu"] < 1 and r["tokens_per_s"] > 0):
            fail(f"implausible figures in {r['method']} n={r['world_size']}: {r['step_ms']} ms, "
                 f"MFU {r['mfu']}")
        ph = r["phases_ms"]
        if abs(ph["step"] - r["step_ms"]) > 1e-9 or "exposed_comm" not in ph:
            fail("phases_ms does not carry the step and exposed communication")
        # 8 ranks x 2 x 2048 tokens, 128 ranks likewise: the global batch scales with the world.
        if r["global_tokens"] != r["world_size"] * 4096:
            fail(f"global tokens {r['global_tokens']} at n={r['world_size']}")
        if not r["audit_ok"]:
            fail(f"audit of the replayed schedule failed: {r.get('audit_message')}")
        # Bandwidth in the nccl-tests sense, as the engine reports it: every collective that ran
        # was in flight for part of the step, and no link runs faster than NVLink's bus rate.
        link = j["machine"]["intra_busbw_GBps"]
        for kind, c in r["collectives"].items():
            if c["calls_per_step"] == 0:
                continue
            t, bus, alg = c.get("in_flight_ms"), c.get("busbw_GBps"), c.get("algbw_GBps")
            if t is None or bus is None or alg is None:
                fail(f"{r['method']} n={r['world_size']} {kind}: in-flight time or bandwidth null")
            if not (0 < t <= r["step_ms"] and 0 < alg and 0 < bus <= link * (1 + 1e-9)):
                fail(f"{r['method']} n={r['world_size']} {kind}: in flight {t} ms of "
                     f"{r['step_ms']}, algbw {alg}, busbw {bus} GB/s (NVLink {link})")
    want = {(m, n) for m in ("dmuon", "fsdp-adamw", "fsdp-muon") for n in (8, 128)}
    if seen != want:
        fail(f"runs {sorted(seen)} != {sorted(want)}")

    import h5py  # Debian's python3-h5py
    with h5py.File(out, "r") as f:
        if f.attrs["format"] != "dmuon-results" or int(f.attrs["num_runs"]) != 6:
            fail("results file format / run count")
        for i in range(6):
            s = f["runs"][str(i)]["summary"].attrs
            def text(v):
                return v.decode() if isinstance(v, bytes) else str(v)
            if text(s["timings_source"]) != "projected" or text(s["machine"]) != "a800":
                fail(f"run {i} is not marked projected on a800")
            if "memory_bandwidth_GBps: 2039" not in text(s["machine_model"]):
                fail(f"run {i} does not embed the machine model")
            if not (0 < float(s["mfu"]) < 1):
                fail(f"run {i} mfu {s['mfu']}")
    # The same file against itself passes the gate; plots are written from it.
    run([a.compare, out, out])
    env = dict(os.environ, MPLBACKEND="Agg")
    plots = os.path.join(a.workdir, "plots")
    txt = run([sys.executable, a.plot, out, "-o", plots], env=env)
    if "scaling.png" not in txt:
        fail(f"plot_results.py wrote no scaling plot: {txt}")
    # Plot titles name the projected machine, not the host that computed the projection.
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); import plot_results as p; "
             "print(p.title('t', p.load(sys.argv[2])))")
    t = run([sys.executable, "-c", probe, os.path.dirname(os.path.abspath(a.plot)), out], env=env)
    if "PROJECTED on machine a800" not in t:
        fail(f"plot titles do not name the projected machine: {t!r}")
    print(f"OK: {len(j['runs'])} projected runs")


if __name__ == "__main__":
    main()
