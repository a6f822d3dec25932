"""Equivariant layer norm of GET and the final scale recovery (``specs/GET.md`` §6, §8).

Per graph, coordinates are centred and divided by their spread (the unbiased standard
deviation of the 3·N_g pooled x, y, z offsets, per channel), then multiplied by a learnable
σ; the applied factor is embedded with an RBF and added to the features before a LayerNorm,
so the network knows the scale it removed. :func:`recover_scale` undoes the product of all
factors at the end.

Deviation from upstream (documented): a graph whose spread is below ``min_std`` (one atom, or
all atoms coincident) is left unscaled (σ / 1) instead of producing ∞ and NaN (edge case E4).
Real complexes have spreads many orders of magnitude above the threshold, so normal inputs give
exactly the upstream values.
"""
from __future__ import annotations

import torch
from torch import nn

from geomol.nn.mlp import mlp2
from geomol.nn.radial import RadialBasis
from geomol.nn.scatter import scatter_count, scatter_mean, scatter_sum

__all__ = ["EquivariantLayerNorm", "recover_scale", "graph_spread"]

MIN_STD = 1e-6


def graph_spread(Y: torch.Tensor, atom_graph: torch.Tensor, n_graphs: int, min_std: float = MIN_STD) -> torch.Tensor:
    """[B, C] unbiased std of the pooled coordinates of each graph (degenerate graphs → 1).

    Args: Y [N, C, 3] centred coordinates; atom_graph [N] graph of each atom.
    """
    count = 3 * scatter_count(atom_graph, n_graphs, Y.dtype).unsqueeze(1)  # [B, 1]
    mean = scatter_sum(Y.sum(-1), atom_graph, n_graphs) / count.clamp(min=1)
    sq = scatter_sum((Y - mean[atom_graph].unsqueeze(-1)).square().sum(-1), atom_graph, n_graphs)
    var = sq / (count - 1).clamp(min=1)
    # Guard before the sqrt so that neither the value nor its gradient becomes inf/NaN.
    degenerate = var <= min_std ** 2
    return torch.where(degenerate, torch.ones_like(var), var).sqrt()


class EquivariantLayerNorm(nn.Module):
    """Per-graph coordinate normalisation with the scale fused into the features.

    Args:
        d_hidden: d, feature size.
        n_channel: C, coordinates per atom.
        n_rbf: R, basis functions embedding the scale factor.
        cutoff: RBF cutoff for the scale factor.

    Shapes (``forward``): H [N, d], Z [N, C, 3], atom_graph [N] → H [N, d], Z [N, C, 3],
    rescale [B, C, 1] (σ / spread, the factor applied to the centred coordinates).
    Parameter names follow the official ``EquivariantLayerNorm``.
    """

    def __init__(self, d_hidden: int, n_channel: int, n_rbf: int, cutoff: float = 7.0, min_std: float = MIN_STD):
        super().__init__()
        self.sigma = nn.Parameter(torch.ones(1, n_channel, 1))
        self.fuse_scale_ffn = mlp2(n_channel * n_rbf, d_hidden, d_hidden)
        self.layernorm = nn.LayerNorm(d_hidden)
        self.rbf = RadialBasis(n_rbf, cutoff)
        self.min_std = min_std

    def forward(self, H: torch.Tensor, Z: torch.Tensor, atom_graph: torch.Tensor, n_graphs: int):
        centre = scatter_mean(Z, atom_graph, n_graphs)  # [B, C, 3]
        Y = Z - centre[atom_graph]
        rescale = self.sigma / graph_spread(Y, atom_graph, n_graphs, self.min_std).unsqueeze(-1)  # [B, C, 1]
        Z = centre[atom_graph] + Y * rescale[atom_graph]
        scale_features = self.rbf(rescale.squeeze(-1)).flatten(1)  # [B, C·R]
        H = self.layernorm(H + self.fuse_scale_ffn(scale_features)[atom_graph])
        return H, Z, rescale


def recover_scale(Z: torch.Tensor, atom_graph: torch.Tensor, record_scale: torch.Tensor, n_graphs: int) -> torch.Tensor:
    """Divide each graph's offsets from its centroid by the accumulated factor.

    Args: Z [N, C, 3]; atom_graph [N]; record_scale [B, C, 1] (product of all ``rescale``).
    Returns Z [N, C, 3] at the scale of the input.
    """
    centre = scatter_mean(Z, atom_graph, n_graphs)[atom_graph]
    return centre + (Z - centre) / record_scale[atom_graph]
