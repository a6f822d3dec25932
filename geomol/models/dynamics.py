"""What trajectory models (EGNO, the EGNN baseline) read from a batch, what they return, and how they are scored.

A trajectory dataset item is a :class:`~geomol.data.blocks.BlockGraph` with

* ``X`` [N, 3] input positions (Å, or the dataset's length unit), ``V`` [N, 3] input velocities
  (length per frame, or the simulator's unit),
* ``X_target`` [N, P, 3] positions at the P target frames,
* ``edge_index`` [2, M] (receiver i in row 0, sender j in row 1), ``edge_attr`` [M, E_d] dataset
  edge features, optionally ``node_attr`` [N, F_d] dataset node features.

The model inputs are then built here, always from the same X and V (``specs/EGNO.md`` §3):
node features h = [|V|, node_attr], edge features [edge_attr, ‖X_i − X_j‖²], and the centroid
of each graph's input positions. The batch vector (PyG) gives the graph of each node.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, NamedTuple

import torch

from geomol.errors import ConfigError
from geomol.nn.scatter import scatter_mean, scatter_sum

__all__ = ["DynamicsInputs", "TrajectoryPrediction", "dynamics_inputs", "trajectory_loss", "per_graph_mse",
           "s2s_mse", "s2t_mse"]

NodeAttrNorm = Literal["dataset", "batch_max"]


@dataclass
class DynamicsInputs:
    """Tensors of one batch as the models consume them (N nodes, M edges, B graphs)."""

    x: torch.Tensor  # [N, 3] positions
    v: torch.Tensor  # [N, 3] velocities
    h: torch.Tensor  # [N, F] invariant node features, column 0 = |v|
    edge_index: torch.Tensor  # [2, M]
    edge_attr: torch.Tensor  # [M, E] invariant edge features, last column = ‖x_i − x_j‖²
    center: torch.Tensor  # [N, 3] centroid of the node's graph (input frame)
    batch: torch.Tensor  # [N] graph index
    num_graphs: int


class TrajectoryPrediction(NamedTuple):
    """Model output: positions x [N, P, 3], velocities v [N, P, 3], node embeddings h [N, P, H]."""

    x: torch.Tensor
    v: torch.Tensor
    h: torch.Tensor


def dynamics_inputs(graph, node_attr_norm: NodeAttrNorm = "dataset") -> DynamicsInputs:
    """Build :class:`DynamicsInputs` from a (batched) trajectory BlockGraph.

    Args:
        graph: BlockGraph or PyG Batch with ``X``, ``V``, ``edge_index`` and optionally
            ``edge_attr``, ``node_attr``, ``batch``.
        node_attr_norm: ``"dataset"`` uses ``node_attr`` as the dataset scaled it (default,
            independent of the batch); ``"batch_max"`` divides each column by its maximum over
            the batch, reproducing the official scripts (whose features then depend on which
            samples share a batch, ``specs/EGNO.md`` §5 quirk 14).
    """
    x, v = graph.X, getattr(graph, "V", None)
    if v is None:
        raise ConfigError("trajectory graph has no velocities 'V'", source=getattr(graph, "name", None))
    n = x.size(0)
    batch = getattr(graph, "batch", None)
    if batch is None:
        batch = torch.zeros(n, dtype=torch.long, device=x.device)
    num_graphs = int(getattr(graph, "num_graphs", 1) or 1)
    node_columns = [v.norm(dim=-1, keepdim=True).detach()]
    node_attr = getattr(graph, "node_attr", None)
    if node_attr is not None:
        node_attr = node_attr.to(x.dtype)
        if node_attr_norm == "batch_max":
            node_attr = node_attr / node_attr.max(0, keepdim=True).values
        elif node_attr_norm != "dataset":
            raise ConfigError(f"unknown node_attr_norm {node_attr_norm!r} (dataset | batch_max)")
        node_columns.append(node_attr)
    edge_index = graph.edge_index
    sq_dist = (x[edge_index[0]] - x[edge_index[1]]).pow(2).sum(-1, keepdim=True).detach()
    edge_attr = getattr(graph, "edge_attr", None)
    edge_attr = sq_dist if edge_attr is None else torch.cat([edge_attr.to(x.dtype), sq_dist], dim=-1)
    center = scatter_mean(x, batch, num_graphs)[batch]
    return DynamicsInputs(x, v, torch.cat(node_columns, -1), edge_index, edge_attr, center, batch, num_graphs)


def trajectory_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Training objective of the reference: (1/P) Σ_p mean over nodes and xyz of (x̂ − x)², for [N, P, 3]."""
    return torch.nn.functional.mse_loss(pred, target)


def per_graph_mse(pred: torch.Tensor, target: torch.Tensor, batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
    """[B, P] mean squared error over the nodes and xyz of each graph, per predicted frame."""
    err = (pred - target).pow(2).mean(-1)  # [N, P]
    count = torch.bincount(batch, minlength=num_graphs).clamp(min=1).to(err.dtype)
    return scatter_sum(err, batch, num_graphs) / count.unsqueeze(-1)


def s2s_mse(pred: torch.Tensor, target: torch.Tensor, batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
    """[B] state-to-state MSE: error at the last target frame (the number the reference logs)."""
    return per_graph_mse(pred[:, -1:], target[:, -1:], batch, num_graphs)[:, 0]


def s2t_mse(pred: torch.Tensor, target: torch.Tensor, batch: torch.Tensor, num_graphs: int) -> torch.Tensor:
    """[B] state-to-trajectory MSE: mean over the P target frames."""
    return per_graph_mse(pred, target, batch, num_graphs).mean(-1)
