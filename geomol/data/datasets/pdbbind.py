"""PDBbind from its standard directory layout and INDEX files.

Layout: ``<root>/<id>/<id>_protein.pdb``, ``<id>_pocket.pdb``, ``<id>_ligand.sdf`` and/or
``<id>_ligand.mol2`` (several roots may be given, e.g. ``refined-set`` and ``v2020-other-PL``).
Labels come from an ``INDEX_general_PL_data.*`` / ``INDEX_refined_data.*`` file
(:func:`~geomol.data.datasets.affinity_labels.parse_pdbbind_index`; Kd/Ki/IC50 in fM…M, the
qualifiers kept or dropped by option). Protein identities for grouped splits come from the
optional ``INDEX_general_PL_name.*`` file (code, year, UniProt id, name); without it each
complex is its own protein. Split files (identity-30, identity-60, scaffold, ...) list one PDB
code per line (:func:`read_id_list`).
"""
from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import Sequence

from geomol.data.store.cache import Recipe
from geomol.data.datasets.affinity_labels import PDBbindEntry, parse_pdbbind_index
from geomol.data.datasets.ligand_complex import (
    assign_groups,
    build_ligand_complex,
    inchikey_from_meta,
    recipe_inputs,
)
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset
from geomol.data.store.preprocess import SkippedItem
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import ConfigError, DatasetError

__all__ = ["read_id_list", "parse_pdbbind_names", "pdbbind_files", "PDBbindDataset"]


def read_id_list(path: str | os.PathLike) -> list[str]:
    """PDB codes of a split file: one per line (first field), lower-cased; ``#`` comments and blanks skipped."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise DatasetError(f"cannot read id list: {exc.strerror}", path) from None
    ids = [line.split(",")[0].split()[0].lower() for line in lines if line.strip() and not line.startswith("#")]
    if len(set(ids)) != len(ids):
        raise DatasetError("id list names a code twice", path)
    return ids


def parse_pdbbind_names(path: str | os.PathLike) -> dict[str, tuple[str, str]]:
    """``{pdb_id: (uniprot_id, protein_name)}`` from an ``INDEX_general_PL_name.*`` file."""
    names = {}
    try:
        lines = Path(path).read_text(errors="replace").splitlines()
    except OSError as exc:
        raise DatasetError(f"cannot read PDBbind name index: {exc.strerror}", path) from None
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.startswith("#"):
            continue
        fields = line.split(None, 3)
        if len(fields) < 3:
            raise DatasetError(f"expected 'code year uniprot name', got {line.strip()!r}", path, number)
        names[fields[0].lower()] = (fields[2], fields[3].strip() if len(fields) > 3 else "")
    return names


def pdbbind_files(folder: Path, code: str, receptor: str, ligand_format: str) -> dict[str, str]:
    """Receptor and ligand files of one complex folder (ligand fallback: the other format)."""
    formats = {"auto": ("sdf", "mol2"), "sdf": ("sdf",), "mol2": ("mol2",)}[ligand_format]
    present = [folder / f"{code}_ligand.{fmt}" for fmt in formats if (folder / f"{code}_ligand.{fmt}").exists()]
    files = {"receptor": str(folder / f"{code}_{receptor}.pdb"),
             "ligands": str(present[0] if present else folder / f"{code}_ligand.{formats[0]}")}
    if len(present) > 1:
        files["ligands_fallback"] = str(present[1])
    return files


class PDBbindDataset(ProcessedDataset):
    """PDBbind complexes (pocket + ligand) labelled with pK.

    Args:
        roots: folder(s) holding the ``<id>/`` complex folders.
        index_file: ``INDEX_general_PL_data.*`` or ``INDEX_refined_data.*``.
        ids: PDB codes to use, or a split file of them; default every indexed code with a folder.
            A requested code without folder or label is reported as skipped, not silently lost.
        receptor: ``'pocket'`` (PDBbind's ``_pocket.pdb``) or ``'protein'`` (the whole protein;
            our pocket of the recipe's cutoff is cut from either).
        ligand_format: ``'auto'`` (SDF, falling back to MOL2 if RDKit cannot read the SDF), ``'sdf'``, ``'mol2'``.
        qualifiers: ``'keep'`` / ``'drop'`` / ``'drop_inequalities'`` (see ``parse_pdbbind_index``).
        name_file: optional ``INDEX_general_PL_name.*``; its UniProt ids become the ``protein`` keys.
        recipe, **kwargs: as the other protein–ligand datasets (:class:`~geomol.data.complexes.recipe.ComplexRecipe`).
    """

    def __init__(self, roots: str | os.PathLike | Sequence[str | os.PathLike], index_file: str | os.PathLike, *,
                 ids: Sequence[str] | str | os.PathLike | None = None, receptor: str = "pocket",
                 ligand_format: str = "auto", qualifiers: str = "keep", name_file: str | os.PathLike | None = None,
                 recipe: ComplexRecipe | None = None, **kwargs):
        if receptor not in ("pocket", "protein") or ligand_format not in ("auto", "sdf", "mol2"):
            raise ConfigError(f"receptor must be 'pocket'/'protein' and ligand_format 'auto'/'sdf'/'mol2', "
                              f"got {receptor!r}, {ligand_format!r}")
        roots = [Path(roots)] if isinstance(roots, (str, os.PathLike)) else [Path(r) for r in roots]
        labels = parse_pdbbind_index(index_file, qualifiers=qualifiers)
        names = parse_pdbbind_names(name_file) if name_file is not None else {}
        folders = {p.name.lower(): p for root in roots if root.is_dir() for p in root.iterdir() if p.is_dir()}
        requested = ids is not None
        codes = (read_id_list(ids) if isinstance(ids, (str, os.PathLike)) else [c.lower() for c in ids]) \
            if requested else [c for c in labels if c in folders]
        if not requested and len(codes) < len(labels):
            warnings.warn(f"{index_file}: {len(labels) - len(codes)} indexed complex(es) have no folder under "
                          f"{[str(r) for r in roots]}", stacklevel=2)
        extra, params = recipe_inputs(recipe, kwargs.get("cache_dir"))
        unlabelled = [SkippedItem(code, "", str(index_file), "not in the index file (or dropped by its qualifier)",
                                  "DatasetError") for code in codes if code not in labels]
        items = [self._item(code, folders, labels[code], names.get(code), receptor, ligand_format, extra, params)
                 for code in codes if code in labels]
        kwargs.setdefault("name", f"pdbbind-{Path(index_file).name}")
        super().__init__(items, info_from_meta=inchikey_from_meta, known_skipped=unlabelled, **kwargs)
        self._infos = assign_groups(self._infos, [[("complex", i.id)] for i in self._infos])

    @staticmethod
    def _item(code: str, folders: dict[str, Path], label: PDBbindEntry, name: tuple[str, str] | None,
              receptor: str, ligand_format: str, extra: dict, params: dict) -> tuple[Recipe, ItemInfo]:
        # a requested code without folder gets missing files, which the report then names
        folder = folders.get(code, Path(code))
        files = {**pdbbind_files(folder, code, receptor, ligand_format), **extra}
        uniprot = name[0] if name and name[0].strip("-") else code
        m = label.measurement
        info = ItemInfo(id=code, source="pdbbind", protein=uniprot.lower(), series=uniprot.lower(), ligand=code,
                        y=m.pk, extra={"measurement": m.kind, "qualifier": m.qualifier, "value": m.value,
                                       "unit": m.unit, "resolution": label.resolution, "year": label.year,
                                       "ligand_name": label.ligand})
        return Recipe(code, build_ligand_complex, files, {"ligand": 0, **params}, group=code), info
