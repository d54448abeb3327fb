#!/usr/bin/env python3
"""dmuon_advise on models where the best choice is known without the advisor.

  idle      a model whose default layout leaves 7 of 8 owners idle (every matrix packed into one
            unit on rank 0: no layers.N / blocks.N key): the winner uses every owner and is
            faster than the start.
  hsdp      llama3-8b on 32 nodes of h100-ndr (NVLink inside a node, NDR between): flat FSDP
            all-gathers over the slow fabric every layer; the winner keeps the all-gathers on
            NVLink (HSDP, R > 1 with G dividing a node's 8 ranks).
  memcap    the uncapped winner runs Z2 (gathered weights kept from forward to backward: faster,
            more memory); with a cap between its peak and the Z3 peak, the winner is Z3 and
            fits the cap, and no over-cap candidate is ranked.
  config    the winner's config file reproduces the winner's projected step in dmuon_project
            and is accepted by dmuon_bench.
  deepseek  DeepSeek-V3 on 512 H100 (seq 4096) under a 30 GB cap: the default layout does not
            fit; the advisor finds one that does within 30 s (a sixth of its default time
            limit) with expert groups (--ep 256 < G), larger replicate sizes than one out of
            memory are not projected, and neither are CP sizes above one out of memory by more
            than the activations CP could split; on 256 H100 it finds --ep 256 = G.
  microbatch  the micro-batch knob (with --seq-len, m > 1): values m, m/2, m/4, 1 that divide
            m, each with accum x m / value micro-steps, so tokens per optimizer step stay;
            llama3-8b on 8 ranks of a800 at seq 8192: micro-batch 16 fits with nothing but a
            smaller micro-batch (the winner takes one, and its config reproduces it), micro-batch
            4 fits with --ac full (the winner keeps 4); micro-batch 1 or no --seq-len: no knob.
  cp        the context-parallel knob (--cp C, with accum x C / start so the sequences per
            optimizer step stay): llama3-8b on 64 H100 at seq 131,072 fits at no CP size 1 (the
            activations of one sequence outgrow a rank whatever else moves); the winner splits
            the sequence, each rank's tokens per step stay, its config reproduces it in
            dmuon_project and dmuon_bench refuses it in one line; a CPU machine, a vision model
            or no --seq-len: no knob.
"""
import argparse
import json
import os
import subprocess
import sys


