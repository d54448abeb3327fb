#!/usr/bin/env python3
"""Every dmuon_bench config key (src/dmuon/config/config_keys.cpp) is compared across ranks: it
has a line in describe_options (src/apps/bench/bench_options.cpp), or it is listed below with
where else it is compared or why only rank 0 reads it. A new flag fails here until it is placed.
Exit 0 / 1."""
import argparse
import re
import sys

# key -> why it has no line of its own in describe_options
ELSEWHERE = {
    "topology": "describe_topology: the resolved name, dimensions and tree",
    "preset": "describe_topology",
    "set": "describe_topology: the resolved dimensions",
    "topology_file": "describe_topology: the tree read (the path may differ per node)",
    "list": "prints and exits before the agreement",
    "boundary": "the rows (boundary label and mode per row)",
    "lenient": "the rows",
    "no_pack": "the pack_threshold line",
    "no_column_balance": "the column_balance line",
    "flops": "rank 0's table only",
    "json": "rank 0's output only",
    "wide": "rank 0's table only",
}

ap = argparse.ArgumentParser()
ap.add_argument("--keys", required=True)
ap.add_argument("--options", required=True)
a = ap.parse_args()
keys = re.findall(r'\{"([a-z_]+)", KeyKind::', open(a.keys).read())
src = open(a.options).read()
body = src[src.find("void describe_options("):]
body = body[: body.find("\n}\n")]
lines = set(re.findall(r'd\.add\("([a-z_0-9]+)"', body))
if len(keys) < 10 or len(lines) < 10:
    print(f"FAILED: could not read the keys ({len(keys)}) or describe_options' lines ({len(lines)})")
    sys.exit(1)
missing = sorted(k for k in keys if k not in lines and k not in ELSEWHERE)
stale = sorted(k for k in ELSEWHERE if k not in keys)
if missing or stale:
    print(f"FAILED: config keys the ranks do not compare: {missing} (add a line in "
          f"describe_options or a reason here); stale entries here: {stale}")
    sys.exit(1)
print(f"OK: {len(keys)} config keys compared across ranks")
