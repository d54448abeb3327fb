#!/usr/bin/env python3
"""Export a PyTorch nn.Module's module tree as a dmuon topology file (JSON).

Usage:
    python3 scripts/export_topology.py my_pkg.models:build_model -o model.json [--name NAME]
        [--dedicate RULE] [--recommended-boundary POLICY] [--incomplete-boundary POLICY]
        [--no-meta]
    dmuon_inspect --topology-file model.json     (or dmuon_bench --topology-file model.json)

`module.path:factory` names an importable module (the current directory is on the path) and a
zero-argument callable in it (a class or a function; dotted attribute paths allowed) that
returns a torch.nn.Module. The factory runs on the meta device unless --no-meta, so even a 70B
model costs no memory: only named_modules(), module._parameters, shapes and dtypes are read,
never the data. Works with torch 1.13 (Debian's python3-torch) and torch 2.x.

The file records the dedication rule (which parameters Muon runs on): --dedicate, by default
"ndim>=2" (every parameter with 2 or more dimensions), so the file works with --topology-file
as is; the rule must select at least one parameter.

Exit codes: 0 written, 2 bad input (one line on stderr; no file is written).

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
import re
import signal
import sys
import tempfile

PROG = "export_topology.py"
FORMAT = "dmuon-topology"
VERSION = 1
# The rule written when --dedicate is not given: every parameter of 2 or more dimensions
# (matrices, and convolution kernels that Muon flattens to matrices). Rule syntax:
# src/dmuon/boundary/dedication.hpp.
DEFAULT_DEDICATE = "ndim>=2"
_DTYPES = {"float32": "float32", "float": "float32", "bfloat16": "bfloat16",
           "float16": "float16", "half": "float16"}
_RULE_TERMS = "all, ndim=N, ndim>=N, ndim<=N, contains:S, excludes:S, regex:R, joined by '&'"


class ExportError(ValueError):
    """Bad input: a one-line message naming the bad value."""


class _Terminated(BaseException):
    """SIGTERM: unwinds (removing a temporary file) past the handlers of the user's code."""

    def __init__(self, signum):
        super().__init__(signum)
        self.signum = signum


def _show(text):
    """`text` quoted for a one-line message: escapes what would break the line or the terminal
    (newlines, lone surrogates that cannot be encoded)."""
    return ascii(text) if not text.isprintable() or not _encodable(text) else f"'{text}'"


def _encodable(text):
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def _first_line(exc):
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def _check_text(kind, text, dotted=False):
    """A module path, parameter name or type name the C++ reader accepts: a non-empty string
    that is valid UTF-8 (JSON text is UTF-8) and, for dotted names, has no empty segment."""
    if not isinstance(text, str):
        raise ExportError(f"{kind} {text!r} is a {type(text).__name__}, not a string")
    if not _encodable(text):
        raise ExportError(f"{kind} {ascii(text)} cannot be encoded as UTF-8 "
                          "(it holds a lone surrogate); rename it")
    if not text or (dotted and "" in text.split(".")):
        raise ExportError(f"{kind} {_show(text)} has an empty name segment")


# A module type the C++ reader accepts (docs/TOPOLOGY-FILE.md): identifier-like ASCII with
# '.', ':' and '<>' for qualified and templated names, at most 256 characters.
_TYPE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.:<>]{0,255}")


def _check_type(kind, text):
    _check_text(kind, text)
    if not _TYPE_NAME.fullmatch(text):
        raise ExportError(f"{kind} {ascii(text)} is not a type name (valid: a letter or '_', "
                          "then letters, digits, '_', '.', ':', '<', '>'; at most 256 "
                          "characters); rename the class")


def _dtype_name(param, name):
    raw = str(getattr(param, "dtype", "float32"))
    key = raw[len("torch."):] if raw.startswith("torch.") else raw
    if key not in _DTYPES:
        raise ExportError(f"parameter {_show(name)} has dtype {raw} "
                          "(valid: float32, bfloat16, float16)")
    return _DTYPES[key]


def _shape(param, name):
    try:
        return [int(d) for d in param.shape]
    except Exception as e:  # e.g. a lazy module's UninitializedParameter
        raise ExportError(f"parameter {_show(name)}: cannot read its shape "
                          f"({_first_line(e)})") from None


def _join(path, attr):
    return f"{path}.{attr}" if path else attr


