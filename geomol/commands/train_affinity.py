"""``geomol train-affinity``: build an affinity ensemble from a config, as every shipped affinity model is built.

The config (YAML, :mod:`geomol.training.ensemble_config`) names the member kind and its configuration, the graph
recipe, where the complexes come from (the data layer's sources, no Lightning data module), how the members differ
and how each is trained::

    geomol train-affinity --config models/contact-corpus.yaml --out models/contact-corpus --overwrite
    geomol train-affinity --config models/get-plb.yaml --out models/get-plb --runs runs/get-plb --overwrite

Each member kind has its trainer, registered in :data:`TRAINERS` (none of them uses Lightning): GET members are
trained one per seed on every complex (:func:`geomol.training.get_members.get_ensemble`; with ``--runs`` an
interrupted build continues from the last finished epoch), contact scorers one per leave-cluster-out fold of the
corpus and calibrated to pK (:func:`geomol.evaluation.contact_cv.contact_ensemble`), contact trees one per
leave-cluster-out fold of the nucleic-acid set (:func:`geomol.evaluation.nucleic_ship.tree_ensemble`). The model directory records the
members' configuration, the complex recipe and the applicability domain of the training complexes, and loads with
``geomol.load_model``.
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

from geomol.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config", required=True, help="the model's config (YAML; see 'models/contact-corpus.yaml')")
    parser.add_argument("--out", required=True, help="model directory to write")
    parser.add_argument("--card", default=None, help="model card (Markdown) to ship with it (default: the facts)")
    parser.add_argument("--cache-dir", default=None, help="processed-data store (default: the config's, $GEOMOL_CACHE)")
    parser.add_argument("--workers", type=int, default=0, help="processes building complexes missing from the store")
    parser.add_argument("--runs", default=None,
                        help="folder of the members' training states (GET: an interrupted build continues there)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing model directory")


def _get_members(config, source, dataset, args):
    from geomol.training.get_members import get_ensemble

    return get_ensemble(config, dataset, runs=args.get("runs"))


def _contact_members(config, source, dataset, args):
    from geomol.evaluation.contact_cv import contact_ensemble

    return contact_ensemble(config, source, workers=args.get("workers", 0))


def _tree_members(config, source, dataset, args):
    from geomol.evaluation.nucleic_ship import tree_ensemble

    return tree_ensemble(config, source, dataset)


TRAINERS = {"GETAffinity": _get_members, "ContactScorer": _contact_members, "ContactTrees": _tree_members}
"""Member kind → its trainer ``(config, source, dataset, options) -> (members, origins)``."""


def build(config_path: str | Path, cache_dir: str | None = None, workers: int = 0,
          runs: str | None = None) -> tuple["AffinityModel", float]:  # noqa: F821 (imported lazily)
    """The ensemble a config describes (members, recipe and applicability domain) and the CPU minutes it took.

    Raises:
        ConfigError: a bad config (naming it), or a member kind without a trainer.
    """
    import torch

    from geomol.data.datasets.sources import affinity_source
    from geomol.inference.affinity_model import AffinityModel
    from geomol.inference.domain import domain_from_graphs
    from geomol.training.ensemble_config import read_ensemble_config

    config = read_ensemble_config(config_path)
    if config.kind not in TRAINERS:
        raise ConfigError(f"no trainer for {config.kind} members (train-affinity trains {sorted(TRAINERS)})",
                          config.source)
    torch.set_num_threads(1)
    source = affinity_source(config.data, config.recipe, cache_dir=cache_dir, source=config.source)
    clock = time.process_time()
    dataset = source.make_dataset(workers)
    members, origins = TRAINERS[config.kind](config, source, dataset, {"workers": workers, "runs": runs})
    model = AffinityModel(members, members[0].to_config(), config.recipe, origins=origins, name=config.name,
                          description=config.description)
    graphs = [dataset[i] for i in range(len(dataset))]
    model.domain = domain_from_graphs(model, graphs, spread_every=config.spread_every,
                                      origin=f"the {len(graphs)} training complexes ({dataset.name}); ensemble "
                                             f"spread on every {config.spread_every}-th")
    return model, (time.process_time() - clock) / 60


def run(args: argparse.Namespace) -> int:
    model, cpu_minutes = build(args.config, args.cache_dir, args.workers, args.runs)
    out = model.save(Path(args.out), card=args.card, name=model.name or Path(args.out).name,
                     metrics={"train_cpu_minutes": round(cpu_minutes, 1)}, overwrite=args.overwrite)
    print(f"{len(model.members)} members → {out} ({cpu_minutes:.1f} CPU minutes)")
    return 0
