"""Where an affinity model's training complexes come from, as plain data-layer objects (no Lightning).

A source is named in the ``data`` section of a ``geomol train-affinity`` config (``source: corpus`` or
``source: benchmark``, with its options) and resolved through :data:`AFFINITY_SOURCES` by :func:`affinity_source`;
it builds its complexes with the model's :class:`~geomol.data.complexes.recipe.ComplexRecipe` into the processed
store (:meth:`make_dataset`). The ``geomol fit`` data modules of :mod:`geomol.tasks` wrap the same objects, so a
source reads its records one way whichever command trains on it.

* :class:`CorpusSource` — the affinity corpus (plb, fep_benchmark, uni_fep, ddg_bindingdb): its records, the
  cross-source protein clusters of their receptors, and every complex once (SMILES posed on their series' reference);
* :class:`BenchmarkSource` — the protein-ligand-benchmark and/or the public FEP+ benchmark folders;
* :class:`NucleicSource` — the RNA/DNA–ligand complexes of a ``nucleic_affinity`` folder.
"""
from __future__ import annotations

import inspect
from functools import cached_property
from typing import Any, Mapping, Sequence

from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.datasets.corpus import read_corpus, select_series
from geomol.data.datasets.corpus_items import SOURCES, Corpus
from geomol.data.datasets.processed import ProcessedDataset
from geomol.data.paths import shared_data_dir
from geomol.data.posing.poses import PoseParameters
from geomol.errors import ConfigError

__all__ = ["CorpusSource", "BenchmarkSource", "NucleicSource", "AFFINITY_SOURCES", "affinity_source"]


class CorpusSource:
    """The affinity corpus, or a slice of it.

    Args:
        recipe: how its complexes become graphs.
        root: the folder holding ``plb``, ``fep_benchmark``, ``uni_fep`` and ``ddg_bindingdb`` (default
            :func:`~geomol.data.paths.shared_data_dir`).
        sources: the sources to use (default all four). series: only these series (``'<source>/<name>'``).
        max_series_per_source: else, at most this many series of each source (a slice for smoke runs).
        cache_dir: the processed store (default ``$GEOMOL_CACHE``).
        pose_parameters: :class:`~geomol.data.posing.poses.PoseParameters` fields for posing SMILES (default: its
            defaults without refinement in the pocket, so that the store's items keep their cache keys).
    """

    def __init__(self, recipe: ComplexRecipe, *, root: str | None = None, sources: Sequence[str] | None = None,
                 series: Sequence[str] | None = None, max_series_per_source: int | None = None,
                 cache_dir: str | None = None, pose_parameters: Mapping[str, Any] | None = None):
        self.recipe, self.cache_dir = recipe, cache_dir
        self.root = str(shared_data_dir()) if root is None else str(root)
        self.sources = list(SOURCES) if sources is None else list(sources)
        self.series = None if series is None else list(series)
        self.max_series_per_source = max_series_per_source
        self.pose_parameters = PoseParameters.from_dict(dict(pose_parameters or {}))

    @property
    def is_slice(self) -> bool:
        return self.series is not None or self.max_series_per_source is not None

    @cached_property
    def corpus(self) -> Corpus:
        """The corpus records of the chosen sources and series (read once)."""
        chosen = select_series(self.root, self.sources, series=self.series,
                               max_series_per_source=self.max_series_per_source)
        return read_corpus(self.root, list(chosen), chosen)

    @cached_property
    def clusters(self):
        """Protein clusters of the corpus' receptors (:class:`~geomol.data.splits.protein_clusters.ProteinClusters`,
        cached as JSON beside the processed store)."""
        from geomol.data.splits.protein_clusters import load_protein_clusters

        clusters, _ = load_protein_clusters(self.corpus.receptors, cache_dir=self.cache_dir, progress=True)
        return clusters

    def make_dataset(self, num_workers: int = 0) -> ProcessedDataset:
        """The corpus complexes in the processed store (built by ``num_workers`` processes where missing)."""
        from geomol.data.datasets.corpus_dataset import CorpusDataset

        return CorpusDataset(self.corpus, self.clusters, recipe=self.recipe, pose_parameters=self.pose_parameters,
                             num_workers=num_workers, name="corpus-slice" if self.is_slice else "corpus",
                             cache_dir=self.cache_dir)


