"""The merged outputs of a screen, made by one streaming pass over its shard tables.

Memory is that of the top-N rows, a fixed pK histogram and one bit per ligand (to prove that every
ligand of the library is in exactly one shard table), whatever the library's size.

* ``top.csv``: the ``top`` scored ligands by predicted pK (ties: library order), ranked from 1;
* ``top.sdf``: their poses, in rank order, with ``rank`` and ``pK`` as SD data;
* ``failures.csv``: every ligand that could not be scored: index, name, SMILES, stage, kind, reason.
"""
from __future__ import annotations

import csv
import gzip
import heapq
import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from rdkit import Chem

from geomol.data.io._source import rdkit_messages
from geomol.errors import DatasetError
from geomol.screen.outputs import OutputFolder, read_table

__all__ = ["MergedScreen", "merge_shards", "PK_BINS"]

PK_BINS = np.linspace(0.0, 16.0, 161)
"""Edges of the pK histogram (0.1 pK wide; values outside are clipped into the end bins)."""

TOP_COLUMNS = ("rank", "index", "name", "smiles", "pK", "pK_std", "dG_kcal_mol", "Kd_M", "pose_method", "core_atoms",
               "core_rmsd", "min_receptor_distance", "clashes", "vina_score", "n_pocket_blocks", "warnings", "shard")
FAILURE_COLUMNS = ("index", "name", "smiles", "stage", "error_kind", "error", "shard")


@dataclass
class MergedScreen:
    """What the merge found: counts, failure reasons, the pK histogram and the top rows (rank order)."""

    ligands: int = 0
    scored: int = 0
    failed: int = 0
    docked_scored: int = 0
    failure_reasons: Counter = field(default_factory=Counter)
    histogram: np.ndarray = field(default_factory=lambda: np.zeros(len(PK_BINS) - 1, dtype=np.int64))
    top: list[dict] = field(default_factory=list)


def _failure_reason(row: dict) -> str:
    return f"{row['stage']}: {row['error_kind'] or 'error'}"


class _Top:
    """The ``size`` best rows by pK (ties broken by library index), kept in a heap."""

    def __init__(self, size: int):
        self.size, self.heap = size, []

    def offer(self, pk: float, index: int, row_of) -> None:
        item = (pk, -index)
        if len(self.heap) < self.size:
            heapq.heappush(self.heap, (*item, row_of()))
        elif item > self.heap[0][:2]:
            heapq.heapreplace(self.heap, (*item, row_of()))

    def ranked(self) -> list[dict]:
        rows = [row for *_, row in sorted(self.heap, key=lambda x: x[:2], reverse=True)]
        for rank, row in enumerate(rows, start=1):
            row["rank"] = rank
        return rows


def merge_shards(folder: OutputFolder, shard_count: int, ligand_count: int, top: int) -> MergedScreen:
    """Read shards ``0 .. shard_count-1`` once; write ``top.csv``, ``top.sdf`` and ``failures.csv``.

    Raises:
        DatasetError: a shard table is missing, or a ligand of the library is missing or appears twice.
    """
    merged, best = MergedScreen(), _Top(top)
    seen = np.zeros(ligand_count, dtype=bool)
    with open(folder.failures, "w", newline="", encoding="utf-8") as handle:
        failures = csv.DictWriter(handle, FAILURE_COLUMNS, extrasaction="ignore")
        failures.writeheader()
        for number in range(shard_count):
            path = folder.shard_table(number)
            if not path.exists():
                raise DatasetError("a shard table is missing (rerun the same command to complete the screen)",
                                   source=path)
            table = read_table(path)
            indices = table.column("index").to_numpy()
            _mark(seen, indices, path)
            scored = np.asarray(table.column("status").to_pylist()) == "scored"
            pks = table.column("pK").to_numpy(zero_copy_only=False)
            merged.ligands += len(indices)
            merged.scored += int(scored.sum())
            methods = table.column("pose_method").to_pylist()
            merged.docked_scored += sum(1 for ok, m in zip(scored, methods) if ok and m == "vina")
            merged.histogram += np.histogram(np.clip(pks[scored], PK_BINS[0], PK_BINS[-1]), PK_BINS)[0]
            for i in np.flatnonzero(scored):
                best.offer(float(pks[i]), int(indices[i]), lambda i=i: table.slice(int(i), 1).to_pylist()[0])
            for i in np.flatnonzero(~scored):
                row = table.slice(int(i), 1).to_pylist()[0]
                merged.failure_reasons[_failure_reason(row)] += 1
                failures.writerow(row)
    merged.failed = merged.ligands - merged.scored
    if not seen.all():
        raise DatasetError(f"{int((~seen).sum())} ligand(s) of the library are in no shard table (first: index "
                           f"{int(np.flatnonzero(~seen)[0])})", source=folder.root)
    merged.top = best.ranked()
    _write_top(folder, merged.top)
    return merged


def _mark(seen: np.ndarray, indices: np.ndarray, source) -> None:
    """Tick ``indices`` off in ``seen``; a ligand ticked twice, or outside the library, is an error."""
    if len(indices) and (indices.min() < 0 or indices.max() >= len(seen)):
        raise DatasetError("a shard holds ligand indices outside the library (another library's shard?)",
                           source=source)
    if seen[indices].any() or len(np.unique(indices)) != len(indices):
        raise DatasetError("a ligand appears in two shard rows", source=source)
    seen[indices] = True


def _cell(value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return f"{value:.6g}" if isinstance(value, float) else str(value)


def _write_top(folder: OutputFolder, rows: list[dict]) -> None:
    with open(folder.top_table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(TOP_COLUMNS)
        for row in rows:
            writer.writerow([_cell(row.get(c)) for c in TOP_COLUMNS])
    poses = _top_poses(folder, rows)
    writer = Chem.SDWriter(str(folder.top_poses))
    try:
        for row in rows:
            molecule = poses.get(row["index"])
            if molecule is not None:
                molecule.SetProp("rank", str(row["rank"]))
                writer.write(molecule)
    finally:
        writer.close()


def _top_poses(folder: OutputFolder, rows: list[dict]) -> dict[int, Chem.Mol]:
    """The poses of ``rows`` from their shards' SDF files, by library index."""
    wanted: dict[int, set[int]] = {}
    for row in rows:
        wanted.setdefault(row["shard"], set()).add(row["index"])
    poses = {}
    for shard, indices in sorted(wanted.items()):
        with gzip.open(folder.shard_poses(shard), "rb") as handle, rdkit_messages():
            for molecule in Chem.ForwardSDMolSupplier(handle, removeHs=False):
                if molecule is not None and int(molecule.GetProp("index")) in indices:
                    poses[int(molecule.GetProp("index"))] = molecule
    return poses
