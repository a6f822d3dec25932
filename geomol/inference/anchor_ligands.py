"""Attach a series' measured ligands to a model as anchors (``predict-affinity --anchors``, ``geomol finetune``).

:func:`anchor_on_ligands` builds the measured ligands' complexes as prediction does, predicts them with the model's
members (its base pK) and returns the model with an :class:`~geomol.inference.anchored_series.AnchoredSeries`:
every later prediction through it is relative to them (:mod:`geomol.inference.anchoring`). Measured ligands that
are missing or fail their checks are left out with one warning; with none left, the model predicts as it is
(the base model).
"""
from __future__ import annotations

import copy
from os import PathLike
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from geomol.data.io import Structure
from geomol.errors import ConfigError
from geomol.inference.affinity import measured_complexes
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.anchored_series import ANCHOR_METHODS, AnchoredSeries, AnchoringSettings, graph_fingerprint
from geomol.inference.anchoring import Anchors
from geomol.inference.ligand_inputs import LigandInput

__all__ = ["anchor_on_ligands", "anchored_model", "anchor_report", "anchored_card", "finetune_method",
           "anchor_affinity"]


def anchored_model(model: AffinityModel, series: AnchoredSeries | None) -> AffinityModel:
    """A shallow copy of ``model`` (the same members) predicting relative to ``series`` (None: as it is)."""
    out = copy.copy(model)
    out.anchors = series
    return out


def anchor_on_ligands(model: AffinityModel, receptor: str | PathLike | Structure, inputs: Sequence[LigandInput],
                      measured: Mapping[str, float], *, receptor_chains: Sequence[str] | None = None,
                      method: str = "", settings: AnchoringSettings | None = None) -> AffinityModel:
    """``model`` anchored on the ``inputs`` that have a measured pK (by name; see the module notes).

    Args:
        model: the base model; its members predict the anchors (any anchors it already carries are replaced).
        receptor, receptor_chains: as for prediction. inputs: ligand inputs holding the measured ligands' poses.
        measured: measured pK by ligand name.
        method: one of :data:`~geomol.inference.anchored_series.ANCHOR_METHODS` (default: the settings' choice for
            the number of anchors). settings: default the model's own (``metrics.anchoring``).

    Raises:
        ConfigError: the model has no anchoring settings and none are given.
    """
    settings = settings or AnchoringSettings.of_model(model)
    used = measured_complexes(receptor, inputs, model, measured, "the anchors", receptor_chains=receptor_chains)
    names = [name for name, _ in used]
    if used:
        base = model.predict([g for _, g in used])[0].double().numpy()
        fingerprints = np.stack([graph_fingerprint(g) for _, g in used])
    else:
        base, fingerprints = np.zeros(0), np.zeros((0, 1))
    anchors = Anchors(names, base, fingerprints, [measured[n] for n in names])
    return anchored_model(model, AnchoredSeries(settings, anchors, method))


def anchor_report(model: AffinityModel) -> dict:
    """What the anchors of an anchored model say about it, for its manifest (``metrics.finetune``): every measured
    ligand predicted from the *other* anchors (leave-one-out: a test on your ligands, not a fit) and the base
    model's own predictions of them."""
    from geomol.metrics.scores import rmse, spearman

    series = model.anchors
    a = series.anchors
    loo, sd = series.predict(a.base, a.fingerprints, a.names)
    score = lambda f, p: None if len(a) < 2 or not np.isfinite(f(p, a.measured)) else round(f(p, a.measured), 4)  # noqa: E731
    return {"method": series.method, "ligands": len(a), "measured": dict(zip(a.names, a.measured.tolist())),
            "base": dict(zip(a.names, a.base.tolist())), "left_out": dict(zip(a.names, loo.tolist())),
            "left_out_sd": dict(zip(a.names, sd.tolist())),
            "spearman_left_out": score(spearman, loo), "rmse_left_out": score(rmse, loo),
            "spearman_base": score(spearman, a.base), "rmse_base": score(rmse, a.base),
            "expected": series.settings.expectation(len(a))}