def export(model, name=None, dedicate=DEFAULT_DEDICATE, recommended_boundary=None,
           incomplete_boundary=None):
    """Returns the topology document of `model` as a dict (see module docstring).

    `model` needs only `named_modules()` (yielding ("", root) first, parents before children, as
    torch does) and, per module, an ordered `_parameters` mapping attr -> parameter-or-None
    whose parameters have `.shape` and `.dtype`. Raises ExportError for a name the file cannot
    hold (not UTF-8, empty segment) or a dtype the suite does not model.
    """
    modules = []
    parameters = []
    by_id = {}  # id(parameter) -> its entry: identity, not equality, defines a tie
    keep_alive = []  # ids are only unique while the objects live
    first = True
    for path, mod in model.named_modules():
        if first:
            if path != "":
                raise ExportError(f"named_modules() must yield the root first, got {_show(path)}")
            root_type = type(mod).__name__
            _check_type("root module type", root_type)
            first = False
        else:
            _check_text("module path", path, dotted=True)
            _check_type(f"type of module {_show(path)}", type(mod).__name__)
            modules.append({"path": path, "type": type(mod).__name__})
        for attr, p in getattr(mod, "_parameters", {}).items():
            if p is None:  # e.g. Linear(bias=False) registers bias as None
                continue
            full = _join(path, attr)
            _check_text("parameter name", full, dotted=True)
            entry = by_id.get(id(p))
            if entry is not None:
                entry.setdefault("tied", []).append(full)
                continue
            entry = {"name": full, "shape": _shape(p, full), "dtype": _dtype_name(p, full)}
            by_id[id(p)] = entry
            keep_alive.append(p)
            parameters.append(entry)
    if first:
        raise ExportError("named_modules() yielded nothing")
    if name is not None:
        _check_text("--name", name)
    doc = {"format": FORMAT, "version": VERSION,
           "name": name or root_type, "root_type": root_type}
    for key, value in (("dedicate", dedicate), ("recommended_boundary", recommended_boundary),
                       ("incomplete_boundary", incomplete_boundary)):
        if value:
            _check_text(key, value)
            doc[key] = value
    doc["modules"] = modules
    doc["parameters"] = parameters
    return doc


def parse_rule(spec):
    """The terms of a dedication rule, as src/dmuon/boundary/dedication.cpp parses them:
    a list of (op, value). Raises ExportError naming the bad term."""
    if not spec:
        raise ExportError(f"empty dedication rule (valid terms: {_RULE_TERMS})")
    terms = []
    rest = spec
    while True:
        if rest.startswith("regex:"):  # a regex may contain '&': it takes the rest
            terms.append(("regex", rest[6:]))
            return terms
        term, amp, rest = rest.partition("&")
        for op in ("ndim>=", "ndim<=", "ndim="):
            if term.startswith(op):
                digits = term[len(op):]
                if not (1 <= len(digits) <= 2 and digits.isascii() and digits.isdigit()):
                    raise ExportError(f"dedication rule {_show(spec)}: bad ndim value "
                                      f"{_show(digits)} (valid terms: {_RULE_TERMS})")
                terms.append((op, int(digits)))
                break
        else:
            if term == "all":
                terms.append(("all", None))
            elif term.startswith(("contains:", "excludes:")) and len(term) > 9:
                terms.append((term[:9], term[9:]))
            else:
                raise ExportError(f"dedication rule {_show(spec)}: unknown term {_show(term)} "
                                  f"(valid terms: {_RULE_TERMS})")
        if not amp:
            return terms


def rule_selects(terms, name, ndim):
    """Whether the parsed rule selects a parameter; None when it has a regex term (RE2 syntax,
    checked by the C++ tools, not here)."""
    for op, v in terms:
        if op == "regex":
            return None
        ok = (op == "all" or (op == "ndim=" and ndim == v) or (op == "ndim>=" and ndim >= v) or
              (op == "ndim<=" and ndim <= v) or (op == "contains:" and v in name) or
              (op == "excludes:" and v not in name))
        if not ok:
            return False
    return True


def count_dedicated(doc):
    """How many parameters the document's rule selects (None when it cannot tell: a regex);
    raises ExportError for a malformed rule."""
    terms = parse_rule(doc.get("dedicate", ""))
    if any(op == "regex" for op, _ in terms):
        return None
    return sum(1 for p in doc["parameters"] if rule_selects(terms, p["name"], len(p["shape"])))


# Name parts of embedding and output-head parameters. Muon is meant for the hidden matrices;
# the Muon authors and the reference's examples leave embeddings and the output head to AdamW.
EMBEDDING_WORDS = ("embed", "wte", "wpe", "lm_head", "tok_embeddings")


