#!/usr/bin/env python3
"""Tests of scripts/export_topology.py.

Default mode: pure Python with fake module objects (named_modules / _parameters), so it runs
without torch, plus the command line run as a subprocess from a scratch directory (every bad
input: exit 2, one line on stderr, no file). `--torch`: real torch.nn modules on the meta
device (torch 1.13, Debian's python3-torch, or 2.x): the exported file of a small model
(data/tiny_torch_lm.py) against its hand-derived module tree, parameters, ties and dedication
rule, read back by dmuon_inspect ($DMUON_INSPECT, else build/bin/dmuon_inspect) with its
hand-derived hook sites; and the C++ built-in `vla tiny` (configs/topologies/
example_tiny_vla.json). `--torch` exits 77 (CTest skip) when torch is not importable.
"""

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
SCRIPT = os.path.join(ROOT, "scripts", "export_topology.py")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import export_topology as et  # noqa: E402

GOLDEN = os.path.join(DATA, "fake_export.json")


class FakeParam:
    def __init__(self, *shape, dtype="torch.float32"):
        self.shape = tuple(shape)
        self.dtype = dtype


class FakeModule:
    """Just enough of nn.Module: ordered _parameters and children, torch's named_modules()."""

    def __init__(self, **params):
        self._parameters = dict(params)
        self._modules = {}

    def add(self, name, module):
        self._modules[name] = module
        return module

    def named_modules(self, memo=None, prefix=""):
        memo = set() if memo is None else memo
        if id(self) in memo:
            return
        memo.add(id(self))
        yield prefix, self
        for name, child in self._modules.items():
            yield from child.named_modules(memo, f"{prefix}.{name}" if prefix else name)


class TinyLM(FakeModule):
    pass


class Embedding(FakeModule):
    pass


class ModuleList(FakeModule):
    pass


class Block(FakeModule):
    pass


class Linear(FakeModule):
    pass


def tiny_lm():
    """scale (0-d) at the root; embed (bf16) tied into head; two blocks with bias=None."""
    root = TinyLM(scale=FakeParam())
    emb = root.add("embed", Embedding(weight=FakeParam(100, 16, dtype="torch.bfloat16")))
    layers = root.add("layers", ModuleList())
    for k in range(2):
        blk = layers.add(str(k), Block())
        blk.add("proj", Linear(weight=FakeParam(16, 16), bias=None))
    root.add("head", Linear(weight=emb._parameters["weight"], bias=None))
    return root


def run_cli(args, cwd, env=None):
    """Runs the script as a user would (its own process, from `cwd`); (rc, stdout, stderr)."""
    e = dict(os.environ)
    e.update(env or {})
    r = subprocess.run([sys.executable, SCRIPT] + list(args), cwd=cwd, env=e,
                       capture_output=True, text=True, errors="backslashreplace", timeout=120)
    return r.returncode, r.stdout, r.stderr


