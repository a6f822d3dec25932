"""The affinity training corpus as plain records: one :class:`CorpusItem` per labelled ligand.

Four sources feed the corpus: ``plb`` and ``fep_benchmark`` (expert poses), ``uni_fep`` (SMILES
with one reference pose per series) and ``ddg_bindingdb`` (docked poses). Each has a reader
returning a :class:`Corpus`: its items and its receptors (:class:`CorpusReceptor`, one per
receptor file, with the chain that contacts the ligands). No graph is built here: graph building
belongs to the recipe that a dataset holds; these records say *what* to build (receptor, pose or
SMILES + reference) and how to label and group it. Protein clusters over all sources come from
:mod:`geomol.data.splits.protein_clusters`, splits from :mod:`geomol.data.splits.corpus`.
"""
from __future__ import annotations

import csv
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import yaml
from rdkit import Chem, RDLogger

from geomol.data.datasets.affinity_labels import plb_measurement_pk
from geomol.units import pk_from_dg
from geomol.data.datasets.fep_benchmark import DG_PROPERTIES, read_fep_metadata
from geomol.data.io import read_ligand, read_ligands
from geomol.data.io.sequences import contact_chain
from geomol.data.splits.grouped import canonical_protein_key
from geomol.errors import DatasetError

__all__ = ["SOURCES", "CorpusItem", "CorpusReceptor", "Corpus", "canonical_smiles", "read_plb_corpus",
           "read_fep_corpus", "join_corpora", "read_csv_rows", "warn_missing_smiles"]

SOURCES = ("plb", "fep_benchmark", "uni_fep", "ddg_bindingdb")


@dataclass(frozen=True)
class CorpusItem:
    """One labelled ligand of one receptor.

    Attributes:
        source: one of :data:`SOURCES`.
        series: ``'<source>/<series>'`` (a plb target, an FEP series, a Uni-FEP system, a DDG PDB folder).
        protein_group: the source's own protein name, canonical (:func:`canonical_protein_key`);
            the cross-source cluster comes from :mod:`geomol.data.splits.protein_clusters`.
        ligand: ligand name as in the source.
        smiles: canonical isomeric SMILES without explicit hydrogens (``''`` if RDKit cannot write one).
        label: pK = -log10(K / M).
        receptor: receptor file (PDB, ``.pdb.gz`` or ``.mol2.gz``).
        pose: file holding the ligand's pose, ``''`` when the ligand is given as SMILES only.
        pose_index: the pose's record in ``pose`` (-1 without a pose).
        reference: a reference ligand pose to model a SMILES-only ligand on (uni_fep), else ``''``.
    """

    source: str
    series: str
    protein_group: str
    ligand: str
    smiles: str
    label: float
    receptor: str
    pose: str = ""
    pose_index: int = -1
    reference: str = ""

    @property
    def id(self) -> str:
        return f"{self.series}/{self.ligand}" if self.pose_index < 0 else f"{self.series}/{self.pose_index}:{self.ligand}"


@dataclass(frozen=True)
class CorpusReceptor:
    """A receptor file and what ties it to others: its ligand-contact chain and its source's protein names.

    Attributes:
        path: the receptor file.
        source: the corpus source it belongs to.
        chain: the chain contacting the ligands (``'_'`` for a blank chain id).
        names: protein names from the source (target, manifest ``target_group``), canonical keys.
    """

    path: str
    source: str
    chain: str
    names: tuple[str, ...] = ()


@dataclass
class Corpus:
    """Items and their receptors (every ``item.receptor`` is the ``path`` of one receptor)."""

    items: list[CorpusItem] = field(default_factory=list)
    receptors: list[CorpusReceptor] = field(default_factory=list)


def join_corpora(parts: Sequence[Corpus]) -> Corpus:
    """One corpus from several; a receptor file listed twice is kept once (first entry)."""
    items = [item for part in parts for item in part.items]
    receptors: dict[str, CorpusReceptor] = {}
    for part in parts:
        for receptor in part.receptors:
            receptors.setdefault(receptor.path, receptor)
    return Corpus(items, list(receptors.values()))


def canonical_smiles(molecule: str | Chem.Mol) -> str:
    """Canonical isomeric SMILES, hydrogens removed, of a SMILES string or an RDKit molecule.

    A molecule RDKit cannot sanitise (a ring nitrogen with a missing charge, a MOL2 aromaticity it
    cannot kekulise) is written from its unsanitised graph; ``''`` when even that fails.
    """
    RDLogger.DisableLog("rdApp.*")  # the caller counts failures; RDKit's own messages would flood logs
    try:
        mol = Chem.MolFromSmiles(molecule) if isinstance(molecule, str) else Chem.Mol(molecule)
        if mol is None and isinstance(molecule, str):
            mol = Chem.MolFromSmiles(molecule, sanitize=False)
        if mol is None:
            return ""
        try:
            Chem.SanitizeMol(mol)
            return Chem.MolToSmiles(Chem.RemoveHs(mol))
        except Exception:  # noqa: BLE001 - RDKit raises several unrelated types; fall back to the raw graph
            mol.UpdatePropertyCache(strict=False)
            return Chem.MolToSmiles(Chem.RemoveHs(mol, sanitize=False))
    except Exception:  # noqa: BLE001
        return ""
    finally:
        RDLogger.EnableLog("rdApp.*")


