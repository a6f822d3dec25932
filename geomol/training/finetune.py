"""Few-shot adaptation of an affinity model to one user's target, from a handful of measured ligands.

A user with k measured ligands of their own protein (k = 3 to 10, typically) wants the model's
ranking of the *other* ligands of that protein. With so few labels only the last layers may move, and
only a little, pulled towards their shipped values (``anchor`` × Σ ‖θ − θ₀‖², "L2-SP") so that k points
cannot undo what the corpus taught; a constant offset fixes the model's level on this target (RMSE),
the weights' small update is what can change the ranking.

One loop (:func:`adapt_member`) serves every member kind through the
:class:`~geomol.models.affinity_member.AffinityMember` contract: the member's frozen part is computed once for
the k complexes (``frozen``), its level is set to the measured mean, and ``finetune_parameters`` move by
full-batch Adam, either with the level on the squared error (``finetune_loss = "mse"``: GET, whose energy
read-out gains an offset, :class:`~geomol.models.readouts.ShiftedEnergyReadout`) or on the residuals centred
within the target, the level refitted after (``"centred"``: the contact scorer's last layer and descriptor
term; the ligand-only trees, which have no parameters to move, refit their level only).

The result is an ordinary :class:`~geomol.inference.affinity_model.AffinityModel` (same recipe,
domain and member count; an energy read-out becomes ``ShiftedEnergyReadout`` in its hyperparameters), written as
a model directory that ``geomol predict-affinity --model DIR`` loads, with a card and manifest
entry (``metrics.finetune``) recording the base model, the ligands, the settings and the fit.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Callable, Mapping, Sequence

import torch

from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError
from geomol.metrics.scores import rmse, spearman
from geomol.inference.affinity import measured_complexes
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.ligand_inputs import ligand_inputs
from geomol.models.affinity_member import AffinityMember

__all__ = ["FinetuneSettings", "FinetuneReport", "adapt_member", "fit_started", "finetune_model", "finetune_on_ligands",
           "finetune_card"]


@dataclass(frozen=True)
class FinetuneSettings:
    """How far k measured ligands may move the read-out.

    Attributes:
        steps: full-batch Adam steps per member.
        lr: Adam learning rate.
        anchor: weight of Σ ‖θ − θ₀‖² over the energy MLP's weights (pK² per unit squared weight change).
    """

    steps: int = 100
    lr: float = 1e-3
    anchor: float = 1.0

    def __post_init__(self):
        if self.steps < 0 or self.lr <= 0 or self.anchor < 0:
            raise ConfigError(f"fine-tuning needs steps >= 0, lr > 0 and anchor >= 0, got {self}")


@dataclass
class FinetuneReport:
    """The fit on the measured ligands: names, measured pK, the ensemble's pK before and after."""

    ligands: list[str]
    measured: list[float]
    before: list[float]
    after: list[float]
    settings: FinetuneSettings
    base_model: str
    decision: Any = None  # the FinetuneDecision that chose ``settings`` (geomol.training.finetune_choice), if any

    def to_dict(self) -> dict:
        fit = {f"{name}_{when}": func(pred, self.measured) for when, pred in (("before", self.before),
                                                                               ("after", self.after))
               for name, func in (("rmse", rmse), ("spearman", spearman))}
        return {"base_model": self.base_model, "ligands": len(self.ligands), "settings": asdict(self.settings),
                **{k: None if math.isnan(v) else round(v, 4) for k, v in fit.items()},
                "measured": dict(zip(self.ligands, self.measured)),
                **({"decision": self.decision.to_dict()} if self.decision is not None else {})}


def adapt_member(member: AffinityMember, inputs: Any, measured: torch.Tensor,
                 settings: FinetuneSettings = FinetuneSettings(), weights: torch.Tensor | None = None
                 ) -> AffinityMember:
    """A copy of ``member`` adapted to k measured complexes of one target (see the module notes).

    Args:
        member: a trained member of any kind.
        inputs: ``member.inputs(graphs)`` of the k complexes.
        measured: ``(k,)`` pK, in the dtype the adapted copy computes in.
        weights: ``(k,)`` non-negative weight of each complex in the fit (default all 1; a complex of weight 0 is
            left out, as a held-out one in :mod:`geomol.training.finetune_choice`).
    """
    new = member.finetune_start().to(measured.dtype).eval()
    with torch.no_grad():  # the frozen part is computed once
        frozen = new.frozen(inputs)
    return fit_started(new, frozen, measured, settings, weights)


def fit_started(new: AffinityMember, frozen: Any, measured: torch.Tensor, settings: FinetuneSettings,
                weights: torch.Tensor | None = None,
                on_step: Callable[[int, AffinityMember], None] | None = None) -> AffinityMember:
    """The fine-tuning loop on ``new`` (a :meth:`~AffinityMember.finetune_start` copy, changed in place) whose
    frozen part for the k complexes is ``frozen``; ``measured`` and ``weights`` as in :func:`adapt_member`.
    ``on_step(step, new)`` is called after every optimiser step (1 … ``settings.steps``): ``new`` then ranks
    ligands as a fit of ``step`` steps does (its level is refitted only at the end)."""
    weights = torch.ones_like(measured) if weights is None else weights.to(measured.dtype)
    mean = lambda values: (weights * values).sum() / weights.sum()  # noqa: E731
    with torch.no_grad():
        new.level.add_(mean(measured - new.head(frozen)))
    head = new.finetune_parameters()
    anchors = [p.detach().clone() for p in head]
    trained = [*head, new.level] if new.finetune_loss == "mse" else head
    new.requires_grad_(False)
    for p in trained:
        p.requires_grad_(True)
    optimiser = torch.optim.Adam(trained, lr=settings.lr) if trained else None
    for step in range(settings.steps if optimiser else 0):
        optimiser.zero_grad()
        residual = new.head(frozen) - measured
        pull = sum(((p - a) ** 2).sum() for p, a in zip(head, anchors))
        fit = mean(residual ** 2) if new.finetune_loss == "mse" else mean((residual - mean(residual)) ** 2)
        (fit + settings.anchor * pull).backward()
        optimiser.step()
        if on_step is not None:
            on_step(step + 1, new)
    if new.finetune_loss == "centred":
        with torch.no_grad():
            new.level.sub_(mean(new.head(frozen) - measured))
    return new.requires_grad_(True).eval()


