"""Ligand-only affinity baselines: tree ensembles on :mod:`geomol.data.chemistry.ligand_features`.

A model that never sees the protein, trained on the training clusters of a fold: a random forest
(``rf``) or histogram gradient boosting (``gbm``) from scikit-learn on folded Morgan counts plus
descriptors, or gradient boosting that learns within series (``gbm_series``): every feature also minus its
mean over the item's series, fitted to the pK minus the series' mean, so that it learns what makes one
analogue bind better than another (a substituent's typical effect) rather than a protein's pK level. Its
centring uses the features of the series' other ligands, never their labels, as a user's series would.
Hyper-parameters are chosen on the fold's *validation* slice (clusters held out of
training) by the protocol's own criterion, the mean per-target Spearman
(:mod:`geomol.metrics.targets`); test items are never looked at. The chosen model is the one fitted
on the training part (no refit), as a structure model's checkpoint chosen on validation is.

Grids are small on purpose (one thread, ~15k items): for ``gbm`` the boosting rounds are grown in
stages (``warm_start``), so every stage of one fit is a candidate at no extra cost.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass, field
from typing import Hashable, Sequence

import numpy as np
import torch
from sklearn.ensemble import HistGradientBoostingRegressor, RandomForestRegressor

from geomol.errors import ConfigError
from geomol.metrics.scores import rmse
from geomol.metrics.targets import MIN_TARGET_LIGANDS, score_targets, summarise_targets, target_members
from geomol.models.ligand_trees import LigandTrees

__all__ = ["LIGAND_MODELS", "GRIDS", "Selection", "group_centred", "series_features", "select_ligand_model",
           "validation_score", "ligand_trees"]

LIGAND_MODELS = ("rf", "gbm", "gbm_series")

# rf: one fit per entry; gbm: one fit per entry, scored after each number of rounds in ``stages``.
GRIDS: dict[str, list[dict]] = {
    "rf": [{"n_estimators": 100, "max_features": "sqrt", "min_samples_leaf": leaf} for leaf in (1, 5)],
    "gbm": [{"learning_rate": 0.1, "max_leaf_nodes": 15, "l2_regularization": 1.0, "stages": (100, 200, 400)}],
    "gbm_series": [{"learning_rate": 0.05, "max_leaf_nodes": 31, "min_samples_leaf": 20, "l2_regularization": 1.0,
                    "stages": (100, 200, 400, 800)}],
}


@dataclass
class Selection:
    """The model chosen on a validation slice.

    Attributes:
        model: the fitted regressor (``predict(X) -> pK``).
        params: its hyper-parameters (for ``gbm``, ``max_iter`` is the chosen number of rounds).
        score: its validation score (mean per-target Spearman, or −RMSE when the slice has no target).
        tried: every candidate's ``{"params", "score"}``.
    """

    model: object
    params: dict
    score: float
    tried: list[dict] = field(default_factory=list)
    kind: str = "rf"

    def predict(self, features: np.ndarray, groups: Sequence[Hashable] | None = None) -> np.ndarray:
        """``(n,)`` predictions for ``features`` ``(n, f)``; ``gbm_series`` needs the rows' series (``groups``)
        and predicts pK differences within each series."""
        if self.kind == "gbm_series":
            if groups is None or len(groups) != len(features):
                raise ConfigError("a gbm_series model predicts within series: give the series of every row")
            features = series_features(features, groups)
        return self.model.predict(features)


def validation_score(pred: np.ndarray, label: np.ndarray, members: dict[Hashable, list[int]]) -> float:
    """Mean per-target Spearman over the slice's targets; −RMSE when it has none (ranking undefined)."""
    if not members:
        return -rmse(pred, label)
    zeros = np.zeros(len(label))  # the heavy-atom columns of the scores are not used here
    value = summarise_targets(score_targets(pred, label, zeros, members))["spearman"]
    return -math.inf if math.isnan(value) else value


def _candidates(kind: str, params: dict, X: np.ndarray, y: np.ndarray, seed: int):
    """Yield ``(params, fitted model)`` for one grid entry (several for the stages of ``gbm``)."""
    if kind == "rf":
        yield params, RandomForestRegressor(**params, n_jobs=1, random_state=seed).fit(X, y)
        return
    base = {k: v for k, v in params.items() if k != "stages"}
    model = HistGradientBoostingRegressor(**base, max_iter=params["stages"][0], early_stopping=False,
                                          warm_start=True, random_state=seed)
    for rounds in params["stages"]:
        model.set_params(max_iter=rounds)
        model.fit(X, y)  # warm start: adds rounds to the previous stage's trees
        yield {**base, "max_iter": rounds}, copy.deepcopy(model)  # later stages must not change this one


def group_centred(values: np.ndarray, groups: Sequence[Hashable]) -> np.ndarray:
    """``values`` (``(n,)`` or ``(n, f)``) minus the mean of their rows' group (``groups``: ``n`` keys)."""
    _, index = np.unique(np.asarray(groups), return_inverse=True)
    values = np.asarray(values, dtype=np.float64)
    flat = values.reshape(len(index), -1)
    sums = np.zeros((int(index.max()) + 1, flat.shape[1]))
    np.add.at(sums, index, flat)
    means = sums / np.bincount(index)[:, None]
    return (flat - means[index]).reshape(values.shape)


