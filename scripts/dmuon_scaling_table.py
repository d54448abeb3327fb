#!/usr/bin/env python3
"""The DMuon scaling table of docs/PROJECTION.md and the README's DMuon-vs-AdamW statements.

For Llama-3-8B, Qwen2.5-7B and Llama-3-70B on H100 NDR nodes (machine h100-ndr), at 8, 64, 512,
4,096 and 16,384 ranks, under FSDP (R = 1) and HSDP (shard groups of G = 64 ranks, from 512 on),
with DMuon under Z2 and Z3 (the reference's step, --dmuon-schedule reference) against AdamW
under FSDP2's default (--baseline-reshard z3): one dmuon_project --json run per cell, and per
DMuon row its step and peak memory against AdamW's with the step difference in named terms
(cost_vs_adamw, docs/PROJECTION.md "DMuon against AdamW"). Sequence 4096, micro-batch 1 per
rank, bf16 weights and gradients, the 2-D projections dedicated, the recommended boundary,
selective activation checkpointing (Llama-3-70B: full, its activations fit no other way).

  scripts/dmuon_scaling_table.py --project build/bin/dmuon_project [--write]

Prints the table and the statements; --write replaces them in docs/PROJECTION.md and README.md
between their "dmuon-scaling" markers. Exit 0, or 2 when dmuon_project fails (its message
shown)."""
import argparse
import json
import os
import subprocess
import sys

MODELS = [("llama3-8b", "Llama-3-8B", "selective"), ("qwen2.5-7b", "Qwen2.5-7B", "selective"),
          ("llama3-70b", "Llama-3-70B", "full")]
WORLDS = [8, 64, 512, 4096, 16384]
HSDP_SHARD = 64
COMMON = ["--topology", "llm", "--machine", "h100-ndr", "--seq-len", "4096", "--micro-batch", "1",
          "--comm-dtype", "bf16", "--reduce-dtype", "bf16", "--dedicate", "ndim=2&contains:proj",
          "--boundary", "recommended", "--method", "dmuon,fsdp-adamw",
          "--baseline-reshard", "z3", "--dmuon-schedule", "reference", "--json"]
TERMS = [("owners_newton_schulz", "NS"), ("publish_wait", "publish"),
         ("exposed_reduce_tail", "reduce tail"), ("broadcast_latency", "bcast lat."),
         ("communicator_serialisation", "serial."), ("barrier_wait", "barrier"),
         ("other", "other")]
HERE = os.path.dirname(os.path.abspath(__file__))


def project(binary, preset, ac, world, replicate, reshard):
    cmd = [binary] + COMMON + ["--preset", preset, "--ac", ac, "--world-size", str(world),
                               "--replicate", str(replicate), "--reshard", reshard]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        print(f"{' '.join(cmd)} exited {p.returncode}:\n{p.stderr}", file=sys.stderr)
        sys.exit(2)
    runs = {r["method"]: r for r in json.loads(p.stdout)["runs"]}
    return runs["dmuon"], runs["fsdp-adamw"]


