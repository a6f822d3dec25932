"""Training the contact scorer (:mod:`geomol.models.contact_scorer`) to rank ligands within their series.

Plain PyTorch, no Lightning: the model is tiny (a per-atom MLP) and a fit over ~12,000 complexes takes
seconds per epoch on one thread. Batches are whole series (``series_per_batch`` of them), and the loss
sees only differences within a series, never a protein's pK level, which no model of one complex can
know for a protein it has not seen:

* ``ranking``: logistic loss over ordered pairs of one series (:func:`geomol.training.losses.ranking_loss`);
* ``ranking_weighted``: the same with pairs weighted by their pK difference up to 1 pK
  (:func:`geomol.training.losses.weighted_ranking_loss`), so pairs within the assays' noise count less;
* ``ranking_per_series``: the logistic loss averaged over each series' pairs, then over the series
  (:func:`geomol.training.losses.series_ranking_loss`), so that a series of 80 ligands does not weigh 70 times
  one of 10, as targets weigh alike in the protocol's mean per-target Spearman;
* ``listwise``: the cross-entropy between each series' softmax of pK and of the scores
  (:func:`geomol.training.losses.listwise_loss`), so the top of each series weighs most;
* ``centred``: squared error after centring scores and labels on their series' mean
  (:func:`geomol.training.losses.centred_loss`), so scores are pK differences within a series.

The epoch is chosen on a validation slice by the protocol's criterion, the mean per-target Spearman
(:func:`geomol.training.ligand_baselines.validation_score`); test items are never looked at.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Hashable, Iterable, Literal, Sequence

import numpy as np
import torch

from geomol.data.chemistry.contact_features import graph_ligand_bonds
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.errors import ConfigError
from geomol.metrics.targets import MIN_TARGET_LIGANDS, target_members
from geomol.models.contact_scorer import ContactBatch, ContactScorer
from geomol.training.ligand_baselines import validation_score
from geomol.training.losses import (centred_loss, listwise_loss, ranking_loss, series_ranking_loss,
                                    weighted_ranking_loss)

__all__ = ["CONTACT_LOSSES", "ContactData", "ContactFit", "calibrate_contact_scorer", "contact_views",
           "fit_contact_scorer", "predict_contact_scorer", "predict_views"]

CONTACT_LOSSES = {"ranking": ranking_loss, "ranking_weighted": weighted_ranking_loss,
                  "ranking_per_series": series_ranking_loss, "listwise": listwise_loss, "centred": centred_loss}


@dataclass
class ContactData:
    """Contact features of a set of complexes, concatenated for batching.

    Attributes:
        atoms: ``(N, F)`` float32, the per-atom contact features of every item, item after item.
        offsets: ``(n + 1,)`` int64, item ``i`` owns rows ``offsets[i]:offsets[i + 1]`` of ``atoms``.
        descriptors: ``(n, D)`` float32 ligand descriptors.
        label: ``(n,)`` pK (``nan`` where unknown).
        keys: ``(n,)`` the target (series) of each item.
        bonds: ``(E, 2)`` int64 rows of ``atoms`` bonded to each other (within one item), for a scorer that
            passes messages along the ligand's bonds; ``None`` when not read.
    """

    atoms: torch.Tensor
    offsets: np.ndarray
    descriptors: torch.Tensor
    label: np.ndarray
    keys: np.ndarray
    bonds: np.ndarray | None = None
    bond_item: np.ndarray | None = field(init=False, repr=False, default=None)  # the item of every bond, once

    def __post_init__(self):
        if self.bonds is not None:
            self.bond_item = np.searchsorted(self.offsets, self.bonds[:, 0], side="right") - 1

    @classmethod
    def from_items(cls, atom_rows: Sequence[np.ndarray], descriptors: np.ndarray, label: Sequence[float],
                   keys: Sequence[Hashable], bonds: Sequence[np.ndarray] | None = None) -> "ContactData":
        """From one ``(L_i, F)`` array per item
        (:func:`~geomol.data.chemistry.contact_features.graph_atom_contacts`) and,
        optionally, one ``(B_i, 2)`` array of bonded row pairs per item
        (:func:`~geomol.data.chemistry.contact_features.graph_ligand_bonds`)."""
        if not len(atom_rows) == len(descriptors) == len(label) == len(keys):
            raise ConfigError(f"{len(atom_rows)} items, {len(descriptors)} descriptor rows, {len(label)} labels, "
                              f"{len(keys)} keys")
        if any(len(rows) == 0 for rows in atom_rows):
            raise ConfigError("every item needs at least one ligand atom")
        offsets = np.concatenate([[0], np.cumsum([len(rows) for rows in atom_rows])]).astype(np.int64)
        if bonds is not None:
            bonds = np.concatenate([np.asarray(pairs, dtype=np.int64).reshape(-1, 2) + start
                                    for pairs, start in zip(bonds, offsets[:-1])]) if len(bonds) else None
        return cls(torch.as_tensor(np.concatenate(atom_rows), dtype=torch.float32), offsets,
                   torch.as_tensor(np.asarray(descriptors), dtype=torch.float32),
                   np.asarray(label, dtype=np.float64), np.asarray(keys), bonds)

    def __len__(self) -> int:
        return len(self.label)

    def batch(self, idx: Sequence[int], bonds: bool = False) -> ContactBatch:
        """The :class:`~geomol.models.contact_scorer.ContactBatch` of the items ``idx``, in that order (with
        their bonds when ``bonds``)."""
        idx = np.asarray(idx, dtype=np.int64)
        starts, lengths = self.offsets[idx], self.offsets[idx + 1] - self.offsets[idx]
        owner = np.repeat(np.arange(len(idx)), lengths)
        rows = starts[owner] + np.arange(len(owner)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        return ContactBatch(self.atoms[torch.from_numpy(rows)], torch.from_numpy(owner),
                            self.descriptors[torch.from_numpy(idx)], len(idx),
                            self.batch_bonds(idx) if bonds else None)

    def ligand_sums(self) -> np.ndarray:
        """``(n, F + D)``: every item's rows summed over its ligand atoms, then its descriptors (what a tree model
        of the whole ligand reads)."""
        sums = np.add.reduceat(self.atoms.double().numpy(), self.offsets[:-1], axis=0)  # every item has ≥ 1 atom
        return np.concatenate([sums, self.descriptors.double().numpy()], axis=1)

    def batch_bonds(self, idx: Sequence[int]) -> torch.Tensor:
        """``(E_b, 2)`` int64: the bonds of the items ``idx`` (distinct) as rows of :meth:`batch`'s ``atoms``."""
        if self.bonds is None:
            raise ConfigError("these contact data carry no ligand bonds")
        idx = np.asarray(idx, dtype=np.int64)
        position = np.full(len(self), -1, dtype=np.int64)
        position[idx] = np.arange(len(idx))
        lengths = self.offsets[idx + 1] - self.offsets[idx]
        batch_start = np.cumsum(lengths) - lengths
        item = self.bond_item
        chosen = position[item] >= 0
        moved = batch_start[position[item[chosen]]] - self.offsets[item[chosen]]
        return torch.from_numpy(self.bonds[chosen] + moved[:, None])


