"""Few-shot adaptation of an affinity model to one user's target, from a handful of measured ligands.

A user with k measured ligands of their own protein (k = 3 to 10, typically) wants the model's
ranking of the *other* ligands of that protein. With so few labels only the last layers may move, and
only a little, pulled towards their shipped values (``anchor`` × Σ ‖θ − θ₀‖², "L2-SP") so that k points
cannot undo what the corpus taught; a constant offset fixes the model's level on this target (RMSE),
the weights' small update is what can change the ranking.

* GET: for every ensemble member the encoder is frozen (its outputs for the k complexes are computed
  once), and the read-out's weights plus the offset (started at the mean residual) are trained on the k
  measured pK by full-batch Adam. For the official energy read-out the weights are its energy MLP
  (``energy_ffn``) and the offset is new (:class:`~geomol.models.readouts.ShiftedEnergyReadout`);
  read-outs that have an ``offset`` of their own (physics-shaped, size-aware, hybrid) keep their class
  and adapt all their parameters.
* Contact scorer (the default model): the per-atom MLP's hidden layers are frozen; its last layer and the
  descriptor term are fitted to the k ligands' differences, then the offset to their level
  (:func:`adapt_contact_scorer`).

The result is an ordinary :class:`~geomol.inference.affinity_model.AffinityModel` (same recipe,
domain and member count; an energy read-out becomes ``ShiftedEnergyReadout`` in its hyperparameters), written as
a model directory that ``geomol predict-affinity --model DIR`` loads, with a card and manifest
entry (``metrics.finetune``) recording the base model, the ligands, the settings and the fit.
"""
from __future__ import annotations

import copy
import math
import warnings
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import torch
import torch.nn.functional as F

from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError
from geomol.inference.affinity import build_complexes
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.ligand_inputs import ligand_inputs
from geomol.evaluation.metrics import rmse, spearman
from geomol.models.contact_scorer import ContactScorer
from geomol.models.get import GETAffinity, GETConfig, as_batch
from geomol.models.readouts import ShiftedEnergyReadout

__all__ = ["SHIFTED_READOUT", "FinetuneSettings", "FinetuneReport", "adapted_readout", "adapt_contact_scorer",
           "finetune_model",
           "finetune_on_ligands", "finetune_card"]

ENERGY_READOUT = "geomol.models.readouts.EnergyReadout"
SHIFTED_READOUT = "geomol.models.readouts.ShiftedEnergyReadout"


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

    def to_dict(self) -> dict:
        fit = {f"{name}_{when}": func(pred, self.measured) for when, pred in (("before", self.before),
                                                                               ("after", self.after))
               for name, func in (("rmse", rmse), ("spearman", spearman))}
        return {"base_model": self.base_model, "ligands": len(self.ligands), "settings": asdict(self.settings),
                **{k: None if math.isnan(v) else round(v, 4) for k, v in fit.items()},
                "measured": dict(zip(self.ligands, self.measured))}


def adapted_readout(arguments: dict) -> str:
    """The read-out path a fine-tuned model has: an energy read-out gains an offset, others keep theirs.

    Raises:
        ConfigError: a read-out without an ``offset`` parameter (nothing to fix the target's level with).
    """
    from geomol.models.readouts import readout_class

    readout = arguments.get("readout", ENERGY_READOUT)
    if readout in (ENERGY_READOUT, SHIFTED_READOUT):
        return SHIFTED_READOUT
    if "offset" not in dict(readout_class(readout)(int(arguments.get("d_hidden", 32))).named_parameters()):
        raise ConfigError(f"fine-tuning needs a read-out with an offset; this model's read-out is {readout}")
    return readout


