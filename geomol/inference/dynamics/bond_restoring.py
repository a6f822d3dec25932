"""Bond-restoring projection: an optional correction of a rollout's frames, off by default.

A trajectory model predicts positions without knowing the bonds; over a rollout, bond lengths drift.
:class:`BondRestoring` moves the atoms of each predicted frame until every bond of a
:class:`~geomol.data.chemistry.covalent_graph.CovalentGraph` has its length in a reference frame again (the
rollout's start frame), by iterative constraint satisfaction in the manner of SHAKE on positions:

* the bonds are split once into groups that share no atom (a greedy edge colouring);
* a sweep visits the groups in turn; within a group every bond b = (i, j) is set to its target
  length L_b exactly and at once, both ends moving half the correction along the bond:
  x_i ← x_i − ½ (d_b − L_b) r̂_b, x_j ← x_j + ½ (d_b − L_b) r̂_b, with r_b = x_i − x_j, d_b = ‖r_b‖;
* sweeps repeat until every bond is within ``tolerance`` of its length, or ``max_sweeps``.

Every correction is along a bond, equal and opposite on its two atoms: the projection commutes with
rotations, reflections and translations and keeps each frame's centroid. Angles and non-bonded
contacts are not constrained. This changes the model's output, so it is measured as a model of its
own ("<name> + bond restoring"), never folded into the model's numbers.
"""
from __future__ import annotations

import numpy as np
import torch

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.chemistry.trajectory import bond_lengths
from geomol.errors import ConfigError

__all__ = ["BondRestoring", "bond_groups"]


def bond_groups(bonds: np.ndarray, num_atoms: int) -> list[np.ndarray]:
    """Indices into ``bonds`` [B, 2], split into groups in which no atom appears twice (greedy colouring)."""
    colours_of_atom: list[set[int]] = [set() for _ in range(num_atoms)]
    colour = np.zeros(len(bonds), dtype=np.int64)
    for b, (i, j) in enumerate(np.asarray(bonds).tolist()):
        taken = colours_of_atom[i] | colours_of_atom[j]
        c = next(c for c in range(len(taken) + 1) if c not in taken)
        colour[b] = c
        colours_of_atom[i].add(c), colours_of_atom[j].add(c)
    return [np.flatnonzero(colour == c) for c in range(int(colour.max(initial=-1)) + 1)]


class BondRestoring:
    """Restore the bond lengths of ``graph`` to their values in ``reference`` [N, 3] (Å).

    Args:
        graph: the bonds to restore. reference: the frame whose bond lengths are the targets.
        tolerance: Å; a frame is done when every bond is this close to its target.
        max_sweeps: the most sweeps over all bond groups per frame.

    Attributes:
        sweeps: sweeps used by the last call (the largest over its frames).
        residual: the largest bond-length error left after the last call (Å).
        most_sweeps, worst_residual: the same over every call so far (a rollout's windows).
    """

    def __init__(self, graph: CovalentGraph, reference, tolerance: float = 1e-3, max_sweeps: int = 500):
        if not len(graph.bonds):
            raise ConfigError("bond restoring needs bonds, and the selection has none (neither in the topology "
                              "nor perceived from the first frame)")
        if tolerance <= 0 or max_sweeps < 1:
            raise ConfigError(f"need tolerance > 0 and max_sweeps ≥ 1, got {tolerance} and {max_sweeps}")
        self.bonds = torch.as_tensor(graph.bonds)
        self.lengths = bond_lengths(reference, graph.bonds)[0]  # [B] Å
        self.groups = [torch.as_tensor(g) for g in bond_groups(graph.bonds, graph.num_atoms)]
        self.tolerance, self.max_sweeps = float(tolerance), int(max_sweeps)
        self.sweeps, self.residual = 0, 0.0
        self.most_sweeps, self.worst_residual = 0, 0.0

    def _error(self, x: torch.Tensor) -> torch.Tensor:
        """[F] largest |d_b − L_b| per frame of x [F, N, 3]."""
        d = (x[:, self.bonds[:, 0]] - x[:, self.bonds[:, 1]]).norm(dim=-1)
        return (d - self.lengths).abs().max(dim=1).values

    def __call__(self, frames: torch.Tensor) -> torch.Tensor:
        """Frames [..., N, 3] (any float dtype and device) with their bonds restored, same shape and dtype."""
        shape, dtype = frames.shape, frames.dtype
        x = frames.detach().reshape(-1, *shape[-2:]).to("cpu", torch.float64).clone()  # [F, N, 3]
        i_all, j_all = self.bonds[:, 0], self.bonds[:, 1]
        sweeps = 0
        while sweeps < self.max_sweeps and float(self._error(x).max()) > self.tolerance:
            for group in self.groups:
                i, j = i_all[group], j_all[group]
                r = x[:, i] - x[:, j]  # [F, b, 3]
                d = r.norm(dim=-1, keepdim=True).clamp(min=1e-9)
                shift = 0.5 * (d - self.lengths[group].unsqueeze(-1)) * r / d
                x[:, i] -= shift
                x[:, j] += shift
            sweeps += 1
        self.sweeps, self.residual = sweeps, float(self._error(x).max())
        self.most_sweeps, self.worst_residual = max(self.most_sweeps, sweeps), max(self.worst_residual, self.residual)
        return x.reshape(shape).to(frames.device, dtype)
