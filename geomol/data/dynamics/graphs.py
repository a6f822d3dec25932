"""Edge sets of the dynamics systems: complete graphs, bonds with their 2-hop pairs, MD17's edge features, an MD state's
radius graph (with optional coarse edges between, e.g., a protein's Cα).

Shared by the trajectory datasets and by rollouts (:mod:`geomol.data.dynamics.systems`), so that a rollout builds
exactly the graph a model was trained on.
"""
from __future__ import annotations

import numpy as np
import torch

from geomol.nn.neighbors import radius_graph

__all__ = ["complete_graph", "bond_and_two_hop_edges", "bond_edges", "md17_edge_features", "radius_edges"]


def complete_graph(n: int) -> np.ndarray:
    """[2, n(n−1)] all directed pairs i ≠ j, i outer and j inner (the reference order)."""
    i, j = np.nonzero(~np.eye(n, dtype=bool))
    return np.stack([i, j]).astype(np.int64)


def bond_and_two_hop_edges(adjacency: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Edges of bonded pairs (hop 1) and pairs with a common neighbour but no bond (hop 2).

    Args:
        adjacency: [n, n] symmetric bool bond matrix (diagonal ignored).

    Returns:
        edge_index [2, M] in the reference order (i outer, j inner, i ≠ j) and hop [M] ∈ {1, 2}.
    """
    bonds = adjacency.astype(bool) & ~np.eye(len(adjacency), dtype=bool)
    two_hop = ((bonds.astype(np.int64) @ bonds.astype(np.int64)) > 0) & ~bonds & ~np.eye(len(bonds), dtype=bool)
    hop = np.where(bonds, 1, np.where(two_hop, 2, 0))
    i, j = np.nonzero(hop)
    return np.stack([i, j]).astype(np.int64), hop[i, j]


def bond_edges(bonds, n: int) -> tuple[np.ndarray, np.ndarray]:
    """edge_index [2, M] of the bonds [B, 2] among n nodes and their 2-hop pairs (the datasets' order) and hop [M]."""
    adjacency = np.zeros((n, n), dtype=bool)
    bonds = np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
    adjacency[bonds[:, 0], bonds[:, 1]] = adjacency[bonds[:, 1], bonds[:, 0]] = True
    return bond_and_two_hop_edges(adjacency)


def md17_edge_features(atomic_numbers, edge_index: np.ndarray, hop: np.ndarray, sticks) -> np.ndarray:
    """[M, 4] float32 MD17 edge features [z_i, z_j, hop, stick] (``specs/EGNO.md`` §3.3): the one definition that
    :class:`~geomol.data.datasets.trajectories.md17.MD17Dataset` and rollouts share."""
    z = np.asarray(atomic_numbers, dtype=np.float64)
    stick_set = {p for a, b in sticks for p in ((int(a), int(b)), (int(b), int(a)))}
    stick = [float((i, j) in stick_set) for i, j in np.asarray(edge_index).T.tolist()]
    return np.stack([z[edge_index[0]], z[edge_index[1]], hop, stick], axis=1).astype(np.float32)


def radius_edges(x: torch.Tensor, cutoff: float, coarse: torch.Tensor | None = None,
                 coarse_cutoff: float | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """An MD state's graph: edge_index [2, M] of the atom pairs of x [N, 3] (Å) closer than ``cutoff`` (Å) and their
    distances [M, 1] (Å), the MD kind's edge feature (the model adds d²).

    With ``coarse`` [C] (node indices, e.g. a protein's Cα) and ``coarse_cutoff`` (Å), the pairs of coarse nodes
    closer than ``coarse_cutoff`` are edges too, after the radius graph's: a short cutoff over every atom sees
    bonded and hydrogen-bonded neighbours only, the coarse edges the fold around them. ``edge_attr`` is then
    [M, 2]: d and 1 on a coarse edge, 0 on a radius edge (a coarse pair closer than ``cutoff`` is both).
    """
    edge_index = radius_graph(x, cutoff)
    flags = []
    if coarse is not None:
        coarse = torch.as_tensor(coarse, device=x.device, dtype=torch.long)
        far = coarse[radius_graph(x[coarse], coarse_cutoff)]
        flags = [x.new_zeros(edge_index.size(1), 1), x.new_ones(far.size(1), 1)]
        edge_index = torch.cat([edge_index, far], dim=1)
    distance = (x[edge_index[0]] - x[edge_index[1]]).norm(dim=-1, keepdim=True)
    return edge_index, torch.cat([distance, torch.cat(flags)], dim=1) if flags else distance
