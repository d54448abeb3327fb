#!/usr/bin/env python3
"""dmuon_project's config keys are dmuon_bench's (src/dmuon/config/config_keys.cpp) minus the
measured-only ones, plus its own; each is a dmuon_project flag, and every dmuon_project flag but
--help, --config and the calibration flags has a key. Exit 0 / 1."""
import argparse
import re
import subprocess
import sys

MEASURED_ONLY = {"device", "steps", "warmup", "seed", "check", "check_tolerance", "inject_nan_step"}
OWN = {"machine", "world_size", "seq_len", "micro_batch", "symmetry", "trace_ranks"}
NOT_KEYS = {"--help", "--version", "--config", "--calibrate", "--output-machine", "--machine-name"}

ap = argparse.ArgumentParser()
ap.add_argument("--project", required=True)
ap.add_argument("--keys", required=True)
a = ap.parse_args()
bench_keys = set(re.findall(r'\{"([a-z_]+)", KeyKind::', open(a.keys).read()))
if len(bench_keys) < 10:
    print(f"FAILED: could not read the key list from {a.keys}")
    sys.exit(1)
keys = (bench_keys - MEASURED_ONLY) | OWN
help_text = subprocess.run([a.project, "--help"], stdout=subprocess.PIPE, text=True,
                           check=True).stdout
# Flags as CLI11 lists them (the option column), not as descriptions mention them.
flags = set(re.findall(r"^\s+(?:-\w, )?(--[a-z][a-z0-9-]*)", help_text, re.M))
key_flags = {"--" + k.replace("_", "-") for k in keys}
missing = sorted(key_flags - flags)
extra = sorted(flags - key_flags - NOT_KEYS)
if missing or extra:
    print(f"FAILED: config keys without a flag: {missing}; flags without a config key: {extra}")
    sys.exit(1)
print(f"OK: {len(keys)} config keys == dmuon_project flags")
