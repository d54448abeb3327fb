#!/usr/bin/env python3
"""Plots dmuon results files (HDF5, layout in results/README.md) as PNGs.

    python3 scripts/plot_results.py results.h5 [more.h5 ...] [-o outdir]

Writes into outdir (default: plots):
  step_breakdown.png          per run: the step time (median over samples of the slowest rank,
                              whiskers min-max) and each phase on a log axis, so small phases
                              stay visible next to fsdp-muon's optimizer
  hook_collective_counts.png  per run and collective kind: calls per step and bytes per step
                              (max over ranks) on log axes, hook sites and hook calls annotated
  rank_loads.png              ownership cost load per rank with the lower bound; idle ranks
                              (owning nothing) marked
  scaling.png                 median step time vs world size (only when the inputs hold several
                              world sizes), one curve per boundary/method and per source
                              (measured: solid; dmuon_project's projected: dashed), min-max
                              whiskers, each with its ideal-scaling line (dotted), and the
                              parallel efficiency below; strong or weak scaling and the global
                              batch in the title

Every title names the topology, world size, device and hardware. Needs h5py and matplotlib
(Debian: python3-h5py python3-matplotlib). Works from any directory. Exit codes: 0 written,
2 bad input (a missing, damaged or foreign file: one line on stderr naming it).
"""

import argparse
import os
import sys
import textwrap

PROG = "plot_results.py"


def die(msg, code=2):
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(code)


try:
    import matplotlib
    import numpy as np  # noqa: E402
except ImportError:  # pragma: no cover
    die("matplotlib/numpy are not installed for this python3 "
        "(apt-get install python3-matplotlib, or run Debian's /usr/bin/python3)")

plt = None  # pyplot, imported once the inputs have read (a bad file is refused without it)


def load_pyplot():
    global plt
    matplotlib.use("Agg")
    import matplotlib.pyplot as pyplot  # noqa: E402

    plt = pyplot

try:
    import h5py  # noqa: E402
except ImportError:  # pragma: no cover
    die("h5py is not installed (apt-get install python3-h5py)")

SCHEMA_VERSIONS = ("1", "2")
READ_TIMEOUT_S = 60


class BadInput(Exception):
    pass


def text(v):
    if isinstance(v, bytes):
        return v.decode("utf-8", errors="replace")
    if isinstance(v, np.ndarray):
        raise BadInput(f"expected a scalar attribute, found an array of {v.size} values")
    return str(v)


def scalar(v, kind, what):
    """An attribute value that must be a single number."""
    arr = np.asarray(v)
    if arr.shape != ():
        raise BadInput(f"{what}: expected a scalar, found an array of shape {arr.shape}")
    if arr.dtype.kind not in "iuf":
        raise BadInput(f"{what}: expected a number, found {arr.dtype}")
    x = kind(arr)
    return x


def array(g, name, ndim, kind="f"):
    """A numeric dataset of `ndim` dimensions (read into memory)."""
    if name not in g:
        raise BadInput(f"missing dataset {g.name}/{name}")
    d = g[name]
    if not isinstance(d, h5py.Dataset):
        raise BadInput(f"{g.name}/{name} is not a dataset")
    if d.ndim != ndim:
        raise BadInput(f"{g.name}/{name}: expected {ndim} dimensions, found {d.ndim}")
    if d.dtype.kind not in "iuf":
        raise BadInput(f"{g.name}/{name}: expected numbers, found {d.dtype}")
    if d.size > 50_000_000:
        raise BadInput(f"{g.name}/{name}: {d.size} values, more than a results file holds")
    return np.asarray(d[()], dtype=float if kind == "f" else np.int64)


def strings(g, name):
    if name not in g:
        raise BadInput(f"missing dataset {g.name}/{name}")
    d = g[name]
    if not isinstance(d, h5py.Dataset) or d.ndim != 1 or d.dtype.kind not in "OSU":
        raise BadInput(f"{g.name}/{name}: expected a list of strings")
    return [text(x) for x in d[()]]


