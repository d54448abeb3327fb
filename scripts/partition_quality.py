#!/usr/bin/env python3
"""Partition quality of every owner strategy on the built-in topologies, from dmuon_inspect.

Prints, per (topology, preset, world size), the makespan / lower-bound ratio of each strategy
and the same-key collisions (how often a layer's units share an owner), so the claim "lpt_refine
lands closer to the lower bound than reference LPT" is a measurement, not an assertion.

usage: partition_quality.py [--inspect PATH] [--worlds 8,64] [--no-pack]
Works from any directory: dmuon_inspect is looked up next to this script (the source tree's
build/bin, or the install prefix's bin) and then on PATH. Exit codes: 0 printed, 2 bad input
(a missing dmuon_inspect, a bad --worlds value, a failing dmuon_inspect run: one line).
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys

PROG = "partition_quality.py"
CASES = [("vla", "paper"), ("moe", "paper"), ("nested", "paper"), ("llm", "llama3-8b"),
         ("moe-llm", "mixtral-8x7b"), ("moe-llm", "deepseek-v3"), ("vla", "tiny"), ("moe", "tiny"),
         ("llm", "mini")]
STRATEGIES = ["lpt", "lpt_refine", "round_robin"]


class BadInput(Exception):
    pass


def find_inspect(given):
    if given:
        if not (os.path.isfile(given) and os.access(given, os.X_OK)):
            raise BadInput(f"--inspect '{given}' is not an executable file")
        return given
    here = os.path.dirname(os.path.realpath(__file__))
    for cand in (os.path.join(here, "..", "build", "bin", "dmuon_inspect"),  # source tree
                 os.path.join(here, "..", "..", "..", "bin", "dmuon_inspect")):  # install
        if os.path.isfile(cand) and os.access(cand, os.X_OK):
            return os.path.normpath(cand)
    found = shutil.which("dmuon_inspect")
    if found:
        return found
    raise BadInput("dmuon_inspect not found next to this script or on PATH (build it with "
                   "scripts/setup.sh, or pass --inspect PATH)")


def worlds_of(text):
    out = []
    for w in text.split(","):
        if not w.strip().isdigit() or int(w) < 1:
            raise BadInput(f"--worlds item '{w}' is not a positive integer")
        out.append(w.strip())
    return out


def main(argv):
    ap = argparse.ArgumentParser(prog=PROG, description=__doc__.splitlines()[0],
                                 epilog="Exit codes: 0 printed, 2 bad input.")
    ap.add_argument("--inspect", help="dmuon_inspect executable (default: found automatically)")
    ap.add_argument("--worlds", default="8,64", help="comma list of world sizes (default 8,64)")
    ap.add_argument("--no-pack", action="store_true", help="every parameter its own unit")
    a = ap.parse_args(argv)
    inspect = find_inspect(a.inspect)
    worlds = worlds_of(a.worlds)
    print(f"# {'topology':<8} {'preset':<13} {'world':>5} {'units':>6}" +
          "".join(f" {s + ' ratio':>17} {'tight':>6} {'coll':>5}" for s in STRATEGIES))
    for topo, preset in CASES:
        for w in worlds:
            row = f"  {topo:<8} {preset:<13} {w:>5}"
            for i, s in enumerate(STRATEGIES):
                cmd = [inspect, "--topology", topo, "--preset", preset, "-n", w,
                       "--owner-strategy", s, "--json"] + (["--no-pack"] if a.no_pack else [])
                r = subprocess.run(cmd, capture_output=True, text=True)
                if r.returncode != 0:
                    err = (r.stderr.strip().splitlines() or ["(no message)"])[-1]
                    raise BadInput(f"dmuon_inspect {topo}/{preset} -n {w} {s} exited "
                                   f"{r.returncode}: {err}")
                p = json.loads(r.stdout)["partition"]
                if i == 0:
                    row += f" {p['units']:>6}"
                row += f" {p['ratio']:>17.4f} {p['tight_ratio']:>6.3f} {p['key_collisions']:>5}"
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # `| head` ends the script quietly
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
