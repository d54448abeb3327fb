#!/usr/bin/env python3
"""Structural contract of `dmuon_inspect --json`, checked for every built-in topology.

Checks facts that hold by construction of SPEC §3/§5 and can be recomputed here
independently: every dedicated parameter has exactly one site and one owner in range, site and
load totals add up, the lower bound is max(largest unit, total / slots), the ratio is
makespan / lower bound, and Z3 predicted bytes per rank equal 3 * (P_M - owned by the rank).
"""
import json
import subprocess
import sys

REQUIRED = ["hook_sites", "sites", "dedicated_params", "params", "partition", "warnings",
            "findings", "comm", "suggested_boundary"]
PARTITION = ["strategy", "slots", "units", "packed_units", "numel_loads", "cost_loads",
             "makespan", "lower_bound", "ratio", "imbalance_all", "imbalance_nonempty"]


def check(exe, args):
    out = subprocess.run([exe, *args, "--json"], check=True, capture_output=True, text=True).stdout
    j = json.loads(out)
    where = " ".join(args)
    for k in REQUIRED:
        assert k in j, f"{where}: missing key {k}"
    for k in PARTITION:
        assert k in j["partition"], f"{where}: missing partition.{k}"
    assert j["hook_sites"] == len(j["sites"]), where
    assert j["dedicated_params"] == len(j["params"]), where
    names = [p["name"] for p in j["params"]]
    assert len(set(names)) == len(names), f"{where}: a parameter listed twice"
    in_sites = [n for s in j["sites"] for n in s["params"]]
    assert sorted(in_sites) == sorted(names), f"{where}: sites do not cover the dedicated set once"
    world = j["world_size"]
    part = j["partition"]
    assert len(part["slots"]) == world and len(part["numel_loads"]) == world, where
    numel = {p["name"]: 1 for p in j["params"]}
    for p in j["params"]:
        n = 1
        for d in p["shape"]:
            n *= d
        numel[p["name"]] = n  # unclamped: a zero-size parameter loads 0 (SPEC §5)
        assert 0 <= p["owner"] < world, where
    assert sum(part["numel_loads"]) == sum(numel.values()), f"{where}: numel loads do not add up"
    assert part["makespan"] == max(part["cost_loads"]), where
    total = sum(part["cost_loads"])
    lb = max(part["largest_unit_cost"], total / world)
    assert abs(part["lower_bound"] - lb) < 1e-9, f"{where}: lower bound {part['lower_bound']} != {lb}"
    assert abs(part["ratio"] - part["makespan"] / lb) < 1e-9, where
    for s in j["sites"]:
        owners = sorted({p["owner"] for p in j["params"] if p["site"] == s["path"]})
        assert owners == s["owners"], f"{where}: site {s['path']} owners {s['owners']} != {owners}"
    # Z3 volume per rank: 2 broadcasts receive + 1 reduce send of everything others own.
    z3 = j["comm"]["z3"]
    pm = z3["dedicated_bytes"]
    for r in range(world):
        total_r = z3["broadcast"]["bytes_per_rank"][r] + z3["reduce"]["bytes_per_rank"][r]
        assert total_r == 3 * (pm - z3["owned_bytes"][r]), f"{where}: rank {r} volume {total_r}"


def main():
    exe = sys.argv[1]
    cases = []
    for topo in ["sequential", "vla", "moe", "nested", "llm", "moe-llm"]:
        for world in ["1", "3", "8"]:
            cases.append(["--topology", topo, "-n", world])
        cases.append(["--topology", topo, "-n", "8", "--owner-strategy", "lpt_refine"])
        cases.append(["--topology", topo, "-n", "8", "--owner-strategy", "round_robin", "--no-pack"])
    cases.append(["--topology", "moe", "--boundary", "recommended", "-n", "8"])
    cases.append(["--topology", "vla", "--boundary", "incomplete", "--lenient", "-n", "4"])
    cases.append(["--topology", "llm", "--preset", "mini", "-n", "8"])
    for c in cases:
        check(exe, c)
    print(f"{len(cases)} passed, 0 failed")


if __name__ == "__main__":
    main()
