"""A torch Dataset of BlockGraphs streamed from a :class:`~geomol.data.store.cache.ProcessedStore`.

Every affinity dataset (PDBbind, ATOM3D LBA/LEP, protein–protein, protein-ligand-benchmark, FEP
benchmark, combined) is a :class:`ProcessedDataset`: a list of recipes with per-item metadata
(:class:`ItemInfo`), preprocessed once into the store and read back item by item. Only the index
(keys, sizes and metadata) lives in memory, so a dataset larger than memory streams from disk.
"""
from __future__ import annotations

import copy
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import torch
from torch.utils.data import Dataset

from geomol.data.blocks import BlockGraph
from geomol.data.store.cache import ProcessedStore, Recipe
from geomol.data.store.preprocess import PreprocessReport, SkippedItem, preprocess
from geomol.data.splits.grouped import check_no_leakage

__all__ = ["ItemInfo", "ProcessedDataset", "replace_info", "default_cache_dir"]


@dataclass(frozen=True)
class ItemInfo:
    """Metadata of one item (what a per-target evaluation or a model card needs).

    Attributes:
        id: unique identifier (``'plb/cdk2/lig_17'``).
        source: dataset family (``'plb'``, ``'fep_benchmark'``, ``'pdbbind'``, ``'lba'``, ...).
        protein: canonical protein key (:func:`geomol.data.splits.grouped.canonical_protein_key`).
        series: congeneric series or target folder (``'merck/cmet'``).
        ligand: ligand name as in the source (SDF title, PDB code, ...).
        group: items sharing a group must stay on one side of any split (alternative states
            of one ligand, the same compound in two sources).
        y: label: pK for affinity datasets, 1/0 (active/inactive) for LEP; ``nan`` if unknown.
        extra: anything else (measurement type, qualifier, SMILES, ...), JSON-serialisable.
    """

    id: str
    source: str = ""
    protein: str = ""
    series: str = ""
    ligand: str = ""
    group: str = ""
    y: float = float("nan")
    extra: dict[str, Any] = field(default_factory=dict)


def default_cache_dir() -> Path:
    """``$GEOMOL_CACHE``, else ``~/.cache/geomol``."""
    return Path(os.environ.get("GEOMOL_CACHE", Path.home() / ".cache" / "geomol"))


class ProcessedDataset(Dataset):
    """BlockGraphs of preprocessed items, with labels and metadata attached.

    ``dataset[i]`` is a :class:`BlockGraph` whose ``y`` is ``info.y`` and which carries the
    attributes ``name`` (= id), ``source``, ``protein``, ``series``, ``ligand``, ``group`` and
    ``item_index`` (position in this dataset); batching turns the strings into lists. Items whose
    record holds several graphs (LEP pairs) come back as a tuple in stored order.

    Args:
        items: ``(recipe, info)`` pairs, in dataset order.
        cache_dir: processed-store directory (default ``$GEOMOL_CACHE`` or ``~/.cache/geomol``).
        name: dataset name, used for the report files ``<cache_dir>/reports/<name>.json|.skipped.csv``.
        num_workers: processes used to preprocess missing items.
        progress: show a progress bar while preprocessing.
        info_from_meta: ``f(info, builder_meta) -> info`` completing metadata known only after
            building (e.g. the label stored inside an LMDB record).
        transform: optional function applied to each returned item.
        known_skipped: items rejected before preprocessing (e.g. no label); they join the report.

    Attributes:
        skipped: items that could not be built (also in the report files).
        report: the :class:`PreprocessReport` of the construction.
    """

    def __init__(
        self,
        items: Sequence[tuple[Recipe, ItemInfo]],
        *,
        cache_dir: str | os.PathLike | None = None,
        name: str = "dataset",
        num_workers: int = 0,
        progress: bool = True,
        retry_failed: bool = False,
        info_from_meta: Callable[[ItemInfo, dict], ItemInfo] | None = None,
        transform: Callable[[Any], Any] | None = None,
        known_skipped: Sequence[SkippedItem] = (),
    ):
        self.store = ProcessedStore(default_cache_dir() if cache_dir is None else cache_dir)
        self.name = name
        self.transform = transform
        report = preprocess([recipe for recipe, _ in items], self.store, name=name, num_workers=num_workers,
                            progress=progress, retry_failed=retry_failed, known_skipped=known_skipped)
        self.report: PreprocessReport = report
        self.skipped: list[SkippedItem] = list(report.skipped)
        self._keys: list[str] = []
        self._sizes: list[int] = []
        self._infos: list[ItemInfo] = []
        for key, (_, info) in zip(report.keys, items):
            if key is None:
                continue
            meta = self.store.meta(key)
            if info_from_meta is not None:
                info = info_from_meta(info, meta.get("builder", {}))
            self._keys.append(key)
            self._sizes.append(int(meta["num_blocks"]))
            self._infos.append(info)

    # ------------------------------------------------------------------ index
    def __len__(self) -> int:
        return len(self._keys)

    @property
    def sizes(self) -> list[int]:
        """Blocks per item (global blocks included; both graphs of a pair): the sampler's budget unit."""
        return list(self._sizes)

    @property
    def infos(self) -> list[ItemInfo]:
        return list(self._infos)

    def info(self, index: int) -> ItemInfo:
        return self._infos[index]

    def column(self, name: str) -> list[Any]:
        """One metadata field for all items, e.g. ``dataset.column('protein')`` for a grouped split."""
        return [getattr(info, name) if hasattr(info, name) else info.extra.get(name) for info in self._infos]

    def subset(self, indices: Sequence[int]) -> "ProcessedDataset":
        """A view with the given items (same store, no reprocessing); sizes and metadata follow."""
        view = copy.copy(self)
        view._keys = [self._keys[i] for i in indices]
        view._sizes = [self._sizes[i] for i in indices]
        view._infos = [self._infos[i] for i in indices]
        return view

    def split(self, parts: Mapping[str, Sequence[int]], *, by: Sequence[str] = ("group",)
              ) -> dict[str, "ProcessedDataset"]:
        """Named subsets, after checking that no item and no value of the ``by`` fields (e.g.
        ``('protein', 'group')`` for a split by target) is in two parts (:func:`check_no_leakage`)."""
        check_no_leakage(parts, *(self.column(field_name) for field_name in by))
        return {name: self.subset(indices) for name, indices in parts.items()}

    # ------------------------------------------------------------------ items
    def __getitem__(self, index: int):
        if index < 0:
            index += len(self)
        info = self._infos[index]
        graphs, _ = self.store.load(self._keys[index])
        out = tuple(self._decorate(graph, info, index) for graph in graphs.values())
        item = out[0] if len(out) == 1 else out
        return self.transform(item) if self.transform is not None else item

    @staticmethod
    def _decorate(graph: BlockGraph, info: ItemInfo, index: int) -> BlockGraph:
        graph.y = torch.tensor([info.y], dtype=graph.X.dtype)
        graph.name = info.id
        graph.source, graph.protein, graph.series = info.source, info.protein, info.series
        graph.ligand, graph.group = info.ligand, info.group
        graph.item_index = index
        return graph


def replace_info(info: ItemInfo, **changes) -> ItemInfo:
    """``dataclasses.replace`` for ItemInfo, merging ``extra`` instead of replacing it."""
    extra = changes.pop("extra", None)
    if extra is not None:
        changes["extra"] = {**info.extra, **extra}
    return replace(info, **changes)
