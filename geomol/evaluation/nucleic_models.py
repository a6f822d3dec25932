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
* ``trees``: extremely randomised trees (``algorithm: et``), a random forest (``rf``) or gradient boosting
  (``gbm``) on the ligand-only rows (``features: ligand``: Morgan counts + descriptors) or on the ligand's summed
  contact rows + descriptors (``features: {contact recipe}``); the grid entry and tier-B weight chosen by
  :data:`INNER_FOLDS` inner leave-cluster-out folds of the training and validation clusters together
  (:func:`~geomol.training.contact_trees.select_trees`: one slice of a dozen complexes is too noisy), then
  refitted on them all;
* ``contact_mlp``: the contact scorer (:mod:`geomol.training.contact_scorer`), ranking loss over all training
  pairs (one pooled group), calibrated to pK on its training items, ``seeds`` scorers averaged;
* ``get``: GET fine-tuned from a pre-trained member (``start: get-plb``, member ``k mod 5``) or trained from
  scratch (``start: scratch``) (:func:`~geomol.training.get_transfer.fit_get_transfer`).
"""
from __future__ import annotations

import copy
from functools import lru_cache
from typing import Callable, Sequence

import numpy as np

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.splits.nucleic import nucleic_cluster_folds
from geomol.errors import ConfigError
from geomol.metrics.scores import spearman
from geomol.evaluation.nucleic_set import NucleicSet, tier_weights
from geomol.training.contact_scorer import calibrate_contact_scorer, fit_contact_scorer, predict_contact_scorer
from geomol.training.contact_trees import select_trees

__all__ = ["MODEL_KINDS", "TIER_B_CANDIDATES", "INNER_FOLDS", "valid_score", "tree_rows", "inner_folds", "fold_trees",
           "get_start"]

TIER_B_CANDIDATES = (0.0, 0.3, 1.0)
"""Tier-B weights tried when ``tier_b`` is ``'auto'`` (the contact scorer, which has no item weights: 0 and 1)."""
INNER_FOLDS = 4
"""Inner leave-cluster-out folds inside each fold's training clusters, where the tree models choose."""


def valid_score(pred: np.ndarray, label: np.ndarray) -> float:
    """Spearman over the validation items; −inf when undefined (constant predictions)."""
    value = spearman(pred, label)
    return -np.inf if np.isnan(value) else value


def _tier_b_options(settings: dict, allowed=TIER_B_CANDIDATES) -> list[float]:
    choice = settings.get("tier_b", 0.0)
    return [w for w in allowed] if choice == "auto" else [float(choice)]


def tree_rows(data: NucleicSet, features) -> np.ndarray:
    """``(n, f)`` the rows a tree model reads: ``'ligand'`` (Morgan counts + descriptors) or a contact recipe's
    summed rows + descriptors (:meth:`~geomol.training.contact_scorer.ContactData.ligand_sums`)."""
    if features == "ligand":
        return data.ligand_features()
    return data.contacts(ContactRecipe.from_dict(features)).ligand_sums()


def inner_folds(data: NucleicSet, items: Sequence[int], seed: int) -> list[tuple[list[int], list[int]]]:
    """:data:`INNER_FOLDS` leave-cluster-out folds of ``items`` (fewer when fewer clusters hold tier-A complexes; fit
    on all tiers, scored on tier A), as item indices of ``data``."""
    items = np.asarray(items, dtype=np.int64)
    tested = len({c for c, t in zip(data.clusters[items], data.tiers[items]) if t == "A"})
    folds = nucleic_cluster_folds(data.clusters[items].tolist(), data.tiers[items].tolist(),
                                  n_folds=min(INNER_FOLDS, tested), seed=seed, valid_fraction=0.0)
    return [(items[f["train"]].tolist(), items[f["test"]].tolist()) for f in folds]


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


def fold_trees(data: NucleicSet, fold: dict, k: int, settings: dict):
    """``(rows, choice)``: the tree model of fold ``k`` (:func:`~geomol.training.contact_trees.select_trees` on its
    training and validation clusters) and every item's rows; what the ``trees`` kind predicts with, and member ``k``
    of a shipped tree ensemble (:mod:`geomol.evaluation.nucleic_ship`)."""
    rows = tree_rows(data, settings.get("features", "ligand"))
    train = list(fold["train"]) + list(fold["valid"])  # the inner folds choose: the validation slice is training data
    choice = select_trees(rows, data.label, train, inner_folds(data, train, seed=k),
                          algorithm=settings.get("algorithm", "et"), seed=k,
                          weightings={w: tier_weights(data.tiers, w) for w in _tier_b_options(settings)})
    return rows, choice


def _trees(data: NucleicSet, fold: dict, k: int, settings: dict):
    rows, choice = fold_trees(data, fold, k, settings)
    return choice.model.predict(rows[data.held_out(fold)]), {"params": choice.params, "tier_b": choice.weighting,
                                                            "inner_spearman": round(choice.score, 4)}


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
