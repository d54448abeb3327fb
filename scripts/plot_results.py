#!/usr/bin/env python3
"""Plots dmuon results files (HDF5, layout in results/README.md) as PNGs.

    python3 scripts/plot_results.py results.h5 [more.h5 ...] -o outdir

Writes into outdir:
  step_breakdown.png          median per-phase time (slowest rank) stacked, per run
  hook_collective_counts.png  hook sites, hook calls/step and collective calls/step per run
  rank_loads.png              ownership cost load per slot (rank), one panel per run
  scaling.png                 median step time vs world size (only when the inputs hold
                              several world sizes), one curve per boundary/method and per
                              source (measured: solid; dmuon_project's projected: dashed),
                              each with its ideal-scaling line (dotted), and the parallel
                              efficiency below; strong or weak scaling and the global batch
                              in the title

Needs h5py and matplotlib (Debian: python3-h5py python3-matplotlib). Exits 2 with one line
on stderr for a missing or unreadable file.
"""

import argparse
import os
import sys
import textwrap

try:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # noqa: E402
    import numpy as np  # noqa: E402
except ImportError:  # pragma: no cover
    print("plot_results.py: error: matplotlib/numpy are not installed for this python3 "
          "(apt-get install python3-matplotlib, or run Debian's /usr/bin/python3)", file=sys.stderr)
    sys.exit(2)

try:
    import h5py  # noqa: E402
except ImportError:  # pragma: no cover
    print("plot_results.py: error: h5py is not installed (apt-get install python3-h5py)",
          file=sys.stderr)
    sys.exit(2)

SCHEMA_VERSION = "1"


class BadInput(Exception):
    pass


def text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


def load(path):
    """Returns a list of run dicts from one results file."""
    if not os.path.isfile(path):
        raise BadInput(f"cannot open '{path}': no such file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise BadInput(f"'{path}' is not an HDF5 file ({e.__class__.__name__})")
    runs = []
    with f:
        if text(f.attrs.get("format", "")) != "dmuon-results":
            raise BadInput(f"'{path}' is not a dmuon results file")
        if text(f.attrs.get("schema_version", "")) != SCHEMA_VERSION:
            raise BadInput(f"'{path}': unsupported schema version "
                           f"'{text(f.attrs.get('schema_version', ''))}'")
        try:
            for i in range(int(f.attrs["num_runs"])):
                g = f["runs"][str(i)]
                b = g["boundary"]
                run = {
                    "file": os.path.basename(path),
                    "index": i,
                    "status": text(g.attrs["status"]),
                    "topology": text(g.attrs["topology"]),
                    "preset": text(g.attrs["preset"]),
                    "method": text(g.attrs["method"]),
                    "reshard": text(g.attrs["reshard"]),
                    "world": int(g.attrs["world_size"]),
                    "replicate": int(g.attrs["replicate"]),
                    # Absent in files written before these options existed.
                    "grad_reduce": text(g.attrs.get("grad_reduce", "per-param")),
                    "prefetch": int(g.attrs.get("prefetch", 0)),
                    "owners": text(g["partition"].attrs["strategy"]),
                    "boundary": text(b.attrs["label"]) or text(b.attrs["spec"]),
                    "phases": [text(p) for p in g["timings"]["phases"][()]],
                    "seconds": np.asarray(g["timings"]["seconds"][()], dtype=float),
                    "kinds": [text(k) for k in g["collectives"]["kinds"][()]],
                    "calls": np.asarray(g["collectives"]["calls_per_step"][()]),
                    "sites": len(b["sites"]["path"]),
                    "cost_loads": np.asarray(g["partition"]["cost_loads"][()]),
                    "slot_rank": np.asarray(g["partition"]["slot_rank"][()]),
                    "lower_bound": float(g["partition"].attrs["lower_bound"]),
                    "summary": {k: v for k, v in g["summary"].attrs.items()},
                    "config": text(g.attrs.get("config", "")),
                }
                runs.append(run)
        except KeyError as e:
            raise BadInput(f"'{path}' is not a complete dmuon results file (missing {e})")
    return runs


def variant(r):
    """method/reshard plus whatever else distinguishes runs of one boundary: the owner strategy
    (dmuon), HSDP, the non-reference engine options."""
    s = f"{r['method']}/{r['reshard']}"
    if r["method"] == "dmuon":
        s += f" {r['owners']}"
    if r["replicate"] > 1:
        s += f" R={r['replicate']}"
    if r["grad_reduce"] != "per-param":
        s += f" {r['grad_reduce']}"
    if r["prefetch"] > 0:
        s += f" pf{r['prefetch']}"
    return s


def label(r, with_world=False):
    # Boundary specs run long ("types:A,B,C (strict)"): wrap them so neighbours don't overlap.
    boundary = "\n".join(textwrap.wrap(r["boundary"].replace(",", ", "), 18)) or "-"
    s = boundary + "\n" + "\n".join(textwrap.wrap(variant(r), 22))
    if with_world:
        s += f" n={r['world']}"
    return s


def median_phases(r):
    """Per phase: median over steps of the slowest rank (ms); matches summary.hpp."""
    sec = r["seconds"]
    if sec.size == 0:
        return np.zeros(len(r["phases"]))
    return 1e3 * np.median(sec.max(axis=1), axis=0)


def step_ms(r):
    if "step_ms" in r["summary"]:
        return float(r["summary"]["step_ms"])
    sec = r["seconds"]
    return float(1e3 * np.median(sec.sum(axis=2).max(axis=1))) if sec.size else float("nan")


def ordered_union(lists):
    """Every name of the lists once, in order of first appearance."""
    out = []
    for names in lists:
        for n in names:
            if n not in out:
                out.append(n)
    return out


def plot_breakdown(runs, out, several_worlds):
    ok = [r for r in runs if r["status"] == "ok"]
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(runs)), 4.5))
    phases = ordered_union(r["phases"] for r in ok)
    x = np.arange(len(runs))
    bottom = np.zeros(len(runs))
    for p in phases:
        h = np.array([median_phases(r)[r["phases"].index(p)]
                      if r["status"] == "ok" and p in r["phases"] else 0.0 for r in runs])
        ax.bar(x, h, bottom=bottom, label=p)
        bottom += h
    for i, r in enumerate(runs):
        if r["status"] != "ok":
            ax.text(i, 0, "rejected\nat set-up", ha="center", va="bottom", fontsize=8, color="red")
    ax.set_xticks(x)
    ax.set_xticklabels([label(r, several_worlds) for r in runs], fontsize=7)
    ax.set_ylabel("median time per step, slowest rank [ms]")
    ax.set_title("Step-time breakdown per boundary / method")
    if phases:
        ax.legend(fontsize=8)
    synthetic = any(text(r["summary"].get("timings_source", "")) == "synthetic-example"
                    for r in runs)
    if synthetic:
        fig.text(0.99, 0.01, "synthetic timings (example file)", ha="right", fontsize=7,
                 color="gray")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "step_breakdown.png"), dpi=100)
    plt.close(fig)