def dedicated_embeddings(doc):
    """(descriptions, excludes words) of the dedicated parameters that are embeddings or output
    heads by name or by a tied name; the words, as excludes: terms, deselect exactly them (a
    word from the canonical name, else the canonical name). Empty when the rule has a regex."""
    terms = parse_rule(doc.get("dedicate", ""))
    if any(op == "regex" for op, _ in terms):
        return [], []
    found, words = [], []
    for p in doc["parameters"]:
        name, tied = p["name"], list(p.get("tied", []))
        if not rule_selects(terms, name, len(p["shape"])):
            continue
        if not any(w in n for w in EMBEDDING_WORDS for n in [name] + tied) and \
                "output.weight" not in [name] + tied:
            continue
        found.append(name + (f" (tied: {', '.join(tied)})" if tied else ""))
        word = next((w for w in EMBEDDING_WORDS if w in name), name)
        if word not in words:
            words.append(word)
    return found, words


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


def check_output_path(path):
    """Refuses an output path that cannot be written before any work is done."""
    if not path:
        raise ExportError("output path is empty")
    if os.path.isdir(path):
        raise ExportError(f"cannot write {_show(path)}: it is a directory")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise ExportError(f"cannot write {_show(path)}: directory {_show(parent)} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ExportError(f"cannot write {_show(path)}: directory {_show(parent)} is not "
                          "writable")