def read_file(path):
    """Returns (provenance dict, list of run dicts); BadInput for anything unexpected."""
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise BadInput(f"'{path}' is not an HDF5 file or is damaged ({str(e).splitlines()[0]})")
    runs = []
    with f:
        if text(f.attrs.get("format", "")) != "dmuon-results":
            raise BadInput(f"'{path}' is not a dmuon results file")
        version = text(f.attrs.get("schema_version", ""))
        if version not in SCHEMA_VERSIONS:
            raise BadInput(f"'{path}': unsupported schema version '{version}' "
                           f"(supported: {', '.join(SCHEMA_VERSIONS)})")
        prov = {
            "device": text(f.attrs.get("device", "host")) or "host",
            "device_model": text(f.attrs.get("device_model", "")),
            "blas_core": text(f.attrs.get("blas_core", "")),
            "hostnames": text(f.attrs.get("hostnames", "")),
        }
        n = scalar(f.attrs["num_runs"], int, "num_runs")
        if "runs" not in f or n != len(f["runs"]):
            raise BadInput(f"num_runs is {n} but /runs holds "
                           f"{len(f['runs']) if 'runs' in f else 0} groups")
        for i in range(n):
            g = f["runs"][str(i)]
            b = g["boundary"]
            world = scalar(g.attrs["world_size"], int, "world_size")
            if world < 1:
                raise BadInput(f"/runs/{i}: world size {world}")
            t = g["timings"]
            phases = strings(t, "phases")
            seconds = array(t, "seconds", 3)
            if seconds.shape[2] != len(phases) or (seconds.shape[0] and seconds.shape[1] != world):
                raise BadInput(f"/runs/{i}/timings/seconds: shape {seconds.shape} does not match "
                               f"{len(phases)} phases and {world} ranks")
            step = array(t, "step_seconds", 2) if "step_seconds" in t else None
            if step is not None and step.shape != seconds.shape[:2]:
                raise BadInput(f"/runs/{i}/timings/step_seconds: shape {step.shape}")
            c = g["collectives"]
            kinds = strings(c, "kinds")
            calls = array(c, "calls_per_step", 2, "i")
            nbytes = array(c, "bytes_per_rank_per_step", 2, "i")
            if calls.shape != (len(kinds), world if kinds else calls.shape[1]) or \
                    nbytes.shape != calls.shape:
                raise BadInput(f"/runs/{i}/collectives: shapes {calls.shape}, {nbytes.shape} for "
                               f"{len(kinds)} kinds and {world} ranks")
            p = g["partition"]
            loads = array(p, "cost_loads", 1)
            slot_rank = array(p, "slot_rank", 1, "i")
            if loads.shape != slot_rank.shape:
                raise BadInput(f"/runs/{i}/partition: {loads.size} loads for {slot_rank.size} slots")
            units = p["cost_loads"].attrs.get("units", "cost units")
            run = {
                "file": os.path.basename(path),
                "index": i,
                "status": text(g.attrs["status"]),
                "topology": text(g.attrs["topology"]),
                "preset": text(g.attrs["preset"]),
                "method": text(g.attrs["method"]),
                "reshard": text(g.attrs["reshard"]),
                "world": world,
                "replicate": scalar(g.attrs["replicate"], int, "replicate"),
                # Absent in files written before these options existed.
                "grad_reduce": text(g.attrs.get("grad_reduce", "per-param")),
                "prefetch": scalar(g.attrs.get("prefetch", 0), int, "prefetch"),
                "owners": text(p.attrs["strategy"]),
                "boundary": text(b.attrs["label"]) or text(b.attrs["spec"]),
                "phases": phases,
                "seconds": seconds,
                "step_seconds": step,
                "kinds": kinds,
                "calls": calls,
                "bytes": nbytes,
                "sites": len(strings(b["sites"], "path")),
                "cost_loads": loads,
                "load_units": text(units),
                "slot_rank": slot_rank,
                "lower_bound": scalar(p.attrs["lower_bound"], float, "lower_bound"),
                "summary": {k: v for k, v in g["summary"].attrs.items()},
                "config": text(g.attrs.get("config", "")),
                "prov": prov,
            }
            runs.append(run)
    return runs


