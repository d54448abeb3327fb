#!/usr/bin/env python3
"""dmuon_inspect on inputs a test must generate: reliability (issue 12 item 3) and the
reference edge cases visible in its JSON (issue 11 item 1).

Bad input ends within seconds with exit 2 and one line on stderr naming the cause: a FIFO or a
directory as the topology file, a 100,000-level JSON file, a regex with 20,000 nested
parentheses, a shape whose size overflows 64 bits. The nested-quantifier regex
`(\\w+\\.?)+experts\\.\\d+` answers at once. With a tied parameter, comm.z2 is predicted on the
Z2 sites (hand-derived below), and a top-level module named `_root` keeps its name.

Usage: check_inspect_inputs.py DMUON_INSPECT
"""
import json
import os
import subprocess
import sys
import tempfile

TIMEOUT_S = 60  # a hang detector, not a performance bound
failures = []


def run(exe, args):
    try:
        p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None
    return p


def expect_bad(exe, name, args, needle):
    p = run(exe, args)
    if p is None:
        failures.append(f"{name}: no answer within {TIMEOUT_S} s (hang)")
        return
    lines = p.stderr.splitlines()
    if p.returncode != 2:
        failures.append(f"{name}: exit {p.returncode}, expected 2; stderr: {p.stderr[:300]!r}")
    elif len(lines) != 1:
        failures.append(f"{name}: {len(lines)} stderr lines, expected 1: {p.stderr[:300]!r}")
    elif needle not in lines[0]:
        failures.append(f"{name}: stderr lacks {needle!r}: {lines[0][:300]!r}")
    elif len(lines[0]) > 600:
        failures.append(f"{name}: stderr line of {len(lines[0])} characters")
    else:
        print(f"ok  {name}")


def expect_json(exe, name, args):
    p = run(exe, [*args, "--json"])
    if p is None:
        failures.append(f"{name}: no answer within {TIMEOUT_S} s (hang)")
        return None
    if p.returncode != 0:
        failures.append(f"{name}: exit {p.returncode}: {p.stderr[:300]!r}")
        return None
    return json.loads(p.stdout)


def check(name, cond, detail):
    if cond:
        print(f"ok  {name}")
    else:
        failures.append(f"{name}: {detail}")