class ExportTest(unittest.TestCase):
    def test_golden(self):
        text = et.to_json(et.export(tiny_lm(), "fake"))
        with open(GOLDEN, encoding="utf-8") as f:
            self.assertEqual(text, f.read())

    def test_structure_and_ties(self):
        doc = et.export(tiny_lm(), "fake")
        self.assertEqual(doc["root_type"], "TinyLM")
        self.assertEqual([m["path"] for m in doc["modules"]],
                         ["embed", "layers", "layers.0", "layers.0.proj", "layers.1",
                          "layers.1.proj", "head"])
        self.assertEqual([p["name"] for p in doc["parameters"]],
                         ["scale", "embed.weight", "layers.0.proj.weight",
                          "layers.1.proj.weight"])  # bias=None skipped, head tied
        emb = doc["parameters"][1]
        self.assertEqual(emb["tied"], ["head.weight"])
        self.assertEqual(emb["dtype"], "bfloat16")
        self.assertEqual(doc["parameters"][0]["shape"], [])
        self.assertNotIn("tied", doc["parameters"][2])

    def test_default_dedication_rule(self):
        doc = et.export(tiny_lm())
        self.assertEqual(doc["dedicate"], "ndim>=2")
        # scale is 0-d; embed.weight and the two proj weights are 2-D.
        self.assertEqual(et.count_dedicated(doc), 3)
        doc["dedicate"] = "ndim=2&excludes:embed"
        self.assertEqual(et.count_dedicated(doc), 2)
        doc["dedicate"] = "ndim<=0"
        self.assertEqual(et.count_dedicated(doc), 1)
        doc["dedicate"] = "contains:proj&contains:layers.1"
        self.assertEqual(et.count_dedicated(doc), 1)
        doc["dedicate"] = "regex:.*proj.*"  # RE2 syntax: left to the C++ tools
        self.assertIsNone(et.count_dedicated(doc))

    def test_rule_syntax(self):
        self.assertEqual(et.parse_rule("ndim>=2"), [("ndim>=", 2)])
        self.assertEqual(et.parse_rule("all&excludes:router&ndim=2"),
                         [("all", None), ("excludes:", "router"), ("ndim=", 2)])
        self.assertEqual(et.parse_rule("ndim=2&regex:a&b"), [("ndim=", 2), ("regex", "a&b")])
        for bad, needle in (("", "empty dedication rule"), ("ndim=x", "bad ndim value 'x'"),
                            ("ndim>=123", "bad ndim value '123'"), ("ndim=2&", "unknown term ''"),
                            ("contains:", "unknown term 'contains:'"),
                            ("ndim==2", "bad ndim value '=2'"), ("rows=2", "unknown term")):
            with self.assertRaisesRegex(et.ExportError, needle, msg=bad):
                et.parse_rule(bad)

    def test_equal_but_distinct_parameters_are_not_tied(self):
        root = TinyLM()
        root.add("a", Linear(weight=FakeParam(4, 4)))
        root.add("b", Linear(weight=FakeParam(4, 4)))
        doc = et.export(root)
        self.assertEqual(doc["name"], "TinyLM")
        self.assertEqual(len(doc["parameters"]), 2)
        self.assertTrue(all("tied" not in p for p in doc["parameters"]))

    def test_shared_module_appears_once(self):
        # torch's named_modules() removes duplicates; so do we (via the model's own walk).
        root = TinyLM()
        shared = Linear(weight=FakeParam(4, 4))
        root.add("a", shared)
        root.add("b", shared)
        doc = et.export(root)
        self.assertEqual([m["path"] for m in doc["modules"]], ["a"])

    def test_rules_recorded(self):
        doc = et.export(tiny_lm(), "fake", dedicate="ndim=2",
                        recommended_boundary="types:Block")
        text = et.to_json(doc)
        self.assertIn('  "dedicate": "ndim=2",\n', text)
        self.assertIn('  "recommended_boundary": "types:Block",\n', text)
        self.assertNotIn("incomplete_boundary", text)
        self.assertEqual(json.loads(text)["dedicate"], "ndim=2")

    def test_bad_dtype(self):
        root = TinyLM(w=FakeParam(2, 2, dtype="torch.float64"))
        with self.assertRaisesRegex(et.ExportError, r"'w' has dtype torch.float64"):
            et.export(root)

    def test_unencodable_names(self):
        root = TinyLM()
        root.add("bad\udcff", Linear(weight=FakeParam(2, 2)))
        with self.assertRaisesRegex(et.ExportError,
                                    r"module path 'bad\\udcff' cannot be encoded as UTF-8"):
            et.export(root)
        with self.assertRaisesRegex(et.ExportError, r"parameter name 'w\\udcff' cannot be"):
            et.export(TinyLM(**{"w\udcff": FakeParam(2, 2)}))
        with self.assertRaisesRegex(et.ExportError, r"--name 'x\\ud800' cannot be encoded"):
            et.export(tiny_lm(), "x\ud800")

    def test_type_names(self):
        root = TinyLM()
        root.add("odd", type("Odd\nType", (Linear,), {})(weight=FakeParam(2, 2)))
        with self.assertRaisesRegex(et.ExportError,
                                    r"type of module 'odd' 'Odd\\nType' is not a type name"):
            et.export(root)

    def test_empty_segment(self):
        root = TinyLM()
        root.add("", Linear(weight=FakeParam(2, 2)))
        with self.assertRaisesRegex(et.ExportError, "module path '' has an empty name segment"):
            et.export(root)

    def test_empty_document_layout(self):
        doc = et.export(TinyLM(), "empty")
        text = et.to_json(doc)
        self.assertIn('  "modules": [],\n  "parameters": []\n}\n', text)
        self.assertEqual(json.loads(text)["modules"], [])

    def test_to_json_header_order_and_dims(self):
        doc = {"format": "dmuon-topology", "version": 1, "name": "x", "preset": "tiny",
               "root_type": "R", "dims": {"d": 4}, "modules": [], "parameters": []}
        self.assertTrue(et.to_json(doc).startswith(
            '{\n  "format": "dmuon-topology",\n  "version": 1,\n  "name": "x",\n'
            '  "preset": "tiny",\n  "root_type": "R",\n  "dims": {"d": 4},\n'))

    def test_factory_errors(self):
        for spec, needle in (("nocolon", "module.path:factory"),
                             (":f", "module.path:factory"),
                             ("json:", "module.path:factory"),
                             ("no_such_module_xyz:f", "cannot import"),
                             ("json:no_such_attr", "no attribute"),
                             ("json:__doc__", "not callable")):
            with self.assertRaisesRegex(et.ExportError, needle):
                et.load_factory(spec)