def _adapted(member: GETAffinity, arguments: dict, graphs: Sequence[BlockGraph], measured: torch.Tensor,
             settings: FinetuneSettings) -> GETAffinity:
    """A copy of ``member`` whose read-out weights and offset are fitted to ``measured``."""
    new = GETAffinity(GETConfig.from_mapping({**arguments, "readout": adapted_readout(arguments)})).to(measured.dtype)
    new.load_state_dict(member.state_dict(), strict=False)  # only readout.offset can be new (energy read-out)
    new.eval()
    with torch.no_grad():  # the encoder is frozen: embed the k complexes once
        out = new.embed(as_batch(list(graphs)))
        new.readout.offset += (measured - new.readout(new, out)).mean()
    weights = new.energy_ffn if isinstance(new.readout, ShiftedEnergyReadout) else new.readout
    head = [p for name, p in weights.named_parameters() if name != "offset"]
    anchors = [p.detach().clone() for p in head]
    new.requires_grad_(False)
    trained = [*head, new.readout.offset]
    for p in trained:
        p.requires_grad_(True)
    optimiser = torch.optim.Adam(trained, lr=settings.lr)
    for _ in range(settings.steps):
        optimiser.zero_grad()
        pull = sum(((p - a) ** 2).sum() for p, a in zip(head, anchors))
        loss = F.mse_loss(new.readout(new, out), measured) + settings.anchor * pull
        loss.backward()
        optimiser.step()
    new.requires_grad_(True)
    return new.eval()


def adapt_contact_scorer(member: ContactScorer, atoms: torch.Tensor, owner: torch.Tensor,
                         descriptors: torch.Tensor | None, measured: torch.Tensor,
                         settings: FinetuneSettings = FinetuneSettings()) -> ContactScorer:
    """A copy of a contact scorer fitted to k measured ligands of one target.

    The per-atom MLP's hidden layers stay frozen; its last layer and the descriptor term move by Adam on
    the squared error of the *centred* residuals (the ranking within the target) with the L2 pull
    ``settings.anchor`` × Σ ‖θ − θ₀‖² towards the base weights, then the offset is refitted so that the
    mean prediction on the k ligands is their mean measured pK.

    Args:
        member: a calibrated :class:`~geomol.models.contact_scorer.ContactScorer`.
        atoms, owner, descriptors: the k complexes (:func:`~geomol.models.contact_scorer.contact_inputs`).
        measured: ``(k,)`` pK.
    """
    new = copy.deepcopy(member).to(measured.dtype).eval()
    atoms, descriptors = atoms.to(measured.dtype), None if descriptors is None else descriptors.to(measured.dtype)
    head = [*new.atom_mlp[-1].parameters(), *(new.descriptor_head.parameters() if new.descriptor_head else ())]
    anchors = [p.detach().clone() for p in head]
    new.requires_grad_(False)
    for p in head:
        p.requires_grad_(True)
    optimiser = torch.optim.Adam(head, lr=settings.lr)
    predict = lambda: new(atoms, owner, descriptors, n_ligands=len(measured))  # noqa: E731
    for _ in range(settings.steps):
        optimiser.zero_grad()
        residual = predict() - measured
        pull = sum(((p - a) ** 2).sum() for p, a in zip(head, anchors))
        loss = ((residual - residual.mean()) ** 2).mean() + settings.anchor * pull
        loss.backward()
        optimiser.step()
    new.requires_grad_(False)
    with torch.no_grad():
        new.offset -= (predict() - measured).mean()
    return new


def finetune_model(model: AffinityModel, graphs: Sequence[BlockGraph], measured: Sequence[float], names: Sequence[str],
                   settings: FinetuneSettings = FinetuneSettings(), *, name: str = "") -> tuple[AffinityModel,
                                                                                                 FinetuneReport]:
    """Every member adapted to the measured complexes (see the module notes).

    Args:
        model: an affinity model whose read-out :func:`adapted_readout` accepts (or one already fine-tuned).
        graphs: the k measured complexes, built with ``model.recipe``; measured: their pK; names: theirs.
        name: the new model's name (default ``<base>-finetuned``).

    Raises:
        ConfigError: fewer than 2 complexes, or a GET read-out this cannot adapt.
    """
    if len(graphs) < 2 or len(graphs) != len(measured) or len(names) != len(graphs):
        raise ConfigError(f"fine-tuning needs at least 2 measured complexes (one name and pK each), got "
                          f"{len(graphs)} complexes, {len(measured)} values, {len(names)} names")
    target = torch.tensor(list(measured), dtype=model.dtype)
    before = model.predict(list(graphs))[0].tolist()
    if model.is_contact_scorer:
        inputs = model.contact_inputs(graphs)
        members = [adapt_contact_scorer(m, *inputs, target, settings) for m in model.members]
        arguments = dict(model.arguments)
    else:
        members = [_adapted(m, model.arguments, graphs, target, settings) for m in model.members]
        arguments = {**model.arguments, "readout": adapted_readout(model.arguments)}
    tuned = AffinityModel(members, arguments, model.recipe, domain=model.domain,
                          name=name or f"{model.name or 'model'}-finetuned", origins=model.origins,
                          description=f"{model.name or 'an affinity model'} fine-tuned on {len(graphs)} measured "
                                      "ligands of one target")
    report = FinetuneReport(list(names), target.tolist(), before, tuned.predict(list(graphs))[0].tolist(), settings,
                            model.name)
    tuned.metrics = {"finetune": report.to_dict(), "base_model_metrics": dict(model.metrics)}
    return tuned, report


