"""Binding-affinity regression and LEP pair classification with GET, as LightningModules.

:class:`AffinityModule` trains :class:`~geomol.models.get.GETAffinity` with MSE on pK and logs,
per epoch, Pearson, Spearman, RMSE and MAE over the whole validation/test set, plus the mean
per-target Spearman/Pearson (targets = the items' ``protein`` labels; one target when absent). The preprocessing the data
module applied (pocket cutoff, hydrogens, fragment vocabulary) is stored in every checkpoint,
so that prediction later builds graphs exactly as in training.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Mapping, Sequence

import torch

from geomol.data.blocks import ligand_atom_mask
from geomol.models.get import GETAffinity, GETPairClassifier
from geomol.tasks.base import GeomolModule
from geomol.tasks.metrics import auprc, auroc, grouped_regression_report, mean_of, regression_report

__all__ = ["AffinityModule", "PairClassificationModule", "ranking_loss", "relative_edge_loss", "denoising_loss"]

_GET_ARGS = ("d_hidden", "d_radial", "n_rbf", "cutoff", "d_edge", "n_layers", "n_head", "k_neighbors",
             "sparse_k", "dropout", "n_block_types")


def ranking_loss(pred: torch.Tensor, y: torch.Tensor, groups: Sequence[str] | None) -> torch.Tensor:
    """Mean logistic loss over ordered pairs of one group: log(1 + exp(−(p_i − p_j))) for y_i > y_j.

    Only the order of predictions within a protein matters to this term, so it targets per-target
    ranking (what Spearman measures) without asking the model to know each protein's offset.
    ``pred``, ``y``: [B]; ``groups``: B labels (all one group when None). 0 when no pair exists.
    """
    if groups is None:
        ids = torch.zeros_like(y, dtype=torch.long)
    else:  # an index per distinct group (hashes could collide)
        index = {group: i for i, group in enumerate(dict.fromkeys(groups))}
        ids = torch.tensor([index[g] for g in groups], device=y.device)
    ordered = (ids[:, None] == ids[None, :]) & (y[:, None] > y[None, :])
    if not ordered.any():
        return pred.sum() * 0.0
    return torch.nn.functional.softplus(-(pred[:, None] - pred[None, :])[ordered]).mean()


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
    ligand atom, and the mean squared distance of GET's output ligand coordinates from the clean
    ones, divided by σ² (1 for a model that returns its input; 0 for perfect denoising)."""
    ligand = ligand_atom_mask(batch)
    noisy = copy.copy(batch)
    noisy.X = batch.X + sigma * torch.randn_like(batch.X) * ligand[:, None].to(batch.X.dtype)
    out = model.embed(noisy)
    error = out.X[ligand] - batch.X[ligand].to(out.X.dtype)
    return (error ** 2).sum(-1).mean() / sigma ** 2


class _GETTask(GeomolModule):
    """Shared by both GET tasks: hyperparameters and lazy model construction.

    Args:
        d_hidden ... dropout: GET hyperparameters (:class:`~geomol.models.get.GETModel`).
        n_block_types: block vocabulary size; ``None`` takes it from the data module
            (``geomol fit`` fills it from the config before building).
        lr, final_lr, weight_decay: Adam with per-step exponential decay from lr to final_lr.
        compile: wrap the model in ``torch.compile``.
        rank_weight: weight of a pairwise ranking loss between ligands of the same protein in a
            batch (affinity only; 0 = the reference MSE alone). Use with ``group_batches``.
        edge_weight: weight of :func:`relative_edge_loss` on the measured relative free energies of
            the data module's perturbation graphs (affinity only; multi-task with the RBFE edges).
            Use with ``group_batches`` so that both ends of an edge share batches.
        pretrain_epochs: the first epochs train only :func:`denoising_loss` on the training
            complexes (labels unused), with ``denoise_sigma`` Å of noise; their validation metrics
            are NaN, so checkpoint selection skips them (affinity only).
    """

    model_class: type = GETAffinity

    def __init__(self, d_hidden: int = 64, d_radial: int = 32, n_rbf: int = 32, cutoff: float = 7.0,
                 d_edge: int = 64, n_layers: int = 3, n_head: int = 4, k_neighbors: int = 9,
                 sparse_k: int | None = 3, dropout: float = 0.1, n_block_types: int | None = None,
                 lr: float = 1e-3, final_lr: float | None = 1e-6, weight_decay: float = 1e-3, compile: bool = False,
                 rank_weight: float = 0.0, edge_weight: float = 0.0, pretrain_epochs: int = 0,
                 denoise_sigma: float = 1.0):
        super().__init__()
        self.save_hyperparameters()
        self.model = None
        self.preprocessing: dict[str, Any] = {}
        self.edges: dict[str, list[tuple[str, str, float]]] = {}
        if n_block_types is not None:
            self._build()

    def _build(self) -> None:
        self.model = self.model_class(**{k: self.hparams[k] for k in _GET_ARGS})
        if self.hparams.get("compile"):
            self.model = torch.compile(self.model, dynamic=True)

    def setup(self, stage: str) -> None:
        datamodule = getattr(self.trainer, "datamodule", None)
        if datamodule is not None and getattr(datamodule, "preprocessing", None):
            self.preprocessing = dict(datamodule.preprocessing)
        if self.hparams.get("edge_weight", 0.0) > 0:
            if not hasattr(datamodule, "relative_edges"):
                raise ValueError("edge_weight > 0 needs a data module with relative_edges() (FEP benchmark data)")
            self.edges = datamodule.relative_edges()
        if self.model is None:
            n_types = getattr(datamodule, "num_block_types", None)
            if n_types is None:
                raise ValueError("n_block_types is not set and the data module does not provide num_block_types")
            self.hparams.n_block_types = int(n_types)
            self._build()

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["geomol_preprocessing"] = self.preprocessing

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        self.preprocessing = dict(checkpoint.get("geomol_preprocessing", {}))
        if self.model is None:
            self.hparams.n_block_types = int(checkpoint["hyper_parameters"]["n_block_types"])
            self._build()