def load(path):
    """Reads one file. The HDF5 library can crash or hang on damaged metadata, so a child
    process reads it first; only a clean read there is repeated here."""
    if not os.path.exists(path):
        raise BadInput(f"cannot open '{path}': no such file")
    if not os.path.isfile(path):
        raise BadInput(f"cannot open '{path}': not a regular file")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        code, msg = 0, b""
        try:
            read_file(path)
        except BadInput as e:
            code, msg = 2, str(e).encode()
        except Exception as e:  # noqa: BLE001 - any failure of a damaged file
            code, msg = 3, f"{e.__class__.__name__}: {str(e).splitlines()[0] if str(e) else ''}".encode()
        os.write(w, msg[:4000])
        os._exit(code)
    os.close(w)
    import select
    chunks = []
    ready, _, _ = select.select([r], [], [], READ_TIMEOUT_S)
    timed_out = not ready
    while ready:
        data = os.read(r, 4096)
        if not data:
            break
        chunks.append(data)
        ready, _, _ = select.select([r], [], [], READ_TIMEOUT_S)
        timed_out = not ready
    os.close(r)
    if timed_out:
        os.kill(pid, 9)
    _, status = os.waitpid(pid, 0)
    msg = b"".join(chunks).decode(errors="replace")
    if timed_out:
        raise BadInput(f"'{path}' is damaged: reading it did not finish within {READ_TIMEOUT_S} s")
    if os.WIFSIGNALED(status):
        raise BadInput(f"'{path}' is damaged: its metadata crashes the HDF5 library "
                       f"(signal {os.WTERMSIG(status)})")
    code = os.WEXITSTATUS(status)
    if code != 0:
        detail = msg if msg.startswith("'" + path) else f"'{path}' is damaged or not a dmuon " \
                                                        f"results file: {msg}"
        raise BadInput(detail)
    try:
        return read_file(path)
    except BadInput:
        raise
    except Exception as e:  # noqa: BLE001
        raise BadInput(f"'{path}' is damaged or not a dmuon results file: {e.__class__.__name__}")


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


def label(r, with_world=False, with_file=False):
    # Boundary specs run long ("types:A,B,C (strict)"): wrap them so neighbours don't overlap.
    boundary = "\n".join(textwrap.wrap(r["boundary"].replace(",", ", "), 18)) or "-"
    s = boundary + "\n" + "\n".join(textwrap.wrap(variant(r), 22))
    if with_world:
        s += f" n={r['world']}"
    if with_file:
        s += f"\n[{r['file']}]"
    return s


def step_samples_ms(r):
    """Per sample, the slowest rank's step time (ms): the wall step when the file has it, else
    the sum over the disjoint phases (schema 1)."""
    if r["step_seconds"] is not None and r["step_seconds"].size:
        return 1e3 * r["step_seconds"].max(axis=1)
    sec = r["seconds"]
    return 1e3 * sec.sum(axis=2).max(axis=1) if sec.size else np.zeros(0)


def phase_samples_ms(r, p):
    sec = r["seconds"]
    return 1e3 * sec[:, :, p].max(axis=1) if sec.size else np.zeros(0)


def hardware(runs):
    """'device model, BLAS kernels' of the inputs (all distinct ones); 'PROJECTED on machine M'
    for a projected run."""
    seen = []
    for r in runs:
        # A projected run ran nowhere: its hardware is the machine model it was projected on,
        # not the host that computed the projection.
        if text(r["summary"].get("timings_source", "")) == "projected":
            s = f"PROJECTED on machine {text(r['summary'].get('machine', '')) or 'unknown'}"
            if s not in seen:
                seen.append(s)
            continue
        p = r["prov"]
        s = p["device"]
        if p["device_model"]:
            s += f" ({p['device_model']}"
            s += f", OpenBLAS {p['blas_core']})" if p["device"] == "host" and p["blas_core"] else ")"
        if s not in seen:
            seen.append(s)
    return "; ".join(seen) or "unknown hardware"


def title(what, runs):
    topo = sorted({f"{r['topology']}/{r['preset'] or 'file'}" for r in runs})
    worlds = sorted({r["world"] for r in runs})
    return (f"{what}\n{', '.join(topo)}, world {', '.join(map(str, worlds))}, "
            f"{textwrap.shorten(hardware(runs), 90)}")


