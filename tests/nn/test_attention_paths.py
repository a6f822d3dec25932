"""Every path that computes GET's attention against one reading of its maths (:func:`geomol.nn.attend.attend`'s
docstring), in float64.

The reading is ``tests/models/get_reference.get_layer``: the formulas walked group by group, pair by pair and head by
head on the layer's own parameters (official names), so autograd through it gives the gradients the maths defines.
The paths: plain autograd on the PyTorch formulation (``chunked=False``); the chunked path under autograd (forward
without a graph, the hand-written backward pass of :mod:`geomol.nn.attend_backward`), with the compiled pair stage
and group level and with their PyTorch formulation; and inference, compiled and in PyTorch.
"""
from __future__ import annotations

import pytest
import torch

from geomol.nn import native
from geomol.nn.atom_pairs import sparse_atom_pairs
from geomol.nn.bilevel_attention import BilevelAttention
from tests.models import get_reference as reference

PATHS = {  # name: (chunked, autograd, compiled)
    "autograd": (False, True, False),
    "chunked, hand-written backward, compiled": (True, True, True),
    "chunked, hand-written backward, pytorch": (True, True, False),
    "inference, compiled": (True, False, True),
    "inference, pytorch": (True, False, False),
}
HEADS, CUTOFF, K = 2, 3.0, 2


def _case(seed: int = 3):
    """Two small complexes (6 blocks, 2 coordinate channels), a layer with non-zero biases everywhere."""
    gen = torch.Generator().manual_seed(seed)
    block_len = torch.tensor([1, 4, 3, 1, 5, 2])
    block_id = torch.repeat_interleave(torch.arange(6), block_len)
    Z = 1.2 * torch.randn(len(block_id), 2, 3, dtype=torch.float64, generator=gen)
    H = torch.randn(len(block_id), 16, dtype=torch.float64, generator=gen)
    edges = torch.tensor([[0, 0, 1, 1, 2, 2, 1, 3, 4, 4, 5, 5], [0, 1, 1, 2, 2, 0, 0, 4, 4, 5, 5, 3]])
    edge_attr = torch.randn(edges.size(1), 8, dtype=torch.float64, generator=gen)
    torch.manual_seed(seed)
    layer = BilevelAttention(16, 8, 2, 8, cutoff=CUTOFF, d_edge=8, n_head=HEADS).double()
    with torch.no_grad():
        for param in layer.parameters():
            param.add_(0.1 * torch.randn(param.shape, dtype=param.dtype, generator=gen))
    return layer, H, Z, block_id, edges, edge_attr


def _by_definition(layer, H, Z, block_id, edges, edge_attr):
    """(H', Z') from the formulas, on the layer's parameters (differentiable in them, H and Z)."""
    sd = {("rbf.rbf.offset" if name == "rbf.offset" else name): value for name, value in layer.named_parameters()}
    sd["rbf.rbf.offset"] = layer.rbf.offset
    groups = reference.atom_pairs(Z.detach(), block_id, edges, K)
    return reference.get_layer(sd, "", H, Z, groups, edges, edge_attr, cutoff=CUTOFF, h=HEADS)


@pytest.mark.parametrize("path", list(PATHS))
def test_each_path_computes_the_stated_maths(path, monkeypatch):
    chunked, autograd, compiled = PATHS[path]
    if compiled and not native.native_available():
        pytest.skip("no C++ compiler: the compiled loops are not built")
    monkeypatch.setenv(native.NATIVE_ENV, "1" if compiled else "0")
    layer, H, Z, block_id, edges, edge_attr = _case()
    layer.chunked = chunked
    H, Z = H.requires_grad_(), Z.requires_grad_()
    want_H, want_Z = _by_definition(layer, H, Z, block_id, edges, edge_attr)
    pairs = sparse_atom_pairs(Z.detach(), block_id, edges, k=K, chunk_pairs=6)  # several chunks
    assert len(pairs.chunks) > 1
    with torch.set_grad_enabled(autograd):
        got_H, got_Z = layer(H, Z, pairs, edge_attr)
    torch.testing.assert_close(got_H, want_H, rtol=1e-10, atol=1e-11)
    torch.testing.assert_close(got_Z, want_Z, rtol=1e-10, atol=1e-11)
    assert not torch.allclose(got_Z, Z) and not torch.allclose(got_H, H)  # the layer moves atoms and features
    if not autograd:
        return
    gen = torch.Generator().manual_seed(7)
    up_H, up_Z = torch.randn(got_H.shape, generator=gen, dtype=H.dtype), torch.randn(got_Z.shape, generator=gen,
                                                                                     dtype=Z.dtype)
    wrt = [H, Z, *layer.parameters()]
    want = torch.autograd.grad([want_H, want_Z], wrt, [up_H, up_Z], allow_unused=True)
    got = torch.autograd.grad([got_H, got_Z], wrt, [up_H, up_Z], allow_unused=True)
    names = ["H", "Z", *(name for name, _ in layer.named_parameters())]
    for name, a, b in zip(names, got, want):
        assert b is not None and b.abs().max() > 0, name  # every input and weight is exercised
        torch.testing.assert_close(a, b, rtol=1e-9, atol=1e-10, msg=name)
