"""Fitting tree ensembles on whole-ligand rows, settings chosen by an inner cross-validation of the training data.

With a hundred complexes of unrelated receptors (the nucleic-acid set) one validation slice of a dozen complexes
is too noisy to choose anything by, so :func:`select_trees` scores every candidate — a grid entry of
:data:`TREE_GRIDS` with one of the given item weightings (e.g. the tier-B weight) — by the Spearman correlation
of its out-of-fold predictions over inner folds of whole clusters inside the training data (the caller deals
them, e.g. :func:`~geomol.data.splits.nucleic.nucleic_cluster_folds` on the training items), then refits the
best candidate on all the training items. Test items are never seen. :func:`tree_member` turns the fit into a
shipped member (:class:`~geomol.models.contact_trees.ContactTrees`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
from sklearn.ensemble import ExtraTreesRegressor, HistGradientBoostingRegressor, RandomForestRegressor

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.errors import ConfigError
from geomol.metrics.scores import spearman
from geomol.models.contact_trees import ContactTrees
from geomol.training.ligand_baselines import Selection, ligand_trees

__all__ = ["TREE_GRIDS", "TreeChoice", "tree_regressor", "select_trees", "tree_member", "common_members"]

TREE_GRIDS: dict[str, list[dict]] = {
    "rf": [{"n_estimators": 400, "min_samples_leaf": leaf, "max_features": share} for leaf in (2, 5)
           for share in (0.3, 1.0)],
    "et": [{"n_estimators": 400, "min_samples_leaf": leaf, "max_features": share} for leaf in (2, 5)
           for share in (0.3, 1.0)],
    "gbm": [{"learning_rate": 0.05, "max_leaf_nodes": 7, "min_samples_leaf": 5, "l2_regularization": 1.0,
             "max_iter": rounds} for rounds in (50, 150, 300)],
}
"""Candidates per algorithm: ``rf`` random forest, ``et`` extremely randomised trees, ``gbm`` gradient boosting."""


@dataclass
class TreeChoice:
    """The candidate chosen by the inner cross-validation, refitted on every training item.

    Attributes:
        model: the fitted scikit-learn regressor; algorithm, params: what it is; weighting: the key of the chosen
        item weights; score: its inner out-of-fold Spearman; tried: every candidate's settings and score.
    """

    model: object
    algorithm: str
    params: dict
    weighting: object
    score: float
    tried: list[dict] = field(default_factory=list)


def tree_regressor(algorithm: str, params: Mapping, seed: int = 0):
    """An unfitted scikit-learn ensemble of ``algorithm`` (:data:`TREE_GRIDS` keys) with ``params``."""
    if algorithm == "rf":
        return RandomForestRegressor(**params, n_jobs=1, random_state=seed)
    if algorithm == "et":
        return ExtraTreesRegressor(**params, n_jobs=1, random_state=seed)
    if algorithm == "gbm":
        return HistGradientBoostingRegressor(**params, early_stopping=False, random_state=seed)
    raise ConfigError(f"tree algorithm is one of {sorted(TREE_GRIDS)}, got {algorithm!r}")


def _fit(algorithm, params, rows, label, weights, items, seed):
    items = np.asarray([i for i in items if weights[i] > 0], dtype=np.int64)
    return tree_regressor(algorithm, params, seed).fit(rows[items], label[items], sample_weight=weights[items])


def select_trees(rows: np.ndarray, label: np.ndarray, train: Sequence[int],
                 inner_folds: Sequence[tuple[Sequence[int], Sequence[int]]], *, algorithm: str,
                 weightings: Mapping[object, np.ndarray], grid: list[dict] | None = None, seed: int = 0) -> TreeChoice:
    """Choose a candidate by inner cross-validation and refit it on ``train`` (module notes).

    Args:
        rows: ``(n, f)`` every item's row; label: ``(n,)`` pK.
        train: the items of the final fit.
        inner_folds: ``(fit items, scored items)`` pairs inside ``train`` (whole clusters apart).
        algorithm: a key of :data:`TREE_GRIDS`; grid: its candidates (default the table's).
        weightings: named ``(n,)`` item weights to try (weight 0: the item is not fitted on).
    """
    if not inner_folds or not weightings:
        raise ConfigError("select_trees needs inner folds and at least one weighting")
    label = np.asarray(label, dtype=np.float64)
    scored = np.concatenate([np.asarray(test, dtype=np.int64) for _, test in inner_folds])
    best, tried = None, []
    for key, weights in weightings.items():
        for params in grid if grid is not None else TREE_GRIDS[algorithm]:
            pred = np.concatenate([_fit(algorithm, params, rows, label, weights, fit, seed).predict(rows[test])
                                   for fit, test in inner_folds])
            score = spearman(pred, label[scored])
            score = -np.inf if np.isnan(score) else score
            tried.append({"params": params, "weighting": key, "score": round(float(score), 4)})
            if best is None or score > best[2]:
                best = (params, key, score)
    params, key, score = best
    model = _fit(algorithm, params, rows, label, weightings[key], train, seed)
    return TreeChoice(model, algorithm, dict(params), key, float(score), tried)


def tree_member(choice: TreeChoice, recipe: ContactRecipe) -> ContactTrees:
    """The fitted trees of ``choice`` as a :class:`~geomol.models.contact_trees.ContactTrees` member reading the
    rows of ``recipe`` (they must be the rows ``choice`` was fitted on)."""
    kind = "gbm" if choice.algorithm == "gbm" else "rf"  # forests (rf, et) share the array layout
    member = ContactTrees.from_trees(ligand_trees(Selection(choice.model, choice.params, choice.score, kind=kind)),
                                     recipe)
    member.model = choice.algorithm
    return member


def common_members(members: Sequence[ContactTrees]) -> list[ContactTrees]:
    """The members with one configuration (what an ensemble needs, :class:`~geomol.inference.affinity_model.
    AffinityModel`): every one padded to the most nodes, depth and trees among them. Padded nodes are leaves no
    path reaches; padded trees (boosting only, where the chosen rounds differ) add 0 to the sum.

    Raises:
        ConfigError: members of different algorithms, recipes, or forests of different sizes.
    """
    configs = [m.to_config() for m in members]
    same = {k: {str(c[k]) for c in configs} for k in ("average", "float32_inputs", "model", "features", "n_features")}
    if any(len(v) > 1 for v in same.values()) or (configs[0]["average"] and len({c["n_trees"] for c in configs}) > 1):
        raise ConfigError("ensemble members must share algorithm, features and (forests) their number of trees")
    sizes = {k: max(c[k] for c in configs) for k in ("n_trees", "n_nodes", "depth")}
    padded = []
    for member, config in zip(members, configs):
        wide = ContactTrees(**{k: v for k, v in {**config, **sizes}.items() if k != "features"}, recipe=member.recipe)
        trees, nodes = member.feature.shape
        for name in ("feature", "threshold", "left", "right", "value"):
            getattr(wide, name)[:trees, :nodes] = getattr(member, name)
        wide.offset.copy_(member.offset)
        wide.scale.copy_(member.scale)
        padded.append(wide.eval())
    return padded
