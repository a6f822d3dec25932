"""``geomol train-affinity``: build a contact-scorer affinity ensemble from a config, as the shipped one is built.

The config (YAML) names the complexes as a ``geomol fit`` config does (its ``data`` section: a corpus data module,
the affinity corpus by default or your own corpus root) and the members::

    name: contact-corpus
    description: contact-scorer affinity ensemble trained on the affinity corpus
    data:
      class_path: geomol.tasks.CorpusDataModule
      init_args: {pocket_cutoff: 10.0, n_folds: 5, valid_fraction: 0.1}
    members:
      features: {roles: true}          # the contact recipe (geomol.data.chemistry.contact_recipe.ContactRecipe)
      model: {hidden: 64}              # ContactScorer: hidden, pooled, message_steps, descriptors
      fit: {loss: ranking, epochs: 20, seed: 0}
    domain: {spread_every: 20}         # ensemble spread measured on every k-th training complex

Member ``k`` is trained on the training clusters of leave-cluster-out fold ``k`` (the epoch chosen on the fold's
validation slice, seed ``seed + 100 k``) and calibrated to pK (:func:`geomol.evaluation.contact_cv.fold_members`);
the model directory records the contact recipe, the complex recipe and the applicability domain, and loads with
``geomol.load_model``. ``models/contact-corpus.yaml`` rebuilds the shipped ``contact-corpus``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from geomol.errors import ConfigError

MEMBER_KEYS = {"features", "model", "fit"}
MODEL_KEYS = {"hidden", "pooled", "message_steps", "descriptors"}
FIT_KEYS = {"loss", "epochs", "seed", "compare_within", "train_sources"}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="the ensemble's config (YAML; see 'models/contact-corpus.yaml')")
    parser.add_argument("--out", required=True, help="model directory to write")
    parser.add_argument("--card", default=None, help="model card (Markdown) to ship with it (default: the facts)")
    parser.add_argument("--cache-dir", default=None, help="processed-data store (default: the config's, $GEOMOL_CACHE)")
    parser.add_argument("--workers", type=int, default=0, help="processes building complexes missing from the store")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing model directory")


def variant(config: dict, source) -> "ContactCV":  # noqa: F821 (imported lazily)
    """The members' settings of a config (:class:`~geomol.evaluation.contact_cv.ContactCV`).

    Raises:
        ConfigError: an unknown key, naming the config.
    """
    from geomol.data.chemistry.contact_recipe import ContactRecipe
    from geomol.evaluation.contact_cv import ContactCV

    members = dict(config.get("members") or {})
    unknown = sorted(set(members) - MEMBER_KEYS) + sorted(set(members.get("model") or {}) - MODEL_KEYS) + sorted(
        set(members.get("fit") or {}) - FIT_KEYS)
    if unknown:
        raise ConfigError(f"members: unknown key(s) {unknown} (members: {sorted(MEMBER_KEYS)}; model: "
                          f"{sorted(MODEL_KEYS)}; fit: {sorted(FIT_KEYS)})", source)
    recipe = ContactRecipe.from_dict(members.get("features"), source)
    return ContactCV(recipe, **(members.get("model") or {}), **(members.get("fit") or {}), seeds=1)


def build(config_path: str | Path, cache_dir: str | None = None, workers: int = 0) -> tuple["AffinityModel", float]:  # noqa: F821
    """The ensemble a config describes (members, recipes and applicability domain) and the CPU minutes it took.

    Raises:
        ConfigError: an unknown section or key, naming the config.
    """
    import torch

    from geomol.commands.preprocess import data_module_from_config
    from geomol.data.complexes.recipe import ComplexRecipe
    from geomol.evaluation.contact_cv import fold_members, module_contacts
    from geomol.inference.affinity_model import AffinityModel
    from geomol.inference.domain import domain_from_graphs
    from geomol.config_files import read_config

    config = read_config(config_path)
    unknown = sorted(set(config) - {"name", "description", "data", "members", "domain"})
    if unknown:
        raise ConfigError(f"unknown section(s) {unknown}", config_path)
    torch.set_num_threads(1)
    cv = variant(config, config_path)
    module = data_module_from_config(config_path, cache_dir=cache_dir)
    clock = time.process_time()
    split = module.split_args
    corpus = module_contacts(module, cv.recipe, workers=workers, n_folds=split["n_folds"],
                             valid_fraction=split["valid_fraction"], bonds=cv.message_steps > 0)
    members, origins = fold_members(corpus, cv)
    recipe = ComplexRecipe.from_dict(module.recipe.to_dict(), config_path)
    model = AffinityModel(members, members[0].to_config(), recipe, origins=origins, name=config.get("name", ""),
                          description=config.get("description", ""))
    spread_every = int((config.get("domain") or {}).get("spread_every", 1))
    dataset = module.make_dataset(workers)
    graphs = [dataset[i] for i in range(len(dataset))]
    model.domain = domain_from_graphs(model, graphs, spread_every=spread_every,
                                      origin=f"the {len(graphs)} corpus complexes; ensemble spread on every "
                                             f"{spread_every}-th")
    return model, (time.process_time() - clock) / 60


def run(args: argparse.Namespace) -> int:
    model, cpu_minutes = build(args.config, args.cache_dir, args.workers)
    out = model.save(Path(args.out), card=args.card, name=model.name or Path(args.out).name,
                     metrics={"train_cpu_minutes": round(cpu_minutes, 1)}, overwrite=args.overwrite)
    print(f"{len(model.members)} members → {out} ({cpu_minutes:.1f} CPU minutes)")
    return 0
