"""The public FEP+ benchmark layout (schrodinger/public_binding_free_energy_benchmark) as a dataset.

``<root>/benchmark_metadata.csv`` lists the series (group folder, protein, file naming scheme,
reference PDB, ...); per series ``<root>/<group>/<scheme>_protein.pdb``, ``<scheme>_ligands.sdf``
(poses; SD property ``r_exp_dg`` = experimental ΔG in kcal/mol, or ``r_fepplus_exp_dg`` where
that is the only one) and ``<scheme>_edges.csv`` (ligand 1, ligand 2, experimental ΔΔG in kcal/mol).

Alternative states of one ligand (protomers, tautomers, flips, poses: ``'lig 2, deprot'``,
``'24 flip b'``, ``'27neu'``/``'27charg'``, ``'2d pose 1'``) carry the same measurement and must
share a split: items of one series are tied into one group when their titles reduce to the same
base name (:func:`alternative_state_base`) or when they carry the same measured ΔG. The latter
can also tie two distinct compounds with equal values, which only makes splits stricter.
Ligands without a measurement (FEP intermediates) are left out with a counted warning.
"""
from __future__ import annotations

import csv
import math
import os
import re
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from geomol.data.store.cache import Recipe
from geomol.units import pk_from_dg
from geomol.data.datasets.ligand_complex import (
    assign_groups,
    build_ligand_complex,
    inchikey_from_meta,
    recipe_inputs,
)
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset
from geomol.data.io import read_ligands
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.data.splits.grouped import canonical_protein_key
from geomol.errors import DatasetError

__all__ = ["FEPSeries", "FEPEdge", "read_fep_metadata", "read_fep_edges", "alternative_state_base",
           "fep_recipes", "fep_group_keys", "series_edges", "FEPEdgesMixin", "FEPBenchmarkDataset"]

DG_PROPERTIES = ("r_exp_dg", "r_fepplus_exp_dg")


@dataclass(frozen=True)
class FEPSeries:
    """One congeneric series: ``id`` = ``'<group>/<scheme>'`` (a scheme can recur in two groups)."""

    group: str
    scheme: str
    protein: str
    reference_pdb: str = ""
    doi: str = ""

    @property
    def id(self) -> str:
        return f"{self.group}/{self.scheme}"

    @property
    def protein_key(self) -> str:
        return canonical_protein_key(self.protein)

    def path(self, root: Path, kind: str) -> Path:
        """``kind`` in ``protein.pdb``, ``ligands.sdf``, ``edges.csv``."""
        return Path(root) / self.group / f"{self.scheme}_{kind}"


@dataclass(frozen=True)
class FEPEdge:
    """A perturbation of the series graph: ΔΔG = ΔG(ligand_b) - ΔG(ligand_a) in kcal/mol."""

    series: str
    ligand_a: str
    ligand_b: str
    ddg: float


def _csv_rows(path: Path) -> list[list[str]]:
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            return [row for row in csv.reader(handle) if any(cell.strip() for cell in row)]
    except OSError as exc:
        raise DatasetError(f"cannot read CSV: {exc.strerror}", path) from None


def read_fep_metadata(root: str | os.PathLike) -> list[FEPSeries]:
    """The series of ``benchmark_metadata.csv`` (columns found by header name)."""
    path = Path(root) / "benchmark_metadata.csv"
    rows = _csv_rows(path)
    if not rows:
        raise DatasetError("empty metadata file", path)
    header = [h.strip().lower() for h in rows[0]]
    need = {"group abbreviation": "group", "protein": "protein", "input file naming scheme": "scheme"}
    missing = [h for h in need if h not in header]
    if missing:
        raise DatasetError(f"metadata lacks column(s) {missing}", path)
    col = {name: header.index(name) for name in header}
    series = []
    for number, row in enumerate(rows[1:], start=2):
        if len(row) < len(header):
            raise DatasetError(f"row has {len(row)} fields, header {len(header)}", path, number)
        get = lambda name: row[col[name]].strip() if name in col else ""  # noqa: E731
        series.append(FEPSeries(get("group abbreviation"), get("input file naming scheme"), get("protein"),
                                get("reference pdb"), get("doi of source")))
    return series


