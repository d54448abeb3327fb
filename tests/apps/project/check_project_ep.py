#!/usr/bin/env python3
"""dmuon_project --ep 4 on 4 ranks (E = G) of the tiny moe-llm: 3 MoE layers (layer 0 dense) of
8 routed experts, h = 128, top-2, 64 tokens per rank (R = 128 routed rows), bf16 activations.
Per MoE layer and micro-step, counted by hand (docs/STEP-WORK.md "Expert parallelism"): the
forward's token counts (2 int64 to each of 3 peers: 48 B), dispatch and combine (R·h/E = 4096
elements to each peer: 3 x 4096 x 2 = 24576 B each), the backward's two row all-to-alls;
--ac full reruns the forward's three. So 15 all-to-alls and 295056 B per rank and step, 24 and
442656 with --ac full. An EP rank holds 2 of 8 experts whole, as many elements as FSDP's 1/4
shard of all 8 (every expert matrix 8192 elements): fsdp-adamw's masters and optimizer state
are those without EP, its gathered weights fewer (no expert is all-gathered). E = 2 < G: the
expert groups projected and audited, the all-to-alls by hand. Refusals: E not dividing G. Exit 0 with 'OK' on success, 1 with the first failed check."""
import argparse
import json

from check_project import expect_refusal, fail, run

COMMON = ["--topology", "moe-llm", "--machine", "h100-ndr", "--world-size", "4", "--boundary",
          "default", "--json"]


def project(exe, *extra):
    j = json.loads(run([exe, *COMMON, *extra]))
    if not j.get("passed"):
        fail(f"{extra}: not passed: {j.get('failures')}")
    return j, {r["method"]: r for r in j["runs"]}


def expect_a2a(j, extra, calls, bytes_per_rank):
    got = j["step_work"].get("ep_activation")
    if got is None:
        fail(f"{extra}: step_work has no ep_activation: {j['step_work']}")
    if got["ep"] != 4 or got["calls_per_step"] != calls or got["bytes_per_rank_per_step"] != \
            bytes_per_rank:
        fail(f"{extra}: {got}, expected {calls} all-to-alls of {bytes_per_rank} B in all")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", required=True)
    a = ap.parse_args()
    work = ["--seq-len", "64", "--micro-batch", "1"]
    j, _ = project(a.project, "--ep", "4", *work)
    expect_a2a(j, "ac none", 15, 295056)
    if not any(n.startswith("--ep 4:") for n in j["notes"]):
        fail(f"no EP note: {j['notes']}")
    full, _ = project(a.project, "--ep", "4", "--ac", "full", *work)
    expect_a2a(full, "ac full", 24, 442656)
    _, ep = project(a.project, "--ep", "4", "--method", "fsdp-adamw")
    _, flat = project(a.project, "--method", "fsdp-adamw")
    e, f = ep["fsdp-adamw"]["memory"]["terms_bytes"], flat["fsdp-adamw"]["memory"]["terms_bytes"]
    for term in ("masters", "optimizer_state"):
        if e[term] != f[term]:
            fail(f"fsdp-adamw {term}: {e[term]} B under --ep 4, {f[term]} B without")
    if not e["weights"] < f["weights"]:
        fail(f"fsdp-adamw gathered weights {e['weights']} B under --ep 4, not below {f['weights']}")
    # E = 2 < G = 4: expert groups of 2 (audited by the projection); the EP group has 1 peer,
    # each rank 4 local experts: counts 4 int64 = 32 B, dispatch and combine R·h/E = 8192
    # elements = 16384 B per all-to-all, so per MoE layer 32 + 4 x 16384 and 15 calls in all.
    half, _ = project(a.project, "--ep", "2", *work)
    got = half["step_work"].get("ep_activation")
    if got is None or got["ep"] != 2 or got["calls_per_step"] != 15 or \
            got["bytes_per_rank_per_step"] != 3 * (32 + 4 * 16384):
        fail(f"--ep 2: {got}, expected 15 all-to-alls of {3 * (32 + 4 * 16384)} B in all")
    # fsdp-adamw at E = 2: every expert matrix sharded over its expert group of 2 (8192
    # elements: no padding), so a rank's masters and optimizer state are again FSDP's 1/4 of
    # the model, its gathered weights fewer (a layer's 4 local experts, not 8).
    _, half_a = project(a.project, "--ep", "2", "--method", "fsdp-adamw")
    h = half_a["fsdp-adamw"]["memory"]["terms_bytes"]
    for term in ("masters", "optimizer_state"):
        if h[term] != f[term]:
            fail(f"fsdp-adamw {term}: {h[term]} B under --ep 2, {f[term]} B without")
    if not h["weights"] < f["weights"]:
        fail(f"fsdp-adamw gathered weights {h['weights']} B under --ep 2, not below {f['weights']}")
    expect_refusal([a.project, *COMMON[:-3], "--world-size", "6", "--ep", "4"],
                   "--ep 4 on R 1 x G 6 x T 1 ranks is not modelled (valid: a divisor of the "
                   "shard group size G = 6")
    expect_refusal([a.project, *COMMON[:-3], "--world-size", "3", "--ep", "3"],
                   "--ep 3 does not divide the 8 experts of 'model.layers.1.mlp.experts'")
    print(f"OK: EP all-to-alls as counted by hand; fsdp-adamw masters {e['masters']} B with and "
          f"without --ep, weights {f['weights']} -> {e['weights']} B")


if __name__ == "__main__":
    main()
