"""The whole affinity corpus from the shared data folder: items, receptors, clusters.

``read_corpus(root)`` reads ``<root>/plb``, ``<root>/fep_benchmark``, ``<root>/uni_fep`` and
``<root>/ddg_bindingdb`` (or the ``sources`` named, or only some of their series) into one
:class:`Corpus`; protein clusters across them come from
:func:`~geomol.data.splits.protein_clusters.load_protein_clusters`. :func:`select_series` picks a small
slice (named series, or the first few of each source) for tests and smoke runs.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Mapping, Sequence

from geomol.data.datasets.corpus_items import SOURCES, Corpus, join_corpora, read_csv_rows, read_fep_corpus, \
    read_plb_corpus
from geomol.data.datasets.ddg_bindingdb import read_ddg_corpus
from geomol.data.datasets.fep_benchmark import read_fep_metadata
from geomol.data.datasets.plb import plb_targets
from geomol.data.datasets.uni_fep import read_uni_fep_corpus, read_uni_fep_manifest
from geomol.errors import ConfigError

__all__ = ["SOURCE_READERS", "SOURCE_SERIES", "read_corpus", "select_series"]

SOURCE_READERS: dict[str, Callable[..., Corpus]] = {
    "plb": read_plb_corpus,
    "fep_benchmark": read_fep_corpus,
    "uni_fep": read_uni_fep_corpus,
    "ddg_bindingdb": read_ddg_corpus,
}
"""Per source, ``reader(folder, names=None)``: the source's corpus, or only the series named."""

SOURCE_SERIES: dict[str, Callable[[Path], list[str]]] = {
    "plb": plb_targets,
    "fep_benchmark": lambda root: [s.id for s in read_fep_metadata(root)],
    "uni_fep": lambda root: [s.system for s in read_uni_fep_manifest(root)],
    "ddg_bindingdb": lambda root: [row["pdb_id"] for row in read_csv_rows(root / "manifest.csv", ("pdb_id",))],
}
"""Per source, the names of its series in file order, read from its index files only (fast)."""


def _check_sources(sources: Sequence[str]) -> None:
    unknown = sorted(set(sources) - set(SOURCE_READERS))
    if unknown:
        raise ConfigError(f"unknown corpus source(s) {unknown}; known: {list(SOURCE_READERS)}")


def select_series(root: str | os.PathLike, sources: Sequence[str] = SOURCES, *, series: Sequence[str] | None = None,
                  max_series_per_source: int | None = None) -> dict[str, list[str] | None]:
    """Which series of each source to read: ``{source: names, or None for all}``.

    Args:
        series: ``'<source>/<name>'`` entries (``'plb/cdk2'``, ``'fep_benchmark/jacs_set/ptp1b'``,
            ``'uni_fep/ChEMBL__PTPN1__CHEMBL768521'``, ``'ddg_bindingdb/1PXN'``, i.e. a corpus item's
            ``series``): only these are read, and only their sources.
        max_series_per_source: else, at most this many series of each source (the first in its index).
    """
    _check_sources(sources)
    if series is not None:
        chosen: dict[str, list[str] | None] = {}
        for entry in series:
            source, _, name = entry.partition("/")
            if source not in sources or not name:
                raise ConfigError(f"series {entry!r} is not '<source>/<name>' with a source among {list(sources)}")
            chosen.setdefault(source, []).append(name)
        return {source: chosen[source] for source in sources if source in chosen}
    if max_series_per_source is None:
        return {source: None for source in sources}
    if max_series_per_source < 1:
        raise ConfigError(f"max_series_per_source must be ≥ 1, got {max_series_per_source}")
    return {source: SOURCE_SERIES[source](Path(root) / source)[:max_series_per_source] for source in sources}


def read_corpus(root: str | os.PathLike, sources: Sequence[str] = SOURCES,
                series: Mapping[str, Sequence[str] | None] | None = None) -> Corpus:
    """Items and receptors of the named sources, each read from ``<root>/<source>``, in the order given.

    ``series`` (from :func:`select_series`) restricts sources to some of their series; a source it
    leaves out or maps to ``None`` is read whole.
    """
    _check_sources(sources)
    series = series or {}
    return join_corpora([SOURCE_READERS[source](Path(root) / source, series.get(source)) for source in sources])