def contact_views(graphs: Iterable, recipe: ContactRecipe, label: Sequence[float], keys: Sequence[Hashable],
                  bonds: bool = False) -> list[ContactData]:
    """The :class:`ContactData` of complex graphs featurised by ``recipe``, one per view
    (:attr:`~geomol.data.chemistry.contact_recipe.ContactRecipe.n_views`: the pose's own first, then the moved
    poses when the recipe keeps them as views).

    Args:
        graphs: complex graphs built from ligand molecules (they carry ``ligand_descriptors``), in item order.
        label: ``(n,)`` pK; keys: ``(n,)`` the series of each item.
        bonds: carry the ligands' bonds (for a scorer passing messages along them).
    """
    rows = [[] for _ in range(recipe.n_views)]
    descriptors, ligand_bonds = [], []
    for graph in graphs:
        graph_bonds = graph_ligand_bonds(graph) if recipe.bond_context or bonds else None  # rigid moves keep them
        for view, view_rows in zip(rows, recipe.views(graph, graph_bonds)):
            view.append(view_rows)
        descriptors.append(graph.ligand_descriptors[0].numpy())
        ligand_bonds.append(graph_bonds)
    return [ContactData.from_items(view, np.asarray(descriptors), label, keys, ligand_bonds if bonds else None)
            for view in rows]


@dataclass
class ContactFit:
    """A contact scorer fitted on a training set, at the epoch chosen on validation.

    Attributes:
        model: the scorer at its best validation epoch (eval mode).
        epoch: that epoch (0-based); score: its validation score; curve: the score after every epoch.
    """

    model: ContactScorer
    epoch: int
    score: float
    curve: list[float] = field(default_factory=list)


