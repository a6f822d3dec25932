"""Decoy complexes: a graph's ligand moved out of its pose, turned in place, or replaced by another ligand.

A model that only reads the ligand (its size, its chemistry) scores a decoy as it scores the true
complex; a model that reads the interactions scores it weaker. Training with a hinge between the two
(:class:`~geomol.tasks.objectives.DecoyLoss`) makes looking at the interface pay. Each decoy is a
:class:`~geomol.data.blocks.BlockGraph` with the same pocket (segment 0) as the complex it came from:

* ``shift``: the ligand translated by 4–8 Å in a random direction (out of the pocket or into its wall);
* ``turn``: the ligand rotated about its centroid by a random rotation of at least 90°;
* ``swap``: the ligand of another complex of the batch (another series where there is one), centred
  on this ligand's centroid and randomly turned (a cross decoy).

Coordinates are in Å. The ligand's global atom moves with it (GET re-centres global atoms anyway).
"""
from __future__ import annotations

import math
from typing import Sequence

import torch
from torch_geometric.data import Batch

from geomol.data.blocks import BlockGraph

__all__ = ["DECOY_KINDS", "random_rotation", "shift_ligand", "turn_ligand", "swap_ligand", "decoy_batch"]

DECOY_KINDS = ("shift", "turn", "swap")


def random_rotation(generator: torch.Generator | None = None, min_angle: float = 0.0) -> torch.Tensor:
    """[3, 3] float64 proper rotation, uniform over rotations whose angle is at least ``min_angle`` rad."""
    while True:
        q = torch.randn(4, generator=generator, dtype=torch.float64)
        w, x, y, z = (q / q.norm()).tolist()
        if 2 * math.acos(min(1.0, abs(w))) >= min_angle:
            break
    return torch.tensor([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]], dtype=torch.float64)


def _ligand_atoms(graph: BlockGraph) -> torch.Tensor:
    """[N] bool: the atoms of segment 1, its global atom included."""
    return graph.segment[graph.block_id] == 1


def _moved(graph: BlockGraph, ligand: torch.Tensor, X_ligand: torch.Tensor) -> BlockGraph:
    decoy = graph.clone()
    X = graph.X.clone()
    X[ligand] = X_ligand.to(X.dtype)
    decoy.X = X
    return decoy


def shift_ligand(graph: BlockGraph, generator: torch.Generator | None = None, min_shift: float = 4.0,
                 max_shift: float = 8.0) -> BlockGraph:
    """A copy of one complex graph with its ligand translated by ``min_shift``–``max_shift`` Å."""
    ligand = _ligand_atoms(graph)
    direction = torch.randn(3, generator=generator, dtype=torch.float64)
    length = min_shift + (max_shift - min_shift) * torch.rand((), generator=generator, dtype=torch.float64)
    return _moved(graph, ligand, graph.X[ligand].double() + direction / direction.norm() * length)


def turn_ligand(graph: BlockGraph, generator: torch.Generator | None = None) -> BlockGraph:
    """A copy of one complex graph with its ligand rotated about its centroid by at least 90°."""
    ligand = _ligand_atoms(graph)
    X = graph.X[ligand].double()
    centre = X.mean(0)
    return _moved(graph, ligand, (X - centre) @ random_rotation(generator, math.pi / 2).T + centre)


def swap_ligand(graph: BlockGraph, donor: BlockGraph, generator: torch.Generator | None = None) -> BlockGraph:
    """``graph``'s pocket with ``donor``'s ligand centred on ``graph``'s ligand centroid, randomly turned.

    The decoy keeps ``graph``'s name and labels (so a loss can pair it with ``graph``) and takes the
    donor's ligand chemistry (``ligand_descriptors``, ``ligand_morgan``, ``ligand_chemistry``).
    """
    pocket_atoms, donor_atoms = ~_ligand_atoms(graph), _ligand_atoms(donor)
    pocket_blocks, donor_blocks = graph.segment == 0, donor.segment == 1
    centre = graph.X[~pocket_atoms].double().mean(0)
    X = donor.X[donor_atoms].double()
    X = (X - X.mean(0)) @ random_rotation(generator).T + centre
    decoy = graph.clone()
    decoy.X = torch.cat([graph.X[pocket_atoms], X.to(graph.X.dtype)])
    decoy.A = torch.cat([graph.A[pocket_atoms], donor.A[donor_atoms]])
    decoy.atom_pos = torch.cat([graph.atom_pos[pocket_atoms], donor.atom_pos[donor_atoms]])
    decoy.B = torch.cat([graph.B[pocket_blocks], donor.B[donor_blocks]])
    decoy.block_len = torch.cat([graph.block_len[pocket_blocks], donor.block_len[donor_blocks]])
    decoy.segment = torch.cat([graph.segment[pocket_blocks], donor.segment[donor_blocks]])
    decoy.block_id = torch.repeat_interleave(torch.arange(decoy.B.numel()), decoy.block_len)
    decoy.num_nodes = decoy.X.size(0)
    for key in ("ligand_descriptors", "ligand_morgan", "ligand_chemistry"):
        if key in donor:
            decoy[key] = donor[key].clone()
    return decoy


def _donor(graphs: Sequence[BlockGraph], k: int, generator: torch.Generator | None) -> int:
    """Another graph of the batch, from another series where the batch has one."""
    series = [getattr(g, "series", None) for g in graphs]
    others = [i for i in range(len(graphs)) if i != k and (series[i] != series[k] or series[k] is None)]
    others = others or [i for i in range(len(graphs)) if i != k]
    return others[int(torch.randint(len(others), (), generator=generator))] if others else k


def decoy_batch(batch: Batch, kinds: Sequence[str] = DECOY_KINDS, fraction: float = 1.0,
                generator: torch.Generator | None = None) -> tuple[Batch, torch.Tensor]:
    """Decoys of a random ``fraction`` of a batch's complexes, one each, of kinds drawn from ``kinds``.

    Returns:
        (the decoys as one batch, [D] long index of the complex each decoy came from).
    """
    unknown = set(kinds) - set(DECOY_KINDS)
    if unknown or not kinds:
        raise ValueError(f"decoy kinds must be among {DECOY_KINDS}, got {list(kinds)}")
    graphs = batch.to_data_list()
    n = len(graphs)
    count = max(1, round(fraction * n))
    chosen = torch.randperm(n, generator=generator)[:count].sort().values
    decoys = []
    for k in chosen.tolist():
        kind = kinds[int(torch.randint(len(kinds), (), generator=generator))]
        if kind == "swap" and n == 1:
            kind = "shift"
        if kind == "shift":
            decoys.append(shift_ligand(graphs[k], generator))
        elif kind == "turn":
            decoys.append(turn_ligand(graphs[k], generator))
        else:
            decoys.append(swap_ligand(graphs[k], graphs[_donor(graphs, k, generator)], generator))
    return Batch.from_data_list(decoys), chosen