class AffinityModule(_GETTask):
    """GET + energy read-out, regression on pK (official LBA recipe by default; arguments as
    :class:`_GETTask`)."""

    model_class = GETAffinity

    def forward(self, batch) -> torch.Tensor:
        """[B] predicted pK."""
        return self.model(batch)

    @property
    def pretraining(self) -> bool:
        """Whether this epoch belongs to the denoising pre-training (``pretrain_epochs``)."""
        return self.current_epoch < self.hparams.get("pretrain_epochs", 0)

    def compute(self, batch):
        hp = self.hparams
        if self.training and self.pretraining:
            return denoising_loss(self.model, batch, hp.denoise_sigma), batch.num_graphs, None
        pred = self(batch)
        loss = GETAffinity.loss(pred, batch.y)
        if self.training and hp.rank_weight > 0:
            loss = loss + hp.rank_weight * ranking_loss(pred, batch.y, getattr(batch, "protein", None))
        if self.training and hp.get("edge_weight", 0.0) > 0:
            loss = loss + hp.edge_weight * relative_edge_loss(pred, batch.series, batch.ligand, self.edges)
        return loss, batch.num_graphs, pred

    def collect(self, batch, pred) -> None:
        targets = getattr(batch, "protein", None) or ["all"] * batch.num_graphs
        self.collector.add(pred=pred, y=batch.y, target=list(targets))

    def epoch_metrics(self, cols: dict[str, list]) -> dict[str, float]:
        metrics = regression_report(cols["pred"], cols["y"])
        metrics.pop("n")
        per_target = grouped_regression_report(cols["pred"], cols["y"], cols["target"])
        metrics["mean_target_spearman"] = mean_of(r["spearman"] for r in per_target.values())
        metrics["mean_target_pearson"] = mean_of(r["pearson"] for r in per_target.values())
        if self.pretraining and self.trainer.state.fn == "fit":  # untrained read-out: never select these epochs
            metrics = {name: math.nan for name in metrics}
        return metrics

    def predict_step(self, batch, batch_idx) -> dict[str, Any]:
        """Per item: ``name``, predicted ``pK`` and, where the item has a label, ``measured_pK``."""
        names = getattr(batch, "name", None) or [str(i) for i in range(batch.num_graphs)]
        out = {"name": list(names), "pK": self(batch).detach().cpu()}
        if getattr(batch, "y", None) is not None:
            out["measured_pK"] = batch.y.detach().float().cpu().reshape(-1)
        return out


class PairClassificationModule(_GETTask):
    """GET pair classifier for LEP: is the second conformation of a pair the active one?

    Batches hold 2P graphs ordered (inactive, active) per pair, both carrying the pair's label in
    ``y`` (1 = active). Logs AUROC and AUPRC per epoch. Defaults: the official LEP configuration.
    """

    model_class = GETPairClassifier

    def __init__(self, d_hidden: int = 128, d_radial: int = 64, **kwargs):
        super().__init__(d_hidden=d_hidden, d_radial=d_radial, **kwargs)

    def forward(self, batch) -> torch.Tensor:
        """[P, 2] logits (class 1 = active)."""
        return self.model(batch)

    def compute(self, batch):
        logits = self(batch)
        labels = batch.y.view(-1)[0::2]
        return GETPairClassifier.loss(logits, labels), logits.size(0), (logits, labels)

    def collect(self, batch, output) -> None:
        logits, labels = output
        self.collector.add(score=logits.softmax(-1)[:, 1], label=labels)

    def epoch_metrics(self, cols: dict[str, list]) -> dict[str, float]:
        return {"auroc": auroc(cols["score"], cols["label"]), "auprc": auprc(cols["score"], cols["label"])}

    def predict_step(self, batch, batch_idx) -> dict[str, Any]:
        """Per pair: ``name`` (of its first conformation) and ``p_active``."""
        p_active = self(batch).softmax(-1)[:, 1].detach().cpu()
        names = getattr(batch, "name", None) or [str(i) for i in range(2 * p_active.numel())]
        return {"name": list(names)[0::2], "p_active": p_active}
