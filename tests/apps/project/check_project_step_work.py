#!/usr/bin/env python3
"""dmuon_project's step work against hand-computed answers (PUBLIC-THROUGHPUT.md §0 and by hand):
Llama-3-8B at s = 8192 counts 48.2 / 57.9 / 57.9 / 51.5 GFLOP per token under 6n / 6n-attn /
megatron / megatron-causal; --ac full adds exactly one forward of the blocks to the hardware
FLOPs (32 x (2 x 218.1 M linear weights + 2 x s x 4096 causal attention) = 16.11 GFLOP per
token); a GPU computes in bf16 unless told (HFU over the bf16 peak); its compute slows while
collectives hold SMs (the machine's collective_sms; said in the notes), and bad step-work flags
are one-line exit-2 errors. Exit 0 with 'OK', 1 with the first failed check."""
import argparse
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print(f"FAILED: {msg}")
    sys.exit(1)


def run(cmd, expect=0):
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != expect:
        fail(f"{' '.join(cmd)} exited {p.returncode} (expected {expect})\n{p.stdout}\n{p.stderr}")
    return p


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    a = ap.parse_args()
    base = [a.project, "--topology", "llm", "--preset", "llama3-8b", "--machine", "a100-80gb",
            "--world-size", "8", "--method", "fsdp-adamw", "--seq-len", "8192",
            "--micro-batch", "1", "--json"]

    def project(*extra):
        j = json.loads(run(base + list(extra)).stdout)
        return j, j["runs"][0]

    for conv, want in (("6n", 48.2), ("6n-attn", 57.9), ("megatron", 57.9),
                       ("megatron-causal", 51.5)):
        _, r = project("--flops", conv)
        got = r["model_flops_per_step"] / r["global_tokens"] / 1e9
        if abs(got - want) > 0.05:
            fail(f"--flops {conv}: {got:.2f} GFLOP per token, expected {want}")
        if r["flop_convention"] != conv:
            fail(f"--flops {conv}: the run reports convention {r['flop_convention']}")

    def hardware_flops_per_token(j, r):
        peak = j["machine"]["peak_tflops"]["bf16"] * 1e12
        return r["hfu"] * r["step_ms"] * 1e-3 * r["world_size"] * peak / r["global_tokens"]

    j_none, r_none = project("--ac", "none")
    j_full, r_full = project("--ac", "full")
    if j_none.get("step_work", {}).get("compute_dtype") != "bf16":
        fail(f"a GPU projection computes in {j_none.get('step_work')}, expected bf16")
    added = hardware_flops_per_token(j_full, r_full) - hardware_flops_per_token(j_none, r_none)
    if abs(added / 16.11e9 - 1) > 0.005:
        fail(f"--ac full adds {added / 1e9:.3f} GFLOP per token, expected 16.11 (one forward)")
    if not r_full["step_ms"] > r_none["step_ms"]:
        fail("--ac full is not slower than --ac none")
    _, r_plain = project("--ac", "none", "--flops", "6n")
    plain = json.loads(run([x for x in base if x not in ("--seq-len", "8192", "--micro-batch", "1")]
                           + ["--tokens", "8192"]).stdout)["runs"][0]
    # The step work adds the attention (12 L h s = 12.88 GFLOP per token) and takes away the
    # embedding's synthetic Linear (6 V h = 3.15 GFLOP per token: a lookup is no GEMM), so the
    # step grows by at least 9.73 GFLOP x 8192 tokens at the bf16 peak (and its memory ops).
    peak = j_none["machine"]["peak_tflops"]["bf16"] * 1e12
    floor_ms = (12 * 32 * 4096 * 8192 - 6 * 128256 * 4096) * 8192 / peak * 1e3
    if not r_none["step_ms"] - plain["step_ms"] > floor_ms:
        fail(f"the activation work adds too little: {r_none['step_ms']:.0f} ms with it, "
             f"{plain['step_ms']:.0f} ms without (at least {floor_ms:.0f} ms more)")

    # Compute under communication: said in the notes; without the machine's collective_sms the
    # same step is faster (its compute no longer shares the SMs with the running collectives).
    want = "compute under communication: a running collective holds 24 (NVLink) / 16 (network)"
    if not any(n.startswith(want) for n in j_none["notes"]):
        fail(f"no compute-under-communication note in {j_none['notes']}")
    if not any(n.startswith("FSDP groups as torchtitan's FSDP2") for n in j_none["notes"]):
        fail(f"a GPU projection does not say its FSDP groups are FSDP2's: {j_none['notes']}")
    machines = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                            "configs", "machines")
    with open(os.path.join(machines, "a100-80gb.yaml")) as f:
        text = f.read()
    kept, skip = [], False
    for line in text.splitlines():
        if line.startswith("    collective_sms:"):
            skip = True
            continue
        if skip and line.startswith("                           #"):
            continue
        skip = False
        kept.append(line)
    with tempfile.TemporaryDirectory() as d:
        plain_machine = os.path.join(d, "a100-no-sms.yaml")
        with open(plain_machine, "w") as f:
            f.write("\n".join(kept) + "\n")
        swapped = [plain_machine if x == "a100-80gb" else x for x in base] + ["--ac", "none"]
        j_free = json.loads(run(swapped).stdout)
        r_free = j_free["runs"][0]
    if not any("not modelled: compute slowed by running collectives" in n
               for n in j_free["notes"]):
        fail(f"a machine without collective_sms does not say so: {j_free['notes']}")
    if not r_free["step_ms"] < r_none["step_ms"]:
        fail(f"compute under communication costs nothing: {r_none['step_ms']:.1f} ms with it, "
             f"{r_free['step_ms']:.1f} ms without")

    errors = (
        (["--ac", "full", "--tokens", "64"], "--seq-len"),
        (["--seq-len", "64"], "--micro-batch"),
        (["--seq-len", "64", "--micro-batch", "1", "--fusion", "jit"], "fusion 'jit'"),
        (["--seq-len", "64", "--micro-batch", "1", "--flops", "7n"], "7n"),
    )
    head = [a.project, "--topology", "llm", "--machine", "a100-80gb", "--world-size", "8"]
    for extra, needle in errors:
        p = run(head + extra, expect=2)
        lines = p.stderr.strip().splitlines()
        if len(lines) != 1 or needle not in lines[0]:
            fail(f"{' '.join(extra)}: expected one line naming '{needle}', got {p.stderr!r}")
    print("OK: step work conventions, --ac full recompute, bf16 compute, compute under "
          "communication, 4 errors")


if __name__ == "__main__":
    main()