class BenchmarkSource:
    """The protein-ligand-benchmark layout and/or the public FEP+ benchmark layout, as one dataset
    (:class:`~geomol.data.datasets.combined.CombinedAffinityDataset`).

    Args:
        recipe: how its complexes become graphs.
        plb_root, fep_root: the two folders (at least one).
        targets: PLB targets to use (default all); series: FEP series (``'group/scheme'``, default all).
        cache_dir: the processed store (default ``$GEOMOL_CACHE``).
    """

    def __init__(self, recipe: ComplexRecipe, *, plb_root: str | None = None, fep_root: str | None = None,
                 targets: Sequence[str] | None = None, series: Sequence[str] | None = None,
                 cache_dir: str | None = None):
        if plb_root is None and fep_root is None:
            raise ConfigError("give plb_root, fep_root or both")
        self.recipe, self.cache_dir = recipe, cache_dir
        self.plb_root, self.fep_root, self.targets, self.series = plb_root, fep_root, targets, series

    def make_dataset(self, num_workers: int = 0) -> ProcessedDataset:
        from geomol.data.datasets.combined import CombinedAffinityDataset

        name = "+".join(n for n, root in (("plb", self.plb_root), ("fep_benchmark", self.fep_root)) if root)
        return CombinedAffinityDataset(self.plb_root, self.fep_root, plb_targets=self.targets, name=name,
                                       fep_series=self.series, recipe=self.recipe, num_workers=num_workers,
                                       cache_dir=self.cache_dir)


class NucleicSource:
    """The RNA/DNA–ligand complexes of a ``nucleic_affinity`` folder
    (:class:`~geomol.data.datasets.nucleic_affinity.NucleicAffinityDataset`, both label tiers).

    Args:
        recipe: how its complexes become graphs.
        root: the folder (``${GEOMOL_SHARED_DATA}/nucleic_affinity``). ids: only these complexes (PDB ids).
        cache_dir: the processed store (default ``$GEOMOL_CACHE``).
    """

    def __init__(self, recipe: ComplexRecipe, *, root: str, ids: Sequence[str] | None = None,
                 cache_dir: str | None = None):
        self.recipe, self.root, self.ids, self.cache_dir = recipe, str(root), ids, cache_dir

    def make_dataset(self, num_workers: int = 0) -> ProcessedDataset:
        from geomol.data.datasets.nucleic_affinity import NucleicAffinityDataset

        return NucleicAffinityDataset(self.root, ids=self.ids, recipe=self.recipe, num_workers=num_workers,
                                      cache_dir=self.cache_dir, progress=False)


AFFINITY_SOURCES: dict[str, type] = {"corpus": CorpusSource, "benchmark": BenchmarkSource, "nucleic": NucleicSource}
"""The ``source`` of a train-affinity config's ``data`` section → its class."""


def affinity_source(options: Mapping[str, Any], recipe: ComplexRecipe, *, cache_dir: str | None = None,
                    source=None) -> CorpusSource | BenchmarkSource | NucleicSource:
    """The source a config's ``data`` section names (``{"source": "corpus", ...its options}``).

    Args:
        options: the section; ``cache_dir`` there wins over the argument.
        recipe: the model's graph recipe. source: the config, for messages.

    Raises:
        ConfigError: no or an unknown ``source``, or an option the source does not take (naming those it takes).
    """
    options = dict(options)
    kind = options.pop("source", None)
    if kind not in AFFINITY_SOURCES:
        raise ConfigError(f"data: 'source' is one of {sorted(AFFINITY_SOURCES)}, got {kind!r}", source)
    cls = AFFINITY_SOURCES[kind]
    accepted = [name for name in inspect.signature(cls).parameters if name != "recipe"]
    unknown = sorted(set(options) - set(accepted))
    if unknown:
        raise ConfigError(f"data: unknown option(s) {unknown} of the {kind} source (it takes {accepted})", source)
    options.setdefault("cache_dir", cache_dir)
    return cls(recipe, **options)
