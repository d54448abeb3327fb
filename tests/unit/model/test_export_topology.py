#!/usr/bin/env python3
"""Tests of scripts/export_topology.py.

Default mode: pure Python with fake module objects (named_modules / _parameters), so it runs
without torch. `--torch`: real torch.nn modules on the meta device, compared with the C++
built-in `vla tiny` (configs/topologies/example_tiny_vla.json); exits 77 (CTest skip) when
torch is not importable. `--regen` rewrites the golden file data/fake_export.json.
"""

import json
import os
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import export_topology as et  # noqa: E402

GOLDEN = os.path.join(HERE, "data", "fake_export.json")


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
                             ("no_such_module_xyz:f", "cannot import"),
                             ("json:no_such_attr", "no attribute"),
                             ("json:__doc__", "not callable")):
            with self.assertRaisesRegex(et.ExportError, needle):
                et.load_factory(spec)

    def test_cli_without_torch(self):
        with tempfile.TemporaryDirectory() as d:
            mod = os.path.join(d, "fake_models_for_export.py")
            with open(mod, "w") as f:
                f.write("import sys\nsys.path.insert(0, %r)\n" % HERE)
                f.write("from test_export_topology import tiny_lm\n")
            out = os.path.join(d, "out.json")
            old = os.getcwd()
            os.chdir(d)
            try:
                rc = et.main(["fake_models_for_export:tiny_lm", "-o", out, "--name", "fake",
                              "--no-meta"])
                self.assertEqual(rc, 0)
                with open(out, encoding="utf-8") as f, open(GOLDEN, encoding="utf-8") as g:
                    self.assertEqual(f.read(), g.read())
                self.assertFalse(os.path.exists(out + ".tmp"))
                self.assertEqual(et.main(["nocolon", "-o", out, "--no-meta"]), 2)
            finally:
                os.chdir(old)


def torch_tests():
    try:
        import torch
        import torch.nn as nn
    except ImportError:
        print("torch is not importable: skipping the torch tests")
        sys.exit(77)

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
            self.norm1 = nn.LayerNorm(d, bias=False)
            self.attn = VitAttention(d)
            self.norm2 = nn.LayerNorm(d, bias=False)
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

    class TorchTest(unittest.TestCase):
        def test_vla_tiny_matches_cpp_builtin(self):
            with torch.device("meta"):
                model = ToyVLA()
            doc = et.export(model, "vla")
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

            with torch.device("meta"):
                model = LM().to(torch.bfloat16)
            doc = et.export(model)
            self.assertEqual(doc["parameters"],
                             [{"name": "embed.weight", "shape": [10, 4], "dtype": "bfloat16",
                               "tied": ["head.weight"]}])

    return TorchTest


if __name__ == "__main__":
    if "--regen" in sys.argv:
        with open(GOLDEN, "w", encoding="utf-8") as f:
            f.write(et.to_json(et.export(tiny_lm(), "fake")))
        print(f"wrote {GOLDEN}")
        sys.exit(0)
    if "--torch" in sys.argv:
        sys.argv.remove("--torch")
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(torch_tests())
    else:
        suite = unittest.defaultTestLoader.loadTestsFromTestCase(ExportTest)
    result = unittest.TextTestRunner(verbosity=2).run(suite)
    sys.exit(0 if result.wasSuccessful() else 1)
