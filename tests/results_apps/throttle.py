#!/usr/bin/env python3
"""Runs a command and keeps its child processes (an mpiexec's ranks) stopped for a given share
of the wall time (SIGSTOP / SIGCONT), so the job runs measurably slower by a known factor:
a planted slowdown for the regression-gate test. Exits with the command's exit code.

usage: throttle.py --stopped 0.5 [--after 1.5] -- COMMAND [ARGS...]
  (0.5: half the wall time stopped, 2x slower; --after: seconds to let the job start first, so
  its start-up calibration - dmuon_bench's sgemm at start - runs at full speed, as it would
  for a regression in the code)
"""
import argparse
import os
import signal
import subprocess
import sys
import time

PERIOD_S = 0.05  # one running slice


def children(pid):
    """The direct children of pid (from /proc)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                out.append(int(d))
        except (OSError, IndexError, ValueError):
            pass
    return out


def signal_all(pids, sig):
    for p in pids:
        try:
            os.kill(p, sig)
        except ProcessLookupError:
            pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stopped", type=float, required=True, help="share of wall time stopped")
    ap.add_argument("--after", type=float, default=0.0, help="seconds before throttling starts")
    ap.add_argument("command", nargs=argparse.REMAINDER)
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd or not 0 <= a.stopped < 1:
        ap.error("need --stopped in [0, 1) and a command after --")
    proc = subprocess.Popen(cmd)
    try:
        proc.wait(timeout=a.after)
    except subprocess.TimeoutExpired:
        pass
    ran = stopped = 0.0
    pids = []
    while proc.poll() is None:
        t0 = time.monotonic()
        time.sleep(PERIOD_S)
        ran += time.monotonic() - t0
        pids = children(proc.pid)
        # Stop until the stopped share of the elapsed time reaches the target.
        t0 = time.monotonic()
        signal_all(pids, signal.SIGSTOP)
        want = a.stopped / (1 - a.stopped) * ran - stopped
        if want > 0:
            time.sleep(want)
        signal_all(pids, signal.SIGCONT)
        stopped += time.monotonic() - t0
    signal_all(pids, signal.SIGCONT)
    total = ran + stopped
    print(f"throttle: stopped {stopped:.2f} s of {total:.2f} s ({100 * stopped / max(total, 1e-9):.0f} %)",
          file=sys.stderr)
    return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