def plot_counts(runs, out, several_worlds):
    fig, ax = plt.subplots(figsize=(max(6, 1.6 * len(runs)), 4.5))
    kinds = ordered_union(r["kinds"] for r in runs)
    series = [("hook sites", [r["sites"] for r in runs]),
              ("hook calls/step", [float(r["summary"].get("hook_calls_per_step", 0))
                                   for r in runs])]
    for k in kinds:
        series.append((f"{k} calls/step (max rank)",
                       [int(r["calls"][r["kinds"].index(k)].max())
                        if k in r["kinds"] and r["calls"].size else 0 for r in runs]))
    x = np.arange(len(runs))
    w = 0.8 / max(1, len(series))
    for j, (name, vals) in enumerate(series):
        ax.bar(x + (j - (len(series) - 1) / 2) * w, vals, width=w, label=name)
    ax.set_xticks(x)
    ax.set_xticklabels([label(r, several_worlds) for r in runs], fontsize=7)
    ax.set_ylabel("count")
    ax.set_title("Hook and collective counts per run")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "hook_collective_counts.png"), dpi=100)
    plt.close(fig)


def plot_loads(runs, out, several_worlds):
    ok = [r for r in runs if r["status"] == "ok" and r["cost_loads"].size]
    n = max(1, len(ok))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 3.2 * rows), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, ok):
        ax.set_visible(True)
        ax.bar(r["slot_rank"], r["cost_loads"], color="tab:blue")
        ax.axhline(r["lower_bound"], color="red", linestyle="--", linewidth=1,
                   label="lower bound")
        ax.set_title(label(r, several_worlds).replace("\n", "  "), fontsize=8)
        ax.set_xlabel("rank")
        ax.set_ylabel("cost load")
        ax.legend(fontsize=7)
    if not ok:
        axes.flat[0].set_visible(True)
        axes.flat[0].text(0.5, 0.5, "no successful runs", ha="center")
    fig.suptitle("Ownership cost load per rank")
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rank_loads.png"), dpi=100)
    plt.close(fig)