def cells():
    for preset, name, ac in MODELS:
        for world in WORLDS:
            layouts = [("FSDP", 1)]
            if world > HSDP_SHARD:
                layouts.append(("HSDP", world // HSDP_SHARD))
            for layout, replicate in layouts:
                for reshard in ("z2", "z3"):
                    yield preset, name, ac, world, layout, replicate, reshard


def gb(r):
    return r["memory"]["peak_GB"]


def row(name, world, layout, replicate, reshard, d, a):
    grid = f"{replicate}x{world // replicate}"
    mem = f"{gb(d):.1f} / {gb(a):.1f}"
    if d["status"] != "ok" or a["status"] != "ok":
        status = lambda r: "oom" if r["status"] == "oom" else (f"{r['step_ms']:,.0f}"
                                                                if r["status"] == "ok" else "-")
        return (f"| {name} | {world:,} | {layout} {grid} | {reshard.upper()} | {status(a)} | "
                f"{status(d)} | | {mem} |" + " |" * len(TERMS)), None
    ratio = d["step_ms"] / a["step_ms"]
    c = d["cost_vs_adamw"]
    terms = " | ".join(f"{c[t]:+,.1f}" for t, _ in TERMS)
    line = (f"| {name} | {world:,} | {layout} {grid} | {reshard.upper()} | {a['step_ms']:,.0f} | "
            f"{d['step_ms']:,.0f} | {ratio:.3f} | {mem} | {terms} |")
    return line, ratio


def table(binary):
    head = ("| model | world | layout R×G | DMuon Z | AdamW ms | DMuon ms | D/A | peak GB D / A | "
            + " | ".join(label for _, label in TERMS) + " |")
    lines = [head, "|" + "---|" * (8 + len(TERMS))]
    results = []
    for preset, name, ac, world, layout, replicate, reshard in cells():
        d, a = project(binary, preset, ac, world, replicate, reshard)
        line, ratio = row(name, world, layout, replicate, reshard, d, a)
        lines.append(line)
        results.append((name, world, layout, reshard, ratio, d, a))
    return "\n".join(lines), results


def statements(results):
    out = []
    for _, name, _ in MODELS:
        mine = [r for r in results if r[0] == name and r[4] is not None]
        if not mine:
            out.append(f"* **{name}**: every cell out of memory on 80 GB H100s.")
            continue
        lo = min(mine, key=lambda r: r[4])
        hi = max(mine, key=lambda r: r[4])
        at8 = [r for r in mine if r[1] == 8]
        ns = max(mine, key=lambda r: r[5]["cost_vs_adamw"]["owners_newton_schulz"])
        oom = sorted({f"{r[1]:,} {r[2]} {r[3].upper()}" for r in results
                      if r[0] == name and r[4] is None})
        s = (f"* **{name}**: DMuon's step is {lo[4]:.3f}× to {hi[4]:.3f}× AdamW's "
             f"({lo[1]:,} ranks {lo[2]} {lo[3].upper()} to {hi[1]:,} ranks {hi[2]} {hi[3].upper()})")
        if at8:
            r8 = min(at8, key=lambda r: r[4])
            c = r8[5]["cost_vs_adamw"]
            s += (f"; on 8 ranks {r8[4]:.3f}× ({r8[5]['step_ms'] - r8[6]['step_ms']:+,.0f} ms: "
                  f"owners' Newton–Schulz {c['owners_newton_schulz']:+,.0f}, publish wait "
                  f"{c['publish_wait']:+,.0f}, exposed reduce tail {c['exposed_reduce_tail']:+,.0f}, "
                  f"other {c['other']:+,.0f})")
        s += (f"; the owners' Newton–Schulz is largest at {ns[1]:,} ranks "
              f"({ns[5]['cost_vs_adamw']['owners_newton_schulz']:,.0f} ms)")
        if oom:
            s += f"; out of memory: {', '.join(oom)}"
        out.append(s + ".")
    return "\n".join(out)


def replace_between(path, text):
    begin, end = "<!-- dmuon-scaling:begin -->", "<!-- dmuon-scaling:end -->"
    doc = open(path).read()
    if begin not in doc or end not in doc:
        print(f"{path}: no {begin} ... {end} markers", file=sys.stderr)
        sys.exit(2)
    head, rest = doc.split(begin, 1)
    _, tail = rest.split(end, 1)
    open(path, "w").write(head + begin + "\n" + text + "\n" + end + tail)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--project", default=os.path.join(HERE, "..", "build", "bin",
                                                      "dmuon_project"))
    ap.add_argument("--write", action="store_true")
    a = ap.parse_args()
    text, results = table(a.project)
    said = statements(results)
    print(text + "\n\n" + said)
    if a.write:
        root = os.path.join(HERE, "..")
        replace_between(os.path.join(root, "docs", "PROJECTION.md"), text)
        replace_between(os.path.join(root, "README.md"), said)


if __name__ == "__main__":
    main()
