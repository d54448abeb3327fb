#!/usr/bin/env python3
"""Validates dmuon_project against dmuon_bench on the machine at hand.

For each rank count N: `mpirun -n N dmuon_project --calibrate` writes a machine file, then for
each topology the same rows run measured (`mpirun -n N dmuon_bench ... --json`) and projected
(`dmuon_project --machine <calibrated> --world-size N ... --json`), back to back, and the
ratio projected / measured is printed per method, for the step and per phase, as a Markdown
table (one run each: ratios of a noisy shared machine move between invocations).

  scripts/validate_projection.py [--ranks 2 4] [--topologies moe vla llm] [--out DIR]
                                 [--repeat K] [-- extra dmuon_bench/dmuon_project arguments]

With --repeat K the whole sequence (calibrate, then per topology measure and project) runs K
times and the table shows medians, the step ratio's range in brackets.

Exit 0 with the table; 2 when a tool fails (its output is shown). Needs the built tools
(build/bin, or --bin DIR) and mpirun; sets the small-machine Open MPI environment of
scripts/env.sh unless already set."""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mpi_single_copy import mechanism as single_copy_mechanism  # noqa: E402

PHASES = ["forward_comm", "forward_compute", "backward_compute", "backward_comm",
          "optimizer_ns", "optimizer_other", "exposed_comm"]


def die(msg):
    print(f"validate_projection.py: error: {msg}", file=sys.stderr)
    sys.exit(2)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        die(f"{' '.join(cmd)} exited {p.returncode}\n{p.stdout}\n{p.stderr}")
    return p.stdout


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ranks", type=int, nargs="+", default=[2, 4])
    ap.add_argument("--topologies", nargs="+", default=["moe", "vla", "llm"])
    ap.add_argument("--methods", default="dmuon,fsdp-adamw,fsdp-muon")
    ap.add_argument("--bin", default=os.path.join(root, "build", "bin"))
    ap.add_argument("--mpiexec", default="mpirun")
    ap.add_argument("--out", default="validation")
    ap.add_argument("--repeat", type=int, default=1,
                    help="repeat calibration + measurement + projection; report medians")
    ap.add_argument("extra", nargs="*", help="more arguments for both tools (after --)")
    a = ap.parse_args()
    env_defaults = {
        "OMPI_MCA_rmaps_base_oversubscribe": "1", "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1", "OMPI_MCA_pml": "ob1",
        "OMPI_MCA_btl": "self,vader",
        # the same transport scripts/env.sh gives dmuon_bench
        "OMPI_MCA_btl_vader_single_copy_mechanism": single_copy_mechanism(),
        "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
    for k, v in env_defaults.items():
        os.environ.setdefault(k, v)
    bench = os.path.join(a.bin, "dmuon_bench")
    project = os.path.join(a.bin, "dmuon_project")
    for exe in (bench, project):
        if not os.access(exe, os.X_OK):
            die(f"'{exe}' not found (build first, or pass --bin)")
    os.makedirs(a.out, exist_ok=True)
    import statistics
    samples = {}  # (topology, ranks, method) -> list of (measured run, projected run)
    for rep in range(a.repeat):
        for n in a.ranks:
            machine = os.path.join(a.out, f"calibrated-np{n}-r{rep + 1}.yaml")
            run([a.mpiexec, "-n", str(n), project, "--calibrate", "--output-machine", machine,
                 "--machine-name", f"calibrated-np{n}"])
            for topo in a.topologies:
                common = ["--topology", topo, "--preset", "tiny", "--boundary", "default",
                          "--method", a.methods, "--json"] + a.extra
                measured = json.loads(run([a.mpiexec, "-n", str(n), bench] + common))
                projected = json.loads(run([project, "--machine", machine, "--world-size",
                                            str(n)] + common))
                for m, p in zip(measured["runs"], projected["runs"]):
                    if m["status"] != "ok" or p["status"] != "ok" or m["method"] != p["method"]:
                        continue
                    samples.setdefault((topo, n, m["method"]), []).append((m, p))
    med = statistics.median
    print("| topology | ranks | method | step measured ms | step projected ms | ratio | "
          + " | ".join(PHASES) + " |")
    print("|---|---|---|---|---|---|" + "---|" * len(PHASES))
    within = 0
    for (topo, n, method), pairs in samples.items():
        ratios = [p["step_ms"] / m["step_ms"] for m, p in pairs if m["step_ms"] > 0]
        ratio = med(ratios)
        within += 0.7 <= ratio <= 1.3
        spread = f" [{min(ratios):.2f}–{max(ratios):.2f}]" if len(ratios) > 1 else ""
        phases = []
        for ph in PHASES:
            mv = med(m["phases_ms"][ph] for m, _ in pairs)
            pv = med(p["phases_ms"][ph] for _, p in pairs)
            phases.append(f"{pv:.1f}/{mv:.1f}")
        print(f"| {topo} | {n} | {method} | {med(m['step_ms'] for m, _ in pairs):.1f} | "
              f"{med(p['step_ms'] for _, p in pairs):.1f} | {ratio:.2f}{spread} | "
              + " | ".join(phases) + " |")
    print(f"\n# phases: projected/measured ms (medians); {within} of {len(samples)} median step "
          f"ratios within [0.7, 1.3]; {a.repeat} repetition(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
