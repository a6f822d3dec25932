"""Binding-affinity regression and LEP pair classification with GET, as LightningModules.

:class:`AffinityModule` trains :class:`~geomol.models.get.GETAffinity` with MSE on pK and logs,
per epoch, Pearson, Spearman, RMSE and MAE over the whole validation/test set, plus the mean
per-target Spearman/Pearson (targets = the items' ``protein`` labels; one target when absent).
Auxiliary objectives are components chosen in the YAML (:mod:`geomol.tasks.objectives`). The data
module's graph recipe (:class:`~geomol.data.complexes.recipe.ComplexRecipe`) is stored in every checkpoint,
so that prediction later builds graphs exactly as in training.
"""
from __future__ import annotations

import math
from typing import Any

import torch

from geomol.data.complexes.recipe import ComplexRecipe
from geomol.metrics.scores import auprc, auroc, grouped_regression_report, mean_of, regression_report
from geomol.models.get import GETAffinity, GETConfig, GETPairClassifier
from geomol.tasks.base import GeomolModule
from geomol.tasks.objectives import (LOSS_TERMS, PRETRAINING_STAGES, DenoisingPretraining, LossTerm, component,
                                     describe)

__all__ = ["AffinityModule", "PairClassificationModule"]

_D = GETConfig()  # the architecture's defaults, written once in GETConfig


class _GETTask(GeomolModule):
    """Shared by both GET tasks: hyperparameters and lazy model construction.

    Args:
        hidden ... z_requires_grad: the architecture, fields of :class:`~geomol.models.get.GETConfig`
            (defaults from there).
        num_block_types: block vocabulary size; ``None`` takes it from the data module's recipe
            (``geomol fit`` fills it from the config before building).
        lr, final_lr, weight_decay: Adam with per-step exponential decay from lr to final_lr.
        compile: wrap the model in ``torch.compile``.
    """

    model_class: type = GETAffinity
    recipe_type = ComplexRecipe

    def __init__(self, hidden: int = _D.hidden, radial_dim: int = _D.radial_dim, num_rbf: int = _D.num_rbf,
                 cutoff: float = _D.cutoff, edge_embedding_dim: int = _D.edge_embedding_dim,
                 num_layers: int = _D.num_layers, num_heads: int = _D.num_heads, k_neighbors: int = _D.k_neighbors,
                 sparse_k: int | None = _D.sparse_k, dropout: float = _D.dropout, num_block_types: int | None = None,
                 z_requires_grad: bool = _D.z_requires_grad, readout: str = _D.readout, lr: float = 1e-3,
                 final_lr: float | None = 1e-6, weight_decay: float = 1e-3, compile: bool = False):
        super().__init__()
        self.save_hyperparameters(ignore=["loss_terms", "pretraining"])  # recorded as plain dicts by the subclass
        self.model = None
        if num_block_types is not None:
            self._build()

    def _build(self) -> None:
        self.model = self.model_class(GETConfig.from_mapping(self.hparams))
        if self.hparams.get("compile"):
            self.model = torch.compile(self.model, dynamic=True)

    def setup(self, stage: str) -> None:
        super().setup(stage)
        if self.model is None:
            n_types = getattr(getattr(self.trainer, "datamodule", None), "num_block_types", None)
            if n_types is None:
                raise ValueError("num_block_types is not set and the data module does not provide num_block_types")
            self.hparams.num_block_types = int(n_types)
            self._build()

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        super().on_load_checkpoint(checkpoint)
        if self.model is None:
            saved = GETConfig.from_mapping(checkpoint["hyper_parameters"], source="checkpoint")
            self.hparams.num_block_types = int(saved.num_block_types)
            self._build()


class AffinityModule(_GETTask):
    """GET + energy read-out, regression on pK (official LBA recipe by default).

    Args:
        loss_terms: auxiliary training losses added to the MSE (:class:`~geomol.tasks.objectives.LossTerm`
            components, e.g. ``RankingLoss``, ``RelativeEdgeLoss``); none by default (the reference MSE alone).
        pretraining: e.g. :class:`~geomol.tasks.objectives.DenoisingPretraining`: its first epochs train
            its own objective instead (labels unused); their validation metrics are NaN.
        mse_weight: factor of the MSE on pK in the training loss (1: the reference; near 0 with a
            :class:`~geomol.tasks.objectives.CentredLoss` to learn from within-series differences only).
            Validation and test losses are the plain MSE whatever it is.
        Other arguments: as :class:`_GETTask`.

    The components are recorded in the hyperparameters as ``{'class_path', 'init_args'}`` dicts.
    """

    model_class = GETAffinity

    def __init__(self, loss_terms: list[LossTerm] | None = None, pretraining: DenoisingPretraining | None = None,
                 mse_weight: float = 1.0, **kwargs):
        self.loss_terms = [component(term, LOSS_TERMS, "loss term", LossTerm) for term in loss_terms or []]
        self.pretraining_stage = (None if pretraining is None else
                                  component(pretraining, PRETRAINING_STAGES, "pre-training stage"))
        super().__init__(**kwargs)
        self.hparams["loss_terms"] = [describe(term) for term in self.loss_terms]
        self.hparams["pretraining"] = None if pretraining is None else describe(self.pretraining_stage)

    def forward(self, batch) -> torch.Tensor:
        """[B] predicted pK."""
        return self.model(batch)

    def setup(self, stage: str) -> None:
        super().setup(stage)
        datamodule = getattr(self.trainer, "datamodule", None)
        for term in self.loss_terms:
            if term.weight:
                term.setup(datamodule)

    @property
    def pretraining(self) -> bool:
        """Whether this epoch belongs to the pre-training stage."""
        return self.pretraining_stage is not None and self.pretraining_stage.active(self.current_epoch)

    def compute(self, batch, batch_idx: int = 0):
        if self.training and self.pretraining:
            return self.pretraining_stage.loss(self.model, batch), batch.num_graphs, None
        pred = self(batch)
        loss = GETAffinity.loss(pred, batch.y)
        if self.training:
            loss = self.hparams.mse_weight * loss
            for term in self.loss_terms:
                if term.weight:
                    loss = loss + term(self.model, batch, pred)
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

    def __init__(self, hidden: int = GETPairClassifier.default_config.hidden,
                 radial_dim: int = GETPairClassifier.default_config.radial_dim, **kwargs):
        super().__init__(hidden=hidden, radial_dim=radial_dim, **kwargs)

    def forward(self, batch) -> torch.Tensor:
        """[P, 2] logits (class 1 = active)."""
        return self.model(batch)

    def compute(self, batch, batch_idx: int = 0):
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
