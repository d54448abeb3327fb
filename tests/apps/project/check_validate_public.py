#!/usr/bin/env python3
"""scripts/validate_public.py as a user runs it: every row of the committed rows file projects
(its flags still parse), the MFU column is the row's published MFU scaled by projected over
published tokens/s, 'within' is the tolerance test of both errors, the error summary (mean
|error|, the worst row, how many fast and slow) is the rows', and bad input is a one-line
exit 2 (an unknown --only id, a rows file with an impossible MFU, a missing binary, --json into
a missing directory) while --strict with a tolerance no projection meets exits 3. Exit 0 with
'OK', 1 with the first failed check."""
import argparse
import json
import os
import sys
import tempfile

from check_project import fail, run_process  # the helpers of the product check beside it


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--script", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--rows", required=True)
    a = ap.parse_args()
    base = [sys.executable, a.script, "--bin", a.bin]
    with open(a.rows, encoding="utf-8") as f:
        rows = json.load(f)["rows"]

    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "rows.json")
        p = run_process(base + ["--json", out])
        with open(out, encoding="utf-8") as f:
            got = json.load(f)["rows"]
        if [r["id"] for r in got] != [r["id"] for r in rows]:
            fail(f"projected rows {[r['id'] for r in got]} are not the file's")
        for r in got:
            if f"| {r['id']} |" not in p.stdout:
                fail(f"row {r['id']} is not in the table")
            proj = r["projected"]
            if proj["oom"]:
                if r["within"]:
                    fail(f"row {r['id']} is out of memory yet counted within")
                continue
            ratio = proj["tokens_per_s_per_gpu"] / r["tokens_per_s_per_gpu"]
            if abs(r["tokens_error"] - (ratio - 1)) > 1e-12:
                fail(f"row {r['id']}: tokens error {r['tokens_error']} is not {ratio - 1}")
            if abs(r["mfu_projected"] - r["mfu"] * ratio) > 1e-12:
                fail(f"row {r['id']}: projected MFU {r['mfu_projected']} is not "
                     f"{r['mfu']} x {ratio}")
            inside = abs(ratio - 1) <= 0.12 and abs(r["mfu"] * (ratio - 1)) <= 0.05
            if r["within"] != inside:
                fail(f"row {r['id']}: within is {r['within']}, the tolerances say {inside}")
        within = sum(r["within"] for r in got)
        if f"{within} of {len(got)} rows within" not in p.stdout:
            fail(f"the summary line does not say {within} of {len(got)}")
        # The error summary, from the rows: mean |error|, the worst row, the signs.
        errs = [(r["tokens_error"], r["id"]) for r in got if "tokens_error" in r]
        mean = 100 * sum(abs(e) for e, _ in errs) / len(errs)
        worst = max(errs, key=lambda x: abs(x[0]))
        want = (f"tokens/s error over the {len(errs)} projected rows: mean |error| {mean:.1f} %, "
                f"max {100 * abs(worst[0]):.1f} % ({worst[1]}), "
                f"{sum(e > 0 for e, _ in errs)} fast and {sum(e < 0 for e, _ in errs)} slow")
        if want not in p.stdout:
            fail(f"the error summary is not '{want}'")

        # No projection is exact to a millionth: --strict exits 3 and says how many are outside.
        run_process(base + ["--only", rows[0]["id"], "--tolerance-tokens", "1e-6", "--strict"],
                    expect=3)

        p = run_process(base + ["--only", "no-such-row"], expect=2)
        if "'no-such-row' is not a row (valid:" not in p.stderr:
            fail(f"unknown row id: {p.stderr!r}")
        bad = os.path.join(tmp, "bad.json")
        with open(bad, "w", encoding="utf-8") as f:
            json.dump({"rows": [dict(rows[0], mfu=1.5)]}, f)
        p = run_process(base + ["--rows", bad], expect=2)
        if "mfu in (0, 1)" not in p.stderr:
            fail(f"impossible MFU: {p.stderr!r}")
        p = run_process([sys.executable, a.script, "--bin", tmp], expect=2)
        if "not found" not in p.stderr:
            fail(f"missing binary: {p.stderr!r}")
        # Said before the ~20 s of projections, not as a traceback after them.
        nowhere = os.path.join(tmp, "no-such-dir", "rows.json")
        p = run_process(base + ["--json", nowhere], expect=2)
        if f"--json '{nowhere}': its directory does not exist" not in p.stderr:
            fail(f"--json into a missing directory: {p.stderr!r}")
    print(f"OK: validate_public ({within} of {len(got)} rows within)")


if __name__ == "__main__":
    main()
