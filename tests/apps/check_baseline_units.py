#!/usr/bin/env python3
"""The baselines' FSDP units by their own rule (--baseline-units, issue 39.1): the baseline rows
are the same whichever --boundary comes first, and their units are the ones derived by hand.

dmuon_bench (measured, 2 ranks) and dmuon_project (DeepSeek-V3 on 256 H100): every baseline
row's hook sites, hook calls and bytes per rank per step agree under swapped boundary orders,
and its site count is the repeated-block rule's (the root plus one per decoder layer)."""

import argparse
import json
import subprocess
import sys


def run_json(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)} exited {p.returncode}: {p.stderr.strip()[-400:]}")
    return json.loads(p.stdout)


def baselines(doc):
    rows = {}
    for r in doc["runs"]:
        if r["baseline"]:
            rows[r["method"]] = (r["status"], r.get("hook_sites"), r.get("hook_calls_per_step"),
                                 r.get("bytes_per_rank_per_step"), r.get("baseline_units"),
                                 r["memory"]["peak_bytes"] if "memory" in r else None)
    return rows


def check_orders(name, base_cmd, orders, want_sites, want_units):
    seen = []
    for order in orders:
        cmd = list(base_cmd)
        for b in order:
            cmd += ["--boundary", b]
        seen.append(baselines(run_json(cmd)))
    if not seen[0]:
        sys.exit(f"FAILED ({name}): no baseline rows")
    for s in seen[1:]:
        if s != seen[0]:
            sys.exit(f"FAILED ({name}): baseline rows differ with the boundary order: {seen[0]} vs {s}")
    for method, row in seen[0].items():
        if (want_sites is not None and row[1] != want_sites) or row[4] != want_units:
            sys.exit(f"FAILED ({name}): {method} has {row[1]} sites, units '{row[4]}'; "
                     f"want {want_sites}, '{want_units}'")
    first = seen[0][next(iter(seen[0]))]
    print(f"{name}: {sorted(seen[0])} identical under {len(orders)} boundary orders "
          f"(status {first[0]}, {first[1]} sites, {first[3]} bytes, peak {first[5]} bytes per rank)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bench", required=True)
    ap.add_argument("--project", required=True)
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--npflag", default="-n")
    a = ap.parse_args()
    # moe tiny: 4 MoELayers (each holding its router and 8 experts) plus the root. The root
    # holds no parameter, but the baselines shard the non-dedicated routers in a unit of their
    # own, as before: 4 + 1 sites (the default boundary's baseline, the "5 sites").
    bench = [a.mpiexec, a.npflag, "2", a.bench, "--topology", "moe", "--tokens", "4",
             "--steps", "1", "--warmup", "0", "--compute", "none",
             "--method", "dmuon,fsdp-adamw,ddp-muon", "--json"]
    check_orders("dmuon_bench moe", bench,
                 [["default", "recommended"], ["recommended", "default"]], 5,
                 "root + 4 x MoELayer (layers.N)")
    # DeepSeek-V3 on 256 H100: 61 decoder layers plus the root (embedding, final norm, head).
    # Each MoE layer is one unit of 256 experts, so the row is out of memory in every order
    # (before, it fit at 60.6 GB only when the recommended boundary came first): no sites in
    # an oom row, its peak memory is compared instead.
    project = [a.project, "--topology", "moe-llm", "--preset", "deepseek-v3", "--machine",
               "h100-ndr", "--world-size", "256", "--method", "fsdp-adamw", "--json"]
    check_orders("dmuon_project deepseek-v3 256", project,
                 [["default", "recommended"], ["recommended", "default"]], None,
                 "root + 61 x MoeDecoderLayer (model.layers.N)")
    print("OK: baseline units")


if __name__ == "__main__":
    main()
