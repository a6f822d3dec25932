"""The GET encoder core: a stack of (bilevel attention, norm, equivariant FFN, norm) layers.

Functionally the official ``GET`` module (``specs/GET.md`` §1, §8): same inputs, outputs,
parameters and order of operations; :func:`geomol.models.get.load_official_state_dict` maps the
official parameter names onto this one.
"""
from __future__ import annotations

import torch
from torch import nn

from geomol.nn.atom_pairs import CHUNK_PAIRS, INFERENCE_CHUNK_PAIRS, AtomPairs, sparse_atom_pairs
from geomol.nn.bilevel_attention import BilevelAttention
from geomol.nn.equivariant_ffn import EquivariantFFN
from geomol.nn.equivariant_norm import MIN_STD, EquivariantLayerNorm, recover_scale

__all__ = ["GET", "GETLayer"]


class GETLayer(nn.Module):
    """Attention → layer norm → FFN → layer norm (official ``layer_i``, ``layernorm0_i``,
    ``ffn_i``, ``layernorm1_i``)."""

    def __init__(self, d_hidden, d_radial, n_channel, n_rbf, cutoff, d_edge, n_head, dropout, min_std):
        super().__init__()
        self.attention = BilevelAttention(d_hidden, d_radial, n_channel, n_rbf, cutoff, d_edge, n_head)
        self.attention_norm = EquivariantLayerNorm(d_hidden, n_channel, n_rbf, cutoff, min_std)
        self.ffn = EquivariantFFN(d_hidden, 4 * d_hidden, n_channel, n_rbf, dropout)
        self.ffn_norm = EquivariantLayerNorm(d_hidden, n_channel, n_rbf, cutoff, min_std)

    def forward(self, H, Z, pairs, edge_attr, block_id, atom_graph, n_blocks, n_graphs):
        """Returns H [N, d], Z [N, C, 3] and the product of both norms' factors [B, C, 1]."""
        H, Z = self.attention(H, Z, pairs, edge_attr)
        H, Z, scale_a = self.attention_norm(H, Z, atom_graph, n_graphs)
        H, Z = self.ffn(H, Z, block_id, n_blocks)
        H, Z, scale_f = self.ffn_norm(H, Z, atom_graph, n_graphs)
        return H, Z, scale_a * scale_f


class GET(nn.Module):
    """Generalist Equivariant Transformer core.

    Args:
        d_hidden: d, atom feature size.
        d_radial: r, attention/message size.
        n_channel: C, coordinates per atom.
        n_rbf: R, radial basis functions (≥ 2).
        cutoff: RBF cutoff of attention and norms, in units of Z (the FFN uses 7.0 regardless).
        d_edge: edge feature size (0: none).
        n_layers: L.
        n_head: h (divides d, r and R).
        dropout: FFN dropout.
        z_requires_grad: False freezes the last FFN's coordinate MLP and the last norm's σ,
            as the official affinity wrapper does (they still influence H).
        sparse_k: atom pairs kept per (atom, block edge); ``None`` keeps all.
        min_std: spread below which a graph is not rescaled by the norms (NaN guard).

    Shapes (``forward``): H [N, d]; Z [N, C, 3]; block_id [N] sorted; batch_id [Nb] sorted
    graph of each block; edges [2, E] (row 0 receives); edge_attr [E, d_edge] →
    (H [N, d], Z [N, C, 3]).
    """

    def __init__(self, d_hidden: int, d_radial: int, n_channel: int, n_rbf: int, cutoff: float = 7.0,
                 d_edge: int = 0, n_layers: int = 4, n_head: int = 4, dropout: float = 0.1,
                 z_requires_grad: bool = True, sparse_k: int | None = 3, min_std: float = MIN_STD):
        super().__init__()
        self.sparse_k, self.n_channel = sparse_k, n_channel
        self.layers = nn.ModuleList(
            GETLayer(d_hidden, d_radial, n_channel, n_rbf, cutoff, d_edge, n_head, dropout, min_std)
            for _ in range(n_layers))
        if not z_requires_grad:
            self.layers[-1].ffn.mlp_z.requires_grad_(False)
            self.layers[-1].ffn_norm.sigma.requires_grad_(False)

    def atom_pairs(self, Z: torch.Tensor, block_id: torch.Tensor, edges: torch.Tensor, n_blocks: int) -> AtomPairs:
        """The sparse atom pairs for these inputs (computed once, reused by every layer), cut into chunks of
        :data:`~geomol.nn.atom_pairs.CHUNK_PAIRS` pairs when autograd is on, of
        :data:`~geomol.nn.atom_pairs.INFERENCE_CHUNK_PAIRS` without it."""
        chunk_pairs = CHUNK_PAIRS if torch.is_grad_enabled() else INFERENCE_CHUNK_PAIRS
        return sparse_atom_pairs(Z.detach(), block_id, edges, self.sparse_k, n_blocks, chunk_pairs=chunk_pairs)

    def forward(self, H: torch.Tensor, Z: torch.Tensor, block_id: torch.Tensor, batch_id: torch.Tensor,
                edges: torch.Tensor, edge_attr: torch.Tensor | None = None,
                pairs: AtomPairs | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        n_blocks = batch_id.numel()
        n_graphs = int(batch_id.max()) + 1
        atom_graph = batch_id[block_id]
        if pairs is None:
            pairs = self.atom_pairs(Z, block_id, edges, n_blocks)
        record_scale = Z.new_ones(n_graphs, self.n_channel, 1)
        for layer in self.layers:
            H, Z, scale = layer(H, Z, pairs, edge_attr, block_id, atom_graph, n_blocks, n_graphs)
            record_scale = record_scale * scale
        return H, recover_scale(Z, atom_graph, record_scale, n_graphs)