def run(cmd, expect_rc=0):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if p.returncode != expect_rc:
        sys.exit(f"FAILED: {' '.join(cmd)} exited {p.returncode} (expected {expect_rc})\n"
                 f"{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return p


def advise(args, extra):
    p = run([args.advise, "--json"] + extra)
    return json.loads(p.stdout)


def check(cond, msg):
    if not cond:
        sys.exit("FAILED: " + msg)


def case_idle(args):
    topo = os.path.join(args.data, "unnamed_blocks.json")
    j = advise(args, ["--topology-file", topo, "--machine", "h100-ndr", "--world-size", "8"])
    start, win = j["start"]["outcome"], j["winner"]["outcome"]
    check(start["idle_ranks"] == 7, f"start should leave 7 ranks idle, got {start['idle_ranks']}")
    check(win["status"] == "ok" and win["idle_ranks"] == 0,
          f"winner should use every owner, got {win}")
    check(win["step_ms"] < start["step_ms"],
          f"winner {win['step_ms']} ms not faster than start {start['step_ms']} ms")
    steps = [r["outcome"]["step_ms"] for r in j["ranked"]]
    check(steps == sorted(steps), f"ranked rows not fastest first: {steps}")
    # The winner is the fastest, or one within the tolerance of it with fewer changed knobs.
    fastest = j["ranked"][0]
    check(fastest["knobs"] == j["fastest"]["knobs"], "first ranked row is not the fastest")
    check(win["step_ms"] <= fastest["outcome"]["step_ms"] * (1 + j["tolerance"]),
          f"winner {win['step_ms']} ms is not within {j['tolerance']} of the fastest")
    print(f"idle: start {start['step_ms']:.2f} ms (7 idle) -> {win['step_ms']:.2f} ms "
          f"({j['winner']['changes']})")
    # --tolerance 50: the winner is, among the fitting candidates within 50 % of the fastest,
    # the one changing the fewest knobs, then needing the least memory (recomputed here from
    # every projected candidate's knobs against the start's).
    t = advise(args, ["--topology-file", topo, "--machine", "h100-ndr", "--world-size", "8",
                      "--tolerance", "50"])
    start_knobs = t["start"]["knobs"]
    fastest = min(e["outcome"]["step_ms"] for e in t["evaluated"] if e["outcome"]["status"] == "ok")
    near = [e for e in t["evaluated"]
            if e["outcome"]["status"] == "ok" and e["outcome"]["step_ms"] <= 1.5 * fastest]
    changed = lambda e: sum(e["knobs"][k] != v for k, v in start_knobs.items())
    want = min(near, key=lambda e: (changed(e), e["outcome"]["peak_bytes"], e["outcome"]["step_ms"]))
    check(t["winner"]["knobs"] == want["knobs"],
          f"--tolerance 50 winner {t['winner']['changes']}, expected {want['changes']}")
    check(changed(t["winner"]) < changed(t["fastest"]),
          "the case should make the tolerance bite: the winner changes as many knobs as the fastest")
    print(f"idle --tolerance 50: winner {t['winner']['changes']} ({changed(t['winner'])} knobs) "
          f"over the fastest {t['fastest']['changes']} ({changed(t['fastest'])} knobs)")


def case_hsdp(args):
    j = advise(args, ["--topology", "llm", "--preset", "llama3-8b", "--machine", "h100-ndr",
                      "--world-size", "256", "--comm-dtype", "bf16"])
    knobs = j["winner"]["knobs"]
    r = int(knobs["replicate"])
    g = 256 // r
    check(r > 1, f"flat FSDP (R=1) won on 32 nodes: {j['winner']['changes']}")
    check(8 % g == 0, f"winner's shard group G={g} spans nodes of 8 ranks")
    print(f"hsdp: winner R={r} x G={g} ({j['winner']['changes']}), "
          f"{j['winner']['outcome']['step_ms']:.1f} ms vs start {j['start']['outcome']['step_ms']:.1f}")


def case_memcap(args):
    base = ["--topology", "llm", "--preset", "llama3-8b", "--machine", "h100-ndr",
            "--world-size", "64", "--seq-len", "8192", "--micro-batch", "1", "--comm-dtype",
            "bf16"]
    free = advise(args, base)
    check(free["winner"]["knobs"]["reshard"] == "z2",
          f"uncapped winner should run z2: {free['winner']['changes']}")
    z2_peak = free["winner"]["outcome"]["peak_GB"]
    z3 = [e for e in free["evaluated"]
          if e["outcome"]["status"] == "ok" and e["knobs"]["reshard"] == "z3"]
    z3_peak = min(e["outcome"]["peak_GB"] for e in z3)
    check(z3_peak < z2_peak, f"z3 peak {z3_peak} not below z2's {z2_peak}")
    cap = (z3_peak + z2_peak) / 2
    capped = advise(args, base + [f"--memory-cap={cap}"])
    win = capped["winner"]
    check(win["outcome"]["status"] == "ok" and win["outcome"]["peak_GB"] <= cap,
          f"capped winner does not fit {cap} GB: {win['outcome']}")
    check(capped["memory_cap_GB"] == cap and capped["memory_cap_source"] == "--memory-cap",
          "cap not applied")
    for row in capped["ranked"]:
        check(row["outcome"]["peak_GB"] <= cap, f"ranked row over the cap: {row['outcome']}")
    check(capped["oom"] > 0, "no candidate was pruned as out of memory under the cap")
    check(win["knobs"]["reshard"] == "z3" or win["outcome"]["peak_GB"] <= cap,
          "capped winner is neither z3 nor within the cap")
    print(f"memcap: uncapped z2 {z2_peak:.1f} GB; cap {cap:.1f} GB -> winner "
          f"{win['knobs']['reshard']} {win['outcome']['peak_GB']:.1f} GB "
          f"({capped['oom']} pruned oom)")


def case_config(args):
    os.makedirs(args.workdir, exist_ok=True)
    cfg = os.path.join(args.workdir, "winner.yaml")
    if os.path.exists(cfg):
        os.remove(cfg)
    topo = os.path.join(args.data, "unnamed_blocks.json")
    common = ["--machine", "h100-ndr", "--world-size", "8"]
    j = advise(args, ["--topology-file", topo, "--write-config", cfg] + common)
    check(os.path.exists(cfg), "no config written")
    p = run([args.project, "--config", cfg, "--json"] + common)
    proj = json.loads(p.stdout)
    check(len(proj["runs"]) == 1, f"the config projects {len(proj['runs'])} rows, expected 1")
    want = j["winner"]["outcome"]["step_ms"]
    got = proj["runs"][0]["step_ms"]
    check(abs(got - want) <= 1e-9 * max(1.0, want),
          f"dmuon_project --config gives {got} ms, the advisor {want} ms")
    # dmuon_bench accepts every key (one rank; R forced to 1, no compute).
    run([args.mpiexec, args.npflag, "1", args.bench, "--config", cfg, "--replicate", "1",
         "--steps", "1", "--warmup", "0", "--compute", "none", "--tokens", "2"])
    # ... and starts a new search (its method: [dmuon] key is accepted), from the winner.
    again = advise(args, ["--config", cfg] + common)
    check(again["start"]["knobs"] == j["winner"]["knobs"],
          f"a search from the winner's config starts elsewhere: {again['start']['knobs']}")
    print(f"config: dmuon_project reproduces {want:.4f} ms; dmuon_bench accepts the file")


def case_deepseek(args):
    """DeepSeek-V3 on H100 at its training sequence length: the default layout needs hundreds of
    GB per rank. At 512 ranks under a 30 GB cap, expert parallelism is E = 256 < G (256 experts
    a layer: each expert shared by an expert group of 2 ranks); the advisor, searching the
    memory-saving knobs first (--ep first), finds a configuration under the cap within 30 s (the
    default limit is 180 s: a busy machine's share) and prunes what cannot fit; at 256 ranks it
    finds E = G, one expert of each layer a rank."""
    def search(world, limit, *extra):
        return advise(args, ["--topology", "moe-llm", "--preset", "deepseek-v3", "--machine",
                             "h100-ndr", "--world-size", str(world), "--seq-len", "4096",
                             "--micro-batch", "1", "--time-limit", str(limit), *extra])
    j = search(512, 30, "--memory-cap", "30")
    start, win = j["start"]["outcome"], j["winner"]["outcome"]
    check(start["status"] == "oom", f"the default layout should not fit: {start}")
    check(j["memory_first"] == ["ep", "ac", "comm_dtype", "reshard", "cp"],
          f"the start does not fit: memory knobs first (--ep 256 at 512), got {j['memory_first']}")
    check(win["status"] == "ok" and win["peak_GB"] <= j["memory_cap_GB"] == 30,
          f"no configuration under the cap found: {win} ({j['winner']['changes']})")
    check(j["winner"]["knobs"]["ep"] == "256",
          f"at 512 the winner does not use expert groups (--ep 256): {j['winner']['changes']}")
    check(j["candidates"] >= len(j["evaluated"]), "candidate count below the projected ones")
    # Memory per rank grows with R at a fixed world: no R above one out of memory is projected.
    def split_r(e):  # (the other knobs as a key, R)
        k = dict(e["knobs"])
        r = int(k.pop("replicate"))
        return json.dumps(k, sort_keys=True), r
    oom_r = {}
    for e in j["evaluated"]:
        key, r = split_r(e)
        if e["outcome"]["status"] == "oom":
            oom_r[key] = min(r, oom_r.get(key, r))
    for e in j["evaluated"]:
        key, r = split_r(e)
        lo = oom_r.get(key)
        check(lo is None or r <= lo,
              f"replicate={r} projected after replicate={lo} was out of memory: {e['changes']}")
    # Out of memory by more than its activations at a CP size (the parameters, not the
    # sequence, overflow): no larger CP size of the same other knobs can fit, so none is
    # projected.
    def split_cp(e):
        k = dict(e["knobs"])
        return json.dumps({n: v for n, v in k.items() if n != "cp"}, sort_keys=True), e["cp"]
    hopeless = {}
    for e in j["evaluated"]:
        key, cp = split_cp(e)
        o = e["outcome"]
        if o["status"] == "oom" and o["excess_bytes"] > o["activation_bytes"]:
            hopeless[key] = min(cp, hopeless.get(key, cp))
    for e in j["evaluated"]:
        key, cp = split_cp(e)
        check(key not in hopeless or cp <= hopeless[key],
              f"--cp {cp} projected after --cp {hopeless.get(key)} was out of memory by more "
              f"than its activations: {e['changes']}")
    check(j["pruned_cp"] > 0, "no CP size pruned")
    print(f"deepseek at 512: {j['winner']['changes']}: {win['step_ms']:.0f} ms, "
          f"{win['peak_GB']:.1f} GB ({len(j['evaluated'])} of {j['candidates']} candidates "
          f"projected, {j['pruned_cp']} CP sizes pruned, complete {j['complete']}, "
          f"{j['wall_s']:.0f} s)")
    # 256 ranks: --ep 256 is a candidate, searched first, and the winner within 8 s of search;
    # every fitting candidate without it that was projected is a per-expert boundary at over
    # three times its step (75 s against about 6 s, docs/ADVISOR.md).
    j = search(256, 8)
    win = j["winner"]["outcome"]
    check(j["memory_first"] == ["ep", "ac", "comm_dtype", "reshard", "cp"],
          f"at 256: memory knobs first, got {j['memory_first']}")
    check(win["status"] == "ok" and j["winner"]["knobs"]["ep"] == "256",
          f"at 256 the winner does not use expert parallelism: {j['winner']['changes']}")
    no_ep = [e for e in j["evaluated"]
             if e["knobs"]["ep"] == "1" and e["outcome"]["status"] == "ok"]
    check(all(e["outcome"]["step_ms"] > 3 * win["step_ms"] for e in no_ep),
          f"a fitting candidate without EP is within 3x of the winner: "
          f"{[(e['changes'], e['outcome']['step_ms']) for e in no_ep]}")
    check("--ep 256" in j["winner_changed_flags"], f"flags {j['winner_changed_flags']}")
    print(f"deepseek at 256: {j['winner']['changes']}: {win['step_ms']:.0f} ms, "
          f"{win['peak_GB']:.1f} GB, D/A {j['winner'].get('vs_adamw', '-')}")


def case_microbatch(args):
    llm = ["--topology", "llm", "--preset", "llama3-8b", "--machine", "a800", "--world-size", "8",
           "--seq-len", "8192"]

    def knob_values(j):
        return [(v["micro_batch"], v["accum"]) for v in j["micro_batch_values"]]

    def same_step_batch(j, m, a):
        # The CP knob (a800 is a GPU machine) keeps micro-batch x accum / C.
        for e in j["evaluated"]:
            check(e["micro_batch"] * e["accum"] == m * a * e["cp"] and
                  e["knobs"]["micro_batch"] == str(e["micro_batch"]),
                  f"{e['changes']}: micro-batch x accum / C is not {m * a}")
            o = e["outcome"]
            if o["status"] == "ok":  # tokens per optimizer step: seq x m x accum x 8 ranks / C
                tokens = o["tokens_per_s"] * o["step_ms"] / 1e3
                check(abs(tokens - 8192 * m * a * 8) <= 1e-6 * tokens,
                      f"{e['changes']}: {tokens} tokens per step, not {8192 * m * a * 8}")

    # Micro-batch 16: 116.5 GB per rank even with --ac full and bf16 (Z3 already): only a
    # smaller micro-batch fits, and the step keeps 16 samples per rank in accum micro-steps.
    os.makedirs(args.workdir, exist_ok=True)
    cfg = os.path.join(args.workdir, "microbatch.yaml")
    if os.path.exists(cfg):
        os.remove(cfg)
    j = advise(args, llm + ["--micro-batch", "16", "--write-config", cfg])
    check(knob_values(j) == [(16, 1), (8, 2), (4, 4), (1, 16)],
          f"micro-batch 16: knob values {knob_values(j)}")
    check(j["memory_first"] == ["ac", "comm_dtype", "reshard", "micro_batch", "cp"],
          f"memory-saving knobs first, the micro-batch and the CP size last: "
          f"{j['memory_first']}")
    same_step_batch(j, 16, 1)
    at16 = [e for e in j["evaluated"] if e["micro_batch"] == 16]
    check(any(e["knobs"]["ac"] == "full" and e["knobs"]["comm_dtype"] == "bf16" and
              e["knobs"]["reshard"] == "z3" for e in at16),
          "the memory-saving knobs at micro-batch 16 together were not projected")
    check(all(e["outcome"]["status"] != "ok" for e in at16),
          "a candidate at micro-batch 16 fits: the case does not need the knob")
    win = j["winner"]
    m, a = win["micro_batch"], win["accum"]
    check(win["outcome"]["status"] == "ok" and m < 16 and m * a == 16,
          f"micro-batch 16 winner: {win['changes']} ({win['outcome']['status']})")
    check(f"--micro-batch={m}" in j["winner_flags"] and f"--accum={a}" in j["winner_flags"],
          f"winner flags {j['winner_flags']}")
    check(f"--micro-batch {m}" in j["winner_changed_flags"] and
          j["winner_changed_flags"].endswith(f"--accum {a}"),
          f"changed flags {j['winner_changed_flags']}")
    check(f"micro_batch={m} (accum {a})" in win["changes"], f"changes: {win['changes']}")
    # The config carries both: dmuon_project reproduces the winner's step.
    proj = json.loads(run([args.project, "--config", cfg, "--json", "--machine", "a800",
                           "--world-size", "8"]).stdout)
    got = proj["runs"][0]["step_ms"]
    check(abs(got - win["outcome"]["step_ms"]) <= 1e-9 * got,
          f"the winner's config projects {got} ms, the advisor said {win['outcome']['step_ms']}")
    print(f"microbatch 16: {win['changes']}: {win['outcome']['step_ms']:.1f} ms, "
          f"{win['outcome']['peak_GB']:.1f} GB (start {j['start']['outcome']['peak_GB']:.1f} GB)")

    # Micro-batch 4: does not fit as given (189 GB) but fits with --ac full: the smaller
    # micro-batches are projected and lose (each micro-step re-gathers the weights).
    j = advise(args, llm + ["--micro-batch", "4"])
    check(knob_values(j) == [(4, 1), (2, 2), (1, 4)],
          f"micro-batch 4: knob values {knob_values(j)}")
    same_step_batch(j, 4, 1)
    check(j["start"]["outcome"]["status"] == "oom", "micro-batch 4 should not fit as given")
    check({e["micro_batch"] for e in j["evaluated"]} == {4, 2, 1},
          "micro-batch 4: the smaller micro-batches were not projected")
    win = j["winner"]
    check(win["outcome"]["status"] == "ok" and (win["micro_batch"], win["accum"]) == (4, 1),
          f"micro-batch 4 fits without the knob, yet the winner is {win['changes']}")
    print(f"microbatch 4: {win['changes']}: {win['outcome']['step_ms']:.1f} ms, "
          f"{win['outcome']['peak_GB']:.1f} GB")

    # Micro-batch 1, and no --seq-len: no such knob.
    for extra in (llm + ["--micro-batch", "1"],
                  ["--topology-file", os.path.join(args.data, "unnamed_blocks.json"),
                   "--machine", "h100-ndr", "--world-size", "8"]):
        j = advise(args, extra)
        want = [(1, 1)] if "--seq-len" in extra else []
        check(knob_values(j) == want, f"{extra}: knob values {knob_values(j)}, expected {want}")
        check("micro_batch" not in j["memory_first"], "a knob without a choice searched first")
        shapes = {(e["micro_batch"], e["accum"] // e["cp"]) for e in j["evaluated"]}
        check(len(shapes) == 1, f"{extra}: several micro-batches projected: {shapes}")
    print("microbatch 1 and no --seq-len: no micro-batch knob")


def case_cp(args):
    seq = 131072
    llm = ["--topology", "llm", "--preset", "llama3-8b", "--machine", "h100-ndr",
           "--world-size", "64", "--seq-len", str(seq), "--micro-batch", "1"]
    os.makedirs(args.workdir, exist_ok=True)
    cfg = os.path.join(args.workdir, "cp.yaml")
    if os.path.exists(cfg):
        os.remove(cfg)
    j = advise(args, llm + ["--write-config", cfg])
    # 2C divides 131,072 and C divides 64 for every power of two to 64; accum x C / 1 is whole.
    check([(v["cp"], v["accum"]) for v in j["cp_values"]] == [(c, c) for c in
                                                               (1, 2, 4, 8, 16, 32, 64)],
          f"cp values {j['cp_values']}")
    check(j["memory_first"][-1] == "cp", f"the CP size is not the last memory knob: "
                                         f"{j['memory_first']}")
    for e in j["evaluated"]:
        check(e["knobs"]["cp"] == str(e["cp"]) and e["accum"] == e["cp"],
              f"{e['changes']}: accum {e['accum']} at --cp {e['cp']} (the start's accum x C)")
        o = e["outcome"]
        if o["status"] == "ok":  # each rank's tokens per step: seq / C x accum, 64 ranks
            tokens = o["tokens_per_s"] * o["step_ms"] / 1e3
            check(abs(tokens - seq * 64) <= 1e-6 * tokens,
                  f"{e['changes']}: {tokens} tokens per step, not {seq * 64}")
    at1 = [e for e in j["evaluated"] if e["cp"] == 1]
    # The activations are what overflows: every CP size is projected, not pruned.
    check({e["cp"] for e in j["evaluated"]} == {1, 2, 4, 8, 16, 32, 64},
          f"CP sizes projected: {sorted({e['cp'] for e in j['evaluated']})}")
    check(any(e["knobs"]["ac"] == "full" and e["knobs"]["comm_dtype"] == "bf16" for e in at1),
          "--ac full with bf16 at --cp 1 was not projected")
    check(all(e["outcome"]["status"] != "ok" for e in at1),
          "a candidate at --cp 1 fits: the case does not need the knob")
    win = j["winner"]
    c = win["cp"]
    check(win["outcome"]["status"] == "ok" and c > 1, f"winner {win['changes']}")
    check(f"--cp {c}" in j["winner_changed_flags"] and
          j["winner_changed_flags"].endswith(f"--accum {c}"),
          f"changed flags {j['winner_changed_flags']}")
    proj = json.loads(run([args.project, "--config", cfg, "--json", "--machine", "h100-ndr",
                           "--world-size", "64"]).stdout)
    got = proj["runs"][0]["step_ms"]
    check(abs(got - win["outcome"]["step_ms"]) <= 1e-9 * got,
          f"the winner's config projects {got} ms, the advisor said {win['outcome']['step_ms']}")
    p = run([args.mpiexec, args.npflag, "1", args.bench, "--config", cfg, "--steps", "1"],
            expect_rc=2)
    # One line of the tool's (mpiexec adds its own about the exit code).
    lines = [x for x in p.stderr.splitlines() if x.startswith("dmuon_bench")]
    check(len(lines) == 1 and f"--cp {c} is projected and searched, not run" in lines[0],
          f"dmuon_bench on the CP config: {p.stderr.strip()}")
    print(f"cp: {win['changes']}: {win['outcome']['step_ms']:.1f} ms, "
          f"{win['outcome']['peak_GB']:.1f} GB (start {j['start']['outcome']['peak_GB']:.1f} GB)")
    # No knob: a CPU machine (torch's ring wraps CUDA kernels), a vision stack, no --seq-len.
    host = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "project", "data",
                        "two_rank_host.yaml")
    for extra in (["--topology", "llm", "--preset", "llama3-8b", "--machine", host,
                   "--world-size", "2", "--seq-len", "4096", "--micro-batch", "1"],
                  ["--topology", "vla", "--machine", "h100-ndr", "--world-size", "8",
                   "--seq-len", "4096", "--micro-batch", "1"],
                  ["--topology", "llm", "--preset", "llama3-8b", "--machine", "h100-ndr",
                   "--world-size", "8"]):
        j = advise(args, extra)
        check([(v["cp"], v["accum"]) for v in j["cp_values"]] == [(1, 1)],
              f"{extra}: cp values {j['cp_values']}")
        check({e["cp"] for e in j["evaluated"]} == {1}, f"{extra}: a CP size above 1 projected")
    print("cp on a CPU machine, a vision model, without --seq-len: no knob")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("case", choices=["idle", "hsdp", "memcap", "config", "deepseek",
                                     "microbatch", "cp"])
    ap.add_argument("--advise", required=True)
    ap.add_argument("--project")
    ap.add_argument("--bench")
    ap.add_argument("--mpiexec", default="mpiexec")
    ap.add_argument("--npflag", default="-n")
    ap.add_argument("--data", required=True)
    ap.add_argument("--workdir", default="advise_work")
    args = ap.parse_args()
    globals()["case_" + args.case](args)
    print(f"OK: advise {args.case}")


if __name__ == "__main__":
    main()
