"""The models of the nucleic-acid cross-validation: one fit per fold, settings chosen on its inner validation.

Each kind of :data:`MODEL_KINDS` is ``fit(data, fold, k, settings) -> (predictions, chosen)``: it trains on the
fold's ``train`` items (tier-B items weighted by ``settings['tier_b']``), chooses what it chooses (hyper-parameters,
epoch, tier-B weight when ``tier_b`` is ``'auto'``) by the Spearman correlation over the fold's ``valid`` items
(whole clusters held out of training; :mod:`geomol.data.splits.nucleic`), and predicts the held-out items
(:meth:`~geomol.evaluation.nucleic_set.NucleicSet.held_out`: tier-A test items, then tier-B ones). Test items are
never looked at before the prediction.

* ``hac``: the ligand's heavy-atom count (no fit);
* ``shipped``: a shipped model as it is (``settings['model']``: ``get-plb``, ``contact-corpus``), never trained
  on nucleic acids;
* ``trees``: a random forest (``algorithm: rf``) or gradient boosting (``gbm``) on the ligand-only rows
  (``features: ligand``: Morgan counts + descriptors) or on the ligand's summed contact rows + descriptors
  (``features: {contact recipe}``), grid :data:`TREE_GRIDS`;
* ``contact_mlp``: the contact scorer (:mod:`geomol.training.contact_scorer`), ranking loss over all training
  pairs (one pooled group), calibrated to pK on its training items, ``seeds`` scorers averaged;
* ``get``: GET fine-tuned from a pre-trained member (``start: get-plb``, member ``k mod 5``) or trained from
  scratch (``start: scratch``) (:func:`~geomol.training.get_transfer.fit_get_transfer`).
"""
from __future__ import annotations

import copy
from functools import lru_cache
from typing import Callable

import numpy as np
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.errors import ConfigError
from geomol.evaluation.contact_cv import ligand_sums
from geomol.evaluation.metrics import spearman
from geomol.evaluation.nucleic_set import NucleicSet, tier_weights
from geomol.training.contact_scorer import calibrate_contact_scorer, fit_contact_scorer, predict_contact_scorer

__all__ = ["MODEL_KINDS", "TREE_GRIDS", "TIER_B_CANDIDATES", "valid_score", "tree_rows", "fit_trees"]

TIER_B_CANDIDATES = (0.0, 0.3, 1.0)
"""Tier-B weights tried when ``tier_b`` is ``'auto'`` (the contact scorer, which has no item weights: 0 and 1)."""
TREE_GRIDS = {
    "rf": [{"n_estimators": 300, "min_samples_leaf": leaf, "max_features": share} for leaf in (2, 5)
           for share in (0.3, 1.0)],
    "gbm": [{"learning_rate": 0.05, "max_leaf_nodes": 7, "min_samples_leaf": 5, "l2_regularization": 1.0,
             "max_iter": rounds} for rounds in (50, 150, 300)],
}


def valid_score(pred: np.ndarray, label: np.ndarray) -> float:
    """Spearman over the validation items; −inf when undefined (constant predictions)."""
    value = spearman(pred, label)
    return -np.inf if np.isnan(value) else value


def _tier_b_options(settings: dict, allowed=TIER_B_CANDIDATES) -> list[float]:
    choice = settings.get("tier_b", 0.0)
    return [w for w in allowed] if choice == "auto" else [float(choice)]


def tree_rows(data: NucleicSet, features) -> np.ndarray:
    """``(n, f)`` the rows a tree model reads: ``'ligand'`` (Morgan counts + descriptors) or a contact recipe's
    summed rows + descriptors (:func:`~geomol.evaluation.contact_cv.ligand_sums`)."""
    if features == "ligand":
        return data.ligand_features()
    return ligand_sums(data.contacts(ContactRecipe.from_dict(features)))


def _tree_model(algorithm: str, params: dict, seed: int):
    if algorithm == "rf":
        return RandomForestRegressor(**params, n_jobs=1, random_state=seed)
    if algorithm == "gbm":
        return HistGradientBoostingRegressor(**params, early_stopping=False, random_state=seed)
    raise ConfigError(f"tree algorithm is 'rf' or 'gbm', got {algorithm!r}")


def fit_trees(rows: np.ndarray, label: np.ndarray, weights: np.ndarray, train, valid, algorithm: str,
              seed: int = 0) -> tuple[object, dict, float]:
    """The grid's (:data:`TREE_GRIDS`) best model on ``valid`` after fitting on ``train`` with item ``weights``:
    ``(model, params, validation score)``."""
    train = np.asarray([i for i in train if weights[i] > 0])
    best = None
    for params in TREE_GRIDS[algorithm]:
        model = _tree_model(algorithm, params, seed).fit(rows[train], label[train], sample_weight=weights[train])
        score = valid_score(model.predict(rows[valid]), label[valid])
        if best is None or score > best[2]:
            best = (model, params, score)
    return best