def anchored_card(model: AffinityModel, report: dict, base_name: str, receptor: str) -> str:
    """The model card of a model anchored on measured ligands (``geomol finetune``)."""
    words = {"residual": "a Gaussian process on the base model's residuals (the base model as its mean, a kernel "
                         "on the ligands' Morgan counts), with a calibrated ±",
             "anchored": "the base model's differences to each measured ligand, averaged, nearer analogues weighing "
                         "more", "base": "the base model as it is (with so few measured ligands nothing else "
                                         "helped in the k-shot evaluation)"}.get(report["method"], report["method"])
    lines = [f"# {model.name}", "",
             f"`{base_name}` anchored on {report['ligands']} measured ligands of one series (receptor `{receptor}`) "
             f"with `geomol finetune`: its weights are the base model's; every prediction is made relative to the "
             f"measured ligands by '{report['method']}': {words}. A measured ligand is predicted from the others.", ""]
    if report["expected"]:
        lines += ["## What to expect", "", report["expected"][0].upper() + report["expected"][1:] + ".", ""]
    lines += ["## Measured ligands (each predicted without itself)", "",
              "| ligand | measured pK | base model | anchored on the others | ± |", "|---|---|---|---|---|"]
    lines += [f"| {n} | {y:.2f} | {report['base'][n]:.2f} | {report['left_out'][n]:.2f} | {report['left_out_sd'][n]:.2f} |"
              for n, y in report["measured"].items()]
    if report["spearman_left_out"] is not None:
        lines += ["", f"On them: Spearman {report['spearman_left_out']} (base model {report['spearman_base']}), RMSE "
                      f"{report['rmse_left_out']} pK (base model {report['rmse_base']})."]
    lines += ["", "## Limitations", "",
              "- for this receptor and chemical series only (anchors of another series mislead); elsewhere use the "
              "base model;", "- the manifest's `anchors` hold the measured values; `metrics.finetune` this table;",
              *model.card_facts(model.manifest())[1:]]
    return "\n".join(lines) + "\n"


def finetune_method(base: AffinityModel, method: str, k: int, forced: bool) -> str:
    """How :func:`geomol.finetune_affinity` adapts ``base`` to ``k`` measured ligands: ``method`` when given,
    ``'finetuned'`` when fine-tuning settings are ``forced``, else the base model's choice for k (fine-tuning for a
    model never measured in the k-shot protocol)."""
    if method != "auto" and method not in ANCHOR_METHODS:
        raise ConfigError(f"method is 'auto' or one of {ANCHOR_METHODS}, not {method!r}")
    if forced:
        if method not in ("auto", "finetuned"):
            raise ConfigError(f"steps, lr and anchor set how weights are fine-tuned: not with method {method!r}")
        return "finetuned"
    if method != "auto":
        return method
    try:
        return AnchoringSettings.of_model(base).method(k)
    except ConfigError:  # a model never measured in the k-shot protocol: fine-tuning, as before it existed
        return "finetuned"


def anchor_affinity(base: AffinityModel, receptor, inputs: Sequence[LigandInput], measured: Mapping[str, float],
                    method: str, *, out=None, name: str = "", receptor_chains=None,
                    overwrite: bool = False) -> AffinityModel:
    """:func:`geomol.finetune_affinity` by anchoring: a copy of ``base`` carrying the measured ligands among
    ``inputs`` as anchors (its manifest's ``metrics.finetune`` the leave-one-out report), written with its card
    to ``out`` when given."""
    inputs = [item for item in inputs if item.name in measured]
    if len(inputs) < 2:
        raise ConfigError(f"anchoring needs at least 2 measured ligands among the ligands, found {len(inputs)} of "
                          f"{len(measured)} measured")
    tuned = anchor_on_ligands(base, receptor, inputs, measured, receptor_chains=receptor_chains, method=method)
    tuned.name = name or f"{base.name or 'model'}-anchored"
    tuned.description = (f"{base.name or 'an affinity model'} anchored on {len(tuned.anchors.anchors)} measured "
                         "ligands of one series")
    report = anchor_report(tuned)
    tuned.metrics = {"finetune": {"base_model": base.name, **report}, "base_model_metrics": dict(base.metrics)}
    if out is not None:
        label = receptor.source if isinstance(receptor, Structure) else Path(receptor).name
        tuned.save(out, card=anchored_card(tuned, report, base.name, label), name=tuned.name, overwrite=overwrite)
    return tuned
