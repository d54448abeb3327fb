#!/usr/bin/env python3
"""Tensor parallelism in `dmuon_inspect --json` (docs/METRICS.md "Tensor parallelism").

For every named layout and a few topologies, recomputes here, independently of the C++ code:
the TP-sharded set (the documented default rule, in Python's re), column/row dims and local
shapes, world rank = dp_owner * T + tp_owner, the TP owner pass itself under round_robin
without packing (visiting order = model order) from the rule in the docs, and the per-rank
predicted bytes: DP collectives on local shards (1-D: 2 broadcasts + 1 reduce of P_local -
owned_local per rank in Z3), TP gather |p|/T * e_g sent and TP scatter |p|/T * 4 received by
every non-owner rank of the DP owner's TP group.
"""
import json
import re
import subprocess
import sys

SHARD = re.compile(r"(.*\.)?(q_proj|k_proj|v_proj|o_proj|gate_proj|up_proj|down_proj)\.weight")
ROW = re.compile(r"(.*\.)?(o_proj|down_proj)\.weight")
BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
LAYOUTS = {"dp_only": (8, 1, 8, 1), "hsdp_2x4": (8, 2, 4, 1), "tp2": (2, 1, 1, 2),
           "tp4": (4, 1, 1, 4), "tp8": (8, 1, 1, 8), "dp_tp2": (8, 1, 4, 2),
           "dp_tp4": (8, 1, 2, 4), "dp_tp8": (16, 1, 2, 8), "hsdp_tp2": (8, 2, 2, 2)}


def numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def run(exe, args):
    out = subprocess.run([exe, *args, "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def check(exe, topo, layout, extra):
    world, R, G, T = LAYOUTS[layout]
    where = f"{topo} {layout} {' '.join(extra)}"
    j = run(exe, ["--topology", topo, "--layout", layout, *extra])
    assert j["world_size"] == world and j["tp"] == T and j["replicate"] == R, where
    assert j["partition"]["shard"] == G, where
    params = j["params"]
    tp = {o["name"]: o for o in j["tp_owners"]}
    expect = [p["name"] for p in params if T > 1 and len(p["shape"]) == 2 and SHARD.fullmatch(p["name"])]
    assert sorted(tp) == sorted(expect), f"{where}: TP-sharded set"
    local = {}
    for p in params:
        o = tp.get(p["name"])
        n = numel(p["shape"])
        if o is None:
            local[p["name"]] = n
            continue
        dim = 1 if ROW.fullmatch(p["name"]) else 0
        assert o["shard_dim"] == dim and o["parallel"] == ("row" if dim else "column"), where
        shape = list(p["shape"])
        shape[dim] //= T
        assert o["local_shape"] == shape, f"{where}: local shape of {p['name']}"
        assert o["dp_owner"] == p["owner"] and 0 <= o["tp_owner"] < T, where
        assert o["rank"] == o["dp_owner"] * T + o["tp_owner"], where
        local[p["name"]] = n // T
    # The owner pass, recomputed (round_robin without packing visits in model order).
    if "round_robin" in extra and T > 1:
        slots = j["partition"]["slots"]
        slot_of_rank = {s["rank"]: i for i, s in enumerate(slots)}
        cost = {}
        for p in params:
            if p["name"] not in tp:
                continue
            d = p["owner"]
            s = slots[slot_of_rank[d]]
            offset = (s["shard"] * R + s["replicate"]) % T if R > 1 else d % T
            loads = cost.setdefault(d, [[0, 0] for _ in range(T)])
            best = min(range(T), key=lambda t: (loads[t][0], loads[t][1], (t - offset) % T))
            assert tp[p["name"]]["tp_owner"] == best, f"{where}: TP owner of {p['name']}"
            loads[best][0] += p["cost"]
            loads[best][1] += numel(p["shape"])
    # Bytes per world rank.
    for mode, bcasts in (("z3", 2), ("z2", 1)):
        c = j["comm"][mode]
        dp_world = R * G
        p_local = sum(local[p["name"]] * BYTES[p["dtype"]] for p in params)
        if R == 1:
            for d in range(dp_world):
                own = sum(local[p["name"]] * BYTES[p["dtype"]] for p in params if p["owner"] == d)
                assert c["broadcast"]["bytes_per_rank"][d] == bcasts * (p_local - own), where
                assert c["reduce"]["bytes_per_rank"][d] == p_local - own, where
        if T == 1:
            assert "tp" not in c, where
            continue
        t = c["tp"]
        gather = [0] * world
        scatter = [0] * world
        for p in params:
            o = tp.get(p["name"])
            if o is None:
                continue
            for r in range(T):
                if r != o["tp_owner"]:
                    gather[o["dp_owner"] * T + r] += local[p["name"]] * BYTES[p["dtype"]]
                    scatter[o["dp_owner"] * T + r] += local[p["name"]] * 4
        assert t["gather"]["bytes_per_rank"] == gather, f"{where} {mode}: gather bytes"
        assert t["scatter"]["bytes_per_rank"] == scatter, f"{where} {mode}: scatter bytes"
        for w in range(world):
            dp = sum(c[k]["bytes_per_rank"][w // T] for k in
                     ("broadcast", "reduce", "replicate_reduce", "replicate_broadcast") if k in c)
            assert t["total_bytes_per_rank"][w] == dp + gather[w] + scatter[w], where
        # Summed over the world each of gather and scatter moves (T-1)/T |p| per parameter.
        assert sum(gather) == sum((T - 1) * local[n] * BYTES[o_dtype] for n, o_dtype in
                                  ((p["name"], p["dtype"]) for p in params if p["name"] in tp)), where


def main():
    exe = sys.argv[1]
    n = 0
    for topo in ("llm", "moe-llm", "sequential"):
        for layout in LAYOUTS:
            for extra in ([], ["--owner-strategy", "round_robin", "--no-pack"]):
                try:
                    check(exe, topo, layout, extra)
                except subprocess.CalledProcessError as e:
                    # A shape that T does not divide is bad input: exit 2 naming it.
                    assert e.returncode == 2 and "not divisible by --tp" in e.stderr, e.stderr
                    print(f"skip {topo} {layout}: {e.stderr.strip()}")
                    continue
                n += 1
    assert n >= 30, n
    print(f"OK: every case ({n} plans)")


if __name__ == "__main__":
    main()