def _hac(data: NucleicSet, fold: dict, k: int, settings: dict):
    return data.heavy[data.held_out(fold)], {}


@lru_cache(maxsize=4)
def _shipped(name: str):
    from geomol.inference.loading import load_model

    return load_model(name)


def _shipped_predictions(data: NucleicSet, fold: dict, k: int, settings: dict):
    model = _shipped(settings["model"])
    held = data.held_out(fold)
    graphs = [data.graphs[i] for i in held]
    pred = np.concatenate([model.predict(graphs[s:s + 16])[0].numpy() for s in range(0, len(graphs), 16)])
    return pred, {"model": settings["model"]}


def _trees(data: NucleicSet, fold: dict, k: int, settings: dict):
    rows = tree_rows(data, settings.get("features", "ligand"))
    best = None
    for weight in _tier_b_options(settings):
        model, params, score = fit_trees(rows, data.label, tier_weights(data.tiers, weight), fold["train"],
                                         fold["valid"], settings.get("algorithm", "rf"), seed=k)
        if best is None or score > best[3]:
            best = (model, params, weight, score)
    model, params, weight, score = best
    return model.predict(rows[data.held_out(fold)]), {"params": params, "tier_b": weight, "valid_spearman": score}


def _contact_mlp(data: NucleicSet, fold: dict, k: int, settings: dict):
    recipe = ContactRecipe.from_dict(settings.get("features", {"roles": True, "nucleic": True}))
    contacts = data.contacts(recipe)
    best = None
    for weight in _tier_b_options(settings, (0.0, 1.0)):
        train = [i for i in fold["train"] if data.tiers[i] == "A" or weight > 0]
        fits = [fit_contact_scorer(contacts, train, fold["valid"], loss=settings.get("loss", "ranking"),
                                   epochs=settings.get("epochs", 40), seed=100 * k + s,
                                   hidden=settings.get("hidden", 32), series_per_batch=1, min_ligands=2,
                                   recipe=recipe) for s in range(settings.get("seeds", 3))]
        for fit in fits:
            calibrate_contact_scorer(fit.model, contacts, train)
        valid = np.mean([predict_contact_scorer(f.model, contacts, fold["valid"]) for f in fits], axis=0)
        score = valid_score(valid, data.label[fold["valid"]])
        if best is None or score > best[2]:
            best = (fits, weight, score)
    fits, weight, score = best
    pred = np.mean([predict_contact_scorer(f.model, contacts, data.held_out(fold)) for f in fits], axis=0)
    return pred, {"tier_b": weight, "epochs": [f.epoch for f in fits], "valid_spearman": score}


def get_start(start: str, member: int):
    """The member fine-tuning starts from: ``get-plb``'s member ``member`` (mod its size), or an untrained GET of
    its architecture (``'scratch'``)."""
    from geomol.models.get import GETAffinity

    model = _shipped("get-plb")
    pretrained = model.members[member % len(model.members)]
    if start == "get-plb":
        return copy.deepcopy(pretrained)
    if start == "scratch":
        return GETAffinity.from_config(pretrained.to_config())
    raise ConfigError(f"GET starts from 'get-plb' or 'scratch', got {start!r}")


def _get(data: NucleicSet, fold: dict, k: int, settings: dict):
    from geomol.training.get_transfer import fit_get_transfer, predict_member

    best = None
    for weight in _tier_b_options(settings):
        fits = [fit_get_transfer(get_start(settings.get("start", "get-plb"), k + s), data.graphs, data.label,
                                 fold["train"], fold["valid"], weights=tier_weights(data.tiers, weight),
                                 epochs=settings.get("epochs", 15), lr=settings.get("lr", 3e-4), seed=100 * k + s)
                for s in range(settings.get("seeds", 1))]
        valid = np.mean([predict_member(f.model, [data.graphs[i] for i in fold["valid"]]) for f in fits], axis=0)
        score = valid_score(valid, data.label[fold["valid"]])
        if best is None or score > best[2]:
            best = (fits, weight, score)
    fits, weight, score = best
    held = [data.graphs[i] for i in data.held_out(fold)]
    pred = np.mean([predict_member(f.model, held) for f in fits], axis=0)
    return pred, {"tier_b": weight, "epochs": [f.epoch for f in fits], "valid_spearman": score,
                  "losses": [[round(v, 4) for v in f.losses] for f in fits]}


MODEL_KINDS: dict[str, Callable] = {"hac": _hac, "shipped": _shipped_predictions, "trees": _trees,
                                    "contact_mlp": _contact_mlp, "get": _get}
