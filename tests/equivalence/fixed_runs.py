#!/usr/bin/env python3
"""Behaviour-equivalence check for refactors: one fixed set of runs, compared between two builds.

  fixed_runs.py --bin DIR --out FILE.json [--quick]   run the set with DIR's tools, write the
                                                      deterministic outputs (calls, bytes, hook
                                                      counts, audit and --check verdicts,
                                                      memory figures, projected times)
  fixed_runs.py --compare A.json B.json               exit 0 when equal, 3 (and the first
                                                      differences) otherwise

Measured timings are left out (they are noise here); everything dmuon_project prints is kept (a
projection is deterministic). Exit codes: 0 ok, 2 bad input, 3 a difference or a failed run.
"""
import argparse
import json
import os
import subprocess
import sys

TOPOLOGIES = ["sequential", "vla", "moe", "nested", "llm", "moe-llm"]
BASELINES = "dmuon,fsdp-adamw,fsdp-muon,ddp-dmuon"
ROUTES = ["--route", "ndim=1=sharded_adamw:bf16", "--route", "contains:embed=fsdp"]
# Keys of a measured run that are timings (or derived from them): left out.
TIMING_KEYS = {
    "phases_ms", "step_ms", "step_ms_samples", "step_ms_spread", "optimizer_ms",
    "optimizer_ms_spread", "micro_step_ms", "vs_best", "ratio_vs_fsdp_adamw", "in_flight_ms",
    "algbw_GBps", "busbw_GBps", "max_rel_error", "worst_parameter", "host", "timings",
    "tokens_per_s", "mfu", "note",
}


def bench_runs():
    """(ranks, args) of the measured runs."""
    common = ["--steps", "2", "--warmup", "0", "--check", "--global-tokens", "32"]
    runs = []
    for t in TOPOLOGIES:
        runs.append((4, ["--topology", t, "--boundary", "default", "--boundary", "recommended",
                         "--method", BASELINES] + common))
    for t in ["llm", "moe"]:
        runs += [
            (4, ["--topology", t, "--boundary", "recommended", "--method", BASELINES,
                 "--accum", "2"] + common),
            (4, ["--topology", t, "--boundary", "recommended", "--method", BASELINES,
                 "--clip-norm", "1"] + common),
            (4, ["--topology", t, "--boundary", "recommended", "--method", BASELINES]
             + ROUTES + common),
            (4, ["--topology", t, "--boundary", "recommended", "--method", BASELINES,
                 "--replicate", "2"] + common),
            (2, ["--topology", t, "--boundary", "recommended", "--method", BASELINES,
                 "--reshard", "z2", "--grad-reduce", "packed", "--comm-dtype", "bf16"] + common),
        ]
    runs += [
        (4, ["--topology", "llm", "--boundary", "recommended", "--method", "dmuon", "--tp", "2"]
         + common),
        (8, ["--topology", "llm", "--boundary", "recommended", "--method", "dmuon", "--tp", "2",
             "--replicate", "2", "--accum", "2", "--clip-norm", "1"] + common),
    ]
    return runs


def project_runs():
    shape = ["--seq-len", "4096", "--micro-batch", "1", "--comm-dtype", "bf16"]
    llm = ["--topology", "llm", "--preset", "llama3-8b", "--machine", "a800"] + shape
    moe = ["--topology", "moe-llm", "--preset", "mixtral-8x7b", "--machine", "h100-ndr"] + shape
    runs = []
    for base in (llm, moe):
        runs += [
            base + ["--world-size", "8,64", "--method", BASELINES],
            base + ["--world-size", "64", "--method", BASELINES, "--accum", "2"],
            base + ["--world-size", "64", "--method", BASELINES, "--clip-norm", "1"],
            base + ["--world-size", "64", "--method", BASELINES] + ROUTES,
            base + ["--world-size", "64", "--method", BASELINES, "--replicate", "2"],
            base + ["--world-size", "64", "--method", BASELINES, "--reshard", "z2",
                    "--grad-reduce", "packed"],
        ]
    runs += [
        llm + ["--world-size", "64", "--method", "dmuon", "--tp", "2"],
        llm + ["--world-size", "64", "--method", "dmuon", "--tp", "2", "--replicate", "2",
               "--accum", "2", "--clip-norm", "1"],
        ["--topology", "moe", "--machine", "h100-ndr", "--world-size", "4,8", "--method",
         BASELINES],
        ["--topology", "vla", "--machine", "a800", "--world-size", "8", "--method", BASELINES,
         "--symmetry", "full"],
    ]
    return runs


