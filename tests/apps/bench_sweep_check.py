#!/usr/bin/env python3
"""End-to-end check of dmuon_bench's default boundary sweep and its results file.

Runs `mpiexec -n NP dmuon_bench --topology T --steps 1 --warmup 0 --tokens 4 --output F`, then
asserts the documented layout (results/README.md) and values:
  * root provenance attributes present, hostnames one per rank, world_size == NP;
  * one run per sweep row (dmuon) plus one per baseline; statuses ok/rejected;
  * a rejected row (topologies with an incomplete boundary) with an error naming
    "no ancestor matched" and no timings;
  * hook_sites of every dmuon run == `dmuon_inspect --json`'s hook_sites for the same
    topology/boundary/world;
  * measured bytes == formula bytes for every run, kind and rank; timings steps x ranks x phases;
  * dmuon_compare F F exits 0; with --other-strategy S, a run with --owner-strategy S compared
    against F exits 3.
Exit 0 on success, 1 with a FAILED line otherwise. Needs h5py (python3-h5py).
"""
import argparse
import json
import os
import subprocess
import sys

try:
    import h5py
except ImportError:
    print("h5py not available: skipped")
    sys.exit(77)

ROOT_ATTRS = ["format", "schema_version", "suite_version", "git_commit", "build_type", "compiler",
              "device", "device_model", "blas_library", "blas_core", "sgemm_gflops",
              "mpi_version", "kokkos_version", "hdf5_version", "cuda_version", "nccl_version",
              "hostnames", "date_utc", "command_line", "world_size", "replicate", "num_runs"]
RUN_ATTRS = ["status", "error", "config", "topology", "preset", "dedicate_rule", "method",
             "reshard", "world_size", "replicate"]


def fail(msg):
    print("FAILED: " + msg)
    sys.exit(1)


