"""Training objectives of the affinity task beyond the supervised MSE, as small components chosen in YAML.

A variant of the recipe is a configuration, not a flag on the task::

    model:
      class_path: geomol.tasks.AffinityModule
      init_args:
        loss_terms:                                   # added to the MSE on pK, in training only
          - class_path: geomol.tasks.objectives.RankingLoss
            init_args: {weight: 1.0}
          - class_path: geomol.tasks.objectives.RelativeEdgeLoss
            init_args: {weight: 1.0}
        pretraining:                                  # the first epochs train this instead
          class_path: geomol.tasks.objectives.DenoisingPretraining
          init_args: {epochs: 2, sigma: 1.0}

A new auxiliary objective is a :class:`LossTerm` subclass (``value(model, batch, pred)``, and
``setup(datamodule)`` when it needs something from the data); nothing in the task changes. Checkpoints record
components as ``{'class_path', 'init_args'}`` data and are re-created from the registries only
(:data:`LOSS_TERMS`, :data:`PRETRAINING_STAGES`; :func:`register_loss_term` adds one of your own).
"""
from __future__ import annotations

from typing import Any, Literal, Mapping, Sequence

import torch

from geomol.errors import ConfigError
from geomol.training.losses import (centred_loss, decoy_hinge_loss, denoising_loss, ranking_loss, relative_edge_loss)

__all__ = ["LossTerm", "RankingLoss", "CentredLoss", "DecoyLoss", "RelativeEdgeLoss", "DenoisingPretraining",
           "LOSS_TERMS", "PRETRAINING_STAGES", "register_loss_term", "register_pretraining", "describe", "component",
           "class_path"]


def describe(component: Any) -> dict[str, Any]:
    """``{'class_path', 'init_args'}`` of a component (what the YAML says; plain values only, so that a
    checkpoint stays loadable with ``torch.load(weights_only=True)``)."""
    return {"class_path": class_path(type(component)), "init_args": dict(component.init_args)}


def class_path(cls: type) -> str:
    """``module.QualifiedName`` of a class: the key it is registered and recorded under."""
    return f"{cls.__module__}.{cls.__qualname__}"


LOSS_TERMS: dict[str, type] = {}
"""Class path → :class:`LossTerm` subclass: the auxiliary losses a checkpoint's hyperparameters may name."""
PRETRAINING_STAGES: dict[str, type] = {}
"""Class path → pre-training stage (:class:`DenoisingPretraining`): what a checkpoint may name."""


def register_loss_term(cls: type) -> type:
    """Make a :class:`LossTerm` subclass loadable from checkpoints by its class path (usable as a decorator).

    The command line builds components from a YAML's class paths itself (typed: only ``LossTerm`` subclasses);
    a checkpoint's hyperparameters are data, so re-creating a module from them (``load_from_checkpoint``) builds
    only registered classes.
    """
    if not (isinstance(cls, type) and issubclass(cls, LossTerm)):
        raise ConfigError(f"{cls!r} is not a LossTerm subclass")
    LOSS_TERMS[class_path(cls)] = cls
    return cls


def register_pretraining(cls: type) -> type:
    """Make a pre-training stage (``active(epoch)``, ``loss(model, batch)``, ``init_args``) loadable from
    checkpoints by its class path (usable as a decorator)."""
    PRETRAINING_STAGES[class_path(cls)] = cls
    return cls


def component(spec: Any, registry: Mapping[str, type], what: str, base: type = object,
              source: str | None = None) -> Any:
    """A component itself (an instance of ``base``, built in this process, e.g. by the command line from a
    YAML), or built from its ``{'class_path', 'init_args'}`` record (a checkpoint's hyperparameters when a module
    is re-created with ``load_from_checkpoint``) if its class is in ``registry``.

    Nothing named by a record is imported or called unless it is registered: a record is data.

    Raises:
        ConfigError: an unregistered class path, a record that is not ``{'class_path', 'init_args'}``, or an
            object that is not a ``base``.
    """
    if not isinstance(spec, Mapping):
        if not isinstance(spec, base):
            raise ConfigError(f"{what} {spec!r} is not a {base.__name__}", source)
        return spec
    path, init_args = spec.get("class_path"), spec.get("init_args") or {}
    if not isinstance(path, str) or not isinstance(init_args, Mapping) or set(spec) - {"class_path", "init_args"}:
        raise ConfigError(f"a {what} record is {{'class_path': str, 'init_args': dict}}, got {dict(spec)!r}", source)
    if path not in registry:
        raise ConfigError(f"{what} {path!r} is not registered (registered: {sorted(registry)}); a checkpoint names "
                          "components as data, so only registered classes are built (see register_loss_term and "
                          "register_pretraining)", source)
    return registry[path](**dict(init_args))


