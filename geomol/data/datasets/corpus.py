"""The whole affinity corpus from the shared data folder: items, receptors, clusters.

``read_corpus(root)`` reads ``<root>/plb``, ``<root>/fep_benchmark``, ``<root>/uni_fep`` and
``<root>/ddg_bindingdb`` (or the ``sources`` named) into one :class:`Corpus`; protein clusters
across them come from :func:`~geomol.data.protein_clusters.load_protein_clusters`.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Sequence

from geomol.data.datasets.corpus_items import SOURCES, Corpus, join_corpora, read_fep_corpus, read_plb_corpus
from geomol.data.datasets.ddg_bindingdb import read_ddg_corpus
from geomol.data.datasets.uni_fep import read_uni_fep_corpus
from geomol.errors import ConfigError

__all__ = ["SOURCE_READERS", "read_corpus"]

SOURCE_READERS: dict[str, Callable[[str | os.PathLike], Corpus]] = {
    "plb": read_plb_corpus,
    "fep_benchmark": read_fep_corpus,
    "uni_fep": read_uni_fep_corpus,
    "ddg_bindingdb": read_ddg_corpus,
}


def read_corpus(root: str | os.PathLike, sources: Sequence[str] = SOURCES) -> Corpus:
    """Items and receptors of the named sources, each read from ``<root>/<source>``, in the order given."""
    unknown = sorted(set(sources) - set(SOURCE_READERS))
    if unknown:
        raise ConfigError(f"unknown corpus source(s) {unknown}; known: {list(SOURCE_READERS)}")
    return join_corpora([SOURCE_READERS[source](Path(root) / source) for source in sources])
