"""The k-shot protocol's series from the corpus cross-validation, with the shipped default model as base model.

The default model, ``contact-corpus``, is one calibrated contact scorer per leave-cluster-out fold of the corpus
protocol (member k trained on fold k's training clusters, its epoch chosen on fold k's validation slice): member k's
predictions on fold k's test and validation items are out-of-fold, so they are the base model's predictions on
proteins it has not seen, without retraining anything. :func:`read_kshot_corpus` featurises every stored complex
once with the members' recipe and keeps the ligands' Morgan counts, names and SMILES (cached in a work folder);
:func:`fold_series` turns the series of one fold's part (``'test'`` or ``'valid'``) into
:class:`~geomol.evaluation.kshot.SeriesData`, with fine-tuning as ``geomol finetune`` does it
(:class:`~geomol.training.finetune_choice.FinetuneChoice`, member k alone).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from geomol.errors import ConfigError
from geomol.evaluation.kshot import SeriesData, distinct_compounds
from geomol.training.contact_scorer import ContactData, predict_contact_scorer
from geomol.training.finetune import fit_started
from geomol.training.finetune_choice import FinetuneChoice

__all__ = ["KShotCorpus", "read_kshot_corpus", "fold_series", "member_of_fold"]


@dataclass
class KShotCorpus:
    """Every stored corpus complex featurised for the protocol.

    Attributes:
        ids, names, smiles: per item its corpus id, ligand name and canonical SMILES.
        data: the contact features (:class:`~geomol.training.contact_scorer.ContactData`; ``keys`` the series).
        morgan: ``(n, 1024)`` uint8 Morgan counts of the ligands.
        folds: the protocol's folds as item positions by part (``train``, ``valid``, ``test``).
        left_out: per source, its items left out because they were not in the store (``stored_only``).
    """

    ids: list[str]
    names: list[str]
    smiles: list[str]
    data: ContactData
    morgan: np.ndarray
    folds: list[dict]
    left_out: dict[str, int] = field(default_factory=dict)

    def save(self, path: Path) -> None:
        d = self.data
        torch.save({"ids": self.ids, "names": self.names, "smiles": self.smiles, "atoms": d.atoms,
                    "offsets": torch.from_numpy(d.offsets), "descriptors": d.descriptors,
                    "label": torch.from_numpy(d.label), "keys": [str(k) for k in d.keys],
                    "morgan": torch.from_numpy(self.morgan),
                    "folds": [{part: [int(i) for i in idx] for part, idx in fold.items()} for fold in self.folds],
                    "left_out": dict(self.left_out)}, path)

    @classmethod
    def load(cls, path: Path) -> "KShotCorpus":
        saved = torch.load(path, weights_only=True)
        data = ContactData(atoms=saved["atoms"], offsets=saved["offsets"].numpy(), descriptors=saved["descriptors"],
                           label=saved["label"].numpy(), keys=np.asarray(saved["keys"]))
        return cls(saved["ids"], saved["names"], saved["smiles"], data, saved["morgan"].numpy(), saved["folds"],
                   saved.get("left_out", {}))


class _SourcesFeaturised:
    """A corpus source of which only the items of ``sources`` are featurised (built into the store where missing;
    with ``stored_only``, only those already in the store, the others left out and counted in
    :attr:`left_out`): its records and protein clusters, hence the protocol's folds, stay the whole corpus's, so
    that every member of the default model still meets only proteins of clusters it never saw."""

    def __init__(self, source, sources: Sequence[str], stored_only: bool = False):
        self.source, self.sources, self.stored_only = source, tuple(sources), stored_only
        self.recipe, self.corpus = source.recipe, source.corpus
        self.left_out: dict[str, int] = {}

    @property
    def clusters(self):
        return self.source.clusters

    def _in_store(self, items: list) -> list:
        """The items whose build is already in the store (a graph, or a failure that preprocessing reports)."""
        from geomol.data.datasets.corpus_dataset import corpus_recipes
        from geomol.data.datasets.processed import default_cache_dir
        from geomol.data.store.cache import FileHasher, ProcessedStore, recipe_key

        root = Path(default_cache_dir() if self.source.cache_dir is None else self.source.cache_dir)
        store, hasher = ProcessedStore(root), FileHasher(root / "file_hashes.json")
        recipes = corpus_recipes(items, self.clusters, recipe=self.recipe, pose_parameters=self.source.pose_parameters,
                                 cache_dir=self.source.cache_dir)
        kept = []
        for item, (built, _) in zip(items, recipes):
            key = recipe_key(built, hasher)
            if store.has(key) or store.failure(key) is not None:
                kept.append(item)
            else:
                self.left_out[item.source] = self.left_out.get(item.source, 0) + 1
        return kept

    def make_dataset(self, num_workers: int = 0):
        from geomol.data.datasets.corpus_dataset import CorpusDataset
        from geomol.data.datasets.corpus_items import Corpus

        items = [item for item in self.corpus.items if item.source in self.sources]
        part = Corpus(self._in_store(items) if self.stored_only else items, self.corpus.receptors)
        return CorpusDataset(part, self.clusters, recipe=self.recipe, pose_parameters=self.source.pose_parameters,
                             num_workers=num_workers, name="corpus-" + "+".join(self.sources),
                             cache_dir=self.source.cache_dir)


def read_kshot_corpus(config_path: Path, work: Path, cache_dir: str | None = None,
                      sources: Sequence[str] | None = None, stored_only: bool = False) -> KShotCorpus:
    """The corpus featurised as the members of the train-affinity config ``config_path`` read it (the default
    model's: ``models/contact-corpus.yaml``), cached as ``work/corpus.pt``; with ``sources``, only those sources'
    items (the folds still the whole corpus's), cached as ``work/corpus-<sources>.pt``; with ``stored_only``
    (needs ``sources``) only their items already in the processed store (:class:`KShotCorpus` ``left_out``: the
    others per source)."""
    path = Path(work) / ("corpus.pt" if sources is None
                         else f"corpus-{'+'.join(sources)}{'-stored' if stored_only else ''}.pt")
    if path.exists():
        return KShotCorpus.load(path)
    from geomol.data.datasets.sources import CorpusSource, affinity_source
    from geomol.evaluation.contact_cv import contact_cv_of, module_contacts
    from geomol.training.ensemble_config import read_ensemble_config

    config = read_ensemble_config(config_path)
    source = affinity_source(config.data, config.recipe, cache_dir=cache_dir, source=config.source)
    if sources is not None:
        if not isinstance(source, CorpusSource):
            raise ConfigError(f"featurising some sources only needs a corpus source, not {type(source).__name__}",
                              config_path)
        source = _SourcesFeaturised(source, sources, stored_only)
    elif stored_only:
        raise ConfigError("featurising only the stored items needs the sources to featurise", config_path)
    cv = contact_cv_of(config)
    morgan = []
    corpus = module_contacts(source, cv.recipe, n_folds=cv.folds,
                             valid_fraction=float(config.ensemble.get("valid_fraction", 0.1)),
                             seen=lambda graph: morgan.append(graph.ligand_morgan.reshape(-1).numpy()))
    items = {item.id: item for item in source.corpus.items}
    chosen = [items[i] for i in corpus.ids]
    out = KShotCorpus(corpus.ids, [item.ligand for item in chosen], [item.smiles for item in chosen], corpus.data,
                      np.stack(morgan).astype(np.uint8), corpus.folds, dict(getattr(source, "left_out", {})))
    Path(work).mkdir(parents=True, exist_ok=True)
    out.save(path)
    return out


def member_of_fold(model, fold: int):
    """The member of a fold ensemble (the default model) trained without fold ``fold``'s clusters."""
    for member, origin in zip(model.members, model.origins):
        if (origin or {}).get("fold") == fold:
            return member
    raise KeyError(f"{model.name} has no member of fold {fold}")


def _slice(frozen, idx: np.ndarray):
    """The rows ``idx`` of a single-view :class:`~geomol.models.contact_scorer.FrozenContacts`."""
    take = torch.from_numpy(np.asarray(idx, dtype=np.int64))
    return frozen._replace(summed=frozen.summed[take], count=frozen.count[take],
                           descriptors=None if frozen.descriptors is None else frozen.descriptors[take],
                           pooled=None if frozen.pooled is None else frozen.pooled[take])


def _finetune(member, data: ContactData, items: np.ndarray, choice: FinetuneChoice):
    """``finetune(chosen, rest)`` for one series: the member fine-tuned on ``chosen`` as ``geomol finetune`` decides
    (:meth:`FinetuneChoice.decide_started`, then :func:`~geomol.training.finetune.fit_started`), predicting
    ``rest``."""
    start = member.finetune_start().to(torch.float64).eval()
    with torch.no_grad():
        frozen = start.frozen(data.batch(items))
    y = torch.as_tensor(data.label[items], dtype=torch.float64)

    def finetune(chosen: np.ndarray, rest: np.ndarray) -> np.ndarray:
        part = _slice(frozen, chosen)
        decision = choice.decide_started([start], [part], y[chosen])
        tuned = fit_started(copy.deepcopy(start), part, y[chosen], decision.settings)
        with torch.no_grad():
            return tuned.head(_slice(frozen, rest)).numpy()

    return finetune


def fold_series(corpus: KShotCorpus, member, fold: int, part: str, *, sources: Sequence[str] | None = None,
                min_ligands: int = 10, choice: FinetuneChoice | None = FinetuneChoice()) -> list[SeriesData]:
    """The series of fold ``fold``'s ``part`` (``'test'`` or ``'valid'``) with at least ``min_ligands`` distinct
    compounds (only those of ``sources`` when given), predicted by ``member`` (the fold's member); fine-tuning
    decided by ``choice`` (None: not scored)."""
    data = corpus.data
    idx = np.asarray(corpus.folds[fold][part], dtype=np.int64)
    out = []
    for key in sorted(set(data.keys[idx].tolist())):
        source = key.split("/", 1)[0]
        if sources is not None and source not in sources:
            continue
        items = idx[data.keys[idx] == key]
        items = items[distinct_compounds([corpus.names[i] for i in items], [corpus.smiles[i] for i in items])]
        if len(items) < min_ligands:
            continue
        out.append(SeriesData(key, source, fold, [corpus.names[i] for i in items], data.label[items].astype(float),
                              predict_contact_scorer(member, data, items), corpus.morgan[items].astype(float),
                              data.descriptors[items].double().numpy(),
                              None if choice is None else _finetune(member, data, items, choice)))
    return out
