"""Build the shipped nucleic-acid affinity model from its config, as the cross-validation built its folds' models.

The config (``models/na-affinity.yaml``) names the data and the members' settings, those of a ``trees`` variant of
the cross-validation (:mod:`geomol.evaluation.nucleic_models`)::

    name: na-affinity
    description: ...
    data: {root: ${GEOMOL_SHARED_DATA}/nucleic_affinity, pocket_cutoff: 10.0, n_folds: 5, split_seed: 0,
           valid_fraction: 0.2}
    members: {features: {roles: true, nucleic: true}, algorithm: et, tier_b: auto}

Member ``k`` is the model of fold ``k`` (:func:`~geomol.evaluation.nucleic_models.fold_trees`: chosen and fitted on
the clusters fold ``k`` does not test), so every cluster was in the training data of 4 of the 5 members and the
cross-validation's figures are the members' figures on clusters they never saw. The model carries the complex
recipe, each member's contact recipe (``hyperparameters.features``) and the applicability domain of all the
complexes (receptor kinds RNA and DNA).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.errors import ConfigError
from geomol.evaluation.nucleic_models import fold_trees
from geomol.evaluation.nucleic_set import NucleicSet, nucleic_set
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.domain import domain_from_graphs
from geomol.shipped_configs import expand_shared_data
from geomol.training.contact_trees import common_members, tree_member

__all__ = ["SECTIONS", "read_ship_config", "nucleic_members", "build_nucleic_model"]

SECTIONS = {"name", "description", "data", "members"}
DATA_KEYS = {"root", "pocket_cutoff", "n_folds", "split_seed", "valid_fraction"}
MEMBER_KEYS = {"features", "algorithm", "tier_b"}


def read_ship_config(path: str | Path) -> dict[str, Any]:
    """The config with ``${GEOMOL_SHARED_DATA}`` expanded; unknown sections or keys are a :class:`ConfigError`."""
    from geomol.config_files import read_config

    config = read_config(path)
    data, members = dict(config.get("data") or {}), dict(config.get("members") or {})
    unknown = sorted(set(config) - SECTIONS) + sorted(set(data) - DATA_KEYS) + sorted(set(members) - MEMBER_KEYS)
    if unknown or "root" not in data or "features" not in members:
        raise ConfigError(f"unknown key(s) {unknown} or a missing data.root / members.features (sections "
                          f"{sorted(SECTIONS)}; data {sorted(DATA_KEYS)}; members {sorted(MEMBER_KEYS)})", path)
    data["root"] = expand_shared_data(str(data["root"]))
    return {**config, "data": data, "members": members}


def nucleic_members(data: NucleicSet, settings: Mapping[str, Any]) -> tuple[list, list[dict]]:
    """One :class:`~geomol.models.contact_trees.ContactTrees` member per fold (module notes) and its origin."""
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


def build_nucleic_model(config_path: str | Path, cache_dir: str | None = None) -> tuple[AffinityModel, NucleicSet]:
    """The ensemble a config describes (members, recipes, applicability domain) and the data it was built from."""
    config = read_ship_config(config_path)
    options = config["data"]
    data = nucleic_set(options["root"], recipe=ComplexRecipe(options.get("pocket_cutoff", 10.0)), cache_dir=cache_dir,
                       n_folds=options.get("n_folds", 5), seed=options.get("split_seed", 0),
                       valid_fraction=options.get("valid_fraction", 0.2))
    members, origins = nucleic_members(data, config["members"])
    model = AffinityModel(members, members[0].to_config(), data.recipe, origins=origins, name=config.get("name", ""),
                          description=config.get("description", ""))
    tiers = ", ".join(f"{int(np.sum(data.tiers == t))} tier {t}" for t in ("A", "B"))
    model.domain = domain_from_graphs(model, data.graphs, origin=f"the {len(data)} nucleic-acid complexes ({tiers})")
    return model, data
