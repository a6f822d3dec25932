"""The contact-tree members of a shipped nucleic-acid model, as the cross-validation built its folds' models.

``geomol train-affinity --config models/na-affinity.yaml`` trains them (the ``ContactTrees`` trainer of
:mod:`geomol.commands.train_affinity`); the config is in the one format of :mod:`geomol.training.ensemble_config`::

    member: {kind: ContactTrees, model: rf, features: {roles: true, nucleic: true}}
    recipe: {pocket_cutoff: 10.0}
    data: {source: nucleic, root: ${GEOMOL_SHARED_DATA}/nucleic_affinity}
    ensemble: {folds: 5, split_seed: 0, valid_fraction: 0.2}
    fit: {tier_b: auto}

Member ``k`` is the model of fold ``k`` of the cross-validation (:func:`~geomol.evaluation.nucleic_models.fold_trees`:
its settings and tier-B weight chosen by an inner cross-validation of the clusters fold ``k`` does not test, then
fitted on them), so every cluster was in the training data of 4 of the 5 members and the cross-validation's figures
are the members' figures on clusters they never saw (``benchmarks/nucleic_affinity_cv.py``, the variant with the
same ``model``, ``features`` and ``tier_b``).
"""
from __future__ import annotations

from typing import Any, Mapping

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.errors import ConfigError
from geomol.evaluation.nucleic_models import fold_trees
from geomol.evaluation.nucleic_set import FOLD_PROTOCOL, NucleicSet, nucleic_set_of
from geomol.training.contact_trees import TREE_GRIDS, common_members, tree_member
from geomol.training.ensemble_config import check_keys

__all__ = ["nucleic_members", "tree_settings", "tree_ensemble"]


def nucleic_members(data: NucleicSet, settings: Mapping[str, Any]) -> tuple[list, list[dict]]:
    """One :class:`~geomol.models.contact_trees.ContactTrees` member per fold (module notes) and its origin.

    Args:
        settings: a ``trees`` variant's settings (``features``, ``algorithm``, ``tier_b``).
    """
    recipe = ContactRecipe.from_dict(settings["features"])
    members, origins = [], []
    for k, fold in enumerate(data.folds):
        _, choice = fold_trees(data, fold, k, dict(settings))
        members.append(tree_member(choice, recipe))
        trained = list(fold["train"]) + list(fold["valid"])
        origins.append({"fold": k, "params": choice.params, "tier_b": choice.weighting,
                        "inner_spearman": round(choice.score, 4), "train_items": len(trained),
                        "held_out_clusters": sorted({str(data.clusters[i]) for i in data.held_out(fold)})})
        print(f"member {k}: {choice.params}, tier B weight {choice.weighting}, inner Spearman {choice.score:.3f}",
              flush=True)
    return common_members(members), origins


def tree_settings(config) -> tuple[dict, dict]:
    """``(trees variant settings, fold protocol)`` of a train-affinity config whose members are ContactTrees.

    Raises:
        ConfigError: an unknown key in ``member``, ``ensemble`` or ``fit``, or an unknown tree model, naming the config.
    """
    check_keys("member", config.member, ("model", "features"), config.source, " of ContactTrees")
    check_keys("ensemble", config.ensemble, ("folds", "split_seed", "valid_fraction"), config.source)
    check_keys("fit", config.fit, ("tier_b",), config.source)
    if config.member.get("model", "rf") not in TREE_GRIDS or "features" not in config.member:
        raise ConfigError(f"member: ContactTrees needs features (a contact recipe) and model one of "
                          f"{sorted(TREE_GRIDS)}", config.source)
    settings = {"features": dict(config.member["features"]), "algorithm": config.member.get("model", "rf"),
                "tier_b": config.fit.get("tier_b", "auto")}
    protocol = {"n_folds": config.ensemble.get("folds", FOLD_PROTOCOL["n_folds"]),
                "seed": config.ensemble.get("split_seed", FOLD_PROTOCOL["seed"]),
                "valid_fraction": config.ensemble.get("valid_fraction", FOLD_PROTOCOL["valid_fraction"])}
    return settings, protocol


def tree_ensemble(config, source, dataset) -> tuple[list, list[dict]]:
    """The members a train-affinity config describes (module notes) from the complexes of ``dataset``.

    Raises:
        ConfigError: a bad section (:func:`tree_settings`) or a source that is not the nucleic-acid set.
    """
    from geomol.data.datasets.sources import NucleicSource

    if not isinstance(source, NucleicSource):
        raise ConfigError("contact-tree members are the fold members of the nucleic-acid set: data.source must be "
                          "'nucleic'", config.source)
    settings, protocol = tree_settings(config)
    return nucleic_members(nucleic_set_of(dataset, config.recipe, **protocol), settings)
