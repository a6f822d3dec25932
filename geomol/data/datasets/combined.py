"""protein-ligand-benchmark + public FEP+ benchmark as one dataset, grouped by protein across both.

The two sources share targets (PTP1B, CDK2, Eg5, Thrombin, Syk, TNKS2, PFKFB3, HIF-2alpha, cMet)
and even compounds (the Merck sets). Every item carries a canonical ``protein`` key
(:func:`~geomol.data.splits.grouped.canonical_protein_key`: ``'HIF-2alpha'`` and ``'hif2a'`` → ``'hif2a'``),
so a split by protein never puts a target on both sides, and a ``group`` that ties alternative
states of a ligand and the same compound (same InChIKey connectivity, same protein) in either
source, so a random split by group does not leak a compound either::

    data = CombinedAffinityDataset("../shared/data/plb", "../shared/data/fep_benchmark")
    for protein, train, test in leave_one_group_out(data.column("protein")):
        parts = data.split({"train": train, "test": test}, by=("protein", "group"))
"""
from __future__ import annotations

import os
from typing import Sequence

from geomol.data.datasets.fep_benchmark import FEPEdgesMixin, fep_group_keys, fep_recipes, series_edges
from geomol.data.datasets.ligand_complex import assign_groups, inchikey_from_meta
from geomol.data.datasets.plb import plb_recipes
from geomol.data.datasets.processed import ProcessedDataset
from geomol.data.complexes.recipe import ComplexRecipe

__all__ = ["CombinedAffinityDataset"]


class CombinedAffinityDataset(FEPEdgesMixin, ProcessedDataset):
    """All complexes of both benchmark folders (pK labels), one processed store.

    Args:
        plb_root: protein-ligand-benchmark folder (or None to leave it out).
        fep_root: FEP benchmark folder (or None).
        plb_targets, fep_series: restrict the sources (default: everything).
        recipe: graph construction (:class:`~geomol.data.complexes.recipe.ComplexRecipe`), as in the single datasets.
        **kwargs: :class:`ProcessedDataset` options (``cache_dir``, ``num_workers``, ``progress``).

    Item metadata: ``source`` (``'plb'`` / ``'fep_benchmark'``), ``protein``, ``series``,
    ``ligand``, ``group``, ``y`` (pK); :meth:`edge_indices` gives the FEP ΔΔG edges.
    """

    def __init__(self, plb_root: str | os.PathLike | None, fep_root: str | os.PathLike | None, *,
                 plb_targets: Sequence[str] | None = None, fep_series: Sequence[str] | None = None,
                 recipe: ComplexRecipe | None = None, **kwargs):
        common = dict(recipe=recipe, cache_dir=kwargs.get("cache_dir"))
        items = []
        if plb_root is not None:
            items += plb_recipes(plb_root, targets=plb_targets, **common)
        if fep_root is not None:
            items += fep_recipes(fep_root, series=fep_series, **common)
        kwargs.setdefault("name", "plb+fep_benchmark")
        super().__init__(items, info_from_meta=inchikey_from_meta, **kwargs)
        fep_keys = iter(fep_group_keys([i for i in self._infos if i.source == "fep_benchmark"]))
        keys = [next(fep_keys) if i.source == "fep_benchmark" else [("series-ligand", i.series, i.ligand)]
                for i in self._infos]
        self._infos = assign_groups(self._infos, keys)
        self.fep_edges = [] if fep_root is None else series_edges(fep_root, self._infos)
