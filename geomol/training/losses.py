"""Loss functions of affinity training, on tensors: pairwise and listwise ranking within groups, centred
squared error, decoy hinge, relative-edge error and coordinate denoising.

Plain PyTorch, no Lightning: the Lightning task's components (:mod:`geomol.tasks.objectives`) and the
Lightning-free fits (:mod:`geomol.training.contact_scorer`) call the same functions.
"""
from __future__ import annotations

import copy
from typing import Mapping, Sequence

import torch

from geomol.data.blocks import ligand_atom_mask
from geomol.nn.scatter import scatter_count, scatter_log_softmax, scatter_softmax, scatter_sum

__all__ = ["ranking_loss", "weighted_ranking_loss", "series_ranking_loss", "listwise_loss", "centred_loss",
           "decoy_hinge_loss", "relative_edge_loss", "denoising_loss"]


def _group_ids(groups: Sequence[str] | None, like: torch.Tensor) -> torch.Tensor:
    """[B] long index of each item's group (all 0 when ``groups`` is None)."""
    if groups is None:
        return torch.zeros_like(like, dtype=torch.long)
    index = {group: i for i, group in enumerate(dict.fromkeys(groups))}  # an index per group (hashes could collide)
    return torch.tensor([index[g] for g in groups], device=like.device)


def ranking_loss(pred: torch.Tensor, y: torch.Tensor, groups: Sequence[str] | None,
                 difference_cap: float | None = None, per_group: bool = False) -> torch.Tensor:
    """Mean logistic loss over ordered pairs of one group: log(1 + exp(−(p_i − p_j))) for y_i > y_j.

    Only the order of predictions within a protein matters to this term, so it targets per-target
    ranking (what Spearman measures) without asking the model to know each protein's offset.
    ``pred``, ``y``: [B]; ``groups``: B labels (all one group when None). 0 when no pair exists.
    With ``difference_cap`` (pK), each pair is weighted by min(y_i − y_j, cap) / cap and the mean is weighted:
    pairs closer than the assays' noise count less than clearly ordered ones. With ``per_group``, the mean is
    taken over each group's pairs, then over the groups: every series counts alike, as every target counts
    alike in a mean per-target Spearman (a group of n items otherwise weighs ~n²).
    """
    ids = _group_ids(groups, y)
    ordered = (ids[:, None] == ids[None, :]) & (y[:, None] > y[None, :])
    if not ordered.any():
        return pred.sum() * 0.0
    losses = torch.nn.functional.softplus(-(pred[:, None] - pred[None, :])[ordered])
    if per_group:
        if difference_cap is not None:
            raise ValueError("ranking_loss: per_group and difference_cap do not combine")
        pair_group, n_groups = ids[:, None].expand_as(ordered)[ordered], int(ids.max()) + 1
        counts = scatter_count(pair_group, n_groups, losses.dtype)
        present = counts > 0
        return (scatter_sum(losses, pair_group, n_groups)[present] / counts[present]).mean()
    if difference_cap is None:
        return losses.mean()
    weights = (y[:, None] - y[None, :])[ordered].clamp(max=difference_cap)
    return (weights * losses).sum() / weights.sum()


def weighted_ranking_loss(pred: torch.Tensor, y: torch.Tensor, groups: Sequence[str] | None) -> torch.Tensor:
    """:func:`ranking_loss` with pairs weighted by their pK difference up to 1 pK."""
    return ranking_loss(pred, y, groups, difference_cap=1.0)


def series_ranking_loss(pred: torch.Tensor, y: torch.Tensor, groups: Sequence[str] | None) -> torch.Tensor:
    """:func:`ranking_loss` averaged within each group first, then over the groups."""
    return ranking_loss(pred, y, groups, per_group=True)


