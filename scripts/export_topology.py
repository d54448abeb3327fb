#!/usr/bin/env python3
"""Export a PyTorch nn.Module's module tree as a dmuon topology file (JSON).

Usage:
    python3 scripts/export_topology.py my_pkg.models:build_model -o model.json [--name NAME]
        [--dedicate RULE] [--recommended-boundary POLICY] [--incomplete-boundary POLICY]
        [--no-meta]

`module.path:factory` names an importable module (the current directory is on the path) and a
zero-argument callable in it (a class or a function; dotted attribute paths allowed). The
factory is called under `torch.device("meta")` unless --no-meta, so even a 70B model costs no
memory: only named_modules(), module._parameters, shapes and dtypes are read, never the data.
Exit codes: 0 written, 2 bad input (one line on stderr).

Importable API: `export(model, name) -> dict` and `to_json(doc) -> str`, which writes the same
bytes as the C++ writer (dmuon::model::write_topology_json): one module / parameter per line.

Tied parameters (one Parameter object held by several modules) appear once, under their first
name in named_modules() order (the canonical name, as in named_parameters()); the other names
are listed in "tied". The format is documented in src/dmuon/model/topology_file.hpp.
"""

import argparse
import importlib
import json
import os
import sys

FORMAT = "dmuon-topology"
VERSION = 1
_DTYPES = {"float32": "float32", "float": "float32", "bfloat16": "bfloat16",
           "float16": "float16", "half": "float16"}


class ExportError(ValueError):
    """Bad input: a one-line message naming the bad value."""


def _dtype_name(param, name):
    raw = str(getattr(param, "dtype", "float32"))
    key = raw[len("torch."):] if raw.startswith("torch.") else raw
    if key not in _DTYPES:
        raise ExportError(f"parameter '{name}' has dtype {raw} "
                          "(valid: float32, bfloat16, float16)")
    return _DTYPES[key]


def _join(path, attr):
    return f"{path}.{attr}" if path else attr


def export(model, name=None, dedicate=None, recommended_boundary=None,
           incomplete_boundary=None):
    """Returns the topology document of `model` as a dict (see module docstring).

    `model` needs only `named_modules()` (yielding ("", root) first, parents before children, as
    torch does) and, per module, an ordered `_parameters` mapping attr -> parameter-or-None
    whose parameters have `.shape` and `.dtype`.
    """
    modules = []
    parameters = []
    by_id = {}  # id(parameter) -> its entry: identity, not equality, defines a tie
    keep_alive = []  # ids are only unique while the objects live
    first = True
    for path, mod in model.named_modules():
        if first:
            if path != "":
                raise ExportError(f"named_modules() must yield the root first, got '{path}'")
            root_type = type(mod).__name__
            first = False
        else:
            modules.append({"path": path, "type": type(mod).__name__})
        for attr, p in getattr(mod, "_parameters", {}).items():
            if p is None:  # e.g. Linear(bias=False) registers bias as None
                continue
            full = _join(path, attr)
            entry = by_id.get(id(p))
            if entry is not None:
                entry.setdefault("tied", []).append(full)
                continue
            entry = {"name": full, "shape": [int(d) for d in p.shape],
                     "dtype": _dtype_name(p, full)}
            by_id[id(p)] = entry
            keep_alive.append(p)
            parameters.append(entry)
    if first:
        raise ExportError("named_modules() yielded nothing")
    doc = {"format": FORMAT, "version": VERSION,
           "name": name or root_type, "root_type": root_type}
    if dedicate:
        doc["dedicate"] = dedicate
    if recommended_boundary:
        doc["recommended_boundary"] = recommended_boundary
    if incomplete_boundary:
        doc["incomplete_boundary"] = incomplete_boundary
    doc["modules"] = modules
    doc["parameters"] = parameters
    return doc


def _q(value):
    return json.dumps(value, ensure_ascii=False)


def to_json(doc):
    """Serializes like the C++ writer: header keys one per line, one entry per line."""
    out = ["{\n"]
    for key in ("format", "version", "name", "preset", "root_type", "dims", "dedicate",
                "recommended_boundary", "incomplete_boundary"):
        if key in doc and doc[key] not in ("", None, {}):
            value = doc[key]
            if key == "dims":
                value = "{" + ", ".join(f"{_q(k)}: {int(v)}" for k, v in value.items()) + "}"
            else:
                value = _q(value)
            out.append(f'  "{key}": {value},\n')
    for key, last in (("modules", False), ("parameters", True)):
        entries = doc.get(key, [])
        out.append(f'  "{key}": [')
        out.append(",".join("\n    " + _q(e) for e in entries))
        out.append("\n  ]" if entries else "]")
        out.append("\n" if last else ",\n")
    out.append("}\n")
    return "".join(out)


def write(doc, path):
    """Writes atomically: a temporary name in the same directory, then rename."""
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(to_json(doc))
    os.replace(tmp, path)


def load_factory(spec):
    """'pkg.module:attr.path' -> the object (the current directory is importable)."""
    if ":" not in spec:
        raise ExportError(f"model spec '{spec}' must have the form module.path:factory")
    mod_name, attr_path = spec.split(":", 1)
    if not mod_name or not attr_path:
        raise ExportError(f"model spec '{spec}' must have the form module.path:factory")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(mod_name)
    except ImportError as e:
        raise ExportError(f"cannot import module '{mod_name}': {e}") from None
    for part in attr_path.split("."):
        if not hasattr(obj, part):
            raise ExportError(f"module '{mod_name}' has no attribute '{attr_path}'")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ExportError(f"'{spec}' is not callable")
    return obj


def build_model(factory, meta=True):
    if not meta:
        return factory()
    import torch  # only needed for the meta device

    with torch.device("meta"):
        return factory()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", help="module.path:factory (a zero-argument callable)")
    ap.add_argument("-o", "--output", required=True, help="output JSON path")
    ap.add_argument("--name", help="topology name (default: the root module's class name)")
    ap.add_argument("--dedicate", help="dedicated-parameter rule to record, e.g. ndim=2")
    ap.add_argument("--recommended-boundary", help="boundary policy to record, e.g. types:A,B")
    ap.add_argument("--incomplete-boundary", help="a deliberately incomplete policy to record")
    ap.add_argument("--no-meta", action="store_true",
                    help="build on the default device instead of torch.device('meta')")
    args = ap.parse_args(argv)
    try:
        model = build_model(load_factory(args.model), meta=not args.no_meta)
        doc = export(model, args.name, args.dedicate, args.recommended_boundary,
                     args.incomplete_boundary)
        write(doc, args.output)
    except (ExportError, OSError) as e:
        print(f"export_topology: {e}", file=sys.stderr)
        return 2
    print(f"wrote {args.output}: {len(doc['modules']) + 1} modules, "
          f"{len(doc['parameters'])} parameters")
    return 0


if __name__ == "__main__":
    sys.exit(main())
