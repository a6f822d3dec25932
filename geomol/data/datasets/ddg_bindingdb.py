"""The DDG / BindingDB congeneric series (``../shared/data/ddg_bindingdb``) as corpus records.

Per PDB folder: ``receptor.mol2.gz`` (TRIPOS MOL2 protein) and ``ligands.mol2.gz`` (Surflex-docked
poses, block k = ``pose_index`` k, title ``BindingDB_<monomer id>``). ``labels.csv`` gives one Ki
per pose; the label is pK = 9 - log10(Ki / nM), recomputed here and checked against the file's
``pK`` column. Poses whose Ki is not a positive number (the file leaves their pK empty) are left
out with a counted warning; poses RDKit cannot sanitise keep their label and get their SMILES
from the unsanitised graph (see :func:`~geomol.data.datasets.corpus_items.canonical_smiles`).
``manifest.csv`` gives each folder's ``target_group`` and ``ligand_contact_chain``.
"""
from __future__ import annotations

import math
import os
import warnings
from pathlib import Path
from typing import Sequence

from geomol.data.datasets.corpus_items import (
    Corpus,
    CorpusItem,
    CorpusReceptor,
    canonical_smiles,
    read_csv_rows,
    warn_missing_smiles,
)
from geomol.data.io import read_ligands
from geomol.data.splits.grouped import canonical_protein_key
from geomol.errors import DatasetError

__all__ = ["pk_from_ki_nm", "read_ddg_labels", "read_ddg_corpus"]

_LABEL_COLUMNS = ("pdb_id", "pose_index", "title", "ligand_name", "ki_qualifier", "ki_nM", "pK")
_PK_TOLERANCE = 1e-3  # the file prints pK with 4 decimals


def pk_from_ki_nm(ki_nm: float) -> float:
    """pK = 9 - log10(Ki / nM) = -log10(Ki / M)."""
    return 9.0 - math.log10(ki_nm)


def read_ddg_labels(root: str | os.PathLike) -> dict[str, list[dict[str, str]]]:
    """``labels.csv`` rows per PDB id, ordered by pose index."""
    rows = read_csv_rows(Path(root) / "labels.csv", _LABEL_COLUMNS)
    per_pdb: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        per_pdb.setdefault(row["pdb_id"], []).append(row)
    for entries in per_pdb.values():
        entries.sort(key=lambda r: int(r["pose_index"]))
    return per_pdb


def _label(row: dict[str, str], where: str) -> float | None:
    """pK of one row, ``None`` when its Ki is not positive; raises when it disagrees with the printed pK."""
    try:
        ki = float(row["ki_nM"])
    except ValueError:
        raise DatasetError(f"Ki is not a number: {row['ki_nM']!r}", where) from None
    if not ki > 0:
        return None
    pk = pk_from_ki_nm(ki)
    if row["pK"] and abs(pk - float(row["pK"])) > _PK_TOLERANCE:
        raise DatasetError(f"pK column {row['pK']} disagrees with 9 - log10({ki} nM) = {pk:.4f}", where)
    return pk


def _folder_items(root: Path, pdb_id: str, group: str, rows: list[dict[str, str]]) -> tuple[list[CorpusItem], int]:
    poses = root / pdb_id / "ligands.mol2.gz"
    receptor = root / pdb_id / "receptor.mol2.gz"
    mols = read_ligands(poses, sanitize=False)
    items, unlabelled = [], 0
    for row in rows:
        index, where = int(row["pose_index"]), f"{root / 'labels.csv'} [{pdb_id} pose {row['pose_index']}]"
        if not 0 <= index < len(mols):
            raise DatasetError(f"pose {index} not in {poses} ({len(mols)} poses)", where)
        title = mols[index].GetProp("_Name").strip()
        if title != row["title"]:
            raise DatasetError(f"pose {index} is titled {title!r} in {poses}, labels say {row['title']!r}", where)
        pk = _label(row, where)
        if pk is None:
            unlabelled += 1
            continue
        items.append(CorpusItem("ddg_bindingdb", f"ddg_bindingdb/{pdb_id}", group, row["ligand_name"] or title,
                                canonical_smiles(mols[index]), pk, str(receptor), str(poses), index))
    return items, unlabelled


def read_ddg_corpus(root: str | os.PathLike, pdb_ids: Sequence[str] | None = None) -> Corpus:
    """Items and receptors of every PDB folder of the manifest (or of the ``pdb_ids`` given)."""
    root = Path(root)
    manifest = read_csv_rows(root / "manifest.csv", ("pdb_id", "target_group", "ligand_contact_chain"))
    chosen = manifest if pdb_ids is None else [row for row in manifest if row["pdb_id"] in set(pdb_ids)]
    unknown = sorted(set(pdb_ids or ()) - {row["pdb_id"] for row in manifest})
    if unknown:
        raise DatasetError(f"unknown PDB folder(s) {unknown}", root / "manifest.csv")
    labels = read_ddg_labels(root)
    items, receptors, unlabelled = [], [], 0
    for row in chosen:
        group = canonical_protein_key(row["target_group"])
        found, skipped = _folder_items(root, row["pdb_id"], group, labels.get(row["pdb_id"], []))
        items += found
        unlabelled += skipped
        receptors.append(CorpusReceptor(str(root / row["pdb_id"] / "receptor.mol2.gz"), "ddg_bindingdb",
                                        row["ligand_contact_chain"] or "_", (group,)))
    if unlabelled:
        warnings.warn(f"{root}: {unlabelled} pose(s) without a positive Ki left out", stacklevel=2)
    warn_missing_smiles(items, root)
    return Corpus(items, receptors)