FACTORIES = '''
import sys
import time
sys.path.insert(0, {here!r})
from test_export_topology import FakeModule, FakeParam, Linear, TinyLM, tiny_lm


def forty_two():
    return 42


def the_class():
    return TinyLM


def raises():
    raise RuntimeError("first line\\nsecond line")


def exits():
    sys.exit(5)


def surrogate_child():
    root = TinyLM()
    root.add("bad\\udcff", Linear(weight=FakeParam(2, 2)))
    return root


def only_vectors():
    return TinyLM(b=FakeParam(4))


def sleeps():
    open("started", "w").close()
    time.sleep(60)
    return tiny_lm()


not_callable = 3
'''


class CliTest(unittest.TestCase):
    """The script as a command, run from a scratch directory (not the repository)."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.dir = self._tmp.name
        with open(os.path.join(self.dir, "fake_factories.py"), "w") as f:
            f.write(FACTORIES.format(here=HERE))
        with open(os.path.join(self.dir, "broken_module.py"), "w") as f:
            f.write('raise ValueError("boom at import")\n')
        # A torch that cannot be imported, whatever this machine has installed.
        os.makedirs(os.path.join(self.dir, "notorch", "torch"))
        with open(os.path.join(self.dir, "notorch", "torch", "__init__.py"), "w") as f:
            f.write('raise ImportError("simulated: no torch here")\n')
        with open(os.path.join(self.dir, "file.txt"), "w") as f:
            f.write("x\n")
        self.out = os.path.join(self.dir, "out", "model.json")
        os.makedirs(os.path.dirname(self.out))

    def tearDown(self):
        self._tmp.cleanup()

    def assert_bad_input(self, args, needle, env=None):
        rc, out, err = run_cli(args, self.dir, env)
        self.assertEqual(rc, 2, f"{args}: stdout {out!r} stderr {err!r}")
        self.assertNotIn("Traceback", err)
        lines = err.splitlines()
        self.assertEqual(len(lines), 1, f"{args}: stderr is not one line: {err!r}")
        self.assertTrue(lines[0].startswith("export_topology.py: error: "), lines[0])
        self.assertIn(needle, lines[0])
        self.assertEqual(out, "")
        self.assertEqual(os.listdir(os.path.dirname(self.out)), [], "a file was left behind")

    def test_help(self):
        rc, out, err = run_cli(["--help"], self.dir)
        self.assertEqual((rc, err), (0, ""))
        self.assertTrue(out.startswith("usage: export_topology.py"))
        self.assertIn("default: ndim>=2", out)
        self.assertIn("Exit codes: 0 written, 2 bad input", out)

    def test_writes_the_golden_file_with_the_default_rule(self):
        rc, out, err = run_cli(["fake_factories:tiny_lm", "-o", self.out, "--name", "fake",
                                "--no-meta"], self.dir)
        self.assertEqual((rc, err), (0, ""))
        self.assertEqual(out, f"wrote '{self.out}': 8 modules, 4 parameters, "
                              "3 dedicated by 'ndim>=2'\n"
                              "note: the rule dedicates 1 embedding/output parameter(s) to Muon "
                              "(embed.weight (tied: head.weight)); Muon is meant for hidden "
                              "matrices: --dedicate 'ndim>=2&excludes:embed' leaves them to AdamW\n")
        with open(self.out, encoding="utf-8") as f, open(GOLDEN, encoding="utf-8") as g:
            self.assertEqual(f.read(), g.read())
        self.assertEqual(os.listdir(os.path.dirname(self.out)), ["model.json"])  # no .tmp
        umask = os.umask(0)
        os.umask(umask)
        self.assertEqual(os.stat(self.out).st_mode & 0o777, 0o666 & ~umask)
        # Overwrites an existing file, with another rule.
        rc, out, err = run_cli(["fake_factories:tiny_lm", "-o", self.out, "--no-meta",
                                "--dedicate", "ndim=2&excludes:embed"], self.dir)
        self.assertEqual((rc, err), (0, ""))
        self.assertIn("2 dedicated by 'ndim=2&excludes:embed'", out)
        self.assertNotIn("note:", out)  # the suggested rule leaves nothing to note
        with open(self.out, encoding="utf-8") as f:
            self.assertEqual(json.load(f)["dedicate"], "ndim=2&excludes:embed")

    def test_bad_factories(self):
        o = ["-o", self.out, "--no-meta"]
        self.assert_bad_input(["fake_factories:forty_two"] + o,
                              "factory 'fake_factories:forty_two' returned an object of type "
                              "int, not a torch.nn.Module")
        self.assert_bad_input(["fake_factories:the_class"] + o,
                              "returned the class TinyLM (not an instance), not a torch.nn.Module")
        self.assert_bad_input(["fake_factories:raises"] + o,
                              "factory 'fake_factories:raises' raised RuntimeError: first line")
        self.assert_bad_input(["fake_factories:exits"] + o, "raised SystemExit: 5")
        self.assert_bad_input(["fake_factories:not_callable"] + o,
                              "'fake_factories:not_callable' is not callable (it is an object "
                              "of type int)")
        self.assert_bad_input(["fake_factories:nope"] + o,
                              "module 'fake_factories' has no attribute 'nope'")
        self.assert_bad_input(["no_such_module_xyz:f"] + o,
                              "cannot import module 'no_such_module_xyz': ModuleNotFoundError")
        self.assert_bad_input(["broken_module:f"] + o,
                              "cannot import module 'broken_module': ValueError: boom at import")
        self.assert_bad_input(["nocolon"] + o, "model spec 'nocolon' must have the form")
        self.assert_bad_input(["fake_factories:surrogate_child"] + o,
                              r"module path 'bad\udcff' cannot be encoded as UTF-8")
        self.assert_bad_input(["fake_factories:only_vectors"] + o,
                              "dedication rule 'ndim>=2' selects none of the model's 1 "
                              "parameters")

    def test_meta_mode_needs_torch(self):
        self.assert_bad_input(["fake_factories:tiny_lm", "-o", self.out],
                              "torch is not importable (ImportError: simulated: no torch here): "
                              "install PyTorch (Debian: python3-torch) or pass --no-meta",
                              env={"PYTHONPATH": os.path.join(self.dir, "notorch")})

    def test_sigterm_ends_quietly(self):
        p = subprocess.Popen([sys.executable, SCRIPT, "fake_factories:sleeps", "-o", self.out,
                              "--no-meta"], cwd=self.dir, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            for _ in range(600):
                if os.path.exists(os.path.join(self.dir, "started")) or p.poll() is not None:
                    break
                time.sleep(0.05)
            p.send_signal(signal.SIGTERM)
            out, err = p.communicate(timeout=60)
        finally:
            if p.poll() is None:
                p.kill()
        self.assertEqual((p.returncode, out, err), (128 + signal.SIGTERM, "", ""))
        self.assertEqual(os.listdir(os.path.dirname(self.out)), [])

    def test_bad_output_paths(self):
        spec = ["fake_factories:tiny_lm", "--no-meta", "-o"]
        self.assert_bad_input(spec + [os.path.join(self.dir, "missing", "m.json")],
                              "does not exist")
        self.assert_bad_input(spec + [os.path.join(self.dir, "file.txt", "m.json")],
                              "does not exist")
        self.assert_bad_input(spec + [os.path.dirname(self.out)], "it is a directory")
        self.assert_bad_input(spec + [""], "--output is empty")
        # A directory the kernel refuses to create files in (root may write anywhere else).
        self.assert_bad_input(spec + ["/proc/export_topology_test.json"],
                              "cannot write '/proc/export_topology_test.json': ")
        if os.geteuid() != 0:
            ro = os.path.join(self.dir, "ro")
            os.mkdir(ro, 0o555)
            self.assert_bad_input(spec + [os.path.join(ro, "m.json")], "is not writable")

    def test_bad_flags(self):
        base = ["fake_factories:tiny_lm", "--no-meta", "-o", self.out]
        self.assert_bad_input(base + ["--bogus"], "unrecognized arguments: --bogus")
        self.assert_bad_input(["fake_factories:tiny_lm", "--no-meta"],
                              "the following arguments are required: -o/--output")
        self.assert_bad_input(["fake_factories:tiny_lm", "-o", "--no-meta"],
                              "argument -o/--output: expected one argument")
        self.assert_bad_input(base + ["--nam", "x"], "unrecognized arguments: --nam")
        self.assert_bad_input(base + ["--name", ""], "--name is empty")
        self.assert_bad_input(base + ["--dedicate", ""], "--dedicate is empty")
        self.assert_bad_input(base + ["--dedicate", "ndim=x"],
                              "dedication rule 'ndim=x': bad ndim value 'x'")
        self.assert_bad_input(base + ["--dedicate", "dim=2"], "unknown term 'dim=2'")
        self.assert_bad_input(base + ["--recommended-boundary", ""],
                              "--recommended-boundary is empty")


def torch_tests():
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print("torch is not importable: skipping the torch tests")
        sys.exit(77)
    print(f"torch {torch.__version__} from {os.path.dirname(torch.__file__)}, "
          f"python {sys.executable}")

    def without_bias(norm):
        norm.bias = None  # LayerNorm(d, bias=False) exists only from torch 2.1
        return norm

    class VitAttention(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.qkv = nn.Linear(d, 3 * d, bias=False)
            self.proj = nn.Linear(d, d, bias=False)

    class VitMlp(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.fc1 = nn.Linear(d, 4 * d, bias=False)
            self.fc2 = nn.Linear(4 * d, d, bias=False)

    class VitBlock(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.norm1 = without_bias(nn.LayerNorm(d))
            self.attn = VitAttention(d)
            self.norm2 = without_bias(nn.LayerNorm(d))
            self.mlp = VitMlp(d)

    class VisionTower(nn.Module):
        def __init__(self, d, n):
            super().__init__()
            self.blocks = nn.ModuleList([VitBlock(d) for _ in range(n)])

    class DecoderLayer(nn.Module):
        def __init__(self, d):
            super().__init__()
            self.q_proj = nn.Linear(d, d, bias=False)
            self.v_proj = nn.Linear(d, d, bias=False)
            self.o_proj = nn.Linear(d, d, bias=False)
            self.gate_proj = nn.Linear(d, 4 * d, bias=False)
            self.down_proj = nn.Linear(4 * d, d, bias=False)

    class ActionHead(nn.Module):
        def __init__(self, d, n_actions=7):
            super().__init__()
            self.fc1 = nn.Linear(d, d, bias=False)
            self.fc2 = nn.Linear(d, n_actions, bias=False)

    class ToyVLA(nn.Module):
        def __init__(self, d=128, n_vit=4, n_dec=4):
            super().__init__()
            self.visual = VisionTower(d, n_vit)
            self.layers = nn.ModuleList([DecoderLayer(d) for _ in range(n_dec)])
            self.action_head = ActionHead(d)

    def devices(model):
        return {str(t.device) for t in list(model.parameters()) + list(model.buffers())}

    def find_inspect():
        path = os.environ.get("DMUON_INSPECT")
        if path:
            return path  # set by CTest: must exist
        path = os.path.join(ROOT, "build", "bin", "dmuon_inspect")
        return path if os.path.exists(path) else None

    # The hand-derived export of data/tiny_torch_lm.py: modules in registration (pre-)order;
    # parameters in named_modules() order, a module's own ones in registration order; the
    # root's 0-d `scale` first; bias=False and the affine-free norm register no parameters;
    # head.weight is embed.weight; the `positions` buffer is not a parameter.
    def block_modules(k):
        p = f"layers.{k}"
        return [(p, "Block"), (f"{p}.norm", "LayerNorm"), (f"{p}.attn", "Linear"),
                (f"{p}.mlp", "Sequential"), (f"{p}.mlp.0", "Linear"), (f"{p}.mlp.1", "GELU"),
                (f"{p}.mlp.2", "Linear")]

    def block_params(k):
        p = f"layers.{k}"
        return [(f"{p}.norm.weight", [8]), (f"{p}.norm.bias", [8]), (f"{p}.attn.weight", [8, 8]),
                (f"{p}.attn.bias", [8]), (f"{p}.mlp.0.weight", [32, 8]),
                (f"{p}.mlp.2.weight", [8, 32])]

    tiny_modules = ([("stem", "Conv1d"), ("embed", "Embedding"), ("layers", "ModuleList")] +
                    block_modules(0) + block_modules(1) + [("norm", "LayerNorm"),
                                                           ("head", "Linear")])
    tiny_params = ([("scale", []), ("stem.weight", [8, 4, 3]), ("embed.weight", [32, 8])] +
                   block_params(0) + block_params(1))

    class TorchTest(unittest.TestCase):
        def test_meta_factories_mode(self):
            # The torch 1.13 path, exercised on whatever torch is installed.
            with et.meta_factories(torch):
                lin = nn.Linear(4, 5)
                emb = nn.Embedding(10, 3)
                t = torch.tensor([1.0, 2.0])
                r = torch.arange(3)
                cpu = torch.empty(2, device="cpu")  # a named device is left alone
            self.assertEqual(devices(lin) | devices(emb), {"meta"})
            self.assertEqual((str(t.device), str(r.device), str(cpu.device)),
                             ("meta", "meta", "cpu"))
            self.assertEqual(list(lin.weight.shape), [5, 4])
            self.assertEqual(str(torch.empty(1).device), "cpu")  # the mode ended

        def test_build_model_is_meta(self):
            sys.path.insert(0, DATA)
            try:
                import tiny_torch_lm
            finally:
                sys.path.remove(DATA)
            model = et.build_model(tiny_torch_lm.build)
            self.assertEqual(devices(model), {"meta"})
            self.assertEqual(str(torch.empty(1).device), "cpu")
            cpu = et.build_model(tiny_torch_lm.build, meta=False)
            self.assertEqual(devices(cpu), {"cpu"})

        def test_factory_errors(self):
            with self.assertRaisesRegex(et.ExportError,
                                        "returned an object of type Tensor, not a torch.nn"):
                et.build_model(lambda: torch.zeros(2), spec="m:f")
            with self.assertRaisesRegex(et.ExportError, "returned the class Linear"):
                et.build_model(lambda: nn.Linear)
            # Reading data is what the meta device cannot do: the hint names --no-meta.
            with self.assertRaisesRegex(et.ExportError,
                                        r"factory 'm:f' raised \w+: .*pass --no-meta"):
                et.build_model(lambda: nn.Linear(2, 2).weight.sum().item(), spec="m:f")

        def test_vla_tiny_matches_cpp_builtin(self):
            doc = et.export(et.build_model(ToyVLA), "vla")
            with open(os.path.join(ROOT, "configs", "topologies", "example_tiny_vla.json")) as f:
                ref = json.load(f)
            self.assertEqual(doc["root_type"], ref["root_type"])
            self.assertEqual(doc["modules"], ref["modules"])
            self.assertEqual(doc["parameters"], ref["parameters"])

        def test_tied_lm_head(self):
            class LM(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.embed = nn.Embedding(10, 4)
                    self.head = nn.Linear(4, 10, bias=False)
                    self.head.weight = self.embed.weight

            doc = et.export(et.build_model(lambda: LM().to(torch.bfloat16)))
            self.assertEqual(doc["parameters"],
                             [{"name": "embed.weight", "shape": [10, 4], "dtype": "bfloat16",
                               "tied": ["head.weight"]}])

        def test_end_to_end_export_then_inspect(self):
            with tempfile.TemporaryDirectory() as d:
                out = os.path.join(d, "model.json")
                rc, stdout, err = run_cli(["tiny_torch_lm:build", "-o", out], d,
                                          {"PYTHONPATH": DATA})
                self.assertEqual((rc, err), (0, ""))
                self.assertEqual(stdout, f"wrote '{out}': 20 modules, 15 parameters, "
                                         "8 dedicated by 'ndim>=2'\n"
                                         "note: the rule dedicates 1 embedding/output "
                                         "parameter(s) to Muon (embed.weight (tied: "
                                         "head.weight)); Muon is meant for hidden matrices: "
                                         "--dedicate 'ndim>=2&excludes:embed' leaves them to "
                                         "AdamW\n")
                with open(out, encoding="utf-8") as f:
                    doc = json.load(f)
                self.assertEqual(list(doc), ["format", "version", "name", "root_type",
                                             "dedicate", "modules", "parameters"])
                self.assertEqual((doc["format"], doc["version"], doc["name"], doc["root_type"],
                                  doc["dedicate"]),
                                 ("dmuon-topology", 1, "TinyTorchLM", "TinyTorchLM", "ndim>=2"))
                self.assertEqual(doc["modules"],
                                 [{"path": p, "type": t} for p, t in tiny_modules])
                expected = [{"name": n, "shape": s, "dtype": "float32"} for n, s in tiny_params]
                expected[2]["tied"] = ["head.weight"]
                self.assertEqual(doc["parameters"], expected)

                inspect = find_inspect()
                if inspect is None:
                    self.skipTest("dmuon_inspect not built (set DMUON_INSPECT)")
                r = subprocess.run([inspect, "--topology-file", out], capture_output=True,
                                   text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                # ndim>=2: stem.weight (3-D), embed.weight (= head.weight) and the 3 matrices
                # of each of the 2 blocks.
                self.assertIn("topology TinyTorchLM (file): 20 modules, 15 parameters, "
                              "8 dedicated", r.stdout)
                self.assertIn("# dedicate ndim>=2   boundary default", r.stdout)
                self.assertIn("# hook sites: 4 ", r.stdout)
                # Sites (SPEC §3, default heuristic, in module order). Z3: the tied embedding
                # goes to the lowest common ancestor of embed and head, the root; the stem has
                # no layers/blocks key (its own site); each block's matrices go to layers.N.
                # Z2: the tied embedding takes the heuristic like any other: its own site.
                for reshard, sites in (("z3", ["", "stem", "layers.0", "layers.1"]),
                                       ("z2", ["stem", "embed", "layers.0", "layers.1"])):
                    r = subprocess.run([inspect, "--topology-file", out, "--json", "--reshard",
                                        reshard], capture_output=True, text=True, timeout=60)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    plan = json.loads(r.stdout)
                    self.assertEqual(plan["hook_sites"], 4)
                    self.assertEqual([s["path"] for s in plan["sites"]], sites,
                                     reshard)

    return TorchTest


if __name__ == "__main__":
    if "--torch" in sys.argv:
        sys.argv.remove("--torch")
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(torch_tests())
    else:
        suite = unittest.TestSuite(unittest.defaultTestLoader.loadTestsFromTestCase(c)
                                   for c in (ExportTest, CliTest))
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