def read_fep_edges(path: str | os.PathLike, series: str = "") -> list[FEPEdge]:
    """Edges of one ``*_edges.csv``: the first three columns are ligand 1, ligand 2, ΔΔG (kcal/mol).

    A ΔΔG written ``None``/``nan``/empty (an edge to an unmeasured intermediate) is read as nan.
    """
    rows = _csv_rows(Path(path))
    edges = []
    for number, row in enumerate(rows[1:], start=2):
        try:
            text = row[2].strip()
            ddg = math.nan if text.lower() in ("", "none", "nan", "na") else float(text)
            edges.append(FEPEdge(series, row[0].strip(), row[1].strip(), ddg))
        except (IndexError, ValueError):
            raise DatasetError(f"expected 'ligand 1, ligand 2, ddG', got {row}", path, number) from None
    return edges


_STATE_WORDS = {"flip", "flipped", "alternative", "stereo", "deprot", "deprotonated", "protonated", "neutral",
                "neu", "charg", "charged", "tautomer", "pose", "xtal", "redocked", "ground", "state", "adjust",
                "in", "out", "equitorial", "equatorial", "u", "d"}
_GLUED_STATE = re.compile(r"^(.*\d[a-z]?)(neu|charg[rs]?)$")  # '27neu', '27chargr', '4charg'


def alternative_state_base(title: str) -> str:
    """The ligand a state title belongs to: ``'lig 2, deprot'`` → ``'lig 2'``, ``'30 flip b'`` → ``'30'``,
    ``'27chargR'`` → ``'27'``, ``'19a_neu'`` → ``'19a'``, ``'2d pose 1'`` → ``'2d'``."""
    base: list[str] = []
    after_state = False
    for token in (t for t in re.split(r"[\s,()_]+", title.lower()) if t):
        glued = _GLUED_STATE.match(token)
        if token in _STATE_WORDS or glued:
            base += [glued.group(1)] if glued else []
            after_state = True
        elif not (after_state and re.fullmatch(r"[a-z]|\d+", token)):  # not 'b' of 'flip b', '2' of 'pose 2'
            base.append(token)
            after_state = False
    return " ".join(base) or title.strip().lower()


def _series_items(root: Path, series: FEPSeries, extra_files: dict, params: dict) -> tuple[list, int]:
    ligands = series.path(root, "ligands.sdf")
    receptor = series.path(root, "protein.pdb")
    files = {"receptor": str(receptor), "ligands": str(ligands), **extra_files}
    items, unmeasured = [], 0
    for index, mol in enumerate(read_ligands(ligands, sanitize=False)):
        title = mol.GetProp("_Name").strip() if mol.HasProp("_Name") else str(index)
        prop = next((p for p in DG_PROPERTIES if mol.HasProp(p)), None)
        if prop is None:
            unmeasured += 1
            continue
        try:
            dg = float(mol.GetProp(prop))
        except ValueError:
            raise DatasetError(f"{prop} is not a number: {mol.GetProp(prop)!r}", ligands, f"molecule {index}") from None
        info = ItemInfo(id=f"fep/{series.id}/{index}:{title}", source="fep_benchmark", protein=series.protein_key,
                        series=series.id, ligand=title, y=pk_from_dg(dg, "kcal/mol"),
                        extra={"dg": dg, "dg_property": prop, "protein_name": series.protein})
        items.append((Recipe(info.id, build_ligand_complex, files, {"ligand": index, **params}, group=str(receptor)),
                      info))
    return items, unmeasured


