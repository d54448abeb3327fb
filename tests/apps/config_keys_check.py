#!/usr/bin/env python3
"""Every config key (src/dmuon/config/config_keys.cpp, the one list) is a dmuon_bench flag, and
every dmuon_bench flag (except --help, --version and --config) has a config key. Exit 0 / 1."""
import argparse
import re
import subprocess
import sys

ap = argparse.ArgumentParser()
ap.add_argument("--bench", required=True)
ap.add_argument("--keys", required=True)
a = ap.parse_args()
keys = re.findall(r'\{"([a-z_]+)", KeyKind::', open(a.keys).read())
if len(keys) < 10:
    print(f"FAILED: could not read the key list from {a.keys}")
    sys.exit(1)
help_text = subprocess.run([a.bench, "--help"], stdout=subprocess.PIPE, text=True, check=True).stdout
flags = set(re.findall(r"(?:^|[\s,])(--[a-z][a-z0-9-]*)", help_text))
key_flags = {"--" + k.replace("_", "-") for k in keys}
missing = sorted(key_flags - flags)
extra = sorted(flags - key_flags - {"--help", "--config", "--version"})
if missing or extra:
    print(f"FAILED: config keys without a flag: {missing}; flags without a config key: {extra}")
    sys.exit(1)
print(f"OK: {len(keys)} config keys == dmuon_bench flags")