def plot_breakdown(runs, out, several_worlds, several_files):
    ok = [r for r in runs if r["status"] == "ok"]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 1.15 * len(runs) + 2), 9),
                                   sharex=True, gridspec_kw={"height_ratios": [1, 1.3]})
    x = np.arange(len(runs))
    med, lo, hi = [], [], []
    for r in runs:
        s = step_samples_ms(r) if r["status"] == "ok" else np.zeros(0)
        if s.size:
            m = float(np.median(s))
            med.append(m)
            lo.append(m - float(s.min()))
            hi.append(float(s.max()) - m)
        else:
            med.append(0.0)
            lo.append(0.0)
            hi.append(0.0)
    ax1.bar(x, med, yerr=[lo, hi], capsize=4, color="tab:gray")
    for i, r in enumerate(runs):
        if r["status"] != "ok":
            ax1.text(i, 0, "rejected\nat set-up", ha="center", va="bottom", fontsize=7, color="red")
    ax1.set_ylabel("step time, slowest rank [ms]\n(median, whiskers min-max over samples)")
    ax1.set_title("whole step", fontsize=9)

    phases = []
    for r in ok:
        for p in r["phases"]:
            if p not in phases:
                phases.append(p)
    w = 0.8 / max(1, len(phases))
    floor = 1e-3  # ms: phases below 1 us are drawn at the floor
    smallest = None
    for j, p in enumerate(phases):
        vals, errs_lo, errs_hi = [], [], []
        for r in runs:
            s = (phase_samples_ms(r, r["phases"].index(p))
                 if r["status"] == "ok" and p in r["phases"] and r["seconds"].size else None)
            if s is not None and float(np.median(s)) > 0:  # a phase a method does not have: none
                m = max(float(np.median(s)), floor)
                vals.append(m)
                errs_lo.append(m - max(float(s.min()), floor))
                errs_hi.append(max(float(s.max()) - m, 0.0))
                smallest = m if smallest is None else min(smallest, m)
            else:
                vals.append(np.nan)
                errs_lo.append(0)
                errs_hi.append(0)
        ax2.bar(x + (j - (len(phases) - 1) / 2) * w, vals, width=w, label=p,
                yerr=[errs_lo, errs_hi], capsize=2)
    ax2.set_yscale("log")
    if smallest is not None:
        ax2.set_ylim(bottom=smallest / 3)
    ax2.set_xticks(x)
    ax2.set_xticklabels([label(r, several_worlds, several_files) for r in runs], fontsize=6)
    ax2.set_ylabel("phase time, slowest rank [ms] (log)")
    ax2.set_title("phases, median of the slowest rank (whiskers min-max), log axis", fontsize=9)
    if phases:
        ax2.legend(fontsize=7, ncol=2)
    synthetic = any(text(r["summary"].get("timings_source", "")) == "synthetic-example"
                    for r in runs)
    if synthetic:
        fig.text(0.99, 0.01, "synthetic timings (example file)", ha="right", fontsize=7,
                 color="gray")
    fig.suptitle(title("Step time per boundary / method", runs), fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "step_breakdown.png"), dpi=110)
    plt.close(fig)


def plot_counts(runs, out, several_worlds, several_files):
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 1.9 * len(runs)), 7.5), sharex=True)
    kinds = []
    for r in runs:
        for k in r["kinds"]:
            if k not in kinds:
                kinds.append(k)
    x = np.arange(len(runs))
    w = 0.8 / max(1, len(kinds))
    for j, k in enumerate(kinds):
        calls, nbytes = [], []
        for r in runs:
            if k in r["kinds"] and r["calls"].size:
                i = r["kinds"].index(k)
                calls.append(float(r["calls"][i].max()))
                nbytes.append(float(r["bytes"][i].max()))
            else:
                calls.append(np.nan)
                nbytes.append(np.nan)
        pos = x + (j - (len(kinds) - 1) / 2) * w
        ax1.bar(pos, calls, width=w, label=k)
        ax2.bar(pos, nbytes, width=w, label=k)
    ax1.set_yscale("log")
    ax2.set_yscale("log")
    ax1.set_ylabel("calls per step\n(max over ranks, log)")
    ax2.set_ylabel("bytes per step\n(max over ranks, log) [B]")
    for i, r in enumerate(runs):
        hooks = r["summary"].get("hook_calls_per_step", None)
        note = f"{r['sites']} sites" + (f"\n{int(hooks)} hooks/step" if hooks is not None else "")
        if r["status"] != "ok":
            note = "rejected"
        ax1.annotate(note, (i, 1), xycoords=("data", "axes fraction"), ha="center", va="bottom",
                     fontsize=6, annotation_clip=False)
    ax2.set_xticks(x)
    ax2.set_xticklabels([label(r, several_worlds, several_files) for r in runs], fontsize=6)
    if kinds:
        ax1.legend(fontsize=7, ncol=3)
    fig.suptitle(title("Collectives per step by kind (hook sites and calls above)", runs),
                 fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "hook_collective_counts.png"), dpi=110)
    plt.close(fig)