def predict_contact_scorer(model: ContactScorer, data: ContactData, idx: Sequence[int],
                           batch_size: int = 2048) -> np.ndarray:
    """``(len(idx),)`` scores of the items ``idx``."""
    idx = np.asarray(idx, dtype=np.int64)
    out = []
    with torch.inference_mode():
        for start in range(0, len(idx), batch_size):
            chunk = idx[start:start + batch_size]
            out.append(model(data.batch(chunk, bonds=model.message_steps > 0)).double().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def predict_views(model: ContactScorer, views: Sequence[ContactData], idx: Sequence[int]) -> np.ndarray:
    """``(len(idx),)`` mean scores of the items ``idx`` over ``views`` (:class:`ContactData` of the same items, e.g.
    of rigidly moved poses): test-time augmentation."""
    return np.mean([predict_contact_scorer(model, view, idx) for view in views], axis=0)


def _series_groups(train: np.ndarray, keys: np.ndarray) -> list[np.ndarray]:
    """The training items of every series with ≥ 2 of them (series in sorted order)."""
    _, series = np.unique(keys[train], return_inverse=True)
    groups = [train[series == k] for k in range(int(series.max()) + 1)]
    return [g for g in groups if len(g) >= 2]


def _series_batches(groups: list[np.ndarray], per_batch: int, rng: np.random.Generator):
    """The series of ``groups`` in a random order, ``per_batch`` whole series at a time."""
    order = rng.permutation(len(groups))
    for start in range(0, len(order), per_batch):
        yield np.concatenate([groups[j] for j in order[start:start + per_batch]])


def fit_contact_scorer(data: ContactData, train: Sequence[int], valid: Sequence[int], *,
                       loss: Literal["ranking", "ranking_weighted", "ranking_per_series", "listwise",
                                     "centred"] = "ranking",
                       epochs: int = 20, seed: int = 0, hidden: int = 32, descriptors: bool = True, lr: float = 3e-3,
                       weight_decay: float = 1e-4,
                       series_per_batch: int = 16, min_ligands: int = MIN_TARGET_LIGANDS,
                       train_keys: np.ndarray | None = None, pooled: int = 0,
                       views: Sequence[ContactData] = (), message_steps: int = 0,
                       recipe: ContactRecipe | None = None) -> ContactFit:
    """Train a :class:`ContactScorer` on ``train``; keep the epoch with the best score on ``valid``.

    Args:
        data: every item's features, labels and series (:class:`ContactData`).
        train, valid: item indices (disjoint protein clusters, :mod:`geomol.data.splits.corpus`).
        loss: a key of :data:`CONTACT_LOSSES` (``'ranking'``, ``'ranking_weighted'``, ``'ranking_per_series'``,
            ``'listwise'``, ``'centred'``), within series (or within ``train_keys``).
        descriptors: include the linear ligand-descriptor term.
        series_per_batch: whole series per optimiser step.
        min_ligands: a validation series is scored when it has this many items.
        train_keys: ``(n,)`` the group of every item that training batches and compares within (default
            ``data.keys``, the series; e.g. the protein cluster, to also compare ligands across a protein's assays).
            Validation is always scored per series.
        pooled: width of the scorer's non-additive term (:class:`ContactScorer`; 0: none).
        views: the same items' features for other poses (e.g. the ligand moved rigidly, a pose augmentation:
            :func:`~geomol.data.chemistry.contact_features.graph_pose_contacts`): every training batch reads ``data``
            or one of them at random, and validation scores the mean prediction over all (:func:`predict_views`).
        message_steps: rounds of messages along the ligands' bonds (:class:`ContactScorer`; ``data.bonds`` needed).
        recipe: how ``data`` was featurised (:func:`contact_views`), kept with the model so that it can be
            saved and used for prediction (None: the model reads given rows only and cannot be saved).
    """
    if loss not in CONTACT_LOSSES:
        raise ConfigError(f"contact scorer loss is one of {sorted(CONTACT_LOSSES)}, got {loss!r}")
    train, valid = np.asarray(train, dtype=np.int64), np.asarray(valid, dtype=np.int64)
    if len(train) == 0 or len(valid) == 0:
        raise ConfigError(f"{len(train)} training and {len(valid)} validation items: both are needed")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = ContactScorer(hidden, node_features=data.atoms.shape[1],
                          descriptor_features=data.descriptors.shape[1] if descriptors else 0, pooled=pooled,
                          message_steps=message_steps, recipe=recipe)
    train_batch = data.batch(train)
    model.fit_normalisation(train_batch.atoms, train_batch.descriptors)
    optimiser = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    loss_function = CONTACT_LOSSES[loss]
    members = target_members(data.keys[valid].tolist(), min_ligands)
    train_keys = data.keys if train_keys is None else np.asarray(train_keys)
    groups = _series_groups(train, train_keys)
    best, curve = None, []
    for epoch in range(epochs):
        model.train()
        for idx in _series_batches(groups, series_per_batch, rng):
            view = (data, *views)[rng.integers(len(views) + 1) if views else 0]
            pred = model(view.batch(idx, bonds=message_steps > 0))
            value = loss_function(pred, torch.as_tensor(data.label[idx], dtype=pred.dtype), train_keys[idx].tolist())
            optimiser.zero_grad()
            value.backward()
            optimiser.step()
        model.eval()
        score = validation_score(predict_views(model, (data, *views), valid), data.label[valid], members)
        curve.append(score)
        if best is None or score > best.score:
            best = ContactFit(copy.deepcopy(model), epoch, score)
    best.curve = curve
    return best


def calibrate_contact_scorer(model: ContactScorer, data: ContactData, train: Sequence[int]) -> None:
    """Calibrate a fitted scorer to pK on its training items, in place (:meth:`ContactScorer.calibrate`: the
    slope of the items' pK on their scores within series, and the offset to their mean pK)."""
    train = np.asarray(train, dtype=np.int64)
    model.scale.fill_(1.0)
    model.offset.fill_(0.0)
    raw = torch.as_tensor(predict_contact_scorer(model, data, train))
    _, groups = np.unique(data.keys[train], return_inverse=True)
    model.calibrate(raw, torch.as_tensor(data.label[train]), torch.as_tensor(groups))