def listwise_loss(pred: torch.Tensor, y: torch.Tensor, groups: Sequence[str] | None,
                  temperature: float = 1.0) -> torch.Tensor:
    """Listwise cross-entropy (ListNet) within groups: −Σ_i softmax(y/T)_i · log softmax(pred)_i over each group's
    items, summed over the groups and divided by their items (a group weighs by its size).

    The whole order of a series is one target distribution: the tightest binders (within ``temperature`` pK of the
    best) carry most of it, so the term asks first for the top of each series, where a user's next compound is
    chosen. ``pred``, ``y``: [B]; ``groups``: B labels. Groups of one item carry no information and are left out.
    """
    ids = _group_ids(groups, y)
    n_groups = int(ids.max()) + 1
    keep = scatter_count(ids, n_groups, pred.dtype)[ids] > 1
    if not keep.any():
        return pred.sum() * 0.0
    target = scatter_softmax(y.to(pred.dtype) / temperature, ids, n_groups)
    return -(target * scatter_log_softmax(pred, ids, n_groups))[keep].sum() / keep.sum()


def centred_loss(pred: torch.Tensor, y: torch.Tensor, groups: Sequence[str] | None) -> torch.Tensor:
    """Mean squared error after centring predictions and labels on their group's mean in the batch.

    Each group's offset (a protein's or an assay's pK level, which no model of one complex can know)
    drops out; what is left is how each ligand differs from the others of its group, in pK units, so
    the term asks for the right spread as well as the right order. Items alone in their group in the
    batch carry no information and are left out. ``pred``, ``y``: [B]; ``groups``: B labels.
    """
    ids = _group_ids(groups, y)
    n_groups = int(ids.max()) + 1
    count = torch.zeros(n_groups, dtype=pred.dtype, device=pred.device).index_add(0, ids, torch.ones_like(pred))
    y = y.to(pred.dtype)
    residual = pred - y
    mean = torch.zeros_like(count).index_add(0, ids, residual) / count
    keep = count[ids] > 1
    if not keep.any():
        return pred.sum() * 0.0
    return ((residual - mean[ids])[keep] ** 2).mean()


def decoy_hinge_loss(pred: torch.Tensor, pred_decoys: torch.Tensor, origin: torch.Tensor,
                     margin: float) -> torch.Tensor:
    """Mean of max(0, margin − (pred[origin_d] − pred_decoys[d])): every decoy must score at least
    ``margin`` pK below the true complex it came from. ``pred``: [B]; ``pred_decoys``, ``origin``: [D]."""
    return torch.relu(margin - (pred[origin] - pred_decoys)).mean()


def relative_edge_loss(pred: torch.Tensor, series: Sequence[str], ligands: Sequence[str],
                       edges: Mapping[str, Sequence[tuple[str, str, float]]]) -> torch.Tensor:
    """Mean squared error of predicted vs measured relative affinities over the perturbation edges
    (RBFE graph) whose two ligands are both in the batch.

    ``pred``: [B] pK; ``series``, ``ligands``: B labels; ``edges``: per series, ``(ligand_a, ligand_b,
    ΔpK)`` with ΔpK = pK(b) − pK(a). 0 (with a gradient path) when no edge is in the batch.
    """
    where = {(s, name): i for i, (s, name) in enumerate(zip(series, ligands))}
    pairs = [(where[(s, a)], where[(s, b)], delta) for s in dict.fromkeys(series) for a, b, delta in edges.get(s, ())
             if (s, a) in where and (s, b) in where]
    if not pairs:
        return pred.sum() * 0.0
    a, b, delta = zip(*pairs)
    measured = torch.tensor(delta, dtype=pred.dtype, device=pred.device)
    return ((pred[list(b)] - pred[list(a)] - measured) ** 2).mean()


def denoising_loss(model, batch, sigma: float) -> torch.Tensor:
    """Self-supervised coordinate denoising (no labels used): Gaussian noise of ``sigma`` Å on every
    ligand atom, and the mean squared error of GET's output ligand coordinates (per atom and axis, Å²) against
    the clean ones, divided by σ²: 1 for a model that returns its noisy input, 0 for perfect denoising."""
    ligand = ligand_atom_mask(batch)
    noisy = copy.copy(batch)
    noisy.X = batch.X + sigma * torch.randn_like(batch.X) * ligand[:, None].to(batch.X.dtype)
    out = model.embed(noisy)
    error = out.X[ligand] - batch.X[ligand].to(out.X.dtype)
    return (error ** 2).mean() / sigma ** 2
