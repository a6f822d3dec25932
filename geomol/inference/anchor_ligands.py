"""Attach a series' measured ligands to a model as anchors (``predict-affinity --anchors``, ``geomol finetune``).

:func:`anchor_on_ligands` builds the measured ligands' complexes as prediction does, predicts them with the model's
members (its base pK) and returns the model with an :class:`~geomol.inference.anchored_series.AnchoredSeries`:
every later prediction through it is relative to them (:mod:`geomol.inference.anchoring`). Measured ligands that
are missing or fail their checks are left out with one warning; with none left, the model predicts as it is
(the base model).
"""
from __future__ import annotations

import copy
import warnings
from os import PathLike
from typing import Mapping, Sequence

import numpy as np

from geomol.data.io import Structure
from geomol.inference.affinity import build_complexes
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.anchored_series import AnchoredSeries, AnchoringSettings, graph_fingerprint
from geomol.inference.anchoring import Anchors
from geomol.inference.ligand_inputs import LigandInput

__all__ = ["anchor_on_ligands", "anchored_model"]


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
    records, graphs = build_complexes(receptor, inputs, model, receptor_chains=receptor_chains)
    used = [(r.name, g) for r, g in zip(records, graphs) if g is not None and r.name in measured]
    failed = [f"{r.name} ({r.error})" for r in records if r.error and r.name in measured]
    absent = sorted(set(measured) - {r.name for r in records})
    if failed or absent:
        warnings.warn(f"measured ligand(s) not used as anchors: {', '.join(failed + absent)}"
                      + (" (not among the ligands)" if absent else ""), stacklevel=2)
    names = [name for name, _ in used]
    if used:
        base = model.predict([g for _, g in used])[0].double().numpy()
        fingerprints = np.stack([graph_fingerprint(g) for _, g in used])
    else:
        base, fingerprints = np.zeros(0), np.zeros((0, 1))
    anchors = Anchors(names, base, fingerprints, [measured[n] for n in names])
    return anchored_model(model, AnchoredSeries(settings, anchors, method))