def fep_recipes(root: str | os.PathLike, *, series: Sequence[str] | None = None, recipe: ComplexRecipe | None = None,
                cache_dir=None) -> list[tuple[Recipe, ItemInfo]]:
    """All ``(recipe, info)`` pairs of the benchmark (or of the series ids given)."""
    root = Path(root)
    table = read_fep_metadata(root)
    chosen = table if series is None else [s for s in table if s.id in set(series)]
    unknown = sorted(set(series or ()) - {s.id for s in table})
    if unknown:
        raise DatasetError(f"unknown series {unknown}", root / "benchmark_metadata.csv")
    extra, params = recipe_inputs(recipe, cache_dir)
    items, unmeasured = [], 0
    for entry in chosen:
        found, missing = _series_items(root, entry, extra, params)
        items += found
        unmeasured += missing
    if unmeasured:
        warnings.warn(f"{root}: {unmeasured} ligand(s) without a measured ΔG ({', '.join(DG_PROPERTIES)}) left out",
                      stacklevel=2)
    return items


def fep_group_keys(infos: Sequence[ItemInfo]) -> list[list[tuple]]:
    """Per item: its series' base title and its series' measured ΔG (the ties described above)."""
    return [[("title", i.series, alternative_state_base(i.ligand)), ("dg", i.series, i.extra.get("dg"))]
            for i in infos]


def series_edges(root: str | os.PathLike, infos: Sequence[ItemInfo]) -> list[FEPEdge]:
    """The edges of every FEP series that has an item among ``infos``."""
    used = {i.series for i in infos if i.source == "fep_benchmark"}
    return [e for s in read_fep_metadata(root) if s.id in used
            for e in read_fep_edges(s.path(Path(root), "edges.csv"), s.id)]


class FEPEdgesMixin:
    """:meth:`edge_indices` for a dataset with ``fep_edges`` and item metadata."""

    fep_edges: list[FEPEdge]
    _infos: list[ItemInfo]

    def edge_indices(self) -> list[tuple[int, int, float]]:
        """``(index_a, index_b, ddG kcal/mol)`` of the measured edges whose two ligands are both in this dataset."""
        where = {(info.series, info.ligand): n for n, info in enumerate(self._infos)}
        return [(where[(e.series, e.ligand_a)], where[(e.series, e.ligand_b)], e.ddg) for e in self.fep_edges
                if (e.series, e.ligand_a) in where and (e.series, e.ligand_b) in where and math.isfinite(e.ddg)]


class FEPBenchmarkDataset(FEPEdgesMixin, ProcessedDataset):
    """Complexes of the public FEP+ benchmark, labelled with pK from the experimental ΔG.

    Metadata: ``source='fep_benchmark'``, ``protein`` = canonical key of the metadata's protein
    name, ``series='<group>/<scheme>'``, ``ligand`` = SDF title, ``group`` (alternative states
    tied, see the module notes), ``y`` = pK, ``extra['dg']`` in kcal/mol.

    Args:
        root: the benchmark folder (e.g. ``../shared/data/fep_benchmark``).
        series: series ids ``'<group>/<scheme>'`` to use (default all).
        recipe, **kwargs: as :class:`~geomol.data.datasets.plb.PLBDataset`.

    Attributes:
        fep_edges: the perturbation edges (:class:`FEPEdge`) of every series used; see
            :meth:`edge_indices` for them as item indices (e.g. for a relative-ΔΔG loss).
    """

    def __init__(self, root: str | os.PathLike, *, series: Sequence[str] | None = None,
                 recipe: ComplexRecipe | None = None, **kwargs):
        items = fep_recipes(root, series=series, recipe=recipe, cache_dir=kwargs.get("cache_dir"))
        kwargs.setdefault("name", "fep_benchmark")
        super().__init__(items, info_from_meta=inchikey_from_meta, **kwargs)
        self._infos = assign_groups(self._infos, fep_group_keys(self._infos))
        self.fep_edges: list[FEPEdge] = series_edges(root, self._infos)