def finetune_on_ligands(model: AffinityModel, receptor, ligands, measured: Mapping[str, float],
                        settings: FinetuneSettings = FinetuneSettings(), *, name: str = "",
                        receptor_chains: Sequence[str] | None = None) -> tuple[AffinityModel, FinetuneReport]:
    """:func:`finetune_model` on the ligands (anything ``predict_affinity`` takes) that have a measured pK.

    Complexes are built and checked as for prediction; a measured ligand that is missing from
    ``ligands`` or fails its checks is left out with one warning naming it.
    """
    records, graphs = build_complexes(receptor, ligand_inputs(ligands), model, receptor_chains=receptor_chains)
    used = [(r.name, g) for r, g in zip(records, graphs) if g is not None and r.name in measured]
    failed = [f"{r.name} ({r.error})" for r in records if r.error and r.name in measured]
    absent = sorted(set(measured) - {r.name for r in records})
    if failed or absent:
        warnings.warn(f"measured ligand(s) left out of the fine-tuning: {', '.join(failed + absent)}"
                      + (" (not among the ligands)" if absent else ""), stacklevel=2)
    return finetune_model(model, [g for _, g in used], [measured[n] for n, _ in used], [n for n, _ in used],
                          settings, name=name)


def _what_moved(tuned: AffinityModel) -> str:
    if tuned.is_contact_scorer:
        return ("in every member the per-atom MLP's hidden layers are unchanged; its last layer and the ligand-descriptor "
                "term")
    return (f"the encoder of every member is unchanged; the read-out's weights "
            f"(read-out `{tuned.arguments['readout'].rpartition('.')[2]}`)")


def finetune_card(tuned: AffinityModel, report: FinetuneReport, receptor: str) -> str:
    """The model card of a fine-tuned model: what it was adapted on, how, and what that means."""
    fit = report.to_dict()
    settings = fit["settings"]
    lines = [f"# {tuned.name}", "",
             f"`{report.base_model}` fine-tuned on {fit['ligands']} measured ligands of one target "
             f"(receptor `{receptor}`) with `geomol finetune`.", "",
             "## What changed", "",
             f"- {_what_moved(tuned)} moved by "
             f"{settings['steps']} Adam steps (learning rate {settings['lr']:g}) with an L2 pull of weight "
             f"{settings['anchor']:g} towards the base weights, and the constant offset was refitted;",
             f"- on the {fit['ligands']} measured ligands: RMSE {fit['rmse_before']} → {fit['rmse_after']} pK, "
             f"Spearman {fit['spearman_before']} → {fit['spearman_after']} (a fit, not a test).", "",
             "## Measured ligands used", "", "| ligand | measured pK | before | after |", "|---|---|---|---|"]
    lines += [f"| {n} | {y:.2f} | {b:.2f} | {a:.2f} |"
              for n, y, b, a in zip(report.ligands, report.measured, report.before, report.after)]
    lines += ["", "## Limitations", "",
              "- meant for this receptor and chemical series only; elsewhere use the base model;",
              "- fitted on a handful of values: the gain on the target's other ligands is not measured here, "
              "and the base model's cross-validation figures (manifest `metrics.base_model_metrics`) do not "
              "describe this model;",
              *tuned.card_facts(tuned.manifest())[1:]]
    return "\n".join(lines) + "\n"