def plot_loads(runs, out, several_worlds, several_files):
    ok = [r for r in runs if r["status"] == "ok" and r["cost_loads"].size]
    n = max(1, len(ok))
    cols = min(3, n)
    rows = (n + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.8 * cols, 3.4 * rows + 0.8), squeeze=False)
    for ax in axes.flat:
        ax.set_visible(False)
    for ax, r in zip(axes.flat, ok):
        ax.set_visible(True)
        loads = r["cost_loads"]
        idle = loads == 0
        ax.bar(r["slot_rank"], loads, color=np.where(idle, "tab:red", "tab:blue"))
        ax.axhline(r["lower_bound"], color="black", linestyle="--", linewidth=1,
                   label=f"lower bound {r['lower_bound']:.4g}")
        if idle.any():
            ax.plot(r["slot_rank"][idle], np.zeros(int(idle.sum())), "x", color="tab:red",
                    label=f"idle: {int(idle.sum())} of {loads.size} ranks own nothing")
        ax.set_title(label(r, several_worlds, several_files).replace("\n", "  "), fontsize=7)
        ax.set_xlabel("rank")
        ax.set_ylabel(f"load [{r['load_units']}]")
        ax.legend(fontsize=6)
    if not ok:
        axes.flat[0].set_visible(True)
        axes.flat[0].text(0.5, 0.5, "no successful runs", ha="center")
    fig.suptitle(title("Ownership (Newton-Schulz) load per rank", runs), fontsize=10)
    fig.tight_layout()
    fig.savefig(os.path.join(out, "rank_loads.png"), dpi=110)
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
        s = step_samples_ms(r)
        if not s.size:
            continue
        source = source_of(r)
        key = (f"{r['topology']}/{r['preset']} {r['boundary']} {variant(r)}", source)
        curves.setdefault(key, {}).setdefault(r["world"], []).extend(s.tolist())
        batches.add(batch_of(r))
    # Per world size: median, min and max over every sample of every repetition.
    curves = {k: {w: (float(np.median(v)), float(min(v)), float(max(v))) for w, v in pts.items()}
              for k, pts in curves.items() if len(pts) >= 2}
    if not curves:
        return False  # no configuration ran at two world sizes
    # Strong scaling keeps the global batch (--global-tokens); weak keeps the per-rank one.
    kinds = {b[0] for b in batches}
    if kinds == {"global"}:
        mode = "strong"
        heading = "strong scaling, global batch " + ", ".join(
            str(n) for n in sorted({b[1] for b in batches})) + " samples"
    elif kinds == {"per_rank"}:
        mode = "weak"
        heading = "weak scaling, " + ", ".join(
            str(n) for n in sorted({b[1] for b in batches})) + " samples per rank"
    else:
        mode = "strong" if "global" in kinds else "weak"
        heading = "mixed batch settings (ideal lines as " + mode + ")"
    fig, (ax, eff) = plt.subplots(2, 1, figsize=(12, 7), sharex=True,
                                  gridspec_kw={"height_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    configs = sorted({k[0] for k in curves})
    for (config, source), pts in sorted(curves.items()):
        color = colors[configs.index(config) % len(colors)]
        w = sorted(pts)
        t = [pts[x][0] for x in w]
        projected = source == "projected"
        style = dict(color=color, linestyle="--" if projected else "-",
                     marker="s" if projected else "o",
                     markerfacecolor="none" if projected else color)
        ax.errorbar(w, t, yerr=[[pts[x][0] - pts[x][1] for x in w],
                                [pts[x][2] - pts[x][0] for x in w]], capsize=3,
                    label=textwrap.fill(f"{config} ({source})", 46), **style)
        w0, t0 = w[0], t[0]
        ideal = [t0 * w0 / x if mode == "strong" else t0 for x in w]
        ax.plot(w, ideal, color=color, linestyle=":", linewidth=1)
        e = [(t0 * w0 / (x * y) if mode == "strong" else t0 / y) for x, y in zip(w, t)]
        eff.plot(w, e, **style)
    ax.plot([], [], color="gray", linestyle=":", linewidth=1, label="ideal scaling")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_ylabel("step time, slowest rank [ms]\n(median, whiskers min-max)")
    ax.set_title(title(f"Scaling: {heading}", runs), fontsize=10)
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
    ap = argparse.ArgumentParser(
        prog=PROG, description="Plot dmuon results files as PNGs (exit 0 written, 2 bad input).",
        epilog="Files: step_breakdown.png, hook_collective_counts.png, rank_loads.png, and "
               "scaling.png when the inputs hold several world sizes.")
    ap.add_argument("files", nargs="+", help="results files (HDF5) written by dmuon_bench")
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
    load_pyplot()
    worlds = sorted({r["world"] for r in runs})
    several = len(worlds) > 1
    several_files = len(set(args.files)) > 1
    plot_breakdown(runs, args.output, several, several_files)
    plot_counts(runs, args.output, several, several_files)
    plot_loads(runs, args.output, several, several_files)
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
        die(str(e).splitlines()[0] if str(e) else "bad input")
    except OSError as e:
        die(f"{e.filename or ''}: {e.strerror or e}")
