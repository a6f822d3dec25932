"""Pieces shared by the trajectory datasets (N-body, Mocap, MD17, MD through MDAnalysis).

Every item is a :class:`~geomol.data.blocks.BlockGraph` whose particles are the graph nodes:

* ``X`` [N, 3] input positions, ``V`` [N, 3] input velocities, ``X_target`` [N, P, 3] the
  positions at the P target frames (all in the dataset's length unit, Å for molecules);
* ``edge_index`` [2, M] (row 0 receiver i, row 1 sender j), ``edge_attr`` [M, E_d];
* optionally ``node_attr`` [N, F_d] (already scaled by a dataset-level constant);
* ``A``/``atom_pos``/``B``/``block_id``/``block_len``/``segment`` as in every BlockGraph, so
  that PyG batching offsets ``edge_index`` by atoms and ``block_id`` by blocks.

The |v| node feature and the squared-distance edge feature are *not* stored: the models compute
them from X and V (:func:`geomol.models.dynamics.dynamics_inputs`), so they always match.
"""
from __future__ import annotations

import numpy as np
import torch

from geomol.data.blocks import BlockGraph
from geomol.data.dynamics.graphs import bond_and_two_hop_edges, complete_graph  # noqa: F401 (re-exported)
from geomol.data.vocab import ATOM_UNK, BLOCK_UNK, POS_UNK

__all__ = ["trajectory_graph", "complete_graph", "bond_and_two_hop_edges", "even_offsets", "last_offsets",
           "displacement_scale", "velocity_at"]


def _tensor(a, dtype) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a), dtype=dtype)


def trajectory_graph(x, v, x_target, edge_index, edge_attr, *, node_attr=None, atom_types=None, atom_pos=None,
                     block_id=None, block_types=None, name: str | None = None, dtype=torch.float32,
                     **extra) -> BlockGraph:
    """Assemble one trajectory sample.

    Args:
        x, v: [N, 3] input positions and velocities; x_target: [N, P, 3].
        edge_index: [2, M] int; edge_attr: [M, E_d].
        node_attr: optional [N, F_d] invariant node features.
        atom_types: [N] atom-type indices (default: unknown type).
        atom_pos: [N] position codes (default: unknown).
        block_id: [N] sorted block of each particle (default: one block per particle).
        block_types: [Nb] block-type indices (default: unknown type).
        name: identifier kept on the graph. extra: further per-graph tensors (e.g. ``charge``).
    """
    n = len(x)
    block_id = torch.arange(n) if block_id is None else _tensor(block_id, torch.long)
    num_blocks = int(block_id[-1]) + 1 if n else 0
    graph = BlockGraph(
        X=_tensor(x, dtype),
        V=_tensor(v, dtype),
        X_target=_tensor(x_target, dtype),
        A=torch.full((n,), ATOM_UNK) if atom_types is None else _tensor(atom_types, torch.long),
        atom_pos=torch.full((n,), POS_UNK) if atom_pos is None else _tensor(atom_pos, torch.long),
        block_id=block_id,
        B=torch.full((num_blocks,), BLOCK_UNK) if block_types is None else _tensor(block_types, torch.long),
        block_len=torch.bincount(block_id, minlength=num_blocks),
        segment=torch.zeros(num_blocks, dtype=torch.long),
        edge_index=_tensor(edge_index, torch.long).view(2, -1),
        edge_attr=_tensor(edge_attr, dtype).view(-1, np.shape(edge_attr)[-1] if np.ndim(edge_attr) == 2 else 1),
        **extra,
    )
    if node_attr is not None:
        graph.node_attr = _tensor(node_attr, dtype).view(n, -1)
    if name is not None:
        graph.name = name
    return graph


def even_offsets(delta: int, num_timesteps: int) -> np.ndarray:
    """[P] target offsets ⌊Δ·p/P⌋, p = 1..P (N-body, MD17): evenly spread, the last is Δ."""
    return np.array([delta * p // num_timesteps for p in range(1, num_timesteps + 1)], dtype=np.int64)


def last_offsets(delta: int, num_timesteps: int) -> np.ndarray:
    """[P] target offsets Δ + p − P, p = 1..P (Mocap, ``last=True``): the P frames up to Δ."""
    return np.array([delta + p - num_timesteps for p in range(1, num_timesteps + 1)], dtype=np.int64)


def velocity_at(positions: np.ndarray, start: int, span: int, direction: str) -> np.ndarray:
    """[N, 3] velocity at frame ``start`` of frames [F, N, 3], per frame: (x[t] − x[t−s]) / s ("backward") or
    (x[t+s] − x[t]) / s ("forward"; s = 1 is the reference protocols' x[t+1] − x[t])."""
    other = start - span if direction == "backward" else start + span
    return (positions[max(start, other)] - positions[min(start, other)]) / span


def displacement_scale(windows, samples: int = 2000, seed: int = 0) -> np.ndarray:
    """[P] root-mean-square displacement (per Cartesian component) of a node from its window's input frame at each
    target frame, the graph's mean motion removed, over up to ``samples`` windows: a generative model's prior σ_p.

    Args:
        windows: a sequence of (positions [P, N, 3] at the targets, positions [N, 3] at the input frame).
    """
    rng = np.random.default_rng(seed)
    chosen = rng.choice(len(windows), size=min(samples, len(windows)), replace=False)
    squares = []
    for i in chosen:
        targets, start = windows[int(i)]
        d = targets - start[None]
        d = d - d.mean(axis=1, keepdims=True)
        squares.append((d ** 2).mean(axis=(1, 2)))
    return np.sqrt(np.mean(squares, axis=0))