def s(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def run(cmd, expect_rc=0):
    print("+ " + " ".join(cmd), flush=True)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if expect_rc is not None and p.returncode != expect_rc:
        fail(f"exit {p.returncode}, expected {expect_rc}\n{p.stdout}\n{p.stderr}")
    return p


def bench(a, out, extra=()):
    cmd = [a.mpiexec, a.npflag, str(a.np), a.bench, "--topology", a.topology, "--steps", "1",
           "--warmup", "0", "--tokens", "4", "--output", out, *extra]
    return run(cmd)


def main():
    ap = argparse.ArgumentParser()
    for k in ["mpiexec", "npflag", "bench", "inspect", "compare", "topology", "workdir"]:
        ap.add_argument("--" + k, required=True)
    ap.add_argument("--np", type=int, required=True)
    ap.add_argument("--other-strategy", default="")
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    out = os.path.join(a.workdir, f"{a.topology}_np{a.np}.h5")
    if os.path.exists(out):
        os.remove(out)
    p = bench(a, out)
    if "# Failed audits and checks : 0 OK" not in p.stdout:
        fail("no OK footer:\n" + p.stdout)
    f = h5py.File(out, "r")
    for k in ROOT_ATTRS:
        if k not in f.attrs:
            fail(f"root attribute {k} missing")
    if s(f.attrs["format"]) != "dmuon-results":
        fail("format attribute")
    if int(f.attrs["world_size"]) != a.np:
        fail("world_size attribute")
    if len(s(f.attrs["hostnames"]).split(",")) != a.np:
        fail("hostnames is not one per rank: " + s(f.attrs["hostnames"]))
    n = int(f.attrs["num_runs"])
    runs = [f[f"runs/{i}"] for i in range(n)]
    methods = [s(r.attrs["method"]) for r in runs]
    for m in ["fsdp-adamw", "fsdp-muon"]:
        if methods.count(m) != 1:
            fail(f"baseline {m} must appear once, got {methods}")
    inspect_cache = {}
    rejected = 0
    for i, r in enumerate(runs):
        for k in RUN_ATTRS:
            if k not in r.attrs:
                fail(f"run {i}: attribute {k} missing")
        status = s(r.attrs["status"])
        spec = s(r["boundary"].attrs["spec"])
        strict = int(r["boundary"].attrs["strict"])
        if status == "rejected":
            rejected += 1
            if "no ancestor matched" not in s(r.attrs["error"]):
                fail(f"run {i}: rejected error lacks 'no ancestor matched': {s(r.attrs['error'])}")
            if not strict:
                fail(f"run {i}: a lenient row was rejected")
            if r["timings/seconds"].shape[0] != 0:
                fail(f"run {i}: rejected run has timings")
            continue
        if status != "ok":
            fail(f"run {i}: status {status}")
        summ = r["summary"].attrs
        if s(summ["timings_source"]) != "measured":
            fail(f"run {i}: timings_source")
        for k in ["step_ms", "optimizer_ms", "exposed_comm_ms", "tokens_per_s",
                  "updated_params_per_s", "hook_sites", "hook_calls_per_step"]:
            if k not in summ:
                fail(f"run {i}: summary {k} missing")
        if methods[i] == "dmuon" and "ns_tflops" not in summ:
            fail(f"run {i}: summary ns_tflops missing")
        sec = r["timings/seconds"]
        if sec.shape[0] != 1 or sec.shape[1] != a.np or sec.shape[2] != len(r["timings/phases"]):
            fail(f"run {i}: timings shape {sec.shape}")
        # Schema 2: self-describing samples (units, dimension labels), the wall step per
        # sample and rank, counts as integers, the run inputs as attributes.
        if s(sec.attrs.get("units", "")) != "s" or \
                [d.label for d in sec.dims] != ["sample", "rank", "phase"]:
            fail(f"run {i}: timings/seconds lacks units or dimension labels")
        step = r["timings/step_seconds"]
        if step.shape != sec.shape[:2] or (step[()] <= 0).any():
            fail(f"run {i}: timings/step_seconds shape {step.shape} or non-positive values")
        if summ["hook_sites"].dtype.kind != "i" or summ["hook_calls_per_step"].dtype.kind != "i":
            fail(f"run {i}: counts in the summary are not integers")
        for k in ["compute", "global_samples", "steps", "warmup", "seed"]:
            if k not in r.attrs:
                fail(f"run {i}: run attribute {k} missing")
        if s(r["collectives/bytes_per_rank_per_step"].attrs.get("units", "")) != "B/step":
            fail(f"run {i}: collective bytes lack units")
        c = r["collectives"]
        meas, form = c["bytes_per_rank_per_step"][()], c["formula_bytes_per_rank_per_step"][()]
        if meas.shape != form.shape or (meas != form).any():
            fail(f"run {i}: measured bytes != formula bytes\n{meas}\n{form}")
        if meas.shape[-1] != a.np or meas.sum() <= 0:
            fail(f"run {i}: collectives shape {meas.shape} / no bytes")
        if methods[i] == "dmuon":
            key = (spec, strict)
            if key not in inspect_cache:
                cmd = [a.inspect, "--topology", a.topology, "--world-size", str(a.np),
                       "--boundary", spec, "--json"] + ([] if strict else ["--lenient"])
                inspect_cache[key] = json.loads(run(cmd).stdout)["hook_sites"]
            if int(summ["hook_sites"]) != inspect_cache[key]:
                fail(f"run {i}: hook_sites {summ['hook_sites']} != dmuon_inspect's "
                     f"{inspect_cache[key]} for {spec} strict={strict}")
            if len(r["boundary/sites/path"]) != inspect_cache[key]:
                fail(f"run {i}: boundary/sites rows != hook_sites")
    strict_incomplete = [r for r in runs if s(r["boundary"].attrs["label"]).startswith("incomplete")
                         and int(r["boundary"].attrs["strict"])]
    if strict_incomplete and rejected != len(strict_incomplete):
        fail(f"{len(strict_incomplete)} strict incomplete rows, {rejected} rejected")
    f.close()
    run([a.compare, out, out], expect_rc=0)
    if a.other_strategy:
        other = os.path.join(a.workdir, f"{a.topology}_np{a.np}_{a.other_strategy}.h5")
        bench(a, other, ["--owner-strategy", a.other_strategy])
        run([a.compare, out, other, "--time-tolerance", "1000"], expect_rc=3)
    print(f"OK: {n} runs ({rejected} rejected) in {out}")


if __name__ == "__main__":
    main()