# ---------------------------------------------------------------------- components
class LossTerm:
    """An auxiliary training loss, ``weight × value(model, batch, pred)``, added to the task's own loss.

    Args:
        weight: its factor (0 switches it off).
    """

    def __init__(self, weight: float = 1.0):
        self.weight = float(weight)
        self.init_args: dict[str, Any] = {"weight": self.weight}

    def setup(self, datamodule) -> None:
        """Take what the term needs from the data module (called once the trainer has one)."""

    def value(self, model, batch, pred: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def __call__(self, model, batch, pred: torch.Tensor) -> torch.Tensor:
        return self.weight * self.value(model, batch, pred)


class _GroupedLoss(LossTerm):
    """A loss over the items of one group in a batch: the same protein (``group_by='protein'``) or the same
    series (``'series'``: one assay of one protein). Use with the data module's ``group_batches`` set to
    the same key, so that batches hold one group's ligands. Subclasses set ``loss_function(pred, y, groups)``."""

    def __init__(self, weight: float = 1.0, group_by: Literal["protein", "series"] = "protein"):
        super().__init__(weight)
        if group_by not in ("protein", "series"):
            raise ConfigError(f"group_by must be 'protein' or 'series', got {group_by!r}")
        self.group_by = group_by
        self.init_args["group_by"] = group_by

    def value(self, model, batch, pred):
        return self.loss_function(pred, batch.y, getattr(batch, self.group_by, None))


class RankingLoss(_GroupedLoss):
    """:func:`~geomol.training.losses.ranking_loss` between ligands of the same protein (default) or series in a
    batch."""

    loss_function = staticmethod(ranking_loss)


class CentredLoss(_GroupedLoss):
    """:func:`~geomol.training.losses.centred_loss` within the series (default) or proteins of a batch: learning
    within series.
    To learn from within-group differences only, set the task's ``mse_weight`` near 0."""

    loss_function = staticmethod(centred_loss)

    def __init__(self, weight: float = 1.0, group_by: Literal["protein", "series"] = "series"):
        super().__init__(weight, group_by)


class DecoyLoss(LossTerm):
    """Negative augmentation: decoys of a ``fraction`` of each training batch
    (:func:`~geomol.data.posing.decoys.decoy_batch`: the ligand shifted, turned, or swapped for another
    series' ligand) must score ``margin`` pK below their true complex
    (:func:`~geomol.training.losses.decoy_hinge_loss`).
    Costs one more forward and backward pass over the decoys."""

    def __init__(self, weight: float = 1.0, margin: float = 1.0, fraction: float = 0.5,
                 kinds: Sequence[str] = ("shift", "turn", "swap")):
        super().__init__(weight)
        from geomol.data.posing.decoys import DECOY_KINDS

        if not kinds or set(kinds) - set(DECOY_KINDS):
            raise ConfigError(f"decoy kinds must be among {DECOY_KINDS}, got {list(kinds)}")
        if not 0 < fraction <= 1:
            raise ConfigError(f"decoy fraction must be in (0, 1], got {fraction}")
        self.margin, self.fraction, self.kinds = float(margin), float(fraction), list(kinds)
        self.init_args.update(margin=self.margin, fraction=self.fraction, kinds=self.kinds)

    def value(self, model, batch, pred):
        from geomol.data.posing.decoys import decoy_batch

        decoys, origin = decoy_batch(batch, self.kinds, self.fraction)
        return decoy_hinge_loss(pred, model(decoys), origin.to(pred.device), self.margin)


class RelativeEdgeLoss(LossTerm):
    """:func:`~geomol.training.losses.relative_edge_loss` on the measured relative free energies of the data module's
    perturbation graphs (multi-task with the RBFE edges; use with ``group_batches: true`` so both ends share batches).

    Attributes:
        edges: per series, ``(ligand_a, ligand_b, ΔpK)``, from ``datamodule.relative_edges()``.
    """

    def __init__(self, weight: float = 1.0):
        super().__init__(weight)
        self.edges: dict[str, list[tuple[str, str, float]]] = {}

    def setup(self, datamodule) -> None:
        if not hasattr(datamodule, "relative_edges"):
            raise ValueError("RelativeEdgeLoss needs a data module with relative_edges() (FEP benchmark data)")
        self.edges = datamodule.relative_edges()

    def value(self, model, batch, pred):
        return relative_edge_loss(pred, batch.series, batch.ligand, self.edges)


class DenoisingPretraining:
    """The first ``epochs`` epochs train only :func:`~geomol.training.losses.denoising_loss` (labels unused) with
    ``sigma`` Å of noise; the validation metrics of those epochs are NaN, so checkpoint selection skips them."""

    def __init__(self, epochs: int = 1, sigma: float = 1.0):
        self.epochs, self.sigma = int(epochs), float(sigma)
        self.init_args: dict[str, Any] = {"epochs": self.epochs, "sigma": self.sigma}

    def active(self, epoch: int) -> bool:
        return epoch < self.epochs

    def loss(self, model, batch) -> torch.Tensor:
        return denoising_loss(model, batch, self.sigma)


for _term in (RankingLoss, CentredLoss, DecoyLoss, RelativeEdgeLoss):
    register_loss_term(_term)
register_pretraining(DenoisingPretraining)
