#!/usr/bin/env python3
"""dmuon_project's output for a sweep over two worlds: every table and comment line within 160
columns (the closing verdict line aside: it is one sentence), and each legend printed once."""

import subprocess
import sys


def main():
    project = sys.argv[1]
    cmd = [project, "--topology", "llm", "--preset", "llama3-70b", "--machine", "h100-ndr",
           "--world-size", "256,512"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd)} exited {p.returncode}: {p.stderr[-400:]}")
    lines = p.stdout.splitlines()
    wide = [l for l in lines if len(l) > 160 and not l.startswith("# verdict")]
    if wide:
        sys.exit(f"FAILED: {len(wide)} line(s) over 160 columns, e.g. {len(wide[0])}: {wide[0][:120]}")
    for legend in ("# times in ms", "# mem GB"):
        n = sum(l.startswith(legend) for l in lines)
        if n != 1:
            sys.exit(f"FAILED: legend '{legend}' printed {n} times over 2 worlds (want 1)")
    tables = sum(l.startswith("# dmuon_project (PROJECTED") for l in lines)
    if tables != 2:
        sys.exit(f"FAILED: {tables} world tables (want 2)")
    print(f"OK: project width ({len(lines)} lines, widest {max(map(len, lines))} incl. verdict)")


if __name__ == "__main__":
    main()