def batch_of(r):
    """(kind, samples): ("global", n) for --global-tokens n, ("per_rank", t) for --tokens t."""
    for line in r["config"].splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "global_tokens":
            return ("global", int(value))
        if key.strip() == "tokens":
            return ("per_rank", int(value))
    return ("unknown", 0)


def source_of(r):
    """"projected" for dmuon_project's runs, "measured" for everything else (the bench's, and
    the synthetic examples results_testgen writes)."""
    return "projected" if text(r["summary"].get("timings_source", "")) == "projected" \
        else "measured"


def plot_scaling(runs, out):
    # Per curve (configuration x source) and world size: the median over repetitions.
    curves = {}
    batches = set()
    for r in runs:
        if r["status"] != "ok":
            continue
        source = source_of(r)
        key = (f"{r['topology']}/{r['preset']} {r['boundary']} {variant(r)}", source)
        curves.setdefault(key, {}).setdefault(r["world"], []).append(step_ms(r))
        batches.add(batch_of(r))
    curves = {k: {w: float(np.median(v)) for w, v in pts.items()} for k, pts in curves.items()
              if len(pts) >= 2}
    if not curves:
        return False  # no configuration ran at two world sizes
    # Strong scaling keeps the global batch (--global-tokens); weak keeps the per-rank one.
    kinds = {b[0] for b in batches}
    if kinds == {"global"}:
        mode = "strong"
        title = "strong scaling, global batch " + ", ".join(
            str(n) for n in sorted({b[1] for b in batches})) + " samples"
    elif kinds == {"per_rank"}:
        mode = "weak"
        title = "weak scaling, " + ", ".join(
            str(n) for n in sorted({b[1] for b in batches})) + " samples per rank"
    else:
        mode = "strong" if "global" in kinds else "weak"
        title = "scaling (mixed batch settings: ideal lines as " + mode + ")"
    fig, (ax, eff) = plt.subplots(2, 1, figsize=(12, 7), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    configs = sorted({k[0] for k in curves})
    for (config, source), pts in sorted(curves.items()):
        color = colors[configs.index(config) % len(colors)]
        w = sorted(pts)
        t = [pts[x] for x in w]
        projected = source == "projected"
        style = dict(color=color, linestyle="--" if projected else "-",
                     marker="s" if projected else "o",
                     markerfacecolor="none" if projected else color)
        ax.plot(w, t, label=textwrap.fill(f"{config} ({source})", 46), **style)
        w0, t0 = w[0], t[0]
        ideal = [t0 * w0 / x if mode == "strong" else t0 for x in w]
        ax.plot(w, ideal, color=color, linestyle=":", linewidth=1)
        e = [(t0 * w0 / (x * y) if mode == "strong" else t0 / y) for x, y in zip(w, t)]
        eff.plot(w, e, **style)
    ax.plot([], [], color="gray", linestyle=":", linewidth=1, label="ideal scaling")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylabel("median step time [ms]")
    ax.set_title(title)
    eff.axhline(1.0, color="gray", linestyle=":", linewidth=1)
    eff.set_xlabel("world size (ranks)")
    eff.set_ylabel("parallel efficiency")
    eff.set_ylim(bottom=0)
    # The legend goes beside the axes, never over the data.
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0)
    fig.subplots_adjust(left=0.07, right=0.64, hspace=0.08)
    fig.savefig(os.path.join(out, "scaling.png"), dpi=100)
    plt.close(fig)
    return True


def main(argv):
    ap = argparse.ArgumentParser(description="Plot dmuon results files as PNGs.")
    ap.add_argument("files", nargs="+", help="results files (HDF5)")
    ap.add_argument("-o", "--output", default="plots", help="output directory (default: plots)")
    args = ap.parse_args(argv)
    runs = []
    for p in args.files:
        runs.extend(load(p))
    if not runs:
        raise BadInput("the input files hold no runs")
    try:
        os.makedirs(args.output, exist_ok=True)
    except OSError as e:
        raise BadInput(f"cannot create output directory '{args.output}': {e.strerror}")
    worlds = sorted({r["world"] for r in runs})
    several = len(worlds) > 1
    plot_breakdown(runs, args.output, several)
    plot_counts(runs, args.output, several)
    plot_loads(runs, args.output, several)
    written = ["step_breakdown.png", "hook_collective_counts.png", "rank_loads.png"]
    if several and plot_scaling(runs, args.output):
        written.append("scaling.png")
    print(f"# wrote {', '.join(written)} to {args.output} ({len(runs)} runs, "
          f"world sizes {', '.join(map(str, worlds))})")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"plot_results.py: error: {e}", file=sys.stderr)
        sys.exit(2)
