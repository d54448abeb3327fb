#!/usr/bin/env python3
"""dmuon_project --tp 2: the issue's command projects the llm preset at world sizes 4 and 8
(R x G x T with T = 2); every run's collectives include the TP gathers and scatters, whose
calls and bytes per rank per step (max over ranks) are what dmuon_inspect --tp 2 predicts for
that world, as are the DP broadcasts and reduces (on the local shards); the global batch is the
DP groups' (world / T ranks). The AdamW baseline runs beside it, with no TP exchange. With --accum K (K micro-steps, accumulation.hpp): the TP gathers
and scatters are still once per step (the optimizer runs once), the dmuon row broadcasts K
times inspect's (Z3 forward and backward of every micro-step), the reduces once. Exit 0 with 'OK' on success, 1 with the first failed check."""
import argparse
import json

from check_project import fail, run  # the same helpers as the product check beside it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    ap.add_argument("--inspect", required=True)
    ap.add_argument("--accum", type=int, default=1)
    a = ap.parse_args()
    j = json.loads(run([a.project, "--topology", "llm", "--preset", "tiny", "--tp", "2",
                        "--world-size", "4,8", "--machine", "h200", "--boundary", "default",
                        "--tokens", "16", "--accum", str(a.accum), "--json"]))
    if j.get("world_sizes") != [4, 8] or not j.get("passed") or j.get("tp") != 2:
        fail(f"world_sizes {j.get('world_sizes')}, passed {j.get('passed')}, tp {j.get('tp')}")
    checked = 0
    adamw = 0
    for r in j["runs"]:
        n = r["world_size"]
        if r["method"] not in ("dmuon", "fsdp-adamw") or not r["audit_ok"]:
            fail(f"run {r['method']} n={n}: dmuon and fsdp-adamw run with --tp, audited OK")
        if r["method"] == "fsdp-adamw":
            # AdamW on the local shards: no TP exchange; its global batch is the DP groups'.
            c = r["collectives"]
            if any(c.get(k, {}).get("calls_per_step", 0) for k in ("tp_gather", "tp_scatter")) \
                    or r["global_tokens"] != n // 2 * 16 or not r["step_ms"] > 0:
                fail(f"fsdp-adamw n={n}: {c.get('tp_gather')}, {r['global_tokens']} tokens")
            adamw += 1
            continue
        pred = json.loads(run([a.inspect, "--topology", "llm", "--preset", "tiny", "--tp", "2",
                               "--world-size", str(n), "--json"]))["comm"]["z3"]
        c = r["collectives"]
        for kind in ("gather", "scatter"):
            got = c.get("tp_" + kind)
            if got is None:
                fail(f"n={n}: collectives lack tp_{kind}: {sorted(c)}")
            want = pred["tp"][kind]
            if got["calls_per_step"] != max(want["calls_per_rank"]) or got["calls_per_step"] <= 0:
                fail(f"n={n} tp_{kind}: {got['calls_per_step']} calls, inspect "
                     f"{max(want['calls_per_rank'])}")
            if got["bytes_per_rank_per_step"] != max(want["bytes_per_rank"]) or \
                    got["formula_bytes_per_rank_per_step"] != max(want["bytes_per_rank"]):
                fail(f"n={n} tp_{kind}: {got['bytes_per_rank_per_step']} B, inspect "
                     f"{max(want['bytes_per_rank'])} B")
            if got["group_size"] != 2:
                fail(f"n={n} tp_{kind}: group size {got['group_size']}")
        for kind, times in (("broadcast", a.accum), ("reduce", 1)):
            if c[kind]["bytes_per_rank_per_step"] != times * pred[kind]["max_bytes"] or \
                    c[kind]["calls_per_step"] != times * pred[kind]["max_calls"]:
                fail(f"n={n} {kind}: {c[kind]} vs {times} x inspect {pred[kind]}")
        if r["tp"]["gather_bytes_per_rank_per_step"] != c["tp_gather"]["bytes_per_rank_per_step"]:
            fail(f"n={n}: the tp block and the collectives disagree")
        if r["global_tokens"] != n // 2 * 16:
            fail(f"n={n}: global tokens {r['global_tokens']}, expected the DP groups' "
                 f"{n // 2} ranks x 16")
        if not (r["step_ms"] > 0 and r["phases_ms"]["optimizer_ns"] > 0):
            fail(f"n={n}: step {r['step_ms']} ms, Newton-Schulz {r['phases_ms']['optimizer_ns']} ms")
        checked += 1
    if checked != 2 or adamw != 2:
        fail(f"{checked} dmuon and {adamw} fsdp-adamw runs checked, expected 2 each (default "
             f"boundary at n = 4 and 8)")
    print(f"OK: {checked} projected TP runs match dmuon_inspect --tp 2 (accum {a.accum})")


if __name__ == "__main__":
    main()