def finetune_model(model: AffinityModel, graphs: Sequence[BlockGraph], measured: Sequence[float], names: Sequence[str],
                   settings=FinetuneSettings(), *, name: str = "") -> tuple[AffinityModel, FinetuneReport]:
    """Every member adapted to the measured complexes (see the module notes).

    Args:
        model: an affinity model of any member kind (a GET read-out must be one
            :func:`~geomol.models.readouts.adapted_readout` accepts).
        graphs: the k measured complexes, built with ``model.recipe``; measured: their pK; names: theirs.
        settings: a :class:`FinetuneSettings`, or a rule that decides them from the measured complexes
            (:class:`~geomol.training.finetune_choice.FinetuneChoice`: its ``decide(model, graphs, measured)``
            returns the decision, recorded in the report).
        name: the new model's name (default ``<base>-finetuned``).

    Raises:
        ConfigError: fewer than 2 complexes, or a GET read-out this cannot adapt.
    """
    if len(graphs) < 2 or len(graphs) != len(measured) or len(names) != len(graphs):
        raise ConfigError(f"fine-tuning needs at least 2 measured complexes (one name and pK each), got "
                          f"{len(graphs)} complexes, {len(measured)} values, {len(names)} names")
    decision = None if isinstance(settings, FinetuneSettings) else settings.decide(model, graphs, measured)
    settings = settings if decision is None else decision.settings
    target = torch.tensor(list(measured), dtype=model.dtype)
    before = model.predict(list(graphs))[0].tolist()
    with torch.no_grad():
        inputs = model.members[0].inputs(list(graphs))
    members = [adapt_member(m, inputs, target, settings) for m in model.members]
    arguments = members[0].to_config()
    tuned = AffinityModel(members, arguments, model.recipe, domain=model.domain,
                          name=name or f"{model.name or 'model'}-finetuned", origins=model.origins,
                          description=f"{model.name or 'an affinity model'} fine-tuned on {len(graphs)} measured "
                                      "ligands of one target")
    report = FinetuneReport(list(names), target.tolist(), before, tuned.predict(list(graphs))[0].tolist(), settings,
                            model.name, decision)
    tuned.metrics = {"finetune": report.to_dict(), "base_model_metrics": dict(model.metrics)}
    return tuned, report


def finetune_on_ligands(model: AffinityModel, receptor, ligands, measured: Mapping[str, float],
                        settings=FinetuneSettings(), *, name: str = "",
                        receptor_chains: Sequence[str] | None = None) -> tuple[AffinityModel, FinetuneReport]:
    """:func:`finetune_model` on the ligands (anything ``predict_affinity`` takes) that have a measured pK.

    Complexes are built and checked as for prediction; a measured ligand that is missing from
    ``ligands`` or fails its checks is left out with one warning naming it.
    """
    used = measured_complexes(receptor, ligand_inputs(ligands), model, measured, "the fine-tuning",
                              receptor_chains=receptor_chains)
    return finetune_model(model, [g for _, g in used], [measured[n] for n, _ in used], [n for n, _ in used],
                          settings, name=name)


def finetune_card(tuned: AffinityModel, report: FinetuneReport, receptor: str) -> str:
    """The model card of a fine-tuned model: what it was adapted on, how, and what that means."""
    fit = report.to_dict()
    settings = fit["settings"]
    lines = [f"# {tuned.name}", "",
             f"`{report.base_model}` fine-tuned on {fit['ligands']} measured ligands of one target "
             f"(receptor `{receptor}`) with `geomol finetune`.", "",
             "## What changed", "",
             f"- in every member {tuned.members[0].finetune_moves()} moved by "
             f"{settings['steps']} Adam steps (learning rate {settings['lr']:g}) with an L2 pull of weight "
             f"{settings['anchor']:g} towards the base weights, and the constant offset was refitted;"
             if settings["steps"] else "- the weights are the base model's; only the constant offset was refitted "
                                       "(the model ranks ligands as the base model does);",
             f"- on the {fit['ligands']} measured ligands: RMSE {fit['rmse_before']} → {fit['rmse_after']} pK, "
             f"Spearman {fit['spearman_before']} → {fit['spearman_after']} (a fit, not a test).", "",
             "## Measured ligands used", "", "| ligand | measured pK | before | after |", "|---|---|---|---|"]
    lines += [f"| {n} | {y:.2f} | {b:.2f} | {a:.2f} |"
              for n, y, b, a in zip(report.ligands, report.measured, report.before, report.after)]
    if report.decision is not None:
        lines += ["", "## How far to adapt: the rule and the estimate from the measured ligands", "",
                  report.decision.rule(), "", report.decision.message(), "",
                  "(manifest `metrics.finetune.decision`; the rule and how it was chosen: `docs/predict.md`.)"]
    lines += ["", "## Limitations", "",
              "- meant for this receptor and chemical series only; elsewhere use the base model;",
              "- fitted on a handful of values: the gain on the target's other ligands is not measured here, "
              "and the base model's cross-validation figures (manifest `metrics.base_model_metrics`) do not "
              "describe this model;",
              *tuned.card_facts(tuned.manifest())[1:]]
    return "\n".join(lines) + "\n"
