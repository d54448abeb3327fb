#!/usr/bin/env python3
"""The README's sample of the main job is one real run: this script runs it and writes it in.

  scripts/readme_sample.py [--bin build/bin] [--readme README.md]   run the main job, rewrite
  scripts/readme_sample.py --check [--readme README.md]             check the block holds together

The block between the markers `<!-- main-job-sample: begin -->` and `<!-- main-job-sample: end -->`
gets the command's wall time and its output, abridged the same way every time (long lists cut to
their first rows, marked `...`). --check (a CTest case) verifies that the block is one run's
output: the verdict's boundary is the table's `best` row, every `vs best` ratio of a measured
dmuon row is consistent with the step column, and the throughput lines name the table's rows.
"""
import argparse
import os
import re
import subprocess
import sys
import time

BEGIN = "<!-- main-job-sample: begin -->"
END = "<!-- main-job-sample: end -->"
COMMAND = ["dmuon_bench", "--topology", "moe"]
RANKS = 8


def fail(msg):
    print(f"readme_sample: {msg}", file=sys.stderr)
    sys.exit(1)


def split_readme(text):
    if text.count(BEGIN) != 1 or text.count(END) != 1 or text.index(BEGIN) > text.index(END):
        fail(f"README needs exactly one '{BEGIN}' ... '{END}' block")
    head, rest = text.split(BEGIN)
    body, tail = rest.split(END)
    return head, body, tail


def abridge(lines):
    """Keep the header, the table, the verdict; cut long lists (collectives, warnings,
    throughput) to their first rows so the sample stays readable."""
    out, section, kept = [], None, 0
    limits = {"collectives": 3, "warning": 6, "throughput": 2}
    for line in lines:
        if line.startswith("# collectives per step"):
            section, kept = "collectives", 0
            out.append(line)
            continue
        if line.startswith("# [") and "WARNING" in line:
            if section != "warning":
                section, kept = "warning", 0
        elif line.startswith("# throughput"):
            if section != "throughput":
                section, kept = "throughput", 0
        elif line.startswith("#   ") and section == "warning":
            pass  # a warning's continuation line belongs to the warning
        elif section == "collectives" and line.startswith("  "):
            pass
        else:
            section = None
        if section is None:
            out.append(line)
            continue
        kept += 1
        if kept <= limits[section]:
            out.append(line)
        elif kept == limits[section] + 1:
            out.append("  ...")
    return out


def run_main_job(bindir):
    exe = os.path.join(bindir, COMMAND[0])
    if not os.access(exe, os.X_OK):
        fail(f"no {exe}: build first (scripts/setup.sh) or pass --bin")
    cmd = ["mpirun", "-n", str(RANKS), exe] + COMMAND[1:]
    env = dict(os.environ, DMUON_PROGRESS="0")
    start = time.monotonic()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    wall = time.monotonic() - start
    if p.returncode != 0:
        fail(f"the main job exited {p.returncode}: {p.stderr.strip()[:500]}")
    return wall, p.stdout.splitlines()


def render(wall, lines):
    shown = " ".join(["mpirun", "-n", str(RANKS)] + COMMAND)
    return (f"\n`{shown}` ({wall:.0f} s on this 2-core machine; written by "
            "`scripts/readme_sample.py`, abridged):\n\n```\n" + "\n".join(abridge(lines)) +
            "\n```\n")


TABLE_ROW = re.compile(r"^  (\S+)\s+(strict|lenient|-)\s+(dmuon|fsdp-adamw|fsdp-muon|ddp-muon)\s+"
                       r"\S+\s+ok\s.*?\s([0-9.]+) \([0-9.]+-[0-9.]+\)\s+(best|[0-9.]+~?|-)\s")


def check(body):
    rows = [m.groups() for m in map(TABLE_ROW.match, body.splitlines()) if m]
    dmuon = [r for r in rows if r[2] == "dmuon"]
    if not dmuon:
        fail("the sample has no measured dmuon row")
    best = [r for r in dmuon if r[4] == "best"]
    if len(best) != 1:
        fail(f"the sample's table marks {len(best)} rows 'best' (one expected)")
    verdict = re.search(r"# verdict: fastest undegraded dmuon row: boundary '(\S+)[^']*' \((\w+)\)",
                        body)
    if not verdict:
        fail("the sample has no verdict line")
    if (verdict.group(1), verdict.group(2)) != (best[0][0], best[0][1]):
        fail(f"the verdict names {verdict.group(1)} ({verdict.group(2)}) but the table's best "
             f"row is {best[0][0]} ({best[0][1]})")
    best_ms = float(best[0][3])
    for word, mode, _, step, vs in dmuon:
        if vs in ("best", "-"):
            continue
        ratio = float(vs.rstrip("~"))
        if abs(float(step) / best_ms - ratio) > 0.011:
            fail(f"row {word} ({mode}): vs best {ratio} but step {step} / best {best_ms}")
    wall = re.search(r"\(([0-9]+) s on this 2-core machine", body)
    if not wall:
        fail("the sample does not say how long its run took")
    print(f"readme_sample: OK ({len(rows)} table rows, verdict {verdict.group(1)}, "
          f"{wall.group(1)} s)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--readme", default=os.path.join(os.path.dirname(__file__), "..", "README.md"))
    ap.add_argument("--bin", default=os.path.join(os.path.dirname(__file__), "..", "build", "bin"))
    ap.add_argument("--check", action="store_true", help="check the block, run nothing")
    a = ap.parse_args()
    try:
        text = open(a.readme, encoding="utf-8").read()
    except OSError as e:
        fail(f"cannot read {a.readme}: {e.strerror}")
    head, body, tail = split_readme(text)
    if a.check:
        check(body)
        return
    body = render(*run_main_job(a.bin))
    check(body)
    tmp = a.readme + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(head + BEGIN + body + END + tail)
    os.replace(tmp, a.readme)
    print(f"readme_sample: wrote the main job's sample into {a.readme}")


if __name__ == "__main__":
    main()
