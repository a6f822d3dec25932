"""Protein–protein (or any chain-group) binding affinity from structure files and a CSV table.

CSV columns (header names, case-insensitive; extra columns are ignored):

* ``id`` (required): item identifier.
* ``receptor_chains``, ``ligand_chains`` (required): chain groups, ``AB`` (one letter per chain)
  or ``A,B`` / ``A B`` for multi-character chain ids.
* ``pdb`` (optional): structure file, relative to ``structure_dir``; default ``<id>.pdb``
  (or ``.cif``, ``.ent``, ``.pdb.gz``, ``.cif.gz``) in ``structure_dir``.
* the affinity, first non-empty of: ``pK`` / ``pKd`` (-log10 Kd in M); ``dG`` in kcal/mol
  (``dG_unit`` may say ``kJ/mol``); ``Kd`` with its unit inside (``12 nM``, ``3.1e-9 M``) or in
  ``Kd_unit``.
* ``protein`` or ``group`` (optional): key for grouped splits (default: the id).

Segment 0 holds the receptor chains' blocks within ``interface_cutoff`` Å of the ligand chains,
segment 1 the ligand chains' blocks within the same distance of the receptor chains.
"""
from __future__ import annotations

import csv
import os
import re
from pathlib import Path

from geomol.data.blocks import BlockGraph
from geomol.data.store.cache import Recipe
from geomol.data.complexes.build import complex_from_pdb
from geomol.units import pk_from_concentration, pk_from_dg
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset
from geomol.data.complexes.pocket import DEFAULT_CUTOFF
from geomol.errors import ConfigError, DatasetError

__all__ = ["chain_group", "ppa_label", "read_ppa_table", "build_chain_complex", "PPADataset"]

_SUFFIXES = (".pdb", ".cif", ".ent", ".pdb.gz", ".cif.gz", ".ent.gz")


def chain_group(text: str, *, source: str | None = None) -> list[str]:
    """``'AB'`` → ``['A', 'B']``; ``'A,B'`` or ``'AA BB'`` → separate (multi-character) ids."""
    text = text.strip()
    if not text:
        raise DatasetError("empty chain group", source)
    return [c for c in re.split(r"[,\s;]+", text) if c] if re.search(r"[,\s;]", text) else list(text)


def ppa_label(row: dict[str, str], *, source: str | None = None) -> tuple[float, str]:
    """``(pK, column used)`` from a table row (see the module docstring for the columns)."""
    for column in ("pk", "pkd"):
        if row.get(column, "").strip():
            return float(row[column]), column
    if row.get("dg", "").strip():
        return pk_from_dg(float(row["dg"]), row.get("dg_unit", "").strip() or "kcal/mol", source=source), "dg"
    text = row.get("kd", "").strip()
    if text:
        match = re.fullmatch(r"([0-9.]+(?:[eE][-+]?\d+)?)\s*([a-zA-Zµμ]*)", text)
        if match is None:
            raise DatasetError(f"cannot read Kd {text!r}", source)
        unit = match.group(2) or row.get("kd_unit", "").strip()
        if not unit:
            raise DatasetError(f"Kd {text!r} has no unit (add it, or a Kd_unit column)", source)
        return pk_from_concentration(float(match.group(1)), unit, source=source), "kd"
    raise DatasetError("no affinity (pK, pKd, dG or Kd column)", source)


def read_ppa_table(path: str | os.PathLike) -> list[dict[str, str]]:
    """Rows of the CSV with lower-cased header names."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = [{k.strip().lower(): (v or "").strip() for k, v in row.items() if k}
                    for row in csv.DictReader(handle)]
    except OSError as exc:
        raise DatasetError(f"cannot read table: {exc.strerror}", path) from None
    for column in ("id", "receptor_chains", "ligand_chains"):
        if rows and column not in rows[0]:
            raise DatasetError(f"table lacks the column {column!r}", path)
    return rows


def _structure(row: dict[str, str], structure_dir: Path) -> Path:
    if row.get("pdb"):
        return structure_dir / row["pdb"]
    candidates = [structure_dir / f"{row['id']}{suffix}" for suffix in _SUFFIXES]
    return next((c for c in candidates if c.exists()), candidates[0])


def build_chain_complex(files: dict[str, str], *, receptor_chains: list[str], ligand_chains: list[str],
                        interface_cutoff: float, keep_hydrogens: bool) -> BlockGraph:
    """Interface graph of two chain groups of one structure file."""
    return complex_from_pdb(files["structure"], receptor_chains=receptor_chains, ligand_chains=ligand_chains,
                            pocket_cutoff=interface_cutoff, keep_hydrogens=keep_hydrogens)


class PPADataset(ProcessedDataset):
    """Chain-group complexes labelled with pK (protein–protein affinity and the like).

    Args:
        table: the CSV described in the module docstring.
        structure_dir: folder of the structure files (default: the table's folder).
        interface_cutoff: Å, blocks of one side with a heavy atom this close to the other side.
        keep_hydrogens: keep hydrogens in the blocks.
        **kwargs: :class:`ProcessedDataset` options.
    """

    def __init__(self, table: str | os.PathLike, *, structure_dir: str | os.PathLike | None = None,
                 interface_cutoff: float = DEFAULT_CUTOFF, keep_hydrogens: bool = False, **kwargs):
        if not interface_cutoff > 0:
            raise ConfigError(f"interface_cutoff must be positive, got {interface_cutoff}")
        structure_dir = Path(structure_dir) if structure_dir is not None else Path(table).parent
        items = []
        for number, row in enumerate(read_ppa_table(table), start=2):
            where = f"{table}:{number}"
            pk, column = ppa_label(row, source=where)
            params = {"receptor_chains": chain_group(row["receptor_chains"], source=where),
                      "ligand_chains": chain_group(row["ligand_chains"], source=where),
                      "interface_cutoff": float(interface_cutoff), "keep_hydrogens": bool(keep_hydrogens)}
            structure = _structure(row, structure_dir)
            key = row.get("protein") or row.get("group") or row["id"]
            info = ItemInfo(id=row["id"], source="ppa", protein=key, series=key, group=row["id"], y=pk,
                            ligand="+".join(params["ligand_chains"]),
                            extra={"label_column": column, "structure": structure.name})
            items.append((Recipe(row["id"], build_chain_complex, {"structure": str(structure)}, params,
                                 group=str(structure)), info))
        if len({info.id for _, info in items}) != len(items):
            raise DatasetError("an id is listed twice", table)
        kwargs.setdefault("name", f"ppa-{Path(table).stem}")
        super().__init__(items, **kwargs)
