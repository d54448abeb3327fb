"""A small torch model for the exporter's end-to-end test (test_export_topology.py --torch).

Imported by scripts/export_topology.py as `tiny_torch_lm:build` (this directory on PYTHONPATH).
Its expected module tree, parameters, ties and hook sites are written out by hand in the test.
"""

import torch
import torch.nn as nn


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.norm = nn.LayerNorm(d)  # weight [d], bias [d]
        self.attn = nn.Linear(d, d)  # weight [d, d], bias [d]
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d, bias=False), nn.GELU(),
                                 nn.Linear(4 * d, d, bias=False))


class TinyTorchLM(nn.Module):
    def __init__(self, vocab=32, d=8, n=2):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(()))  # a 0-d parameter of the root
        self.stem = nn.Conv1d(4, d, 3, bias=False)  # a 3-D weight [d, 4, 3]
        self.embed = nn.Embedding(vocab, d)
        self.layers = nn.ModuleList([Block(d) for _ in range(n)])
        self.norm = nn.LayerNorm(d, elementwise_affine=False)  # no parameters
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied: one Parameter, two holders
        self.register_buffer("positions", torch.arange(16))  # a buffer, not a parameter


def build():
    return TinyTorchLM()