def read_csv_rows(path: Path, required: Sequence[str]) -> list[dict[str, str]]:
    """Rows of a CSV with a header, checking that ``required`` columns are present."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            header = reader.fieldnames or []
    except OSError as exc:
        raise DatasetError(f"cannot read CSV: {exc.strerror}", path) from None
    missing = [column for column in required if column not in header]
    if missing:
        raise DatasetError(f"missing column(s) {missing}; header is {header}", path)
    return rows


def warn_missing_smiles(items: Sequence[CorpusItem], where: str | os.PathLike) -> None:
    """One counted warning for items whose SMILES RDKit could not write."""
    missing = [item.id for item in items if not item.smiles]
    if missing:
        warnings.warn(f"{where}: no SMILES for {len(missing)} ligand(s), e.g. {missing[0]}", stacklevel=3)


def _pose_contact_chain(receptor: Path, poses: Path) -> str:
    """Contact chain of ``receptor`` with the first pose of ``poses`` (heavy atoms, 5 Å)."""
    mol = read_ligand(poses, 0, sanitize=False)
    heavy = [atom.GetIdx() for atom in mol.GetAtoms() if atom.GetAtomicNum() > 1]
    return contact_chain(receptor, mol.GetConformer().GetPositions()[heavy])


def _plb_target(root: Path, target: str) -> Corpus:
    folder = root / target
    table_path = folder / "00_data" / "ligands.yml"
    try:
        table = yaml.safe_load(table_path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise DatasetError(f"cannot read YAML: {exc}", table_path) from None
    receptor, poses = folder / "01_protein" / "crd" / "protein.pdb", folder / "02_ligands" / "ligands.sdf"
    group = canonical_protein_key(target)
    items, titles = [], set()
    for index, mol in enumerate(read_ligands(poses, sanitize=False)):
        title = mol.GetProp("_Name").strip()
        titles.add(title)
        entry = table.get(title)
        if entry is None:
            continue
        label = plb_measurement_pk(entry.get("measurement") or {}, source=f"{table_path} [{title}]")
        items.append(CorpusItem("plb", f"plb/{target}", group, title, canonical_smiles(mol), label.pk, str(receptor),
                                str(poses), index))
    left_out = len(titles - set(table)) + len(set(table) - titles)
    if left_out:
        warnings.warn(f"{folder}: {left_out} ligand(s) posed but unmeasured or measured but unposed left out",
                      stacklevel=3)
    return Corpus(items, [CorpusReceptor(str(receptor), "plb", _pose_contact_chain(receptor, poses), (group,))])


def read_plb_corpus(root: str | os.PathLike, targets: Sequence[str] | None = None) -> Corpus:
    """Measured and posed ligands of the protein-ligand-benchmark folder (labels as :mod:`plb`)."""
    root = Path(root)
    if not root.is_dir():
        raise DatasetError("protein-ligand-benchmark folder not found", root)
    available = sorted(p.name for p in root.iterdir() if (p / "00_data" / "ligands.yml").is_file())
    chosen = available if targets is None else list(targets)
    unknown = sorted(set(chosen) - set(available))
    if unknown:
        raise DatasetError(f"unknown target(s) {unknown}; available: {available}", root)
    corpus = join_corpora([_plb_target(root, target) for target in chosen])
    warn_missing_smiles(corpus.items, root)
    return corpus


def read_fep_corpus(root: str | os.PathLike, series: Sequence[str] | None = None) -> Corpus:
    """Measured ligands of the public FEP+ benchmark (ΔG → pK as :mod:`fep_benchmark`), unmeasured ones left out."""
    root = Path(root)
    table = read_fep_metadata(root)
    chosen = table if series is None else [s for s in table if s.id in set(series)]
    unknown = sorted(set(series or ()) - {s.id for s in table})
    if unknown:
        raise DatasetError(f"unknown series {unknown}", root / "benchmark_metadata.csv")
    items, receptors, unmeasured = [], [], 0
    for entry in chosen:
        receptor, poses = entry.path(root, "protein.pdb"), entry.path(root, "ligands.sdf")
        group = entry.protein_key
        for index, mol in enumerate(read_ligands(poses, sanitize=False)):
            prop = next((p for p in DG_PROPERTIES if mol.HasProp(p)), None)
            if prop is None:
                unmeasured += 1
                continue
            try:
                label = pk_from_dg(float(mol.GetProp(prop)), "kcal/mol")
            except ValueError:
                raise DatasetError(f"{prop} is not a number: {mol.GetProp(prop)!r}", poses, index) from None
            items.append(CorpusItem("fep_benchmark", f"fep_benchmark/{entry.id}", group, mol.GetProp("_Name").strip(),
                                    canonical_smiles(mol), label, str(receptor), str(poses), index))
        receptors.append(CorpusReceptor(str(receptor), "fep_benchmark", _pose_contact_chain(receptor, poses), (group,)))
    if unmeasured:
        warnings.warn(f"{root}: {unmeasured} ligand(s) without a measured ΔG left out", stacklevel=2)
    warn_missing_smiles(items, root)
    return Corpus(items, receptors)
