#!/usr/bin/env python3
"""Projects the reference DMuon library's published benchmark configurations.

For each model of configs/reference/*.yaml (Qwen2.5-1.5B, Llama-3.2-3B, Qwen2.5-7B,
Llama-3.1-8B, Qwen2.5-14B) and each setup: 8 GPUs (the config as written: sequence 2048,
micro-batch 2, Z2, bf16 communication) and 128 GPUs (16 nodes, sequence 4096, micro-batch 2)
under FSDP and HSDP (R = 16 nodes x G = 8) with Z2 and Z3, runs dmuon_project --json and prints a
Markdown table: projected step time of dmuon, fsdp-adamw and fsdp-muon, dmuon / adamw, and MFU.

  scripts/reference_projections.py [--machine a800] [--project build/bin/dmuon_project]

Exit 0 with the table; 2 when dmuon_project fails (its message is shown)."""
import argparse
import glob
import json
import os
import subprocess
import sys

SETUPS = [
    ("8 GPUs, Z2", []),
    ("128 GPUs FSDP Z2", ["--world-size", "128", "--seq-len", "4096"]),
    ("128 GPUs FSDP Z3", ["--world-size", "128", "--seq-len", "4096", "--reshard", "z3"]),
    ("128 GPUs HSDP 16x8 Z2", ["--world-size", "128", "--seq-len", "4096", "--replicate", "16"]),
    ("128 GPUs HSDP 16x8 Z3", ["--world-size", "128", "--seq-len", "4096", "--replicate", "16",
                               "--reshard", "z3"]),
]
ORDER = ["qwen2.5-1.5b", "llama3.2-3b", "qwen2.5-7b", "llama3-8b", "qwen2.5-14b"]


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--machine", default=None, help="override the configs' machine (a800)")
    ap.add_argument("--project", default=os.path.join(root, "build", "bin", "dmuon_project"))
    a = ap.parse_args()
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    configs = sorted(glob.glob(os.path.join(root, "configs", "reference", "*.yaml")),
                     key=lambda p: ORDER.index(os.path.basename(p)[:-5])
                     if os.path.basename(p)[:-5] in ORDER else 99)
    print("| model | setup | dmuon ms | fsdp-adamw ms | fsdp-muon ms | dmuon / adamw | "
          "fsdp-muon / adamw | MFU dmuon | MFU adamw |")
    print("|---|---|---|---|---|---|---|---|---|")
    for cfg in configs:
        model = os.path.basename(cfg)[:-5]
        for name, extra in SETUPS:
            cmd = [a.project, "--config", cfg, "--json"] + extra
            if a.machine:
                cmd += ["--machine", a.machine]
            p = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if p.returncode != 0:
                print(p.stderr, file=sys.stderr)
                return 2
            runs = {r["method"]: r for r in json.loads(p.stdout)["runs"] if r["status"] == "ok"}
            d, w, m = runs["dmuon"], runs["fsdp-adamw"], runs["fsdp-muon"]
            print(f"| {model} | {name} | {d['step_ms']:.0f} | {w['step_ms']:.0f} | "
                  f"{m['step_ms']:.0f} | {d['step_ms'] / w['step_ms']:.3f} | "
                  f"{m['step_ms'] / w['step_ms']:.2f} | {100 * d['mfu']:.1f} % | "
                  f"{100 * w['mfu']:.1f} % |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
