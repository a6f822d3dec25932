"""The contact scorer in the corpus cross-validation: out-of-fold predictions for every fold.

Every complex of the corpus is read from the processed store (``geomol preprocess --config
configs/get_affinity_corpus.yaml`` builds it; items missing from it are built here) and featurised by a
:class:`~geomol.data.chemistry.contact_recipe.ContactRecipe` (:func:`corpus_contacts`). For each fold of the
protocol (:mod:`geomol.evaluation.corpus_folds`) :func:`contact_fold` trains ``seeds`` contact scorers
(:func:`~geomol.training.contact_scorer.fit_contact_scorer`, the epoch chosen on the fold's validation slice), or a
within-series boosted model on the ligands' summed rows, and writes the mean of their scores on the fold's test
items in the protocol's format (:func:`~geomol.evaluation.predictions.write_fold`), with few-shot rows when asked
(:mod:`geomol.evaluation.fewshot`). ``benchmarks/affinity_corpus_contact.py`` is its command line.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, NamedTuple

import numpy as np
from rich.progress import track

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES
from geomol.data.splits.corpus import item_clusters
from geomol.errors import ConfigError
from geomol.evaluation.corpus_folds import PROTOCOL_SEED, checked_folds, source_items
from geomol.evaluation.fewshot import contact_fewshot_rows, contact_fewshot_scores
from geomol.metrics.scores import mean_of
from geomol.evaluation.predictions import write_fold
from geomol.provenance import provenance
from geomol.training.contact_scorer import (CONTACT_LOSSES, ContactData, calibrate_contact_scorer, contact_views,
                                            fit_contact_scorer, predict_views)
from geomol.training.finetune import FinetuneSettings
from geomol.training.ligand_baselines import select_ligand_model

__all__ = ["CorpusContacts", "ContactCV", "corpus_contacts", "module_contacts", "contact_fold", "fold_members", "fold_member",
           "compare_fewshot_settings", "ligand_sums", "HEAVY"]

HEAVY = DESCRIPTOR_NAMES.index("heavy_atoms")


class CorpusContacts(NamedTuple):
    """What :func:`corpus_contacts` read: item ids, their :class:`ContactData`, the protocol's folds (item indices
    by part), the protein cluster of every item, and the items' rows in the recipe's other views (moved poses)."""

    ids: list[str]
    data: ContactData
    folds: list[dict]
    clusters: np.ndarray
    views: list[ContactData]


def corpus_contacts(recipe: ContactRecipe = ContactRecipe(), *, root: str | None = None,
                    sources: list[str] | None = None, series: list[str] | None = None, cache_dir: str | None = None,
                    workers: int = 0, n_folds: int = 5, valid_fraction: float = 0.1,
                    bonds: bool = False) -> CorpusContacts:
    """Every stored complex of the corpus (or of the given ``sources`` / ``series``) featurised by ``recipe``;
    the item ids; the protocol's ``n_folds`` folds as item indices (``valid_fraction`` of each fold's training
    clusters held out for model selection); the protein cluster of every item. With ``bonds``, the data carry the
    ligands' bonds for a scorer passing messages along them.

    Raises:
        ConfigError: the store's pocket is narrower than ``recipe`` reads.
    """
    from geomol.tasks import CorpusDataModule  # the corpus' complexes as the training data module builds them

    module = CorpusDataModule(root=root, sources=sources, series=series, pocket_cutoff=10.0, cache_dir=cache_dir)
    return module_contacts(module, recipe, workers=workers, n_folds=n_folds, valid_fraction=valid_fraction,
                           bonds=bonds)


def module_contacts(module, recipe: ContactRecipe, *, workers: int = 0, n_folds: int = 5,
                    valid_fraction: float = 0.1, bonds: bool = False,
                    seen: Callable[[Any], None] | None = None) -> CorpusContacts:
    """:func:`corpus_contacts` of the corpus: a :class:`~geomol.data.datasets.sources.CorpusSource` or a
    :class:`~geomol.tasks.CorpusDataModule` (anything with its complexes, records and clusters). ``seen(graph)`` is
    called with every complex graph as it is featurised (to keep more of it, e.g. the ligands' fingerprints)."""
    recipe.check_pocket(module.recipe.pocket_cutoff, "the corpus store")
    dataset = module.make_dataset(workers)
    items = dataset.corpus_items

    def graphs():
        for i in track(range(len(dataset)), description="contact features", transient=True):
            graph = dataset[i]
            if seen is not None:
                seen(graph)
            yield graph

    data, *views = contact_views(graphs(), recipe, [item.label for item in items], [item.series for item in items],
                                 bonds)
    records = module.corpus.items
    record_clusters = item_clusters(records, module.clusters)
    folds, _ = checked_folds(records, record_clusters, n_folds, PROTOCOL_SEED, valid_fraction)
    position = {item.id: i for i, item in enumerate(items)}
    stored = [{part: [position[records[r].id] for r in idx if records[r].id in position] for part, idx in fold.items()}
              for fold in folds]
    cluster_of = dict(zip((record.id for record in records), record_clusters))
    return CorpusContacts([item.id for item in items], data, stored,
                          np.asarray([cluster_of[item.id] for item in items]), views)


@dataclass
class ContactCV:
    """One contact-scorer variant of the protocol's table: its featurisation, scorer, fit and what to measure.

    Attributes:
        recipe: the featurisation; model: ``'mlp'`` (the scorer) or ``'gbm_series'`` (boosting within series on the
            ligands' summed rows); loss, epochs, hidden, pooled, message_steps, descriptors: the scorer and its fit
            (:func:`~geomol.training.contact_scorer.fit_contact_scorer`); compare_within: ``'series'`` or
            ``'protein'`` (training compares ligands within a protein cluster); seeds: scorers per fold (scores
            averaged; fold ``k`` seed ``s`` trains with ``seed + 100 k + s``); train_sources: train on these
            sources' items only; fewshot, fewshot_draws: k values and draws of few-shot fine-tuning rows;
            variant: the name in the records; folds: the protocol's fold count.
    """

    recipe: ContactRecipe = field(default_factory=ContactRecipe)
    model: str = "mlp"
    loss: str = "ranking"
    epochs: int = 20
    hidden: int = 32
    pooled: int = 0
    message_steps: int = 0
    descriptors: bool = True
    compare_within: str = "series"
    seeds: int = 5
    seed: int = 0
    train_sources: list[str] | None = None
    fewshot: list[int] | None = None
    fewshot_draws: int = 5
    variant: str = "contact"
    folds: int = 5

    def __post_init__(self):
        if self.model not in ("mlp", "gbm_series") or self.loss not in CONTACT_LOSSES \
                or self.compare_within not in ("series", "protein"):
            raise ConfigError(f"contact CV: model mlp|gbm_series, loss one of {sorted(CONTACT_LOSSES)}, "
                              f"compare_within series|protein; got {self.model}, {self.loss}, {self.compare_within}")
        if self.fewshot and (self.model != "mlp" or self.message_steps):
            raise ConfigError("few-shot rows fine-tune the contact scorer: use them with model mlp, without messages")

    def about(self) -> str:
        """What the variant is, in words (the fold records' ``about``)."""
        recipe = self.recipe
        roles = " with interaction roles" if recipe.roles else ""
        if self.model == "gbm_series":
            text = (f"gradient boosting within series on the ligand's summed contact features{roles} + descriptors, "
                    f"also centred on their series, fitted to the pK minus the series' mean")
        else:
            context = (" and receptor classes by distance shell" if recipe.radial else "") + (
                " and the mean of its bonded neighbours' rows" if recipe.bond_context else "")
            if recipe.moves:
                smooth = recipe.pose_views == "smooth"
                context += (f", {'averaged over the pose and' if smooth else 'augmented by'} {2 * recipe.moves} rigid "
                            f"moves of the ligand ({recipe.shift:g} Å, {recipe.turn:g}°"
                            f"{'' if smooth else '; predictions averaged over them'})")
            text = (f"per-atom contact MLP{roles}{context}{' + descriptors' if self.descriptors else ''}, {self.loss} "
                    f"loss within {self.compare_within}, mean of {self.seeds} seeds"
                    + (f", hidden {self.hidden}" if self.hidden != 32 else "")
                    + (f", non-additive term of width {self.pooled}" if self.pooled else "")
                    + (f", {self.message_steps} rounds of messages along the ligand's bonds" if self.message_steps
                       else ""))
        return text + (f", trained on {' '.join(self.train_sources)} only" if self.train_sources else "")


def ligand_sums(data: ContactData) -> np.ndarray:
    """``(n, F + D)``: every item's contact features summed over its ligand atoms, then its descriptors."""
    return data.ligand_sums()


def _boosted(k: int, data: ContactData, train: list[int], fold: dict, cv: ContactCV) -> tuple[np.ndarray, dict]:
    """Fold ``k`` of the within-series gradient boosting on :func:`ligand_sums`: its test predictions and what was
    chosen on validation (:func:`~geomol.training.ligand_baselines.select_ligand_model`)."""
    features, series = ligand_sums(data), data.keys
    selection = select_ligand_model("gbm_series", features, data.label, train, fold["valid"],
                                    data.keys[fold["valid"]].tolist(), seed=cv.seed + k, groups=series)
    test = np.asarray(fold["test"], dtype=np.int64)
    return selection.predict(features[test], series[test]), {"chosen": selection.params,
                                                             "valid_mean_target_spearman": [selection.score]}


def contact_fold(k: int, corpus: CorpusContacts, cv: ContactCV, out_dir: Path) -> dict:
    """Train fold ``k``'s seeds (or its boosted model), write its predictions and record; return the record. With
    the recipe's moved-pose views, training reads them as augmentation and predictions average over them."""
    data, fold, views = corpus.data, corpus.folds[k], corpus.views
    clock = time.process_time()
    train = source_items(fold["train"], data.keys, cv.train_sources)
    test = np.asarray(fold["test"], dtype=np.int64)
    fits = []
    if cv.model == "gbm_series":
        pred, chosen = _boosted(k, data, train, fold, cv)
    else:
        fits = [fit_contact_scorer(data, train, fold["valid"], loss=cv.loss, epochs=cv.epochs,
                                   seed=cv.seed + 100 * k + s, hidden=cv.hidden, descriptors=cv.descriptors,
                                   train_keys=corpus.clusters if cv.compare_within == "protein" else None,
                                   pooled=cv.pooled, views=views, message_steps=cv.message_steps, recipe=cv.recipe)
                for s in range(cv.seeds)]
        pred = np.mean([predict_views(fit.model, (data, *views), test) for fit in fits], axis=0)
        chosen = {"chosen_epochs": [fit.epoch for fit in fits],
                  "valid_mean_target_spearman": [fit.score for fit in fits]}
    cpu = time.process_time() - clock
    heavy = data.descriptors[:, HEAVY].numpy()
    recipe = cv.recipe
    record = {"fold": k, "folds": cv.folds, "model": "contact scorer", "variant": cv.variant, "about": cv.about(),
              "contact_model": cv.model, "epochs": cv.epochs if fits else 0, "loss": cv.loss, "hidden": cv.hidden,
              "pooled": cv.pooled, "descriptors": cv.descriptors, "chemistry": recipe.roles,
              "bond_context": recipe.bond_context, "radial": recipe.radial, "compare_within": cv.compare_within,
              "message_steps": cv.message_steps, "features": recipe.to_dict(),
              "moves": {"count": recipe.moves, "shift": recipe.shift, "turn": recipe.turn, "use": recipe.pose_views}
              if recipe.moves else None,
              "atom_features": int(data.atoms.shape[1]), "seeds": len(fits), **chosen,
              "split_sizes": {**{part: len(idx) for part, idx in fold.items()}, "train": len(train)},
              "train_sources": cv.train_sources, "train_cpu_seconds": cpu, "test_items": len(test),
              "provenance": provenance()}
    if cv.fewshot and fits:
        calibrate_contact_scorer(fits[0].model, data, train)
        record["fewshot_rows"] = contact_fewshot_rows(fits[0].model, data, test, heavy, k, cv.fewshot,
                                                      cv.fewshot_draws)
    write_fold(out_dir, k, [corpus.ids[i] for i in test], pred, data.label[test], heavy[test], record)
    print(f"fold {k}: {record.get('chosen_epochs', record.get('chosen'))}, validation "
          f"{np.mean(record['valid_mean_target_spearman']):.3f}, {cpu:.0f} CPU s", flush=True)
    return record


def fold_members(corpus: CorpusContacts, cv: ContactCV) -> tuple[list, list[dict]]:
    """One calibrated contact scorer per fold of the protocol, and what each was trained on.

    Member ``k`` is trained as seed 0 of fold ``k`` in :func:`contact_fold` (the fold's training clusters, the
    epoch chosen on its validation slice, seed ``seed + 100 k``), then calibrated to pK on its training items
    (:func:`~geomol.training.contact_scorer.calibrate_contact_scorer`). Together the members have seen every
    cluster, and each member's accuracy on the clusters it never saw is what the cross-validation reports.
    """
    members, origins = zip(*(fold_member(corpus, cv, k) for k in range(len(corpus.folds))))
    return list(members), list(origins)


def fold_member(corpus: CorpusContacts, cv: ContactCV, k: int):
    """Member ``k`` of :func:`fold_members` (a calibrated contact scorer) and what it was trained on."""
    if cv.model != "mlp":
        raise ConfigError(f"members are contact scorers (model 'mlp'), not {cv.model!r}")
    fold = corpus.folds[k]
    train = source_items(fold["train"], corpus.data.keys, cv.train_sources)
    fit = fit_contact_scorer(corpus.data, train, fold["valid"], loss=cv.loss, epochs=cv.epochs,
                             seed=cv.seed + 100 * k, hidden=cv.hidden, descriptors=cv.descriptors,
                             train_keys=corpus.clusters if cv.compare_within == "protein" else None,
                             pooled=cv.pooled, views=corpus.views, message_steps=cv.message_steps, recipe=cv.recipe)
    calibrate_contact_scorer(fit.model, corpus.data, train)
    origin = {"fold": k, "epoch": fit.epoch, "valid_mean_target_spearman": round(fit.score, 4),
              "train_items": len(train), "valid_items": len(fold["valid"]),
              "scale": round(float(fit.model.scale), 4), "offset": round(float(fit.model.offset), 4)}
    print(f"member {k}: epoch {fit.epoch}, validation {fit.score:.3f}, scale {float(fit.model.scale):.3f}",
          flush=True)
    return fit.model, origin


def compare_fewshot_settings(contacts: CorpusContacts, grid: list[FinetuneSettings], ks: list[int], *,
                             hidden: int = 32, draws: int = 1, min_ligands: int = 10, max_targets: int = 20
                             ) -> list[dict]:
    """Few-shot fine-tuning settings compared on *validation* targets of each fold (never test): each fold's
    calibrated seed-0 scorer fine-tuned with every setting on the same draws of k ligands; the mean gain in
    Spearman over the untuned scorer per (anchor, lr, k)."""
    data, folds = contacts.data, contacts.folds
    heavy = data.descriptors[:, HEAVY].numpy()
    gains = {(s.anchor, s.lr, k): [] for s in grid for k in ks}
    for f, fold in enumerate(folds):
        train = source_items(fold["train"], data.keys)
        model = fit_contact_scorer(data, train, fold["valid"], hidden=hidden, seed=100 * f).model
        calibrate_contact_scorer(model, data, train)
        valid = np.asarray(fold["valid"])
        keys = [k for k in sorted(set(data.keys[valid].tolist())) if (data.keys[valid] == k).sum() >= min_ligands]
        for key in keys[:max_targets]:
            items = valid[data.keys[valid] == key]
            for settings in grid:
                for k in ks:
                    scores = contact_fewshot_scores(model, data, items, heavy, k, draws, np.random.default_rng(f),
                                                    settings)
                    gains[settings.anchor, settings.lr, k].append(scores["finetuned"] - scores["base"])
        print(f"fold {f}: {min(len(keys), max_targets)} validation targets", flush=True)
    return [{"anchor": a, "lr": lr, "k": k, "targets": len(v), "mean_gain": round(mean_of(v), 4)}
            for (a, lr, k), v in gains.items()]


MEMBER_KEYS = ("hidden", "pooled", "message_steps", "features", "descriptor_features")
FIT_KEYS = ("loss", "epochs", "seed", "compare_within", "train_sources")
ENSEMBLE_KEYS = ("folds", "valid_fraction")


def contact_cv_of(config) -> ContactCV:
    """The members' settings (:class:`ContactCV`, one seed) of a train-affinity config of contact scorers
    (:class:`~geomol.training.ensemble_config.EnsembleConfig`: ``member`` the scorer's configuration — hidden,
    pooled, message_steps, the contact recipe ``features``, descriptor_features 0 or 11 —, ``fit``
    loss/epochs/seed/compare_within/train_sources, ``ensemble: {folds, valid_fraction}``).

    Raises:
        ConfigError: an unknown key or a descriptor width other than 0 or the descriptors', naming the config.
    """
    from geomol.training.ensemble_config import check_keys

    for section, known in (("member", MEMBER_KEYS), ("fit", FIT_KEYS), ("ensemble", ENSEMBLE_KEYS)):
        check_keys(section, getattr(config, section), known, config.source, " of contact-scorer members")
    member = dict(config.member)
    descriptors = member.pop("descriptor_features", len(DESCRIPTOR_NAMES))
    if descriptors not in (0, len(DESCRIPTOR_NAMES)):
        raise ConfigError(f"member: descriptor_features is 0 (no descriptor term) or {len(DESCRIPTOR_NAMES)}, "
                          f"got {descriptors!r}", config.source)
    features = ContactRecipe.from_dict(member.pop("features", None), config.source)
    return ContactCV(features, **member, **config.fit, descriptors=bool(descriptors), seeds=1,
                     folds=int(config.ensemble.get("folds", 5)))


def contact_ensemble(config, source, *, workers: int = 0) -> tuple[list, list[dict]]:
    """The contact scorers a train-affinity config describes (:func:`contact_cv_of`): one calibrated member per
    leave-cluster-out fold (:func:`fold_members`) of the corpus ``source``
    (:class:`~geomol.data.datasets.sources.CorpusSource`).

    Raises:
        ConfigError: a bad section (:func:`contact_cv_of`) or a source that is not the corpus, naming the config.
    """
    from geomol.data.datasets.sources import CorpusSource

    cv = contact_cv_of(config)
    if not isinstance(source, CorpusSource):
        raise ConfigError("contact-scorer members are the fold members of the affinity corpus: data.source must be "
                          "'corpus'", config.source)
    corpus = module_contacts(source, cv.recipe, workers=workers, n_folds=cv.folds,
                             valid_fraction=float(config.ensemble.get("valid_fraction", 0.1)),
                             bonds=cv.message_steps > 0)
    return fold_members(corpus, cv)
