#!/usr/bin/env python3
"""Partition quality of every owner strategy on the built-in topologies, from dmuon_inspect.

Prints, per (topology, preset, world size), the makespan / lower-bound ratio of each strategy
and the same-key collisions (how often a layer's units share an owner), so the claim "lpt_refine
lands closer to the lower bound than reference LPT" is a measurement, not an assertion.

usage: scripts/partition_quality.py [--inspect build/bin/dmuon_inspect] [--worlds 8,64]
"""
import argparse
import json
import subprocess

CASES = [("vla", "paper"), ("moe", "paper"), ("nested", "paper"), ("llm", "llama3-8b"),
         ("moe-llm", "mixtral-8x7b"), ("moe-llm", "deepseek-v3"), ("vla", "tiny"), ("moe", "tiny"),
         ("llm", "mini")]
STRATEGIES = ["lpt", "lpt_refine", "round_robin"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--inspect", default="build/bin/dmuon_inspect")
    ap.add_argument("--worlds", default="8,64")
    ap.add_argument("--no-pack", action="store_true")
    a = ap.parse_args()
    print(f"# {'topology':<8} {'preset':<13} {'world':>5} {'units':>6}" +
          "".join(f" {s + ' ratio':>17} {'tight':>6} {'coll':>5}" for s in STRATEGIES))
    for topo, preset in CASES:
        for w in a.worlds.split(","):
            row = f"  {topo:<8} {preset:<13} {w:>5}"
            for i, s in enumerate(STRATEGIES):
                cmd = [a.inspect, "--topology", topo, "--preset", preset, "-n", w,
                       "--owner-strategy", s, "--json"] + (["--no-pack"] if a.no_pack else [])
                p = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)["partition"]
                if i == 0:
                    row += f" {p['units']:>6}"
                row += f" {p['ratio']:>17.4f} {p['tight_ratio']:>6.3f} {p['key_collisions']:>5}"
            print(row)


if __name__ == "__main__":
    main()