def inspect_runs():
    runs = []
    for t in TOPOLOGIES:
        runs.append(["--topology", t, "--world-size", "8"])
        runs.append(["--topology", t, "--world-size", "8", "--boundary", "recommended",
                     "--replicate", "2", "--reshard", "z2", "--grad-reduce", "packed"])
    runs.append(["--topology", "llm", "--world-size", "8", "--tp", "2"])
    runs.append(["--topology", "llm", "--world-size", "8", "--accum", "2", "--clip-norm", "1"]
                + ROUTES)
    return runs


def strip(value):
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


def run(cmd, env):
    """The tool's JSON and its exit code (3, a failed check, still prints the JSON)."""
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    try:
        out = json.loads(p.stdout)
    except json.JSONDecodeError:
        lines = p.stderr.strip().splitlines()
        return {"exit": p.returncode, "failed": lines[-1:] if lines else []}
    out["exit_code"] = p.returncode
    return out


def collect(bin_dir, quick):
    env = dict(os.environ)
    mpirun = env.get("MPIEXEC", "mpirun")
    out = {"bench": {}, "project": {}, "inspect": {}}
    bench = bench_runs()[:3] if quick else bench_runs()
    for ranks, args in bench:
        key = f"np{ranks} " + " ".join(args)
        print(f"bench   {key}", file=sys.stderr, flush=True)
        out["bench"][key] = strip(run([mpirun, "-n", str(ranks),
                                       os.path.join(bin_dir, "dmuon_bench")] + args + ["--json"],
                                      env))
    for args in project_runs()[: 3 if quick else None]:
        key = " ".join(args)
        print(f"project {key}", file=sys.stderr, flush=True)
        out["project"][key] = run([os.path.join(bin_dir, "dmuon_project")] + args + ["--json"],
                                  env)
        out["project"][key].pop("host", None)
    for args in inspect_runs()[: 3 if quick else None]:
        key = " ".join(args)
        out["inspect"][key] = run([os.path.join(bin_dir, "dmuon_inspect")] + args + ["--json"],
                                  env)
    return out


# Compared as if absent: the projection's own wall time, and where the machine file lies (the
# two builds being compared sit in different checkouts).
NOT_COMPARED = {"build_s", "replay_s"}


def comparable(value, key=""):
    if isinstance(value, dict):
        return {k: comparable(v, k) for k, v in value.items() if k not in NOT_COMPARED}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    if key == "source" and isinstance(value, str) and os.sep in value:
        return os.path.basename(value)
    return value


def differences(a, b, path=""):
    if type(a) is not type(b):
        yield f"{path}: {a!r} != {b!r}"
    elif isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                yield f"{path}/{k}: only in {'B' if k not in a else 'A'}"
            else:
                yield from differences(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        if len(a) != len(b):
            yield f"{path}: {len(a)} items != {len(b)}"
        for i, (x, y) in enumerate(zip(a, b)):
            yield from differences(x, y, f"{path}[{i}]")
    elif a != b:
        yield f"{path}: {a!r} != {b!r}"


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", help="directory holding dmuon_bench, dmuon_project, dmuon_inspect")
    ap.add_argument("--out", help="where to write the collected outputs (JSON)")
    ap.add_argument("--quick", action="store_true", help="a few runs of each tool only")
    ap.add_argument("--compare", nargs=2, metavar=("A", "B"))
    a = ap.parse_args()
    if a.compare:
        try:
            x, y = (json.load(open(f)) for f in a.compare)
        except (OSError, json.JSONDecodeError) as e:
            print(f"fixed_runs.py: error: {e}", file=sys.stderr)
            return 2
        diffs = list(differences(comparable(x), comparable(y)))
        for d in diffs[:40]:
            print(d)
        print(f"{len(diffs)} difference(s)" if diffs else "identical")
        return 3 if diffs else 0
    if not a.bin or not a.out:
        print("fixed_runs.py: error: --bin and --out (or --compare A B) are required",
              file=sys.stderr)
        return 2
    result = collect(a.bin, a.quick)
    failed = [k for tool in result.values() for k, v in tool.items() if "failed" in v]
    with open(a.out + ".tmp", "w") as f:
        json.dump(result, f, indent=1, sort_keys=True)
    os.replace(a.out + ".tmp", a.out)
    for k in failed:
        print(f"failed: {k}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
