#!/usr/bin/env python3
"""The run key holds every option that changes what is run or measured (issue 37).

Two results files that differ in one such option are not the same run: dmuon_compare exits 3
and names the option and both values. Checked for each option the key gained with the option
table (ac, seq_len, micro_batch, fusion, compute_dtype, flops, machine, baseline_units) on projections (one
process, fractions of a second each), and for the measured pair the issue reported
(dmuon_bench --ac none / --ac full at 2 ranks). The same command twice matches (exit 0).

  check_run_key.py --bin BUILD/bin --workdir DIR [--mpiexec mpiexec --npflag -n]
"""
import argparse
import json
import os
import subprocess
import sys

# (option, value A, value B, what dmuon_compare must name): the shape is seq 64 x micro-batch 2.
CASES = [
    (["--ac", "none"], ["--ac", "full"], "ac: none vs full"),
    (["--seq-len", "64"], ["--seq-len", "128"], "seq_len: 64 vs 128"),
    (["--micro-batch", "2"], ["--micro-batch", "4"], "micro_batch: 2 vs 4"),
    (["--fusion", "fused"], ["--fusion", "eager"], "fusion: fused vs eager"),
    ([], ["--compute-dtype", "fp32"], "compute_dtype: - vs fp32"),
    (["--flops", "6n-attn"], ["--flops", "megatron"], "flops: 6n-attn vs megatron"),
    (["--machine", "h100-ndr"], ["--machine", "a800"], "machine: h100-ndr vs a800"),
    (["--method", "fsdp-adamw"], ["--method", "fsdp-adamw", "--baseline-units", "default"],
     "baseline_units: repeated-blocks vs default"),
]
BASE = ["--seq-len", "64", "--micro-batch", "2", "--ac", "none", "--machine", "h100-ndr",
        "--method", "dmuon"]


def fail(msg):
    sys.exit("FAILED: " + msg)


def run(cmd, rc=0):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if p.returncode != rc:
        fail(f"{' '.join(cmd)} exited {p.returncode} (expected {rc})\n{p.stdout[-3000:]}\n"
             f"{p.stderr[-2000:]}")
    return p


def with_options(base, extra):
    """`base` with the flags of `extra` replacing its own."""
    out, skip = [], set(extra[::2])
    i = 0
    while i < len(base):
        if base[i] in skip:
            i += 2
            continue
        out.append(base[i])
        i += 1
    return out + extra


def project(args, bindir, path):
    run([os.path.join(bindir, "dmuon_project"), "--topology", "llm", "--preset", "mini",
         "--world-size", "2", "--boundary", "default", "--output", path]
        + args)


def compare(bindir, a, b, rc):
    return run([os.path.join(bindir, "dmuon_compare"), "--deterministic-only", "--json", a, b],
               rc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--npflag", default="-n")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    same = [os.path.join(a.workdir, f"same{i}.h5") for i in (0, 1)]
    for p in same:
        project(BASE, a.bin, p)
    compare(a.bin, same[0], same[1], 0)
    for k, (opt_a, opt_b, named) in enumerate(CASES):
        fa, fb = (os.path.join(a.workdir, f"case{k}{s}.h5") for s in "ab")
        project(with_options(BASE, opt_a), a.bin, fa)
        project(with_options(BASE, opt_b), a.bin, fb)
        j = json.loads(compare(a.bin, fa, fb, 3).stdout)
        if named not in j.get("only_a_nearest", [""])[0]:
            fail(f"{opt_a} vs {opt_b}: dmuon_compare does not name '{named}': "
                 f"{j.get('only_a_nearest')}")
    # The measured pair of the issue: dmuon_bench at 2 ranks, --ac none against --ac full.
    bench = [a.mpiexec, a.npflag, "2", os.path.join(a.bin, "dmuon_bench"), "--topology", "llm",
             "--preset", "tiny", "--seq-len", "16", "--micro-batch", "2", "--method", "dmuon",
             "--boundary", "default", "--steps", "1", "--warmup", "0"]
    fa, fb = (os.path.join(a.workdir, f"bench_{ac}.h5") for ac in ("none", "full"))
    run(bench + ["--ac", "none", "--output", fa])
    run(bench + ["--ac", "full", "--output", fb])
    p = run([os.path.join(a.bin, "dmuon_compare"), "--deterministic-only", fa, fb], 3)
    if "ac: none vs full" not in p.stdout:
        fail("the measured --ac pair: the table does not name 'ac: none vs full'\n" + p.stdout)
    print(f"OK: {len(CASES)} options keyed and named; the same run matches; the measured pair "
          "exits 3 naming ac")


if __name__ == "__main__":
    main()