def write(doc, path):
    """Writes atomically: a temporary file in the same directory, then rename; the temporary
    file is removed on any failure (and on SIGTERM, which the script turns into _Terminated)."""
    text = to_json(doc).encode("utf-8")
    try:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp",
                                   dir=os.path.dirname(os.path.abspath(path)))
    except OSError as e:
        raise ExportError(f"cannot write {_show(path)}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(text)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; the file is an ordinary output
        os.replace(tmp, path)
    except BaseException as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        if isinstance(e, OSError):
            raise ExportError(f"cannot write {_show(path)}: {e.strerror or e}") from None
        raise


def load_factory(spec):
    """'pkg.module:attr.path' -> the object (the current directory is importable)."""
    mod_name, colon, attr_path = spec.partition(":")
    if not colon or not mod_name or not attr_path:
        raise ExportError(f"model spec {_show(spec)} must have the form module.path:factory")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        obj = importlib.import_module(mod_name)
    except (Exception, SystemExit) as e:  # ImportError, or anything its import code raises
        raise ExportError(f"cannot import module {_show(mod_name)}: {_first_line(e)}") from None
    for part in attr_path.split("."):
        try:
            obj = getattr(obj, part)
        except Exception:
            raise ExportError(f"module {_show(mod_name)} has no attribute "
                              f"{_show(attr_path)}") from None
    if not callable(obj):
        raise ExportError(f"{_show(spec)} is not callable (it is an object of type "
                          f"{type(obj).__name__})")
    return obj


def _import_torch():
    try:
        import torch
    except Exception as e:
        raise ExportError(f"torch is not importable ({_first_line(e)}): install PyTorch "
                          "(Debian: python3-torch) or pass --no-meta") from None
    return torch


def meta_factories(torch):
    """A context in which tensor factory calls without a device create meta tensors.

    torch >= 2.0 has this built in (`with torch.device("meta"):`, torch/utils/_device.py);
    torch 1.13 (Debian 12's python3-torch) has not, but it has the mechanism that feature is
    built on: a TorchFunctionMode sees every call of a torch function, factories included, and
    may change its arguments. This mode does what torch 2's DeviceContext does: it adds
    device="meta" to the factory functions below when the caller named no device. Module
    constructors create their parameters with such factories (torch.empty(shape, device=None)
    and the init functions, which run in place on the meta tensors), so no memory is
    allocated. The legacy torch.Tensor(shape) constructor is not a factory function and still
    allocates on the CPU, as it does under torch 2's device context.
    """
    from torch.overrides import TorchFunctionMode

    names = ("empty", "empty_permuted", "empty_strided", "zeros", "ones", "full", "arange",
             "range", "eye", "linspace", "logspace", "rand", "randn", "randint", "randperm",
             "tensor", "as_tensor", "asarray", "scalar_tensor", "tril_indices", "triu_indices",
             "bartlett_window", "blackman_window", "hamming_window", "hann_window",
             "kaiser_window")
    factories = {getattr(torch, n) for n in names if hasattr(torch, n)}
    factories |= {getattr(torch.fft, n) for n in ("fftfreq", "rfftfreq") if hasattr(torch.fft, n)}

    class MetaFactories(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = dict(kwargs or {})
            if func in factories and kwargs.get("device") is None:
                kwargs["device"] = "meta"
            return func(*args, **kwargs)  # the mode is off inside its own handler

    return MetaFactories()


def meta_context(torch):
    """torch 2's own device context where it exists (what users of torch 2 expect), else the
    equivalent function mode."""
    device = torch.device("meta")
    if hasattr(device, "__enter__"):
        return device
    try:
        return meta_factories(torch)
    except (ImportError, AttributeError):  # torch < 1.13: no usable TorchFunctionMode
        raise ExportError(f"torch {torch.__version__} cannot build a model on the meta device "
                          "(needs torch >= 1.13): pass --no-meta") from None


def _is_module(model):
    torch = sys.modules.get("torch")
    module_type = getattr(getattr(torch, "nn", None), "Module", None)
    if module_type is not None:
        return isinstance(model, module_type)
    # torch was never imported (--no-meta with a torch-free factory): the duck type export()
    # documents.
    return not isinstance(model, type) and callable(getattr(model, "named_modules", None))


def build_model(factory, meta=True, spec="the factory"):
    """Calls the factory (on the meta device unless meta=False) and checks that it returned
    an nn.Module; any failure is an ExportError."""
    ctx = meta_context(_import_torch()) if meta else None
    try:
        if ctx is None:
            model = factory()
        else:
            with ctx:
                model = factory()
    except (Exception, SystemExit) as e:
        hint = " (it ran on the meta device: pass --no-meta to build it on the CPU)" if meta else ""
        raise ExportError(f"factory {_show(spec)} raised {_first_line(e)}{hint}") from None
    if not _is_module(model):
        what = (f"the class {model.__name__} (not an instance)" if isinstance(model, type)
                else f"an object of type {type(model).__name__}")
        raise ExportError(f"factory {_show(spec)} returned {what}, not a torch.nn.Module")
    return model


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse prints the usage too)
        raise ExportError(f"{message} (see --help)")


def _parser():
    ap = _Parser(prog=PROG, allow_abbrev=False,
                 description="Export a PyTorch nn.Module's module tree as a dmuon topology "
                             "file (JSON) for dmuon_inspect/dmuon_bench --topology-file.",
                 epilog="Exit codes: 0 written, 2 bad input (one line on stderr, no file).")
    ap.add_argument("model", help="module.path:factory, a zero-argument callable returning an "
                                  "nn.Module (the current directory is importable)")
    ap.add_argument("-o", "--output", required=True, help="output JSON path")
    ap.add_argument("--name", help="topology name (default: the root module's class name)")
    ap.add_argument("--dedicate", default=DEFAULT_DEDICATE,
                    help=f"dedication rule to record (default: {DEFAULT_DEDICATE}, every "
                         f"parameter with 2 or more dimensions; terms: {_RULE_TERMS})")
    ap.add_argument("--recommended-boundary", help="boundary policy to record, e.g. types:A,B")
    ap.add_argument("--incomplete-boundary", help="a deliberately incomplete policy to record")
    ap.add_argument("--no-meta", action="store_true",
                    help="build on the default device instead of the meta device")
    return ap


def run(argv):
    args = _parser().parse_args(argv)
    for flag, value in (("--output", args.output), ("--name", args.name),
                        ("--dedicate", args.dedicate),
                        ("--recommended-boundary", args.recommended_boundary),
                        ("--incomplete-boundary", args.incomplete_boundary)):
        if value is not None and not value:
            raise ExportError(f"{flag} is empty")
    parse_rule(args.dedicate)  # a bad rule fails before the model is built
    check_output_path(args.output)
    model = build_model(load_factory(args.model), meta=not args.no_meta, spec=args.model)
    try:
        doc = export(model, args.name, args.dedicate, args.recommended_boundary,
                     args.incomplete_boundary)
    except ExportError:
        raise
    except Exception as e:  # a module whose tree cannot be walked
        raise ExportError(f"cannot read the module tree of {_show(args.model)}: "
                          f"{_first_line(e)}") from None
    dedicated = count_dedicated(doc)
    if dedicated == 0:
        raise ExportError(f"dedication rule {_show(args.dedicate)} selects none of the model's "
                          f"{len(doc['parameters'])} parameters (dmuon_inspect would refuse the "
                          "file): pass --dedicate RULE")
    write(doc, args.output)
    selected = "?" if dedicated is None else dedicated
    print(f"wrote {_show(args.output)}: {len(doc['modules']) + 1} modules, "
          f"{len(doc['parameters'])} parameters, {selected} dedicated by '{args.dedicate}'")
    found, words = dedicated_embeddings(doc)
    if found:
        rule = "&".join([args.dedicate] + [f"excludes:{w}" for w in words])
        print(f"note: the rule dedicates {len(found)} embedding/output parameter(s) to Muon "
              f"({', '.join(found)}); Muon is meant for hidden matrices: "
              f"--dedicate '{rule}' leaves them to AdamW")
    return 0


def main(argv=None):
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except ExportError as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        return 2
    except _Terminated as t:
        return 128 + t.signum


def _on_sigterm(signum, frame):
    raise _Terminated(signum)  # unwinds through write(), which removes its temporary file


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, _on_sigterm)
    sys.exit(main())
