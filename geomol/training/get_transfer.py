"""Transfer a pre-trained GET member to another kind of receptor: fine-tune every weight on labelled complexes.

Plain PyTorch, no Lightning (as :mod:`geomol.training.contact_scorer`): the data are small (tens to a few hundred
complexes, e.g. the nucleic-acid set of :mod:`geomol.data.datasets.nucleic_affinity`) and the fit runs inside
cross-validation folds. :func:`fit_get_transfer` starts from a trained member (``get-plb``'s, trained on
protein–ligand complexes) or from scratch, sets its level to the training labels' mean (an energy read-out gains
an offset, :meth:`~geomol.models.get.GETAffinity.finetune_start`), trains with a weighted squared error on pK
(per-item weights: e.g. low-confidence labels count less) and keeps the epoch with the best score on the
validation items (Spearman over them; test items are never looked at).

Batches are fixed groups of ``batch_size`` complexes drawn once (their edges and atom pairs are built once,
:meth:`~geomol.models.get.GETAffinity.inputs`); each epoch visits them in a new order.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
import torch

from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError
from geomol.metrics.scores import spearman
from geomol.models.get import GETAffinity

__all__ = ["TransferFit", "bare_graph", "fit_get_transfer", "predict_member"]


def bare_graph(graph: BlockGraph) -> BlockGraph:
    """The tensors GET reads of a complex graph (batches of them collate quickly)."""
    return BlockGraph(X=graph.X, A=graph.A, atom_pos=graph.atom_pos, block_id=graph.block_id, B=graph.B,
                      block_len=graph.block_len, segment=graph.segment, y=graph.y)


@dataclass
class TransferFit:
    """A fine-tuned member at its best validation epoch.

    Attributes:
        model: the member (eval mode); epoch: the chosen epoch (0-based; −1: the start, before any step);
        score: its validation Spearman; curve: the validation Spearman after every epoch; losses: the mean
        training loss of every epoch (pK²).
    """

    model: GETAffinity
    epoch: int
    score: float
    curve: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)


def predict_member(model: torch.nn.Module, graphs: Sequence[BlockGraph], batch_size: int = 16) -> np.ndarray:
    """``(len(graphs),)`` predictions of one member (eval mode, no gradients)."""
    model.eval()
    out = []
    with torch.inference_mode():
        for start in range(0, len(graphs), batch_size):
            out.append(model(model.inputs(list(graphs[start:start + batch_size]))).double().numpy())
    return np.concatenate(out) if out else np.zeros(0)


def _fixed_batches(train: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    order = rng.permutation(train)
    return [order[start:start + batch_size] for start in range(0, len(order), batch_size)]


def fit_get_transfer(start: GETAffinity, graphs: Sequence[BlockGraph], label: np.ndarray, train: Sequence[int],
                     valid: Sequence[int], *, weights: np.ndarray | None = None, epochs: int = 20, lr: float = 3e-4,
                     weight_decay: float = 1e-3, batch_size: int = 8, seed: int = 0,
                     clip: float = 1.0) -> TransferFit:
    """Fine-tune a copy of ``start`` on ``train``; keep the epoch with the best validation Spearman.

    Args:
        start: the pre-trained member (left unchanged), or an untrained one (training from scratch).
        graphs: every item's complex graph (:func:`bare_graph` is applied here); label: ``(n,)`` pK.
        train, valid: item indices (disjoint clusters: :mod:`geomol.data.splits.nucleic`).
        weights: ``(n,)`` weight of each item in the loss (default 1); items of weight 0 are not trained on.
        epochs, lr, weight_decay, batch_size, clip: Adam on the weighted mean squared error, gradients clipped to
            norm ``clip``.
        seed: the batches and their order.

    Raises:
        ConfigError: no training or no validation item.
    """
    label = np.asarray(label, dtype=np.float64)
    weights = np.ones(len(label)) if weights is None else np.asarray(weights, dtype=np.float64)
    train = np.asarray([i for i in train if weights[i] > 0], dtype=np.int64)
    valid = np.asarray(valid, dtype=np.int64)
    if len(train) == 0 or len(valid) < 2:
        raise ConfigError(f"{len(train)} training and {len(valid)} validation items: at least 1 and 2 are needed")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    bare = [bare_graph(g) for g in graphs]
    model = start.finetune_start()
    with torch.no_grad():
        offset = np.average(label[train] - predict_member(model, [bare[i] for i in train]), weights=weights[train])
        model.readout.offset += float(offset)
    batches = [(model.inputs([bare[i] for i in b]), torch.as_tensor(label[b]), torch.as_tensor(weights[b]))
               for b in _fixed_batches(train, batch_size, rng)]
    valid_graphs = [bare[i] for i in valid]
    optimiser = torch.optim.Adam(model.parameters(), lr=lr, weight_decay=weight_decay)
    best = TransferFit(copy.deepcopy(model).eval(), -1, spearman(predict_member(model, valid_graphs), label[valid]))
    curve, losses = [], []
    for epoch in range(epochs):
        model.train()
        total = 0.0
        for k in rng.permutation(len(batches)):
            inputs, target, weight = batches[k]
            pred = model(inputs)
            loss = (weight.to(pred.dtype) * (pred - target.to(pred.dtype)) ** 2).sum() / weight.sum()
            optimiser.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            optimiser.step()
            total += float(loss.detach()) * len(target)
        losses.append(total / len(train))
        score = spearman(predict_member(model, valid_graphs), label[valid])
        curve.append(score)
        if score > best.score:
            best = TransferFit(copy.deepcopy(model).eval(), epoch, score)
    best.curve, best.losses = curve, losses
    return best
