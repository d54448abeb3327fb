#!/usr/bin/env python3
"""dmuon_inspect when the reshard mode it does not show has no valid plan.

A parameter `emb` [8, 8] fp32 tied to `layers.0.fc.weight`, under the strict boundary
`types:ModuleList`: Z3 takes the lowest common ancestor of the holders (the root, valid, as the
reference DMuon does); Z2 looks for a ModuleList above `emb`'s canonical holder (the root) and
finds none. Shown Z3 (the default): exit 0, the Z2 rows and `comm.z2` say why, in one line.
Shown Z2: exit 2 with that line.

Z3 by hand, world 2 (G = 2), one site (the root) with one owner: 2 broadcasts per step
(forward, backward) of 8·8·4 = 256 B to the rank that does not own it (512 B), 1 reduce of
256 B from it; 4 hooks fire, 3 communicate.

Usage: check_inspect_invalid_mode.py DMUON_INSPECT
"""
import json
import os
import subprocess
import sys
import tempfile

TOPOLOGY = {
    "format": "dmuon-topology", "version": 1, "root_type": "M", "dedicate": "ndim>=2",
    "modules": [{"path": "layers", "type": "ModuleList"}, {"path": "layers.0", "type": "L"},
                {"path": "layers.0.fc", "type": "Linear"}],
    "parameters": [{"name": "emb", "shape": [8, 8], "dtype": "float32",
                    "tied": ["layers.0.fc.weight"]}],
}
REASON = "no ancestor matched for dedicated parameter 'emb'"
failures = []


def check(name, cond, detail=""):
    if cond:
        print(f"ok  {name}")
    else:
        failures.append(f"{name}: {detail}")


def run(exe, path, *extra):
    return subprocess.run([exe, "--topology-file", path, "--boundary", "types:ModuleList",
                           "--world-size", "2", *extra],
                          capture_output=True, text=True, timeout=60)


def main():
    exe = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "tied.json")
        with open(path, "w") as f:
            json.dump(TOPOLOGY, f)

        p = run(exe, path)
        check("human: exit 0 with Z2 unresolved", p.returncode == 0,
              f"exit {p.returncode}: {p.stderr[:300]!r}")
        rows = [line for line in p.stdout.splitlines() if line.split()[:1] in (["z3"], ["z2"])]
        check("human: one Z3 row, one Z2 row", len(rows) == 2, repr(rows))
        if len(rows) == 2:
            check("human: Z3 row by hand (hooks 4/3, 2 broadcasts, 1 reduce)",
                  rows[0].split()[:5] == ["z3", "4", "3", "2", "1"], rows[0])
            check("human: Z2 row is not valid, with the reason",
                  rows[1].split()[:3] == ["z2", "not", "valid:"] and REASON in rows[1], rows[1])

        p = run(exe, path, "--json", "--clip-norm", "1")
        check("json: exit 0", p.returncode == 0, f"exit {p.returncode}: {p.stderr[:300]!r}")
        if p.returncode == 0:
            comm = json.loads(p.stdout)["comm"]
            z2 = comm.get("z2", {})
            check("json: comm.z2 is only {error}", list(z2) == ["error"], repr(z2))
            error = z2.get("error", "")
            check("json: the error is one line naming the cause",
                  REASON in error and "\n" not in error, repr(error))
            z3 = comm.get("z3", {})
            check("json: comm.z3 by hand",
                  z3.get("hooks_fired_per_step") == 4
                  and z3.get("hooks_communicating_per_step") == 3
                  and z3.get("broadcast", {}).get("max_calls") == 2
                  and z3.get("broadcast", {}).get("max_bytes") == 512
                  and z3.get("reduce", {}).get("max_bytes") == 256
                  and z3.get("world_all_reduce") == {"calls_per_rank": 1, "bytes_per_rank": 0},
                  repr(z3)[:400])

        p = run(exe, path, "--reshard", "z2")
        lines = p.stderr.splitlines()
        check("shown Z2 unresolved: exit 2, one line with the cause",
              p.returncode == 2 and len(lines) == 1 and REASON in lines[0],
              f"exit {p.returncode}: {p.stderr[:300]!r}")

    if failures:
        print("FAILED:\n  " + "\n  ".join(failures))
        return 1
    print("OK: every case")
    return 0


if __name__ == "__main__":
    sys.exit(main())