def topology(modules, params):
    return {"format": "dmuon-topology", "version": 1, "name": "t", "root_type": "Net",
            "dedicate": "ndim=2", "modules": [{"path": p, "type": t} for p, t in modules],
            "parameters": params}


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="dmuon_inspect_inputs_") as d:
        # --- inputs that are not regular files -------------------------------------------
        fifo = os.path.join(d, "model.json")
        os.mkfifo(fifo)
        expect_bad(exe, "fifo", ["--topology-file", fifo], "a FIFO (valid: a regular file)")
        expect_bad(exe, "directory", ["--topology-file", d], "a directory (valid: a regular file)")

        # --- nesting and regex size ----------------------------------------------------------
        deep = os.path.join(d, "deep.json")
        with open(deep, "w") as f:
            f.write("[" * 100000 + "]" * 100000)
        expect_bad(exe, "json_100000_levels", ["--topology-file", deep],
                   "nested deeper than 64 levels")
        parens = "(" * 20000 + "a" + ")" * 20000
        expect_bad(exe, "regex_20000_parentheses", ["--boundary", "paths:" + parens],
                   "is too long (40007 characters")
        expect_bad(exe, "dedicate_regex_20000_parentheses", ["--dedicate", "regex:" + parens],
                   "is too long (40007 characters")
        expect_bad(exe, "regex_lookahead", ["--boundary", "paths:(?=layers).*"], "bad regex")

        # --- the nested-quantifier regex answers (moe tiny: 32 Expert sites + 4 o_proj) -------
        j = expect_json(exe, "nested_quantifiers",
                        ["--topology", "moe", "--lenient", "--boundary",
                         r"paths:(\w+\.?)+experts\.\d+"])
        if j is not None:
            check("nested_quantifiers_sites", j["hook_sites"] == 36, f"hook_sites {j['hook_sites']}")

        # --- sizes: overflow is exit 2 naming the parameter, never a negative load -------------
        big = os.path.join(d, "big.json")
        with open(big, "w") as f:
            json.dump(topology([("a", "Linear")],
                               [{"name": "a.weight", "shape": [2**32, 2**32]}]), f)
        expect_bad(exe, "shape_product_overflow", ["--topology-file", big],
                   "parameters[0] 'a.weight'")
        # 2^30 x 2^30 fits, its optimizer cost (15 * 2^90 / 1e9 > 2^63) does not.
        with open(big, "w") as f:
            json.dump(topology([("a", "Linear")],
                               [{"name": "a.weight", "shape": [2**30, 2**30]}]), f)
        expect_bad(exe, "optimizer_cost_overflow", ["--topology-file", big],
                   "parameter 'a.weight' shape [1073741824, 1073741824]: its optimizer cost "
                   "overflows 64 bits")
        # 2^29 x 2^30 under the numel cost model: load 2^59 on one rank, 0 on the other.
        with open(big, "w") as f:
            json.dump(topology([("a", "Linear")],
                               [{"name": "a.weight", "shape": [2**29, 2**30]}]), f)
        j = expect_json(exe, "numel_cost_of_a_large_shape",
                        ["--topology-file", big, "--cost-model", "numel", "-n", "2"])
        if j is not None:
            loads = sorted(j["partition"]["numel_loads"])
            check("numel_loads_not_negative", loads == [0, 2**59], f"numel_loads {loads}")

        # --- Z2 sites for a tied parameter -------------------------------------------------------
        # layers.0.a.weight is also layers.1.a.weight; layers.0.b.weight beside it; [4, 4] fp32
        # (64 B each), one bucket "layers.0", packed into one unit on rank 0 of 2.
        # Z3: sites "layers" (lowest common ancestor) and "layers.0": 2 (site, owner) pairs,
        # 2 broadcasts each = 4; hooks 8 fire, 6 communicate. Z2: one site "layers.0": 1
        # broadcast; 4 fire, 2 communicate; rank 1 receives 128 B once.
        tied = os.path.join(d, "tied.json")
        with open(tied, "w") as f:
            json.dump(topology(
                [("layers", "ModuleList"), ("layers.0", "L"), ("layers.0.a", "Linear"),
                 ("layers.0.b", "Linear"), ("layers.1", "L"), ("layers.1.a", "Linear")],
                [{"name": "layers.0.a.weight", "shape": [4, 4], "tied": ["layers.1.a.weight"]},
                 {"name": "layers.0.b.weight", "shape": [4, 4]}]), f)
        j = expect_json(exe, "tied_z3", ["--topology-file", tied, "-n", "2"])
        if j is not None:
            z3, z2 = j["comm"]["z3"], j["comm"]["z2"]
            got = (j["reshard"], j["hook_sites"], z3["broadcast"]["max_calls"], z3["hooks_fired_per_step"],
                   z3["hooks_communicating_per_step"], z2["broadcast"]["max_calls"],
                   z2["broadcast"]["bytes_per_rank"], z2["hooks_fired_per_step"],
                   z2["hooks_communicating_per_step"])
            want = ("z3", 2, 4, 8, 6, 1, [0, 128], 4, 2)
            check("tied_comm_z3_and_z2_on_their_own_sites", got == want, f"{got} != {want}")
        j = expect_json(exe, "tied_z2", ["--topology-file", tied, "-n", "2", "--reshard", "z2"])
        if j is not None:
            got = (j["reshard"], [s["path"] for s in j["sites"]], j["sites"][0]["reason"])
            check("tied_z2_plan", got == ("z2", ["layers.0"], "layer-key"), f"{got}")

        # --- a top-level module named _root ---------------------------------------------------
        root = os.path.join(d, "root.json")
        with open(root, "w") as f:
            json.dump(topology(
                [("_root", "Wrapper"), ("_root.layers", "ModuleList"), ("_root.layers.0", "L"),
                 ("_root.layers.0.fc", "Linear")],
                [{"name": "_root.layers.0.fc.weight", "shape": [4, 4]}]), f)
        j = expect_json(exe, "root_named_module", ["--topology-file", root, "-n", "2"])
        if j is not None:
            got = [s["path"] for s in j["sites"]]
            check("root_named_module_site", got == ["_root.layers.0"], f"sites {got}")

    for f in failures:
        print(f"FAILED {f}")
    if failures:
        return 1
    print("OK: every case")
    return 0


if __name__ == "__main__":
    sys.exit(main())