def series_features(features: np.ndarray, groups: Sequence[Hashable]) -> np.ndarray:
    """``(n, 2f)``: each item's features minus their mean over its series, then the features themselves."""
    return np.concatenate([group_centred(features, groups), features], axis=1)


def select_ligand_model(kind: str, features: np.ndarray, label: np.ndarray, train: Sequence[int],
                        valid: Sequence[int], valid_keys: Sequence[Hashable], *,
                        min_ligands: int = MIN_TARGET_LIGANDS, seed: int = 0,
                        grid: list[dict] | None = None, groups: Sequence[Hashable] | None = None) -> Selection:
    """Fit every candidate of ``grid`` (default :data:`GRIDS`) on ``train``; keep the best on ``valid``.

    Args:
        kind: ``'rf'``, ``'gbm'`` or ``'gbm_series'`` (see the module doc).
        features: ``(n_items, n_features)`` (:class:`~geomol.data.chemistry.ligand_features.LigandFeaturizer`).
        label: ``(n_items,)`` measured pK.
        train, valid: item indices.
        valid_keys: the target of each ``valid`` item (same order), for the per-target score.
        groups: ``gbm_series`` only: the series of every item (``n_items`` keys). The chosen model then
            predicts pK differences within a series (:meth:`Selection.predict` with the rows' series).
    """
    if kind not in LIGAND_MODELS:
        raise ConfigError(f"ligand-only model is one of {LIGAND_MODELS}, got {kind!r}")
    if len(valid_keys) != len(valid):
        raise ConfigError(f"{len(valid_keys)} target keys for {len(valid)} validation items")
    train, valid = np.asarray(train), np.asarray(valid)
    target = label[train]
    if kind == "gbm_series":
        if groups is None or len(groups) != len(label):
            raise ConfigError("gbm_series learns within series: give the series of every item (groups)")
        features = series_features(features, groups)
        target = group_centred(target, np.asarray(groups)[train])
    members = target_members(valid_keys, min_ligands)
    best, tried = None, []
    for params in grid if grid is not None else GRIDS[kind]:
        for chosen, model in _candidates(kind, params, features[train], target, seed):
            score = validation_score(model.predict(features[valid]), label[valid], members) if len(valid) else 0.0
            tried.append({"params": chosen, "score": score})
            if best is None or score > best.score:
                best = Selection(model, chosen, score, kind=kind)
    best.tried = tried
    return best


def ligand_trees(selection: Selection) -> LigandTrees:
    """The fitted model of a :class:`Selection` as a :class:`~geomol.models.ligand_trees.LigandTrees` member
    (its trees as arrays: shipped, loaded with ``weights_only=True`` and fine-tuned like any member; it predicts
    exactly as scikit-learn does on the same rows).

    Raises:
        ConfigError: a ``gbm_series`` model: it predicts differences within a series from the features of the
            whole series at once, which a member scoring complexes one batch at a time cannot give it.
    """
    if selection.kind == "gbm_series":
        raise ConfigError("a gbm_series model predicts differences within a series from the whole series' "
                          "features at once; it cannot be a member of a shipped model (use 'rf' or 'gbm')")
    model = selection.model
    if selection.kind == "rf":
        trees = [(e.tree_.feature, e.tree_.threshold, e.tree_.children_left, e.tree_.children_right,
                  e.tree_.value[:, 0, 0]) for e in model.estimators_]
        offset, average, float32_inputs = 0.0, True, True
    else:
        nodes = [predictors[0].nodes for predictors in model._predictors]  # noqa: SLF001 (no public tree arrays)
        trees = [(np.where(n["is_leaf"], -1, n["feature_idx"]), n["num_threshold"], n["left"], n["right"], n["value"])
                 for n in nodes]
        offset, average, float32_inputs = float(np.ravel(model._baseline_prediction)[0]), False, False  # noqa: SLF001
    member = LigandTrees(len(trees), max(len(tree[0]) for tree in trees), max(_depth(*tree[:4]) for tree in trees),
                         n_features=int(model.n_features_in_), average=average, float32_inputs=float32_inputs,
                         model=selection.kind)
    with torch.no_grad():
        for k, (feature, threshold, left, right, value) in enumerate(trees):
            leaf = np.asarray(feature) < 0
            n = len(leaf)
            member.feature[k, :n] = torch.from_numpy(np.where(leaf, -1, feature).astype(np.int64))
            member.threshold[k, :n] = torch.from_numpy(np.asarray(threshold, dtype=np.float64))
            member.left[k, :n] = torch.from_numpy(np.where(leaf, np.arange(n), left).astype(np.int64))
            member.right[k, :n] = torch.from_numpy(np.where(leaf, np.arange(n), right).astype(np.int64))
            member.value[k, :n] = torch.from_numpy(np.asarray(value, dtype=np.float64))
        member.offset.fill_(offset)
    return member.eval()


def _depth(feature, threshold, left, right) -> int:
    """Edges on the longest root-to-leaf path of one tree's arrays."""
    depth, frontier = 0, [0]
    while True:
        inner = [i for i in frontier if feature[i] >= 0]
        if not inner:
            return depth
        frontier, depth = [int(c) for i in inner for c in (left[i], right[i])], depth + 1
