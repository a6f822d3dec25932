"""The Uni-FEP benchmark systems (``../shared/data/uni_fep``) as corpus records.

``manifest.csv`` lists one system (congeneric series) per row with its ``target_group`` and the
``ligand_contact_chain``; per system ``protein.pdb.gz`` (prepared receptor), ``ref_ligand.sdf``
(the ONE ligand with a pose) and ``result_dG.csv`` (``ligand_smiles``, ``ligand_name``,
``exp_dG (kcal/mol)`` and Uni-FEP's own predictions ``fep_dG``/``fep_dG_std``, which are never
labels). Labels: pK = -exp_dG / (R T ln 10), T = 298.15 K. Every ligand is given as SMILES, so an
item has no pose: it names the reference ligand to model its pose on.
"""
from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Sequence

from geomol.units import pk_from_dg
from geomol.data.datasets.corpus_items import (
    Corpus,
    CorpusItem,
    CorpusReceptor,
    canonical_smiles,
    read_csv_rows,
    warn_missing_smiles,
)
from geomol.data.splits.grouped import canonical_protein_key
from geomol.errors import DatasetError

__all__ = ["UniFEPSystem", "read_uni_fep_manifest", "read_uni_fep_series", "read_uni_fep_corpus"]

_DG_COLUMN = "exp_dG (kcal/mol)"


class UniFEPSystem:
    """One manifest row: ``system`` folder, ``target_group``, ``ligand_contact_chain``, ``subset``."""

    def __init__(self, root: Path, row: dict[str, str]):
        self.folder = root / row["system"]
        self.system = row["system"]
        self.target_group = row["target_group"]
        self.contact_chain = row["ligand_contact_chain"] or "_"
        self.subset = row.get("subset", "")

    @property
    def receptor(self) -> Path:
        return self.folder / "protein.pdb.gz"

    @property
    def reference(self) -> Path:
        return self.folder / "ref_ligand.sdf"


def read_uni_fep_manifest(root: str | os.PathLike) -> list[UniFEPSystem]:
    """The systems of ``<root>/manifest.csv``, in file order."""
    root = Path(root)
    rows = read_csv_rows(root / "manifest.csv", ("system", "target_group", "ligand_contact_chain"))
    return [UniFEPSystem(root, row) for row in rows]


def read_uni_fep_series(system: UniFEPSystem) -> list[CorpusItem]:
    """The measured ligands of one system; a ligand without a numeric ``exp_dG`` is an error naming the row."""
    path = system.folder / "result_dG.csv"
    group = canonical_protein_key(system.target_group)
    items = []
    for number, row in enumerate(read_csv_rows(path, ("ligand_smiles", "ligand_name", _DG_COLUMN)), start=2):
        try:
            dg = float(row[_DG_COLUMN])
        except (TypeError, ValueError):
            raise DatasetError(f"exp_dG is not a number: {row[_DG_COLUMN]!r}", path, number) from None
        if not math.isfinite(dg):
            raise DatasetError(f"exp_dG is not finite: {dg}", path, number)
        items.append(CorpusItem("uni_fep", f"uni_fep/{system.system}", group, row["ligand_name"].strip(),
                                canonical_smiles(row["ligand_smiles"]), pk_from_dg(dg, "kcal/mol"),
                                str(system.receptor), reference=str(system.reference)))
    return items


def read_uni_fep_corpus(root: str | os.PathLike, systems: Sequence[str] | None = None) -> Corpus:
    """Items and receptors of every system (or of the ``systems`` folder names given)."""
    table = read_uni_fep_manifest(root)
    chosen = table if systems is None else [s for s in table if s.system in set(systems)]
    unknown = sorted(set(systems or ()) - {s.system for s in table})
    if unknown:
        raise DatasetError(f"unknown system(s) {unknown}", Path(root) / "manifest.csv")
    items = [item for system in chosen for item in read_uni_fep_series(system)]
    warn_missing_smiles(items, root)
    receptors = [CorpusReceptor(str(s.receptor), "uni_fep", s.contact_chain, (canonical_protein_key(s.target_group),))
                 for s in chosen]
    return Corpus(items, receptors)
