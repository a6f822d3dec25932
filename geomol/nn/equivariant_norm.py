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
from geomol.nn.scatter import scatter_count, scatter_sum

__all__ = ["EquivariantLayerNorm", "recover_scale", "graph_spread"]

MIN_STD = 1e-6


def _graph_sum(values: torch.Tensor, atom_graph: torch.Tensor, n_graphs: int) -> torch.Tensor:
    """[B, ...] per-graph sums of ``values`` [N, ...] (one graph: a plain sum, without the scatter)."""
    return values.sum(0, keepdim=True) if n_graphs == 1 else scatter_sum(values, atom_graph, n_graphs)


def _per_atom(per_graph: torch.Tensor, atom_graph: torch.Tensor, n_graphs: int) -> torch.Tensor:
    """Each atom's row of ``per_graph`` [B, ...]: [N, ...], or [1, ...] as it is for one graph (broadcasts)."""
    return per_graph if n_graphs == 1 else per_graph.index_select(0, atom_graph)


def _atom_counts(atom_graph: torch.Tensor, n_graphs: int, dtype: torch.dtype) -> torch.Tensor:
    """[B, 1] atoms per graph."""
    if n_graphs == 1:
        return torch.full((1, 1), atom_graph.numel(), dtype=dtype, device=atom_graph.device)
    return scatter_count(atom_graph, n_graphs, dtype).unsqueeze(1)


def _centres(Z: torch.Tensor, atom_graph: torch.Tensor, n_graphs: int, count: torch.Tensor) -> torch.Tensor:
    """Each atom's graph centre: [N, C, 3], or [1, C, 3] for one graph (broadcasts); count [B, 1]: atoms per graph."""
    return _per_atom(_graph_sum(Z, atom_graph, n_graphs) / count.clamp(min=1).unsqueeze(-1), atom_graph, n_graphs)


def _graph_spread(Y: torch.Tensor, atom_graph: torch.Tensor, n_graphs: int, count: torch.Tensor,
                  min_std: float) -> torch.Tensor:
    """:func:`graph_spread` given the atoms per graph ``count`` [B, 1]."""
    values = 3 * count
    mean = _graph_sum(Y.sum(-1), atom_graph, n_graphs) / values.clamp(min=1)  # [B, C]
    sq = _graph_sum((Y - _per_atom(mean, atom_graph, n_graphs).unsqueeze(-1)).square().sum(-1), atom_graph, n_graphs)
    var = sq / (values - 1).clamp(min=1)
    # Guard before the sqrt so that neither the value nor its gradient becomes inf/NaN.
    degenerate = var <= min_std ** 2
    return torch.where(degenerate, torch.ones_like(var), var).sqrt()


def graph_spread(Y: torch.Tensor, atom_graph: torch.Tensor, n_graphs: int, min_std: float = MIN_STD) -> torch.Tensor:
    """[B, C] unbiased std of the pooled coordinates of each graph (degenerate graphs → 1).

    Args: Y [N, C, 3] centred coordinates; atom_graph [N] graph of each atom.
    """
    return _graph_spread(Y, atom_graph, n_graphs, _atom_counts(atom_graph, n_graphs, Y.dtype), min_std)


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
        count = _atom_counts(atom_graph, n_graphs, Z.dtype)  # [B, 1]
        centre = _centres(Z, atom_graph, n_graphs, count)  # [N or 1, C, 3]
        Y = Z - centre
        rescale = self.sigma / _graph_spread(Y, atom_graph, n_graphs, count, self.min_std).unsqueeze(-1)  # [B, C, 1]
        Z = centre + Y * _per_atom(rescale, atom_graph, n_graphs)
        scale_features = self.rbf(rescale.squeeze(-1)).flatten(1)  # [B, C·R]
        H = self.layernorm(H + _per_atom(self.fuse_scale_ffn(scale_features), atom_graph, n_graphs))
        return H, Z, rescale


def recover_scale(Z: torch.Tensor, atom_graph: torch.Tensor, record_scale: torch.Tensor, n_graphs: int) -> torch.Tensor:
    """Divide each graph's offsets from its centroid by the accumulated factor.

    Args: Z [N, C, 3]; atom_graph [N]; record_scale [B, C, 1] (product of all ``rescale``).
    Returns Z [N, C, 3] at the scale of the input.
    """
    centre = _centres(Z, atom_graph, n_graphs, _atom_counts(atom_graph, n_graphs, Z.dtype))
    return centre + (Z - centre) / _per_atom(record_scale, atom_graph, n_graphs)
