#!/usr/bin/env python3
"""dmuon_project's per-rank memory (docs/MEMORY.md) as a product:

- Llama-3-8B on 64 A100 80GB (torchtitan ran it with FSDP on these GPUs, PUBLIC-THROUGHPUT.md
  §2a), s = 8192, local batch 1, --ac selective: fsdp-adamw and dmuon fit (status ok, a step
  time), their peak is the sum of its phase's terms, and the table has a mem GB column.
- DeepSeek-V3 on 64 H100 80GB with fsdp-adamw: 671 B parameters / 64 = 10.5 B per rank, so
  the fp32 masters (42 GB) and AdamW's two moments (84 GB) alone exceed 80 GB: status oom, the
  excess = peak - 84.99e9 bytes (the 79.15 GiB PyTorch can allocate of an 80 GiB part), no time in the table or the JSON, exit 0 (not a failure), and
  the HDF5 summary carries the memory terms.
Exit 0 with 'OK', 1 with the first failed check."""
import argparse
import json
import os
import re
import subprocess
import sys


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


def run(cmd, expect=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != expect:
        fail(f"{' '.join(cmd)} exited {p.returncode} (expected {expect})\n{p.stdout}\n{p.stderr}")
    return p.stdout


PERSISTENT = ("masters", "optimizer_state", "gradients", "ns_input", "tp_buffers",
              "graph_buffers")
PHASES = {
    "forward": PERSISTENT + ("weights", "activations"),
    "backward": PERSISTENT + ("weights", "activations", "recompute", "grad_buffers"),
    "optimizer": PERSISTENT + ("gather_buffers", "ns_workspace", "optimizer_transient"),
}


# What CUDA allocations can use on an 80 GB A100 / H100 (configs/machines: 79.15 GiB).
CAPACITY_GB = 84.99


def check_memory(r, where):
    m = r.get("memory")
    if m is None:
        fail(f"{where}: no memory object")
    t = m["terms_bytes"]
    if set(t) != set(PHASES["backward"]) | set(PHASES["optimizer"]):
        fail(f"{where}: terms {sorted(t)}")
    phases = {p: sum(t[k] for k in keys) for p, keys in PHASES.items()}
    if m["ns_workspace_in_graph_pool"]:  # the reference's step: held for the whole step
        phases["forward"] += t["ns_workspace"]
        phases["backward"] += t["ns_workspace"]
    if m["peak_bytes"] != max(phases.values()) or phases[m["phase"]] != m["peak_bytes"]:
        fail(f"{where}: peak {m['peak_bytes']} in {m['phase']}, phases {phases}")
    if abs(m["peak_GB"] - m["peak_bytes"] / 1e9) > 1e-9:
        fail(f"{where}: peak_GB {m['peak_GB']}")
    return m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    ap.add_argument("--workdir", required=True)
    a = ap.parse_args()
    os.makedirs(a.workdir, exist_ok=True)

    llama = [a.project, "--topology", "llm", "--preset", "llama3-8b", "--machine", "a100-80gb",
             "--world-size", "64", "--method", "dmuon,fsdp-adamw", "--boundary", "default",
             "--comm-dtype", "bf16", "--seq-len", "8192", "--micro-batch", "1", "--ac",
             "selective"]
    j = json.loads(run(llama + ["--json"]))
    if j["machine"]["memory_GB"] != CAPACITY_GB or j["oom"] != 0:
        fail(f"llama3-8b on a100-80gb: memory_GB {j['machine']['memory_GB']}, oom {j['oom']}")
    for r in j["runs"]:
        where = f"llama3-8b {r['method']}"
        m = check_memory(r, where)
        if r["status"] != "ok" or m["oom"] or not r["step_ms"] > 0:
            fail(f"{where}: status {r['status']}, oom {m['oom']}")
        if not (10 < m["peak_GB"] < 80) or m["capacity_GB"] != CAPACITY_GB or \
                m["excess_bytes"] != 0:
            fail(f"{where}: peak {m['peak_GB']:.1f} GB of {m['capacity_GB']}")
        if not m["activations_modelled"] or m["terms_bytes"]["activations"] <= 0:
            fail(f"{where}: activations not modelled with --seq-len")
    table = run(llama)
    if not re.search(r"mem GB.*\n(.*\n)*\s+default\s+dmuon\s+\d+\.\d+\s.*\s\d+\.\d\s", table):
        fail(f"no mem GB column with a dmuon row:\n{table}")
    if any("oom" in line for line in table.splitlines() if not line.startswith("#")):
        fail(f"llama3-8b on 64 A100 80GB reported oom:\n{table}")

    out = os.path.join(a.workdir, "deepseek.h5")
    if os.path.exists(out):
        os.remove(out)
    ds = [a.project, "--topology", "moe-llm", "--preset", "deepseek-v3", "--machine", "h100-ndr",
          "--world-size", "64", "--method", "fsdp-adamw", "--comm-dtype", "bf16"]
    j = json.loads(run(ds + ["--json"]))
    r = j["runs"][0]
    m = check_memory(r, "deepseek-v3 fsdp-adamw")
    t = m["terms_bytes"]
    # 671 B parameters: masters 4 B and AdamW state 8 B per parameter over 64 ranks.
    if not (40e9 < t["masters"] < 44e9 and 80e9 < t["optimizer_state"] < 88e9):
        fail(f"deepseek-v3 masters {t['masters']} / optimizer state {t['optimizer_state']}")
    if r["status"] != "oom" or not m["oom"] or j["oom"] != 1 or j["failures"] != 0:
        fail(f"deepseek-v3: status {r['status']}, oom {j['oom']}, failures {j['failures']}")
    if m["excess_bytes"] != m["peak_bytes"] - round(CAPACITY_GB * 1e9):
        fail(f"deepseek-v3: excess {m['excess_bytes']} != peak {m['peak_bytes']} - "
             f"{CAPACITY_GB}e9")
    if "step_ms" in r or "mfu" in r or "oom:" not in r.get("error", ""):
        fail(f"deepseek-v3: an oom run reports a time or no reason: {sorted(r)}")
    table = run(ds + ["--output", out])
    excess = m["excess_bytes"] / 1e9
    if not re.search(r"fsdp-adamw\s+oom \(\+%.1f GB\)\s+-\s+-" % excess, table):
        fail(f"no 'oom (+{excess:.1f} GB)' row without a time:\n{table}")
    if "out of memory: 1 row(s)" not in table:
        fail(f"no out-of-memory count:\n{table}")

    import h5py  # Debian's python3-h5py
    with h5py.File(out, "r") as f:
        run0 = f["runs"]["0"]
        s = run0["summary"].attrs
        status = run0.attrs.get("status", b"")
        status = status.decode() if isinstance(status, bytes) else str(status)
        if status != "oom":
            fail(f"results file: status {status!r}")
        if int(s["memory_peak_bytes"]) != m["peak_bytes"] or \
                int(s["memory_excess_bytes"]) != m["excess_bytes"] or \
                float(s["memory_capacity_GB"]) != CAPACITY_GB:
            fail("results file: memory summary differs from the JSON")
        for k, v in t.items():
            if int(s[f"memory_{k}_bytes"]) != v:
                fail(f"results file: memory_{k}_bytes")
    print("OK: memory (llama3-8b fits on 64 A100 80GB; deepseek-v3 fsdp-adamw oom by "
          f"{excess:.1f} GB on 64 H100)")


if __name__ == "__main__":
    main()
