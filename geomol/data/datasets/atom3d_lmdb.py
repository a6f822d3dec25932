"""ATOM3D LBA (ligand binding affinity) and LEP (ligand efficacy prediction) LMDB datasets.

The files are read with the ``lmdb`` package alone (no atom3d, no pandas). Format, as written by
atom3d's ``make_lmdb_dataset``: an LMDB environment (a directory holding ``data.mdb``, or a
single file) whose keys are ``str(index).encode()``; each value is a gzip-compressed JSON dict.
The key ``num_examples`` holds the count and ``serialization_format`` the encoding (``json``;
``msgpack`` if the msgpack package is installed; pickled ``pkl`` is refused, being unsafe).
Atom tables (``atoms_pocket``, ``atoms_ligand``, ``atoms_active``, ...) are pandas frames
serialised with ``to_json(orient='split')``: ``{"columns": [...], "index": [...], "data": [[...]]}``;
the reader also accepts a ``{column: {row: value}}`` / ``{column: [values]}`` dict and a list of
records. Columns used: chain, residue, insertion_code, resname, name, element, x, y, z.

Graphs follow the official GET preprocessing (``specs/GET.md`` §11.2):

* LBA: segment 0 = pocket residues of ``atoms_pocket`` (one block per chain + residue number +
  insertion code, hydrogens dropped, waters dropped); segment 1 = one block per ligand atom
  (lower-case element symbol, position code ``'sm'``); label ``scores.neglog_aff`` (pK). The
  official code keeps ligand hydrogens; here they are dropped unless ``ligand_hydrogens=True``.
* LEP: for each conformation the last residue is the ligand (one block per atom, position code
  from the atom name); protein residues with a heavy atom within 6 Å of a ligand heavy atom are
  kept. The item is the pair ``(inactive, active)``; label 1 for 'A', 0 for 'I'.

Residues that are not (modified) amino acids or nucleotides, such as ions or cofactors in a
pocket, become one block per atom, as everywhere in geomol (the official code makes one block of
unknown type per such residue).
"""
from __future__ import annotations

import functools
import gzip
import json
import os
from pathlib import Path
from typing import Any, Sequence

import warnings

import numpy as np
from rdkit import Chem, RDLogger
from rdkit.Chem import AllChem, rdDetermineBonds
from scipy.spatial import cKDTree

from geomol.data.blocks import Block, BlockGraph
from geomol.data.store.cache import Recipe, shared_environment
from geomol.data.datasets.ligand_complex import load_fragment_vocab
from geomol.data.datasets.processed import ItemInfo, ProcessedDataset, default_cache_dir, replace_info
from geomol.data.io.ligand import ligand_blocks
from geomol.data.complexes.recipe import fragment_files
from geomol.data.vocab import VOCAB, element_block_symbol, format_element, is_element, position_code, residue_block_symbol
from geomol.errors import DatasetError, UnknownElementError

__all__ = ["AtomTable", "Atom3DReader", "open_atom3d", "atom_table", "lba_graph", "lep_graphs", "build_lba",
           "build_lep", "LBADataset", "LEPDataset", "LEP_CUTOFF", "ligand_molecule"]

LEP_CUTOFF = 6.0
"""Å: the official LEP interface distance (protein residues this close to the ligand are kept)."""

_WATERS = {"HOH", "WAT", "H2O", "DOD", "TIP3", "SOL"}
_REQUIRED = ("chain", "residue", "resname", "name", "element", "x", "y", "z")


class AtomTable:
    """Columns of an ATOM3D atom frame as Python lists / a float64 [N, 3] coordinate array (Å)."""

    def __init__(self, columns: dict[str, list], source: str):
        missing = [c for c in _REQUIRED if c not in columns]
        if missing:
            raise DatasetError(f"atom table lacks column(s) {missing}", source)
        n = len(columns["x"])
        if any(len(v) != n for v in columns.values()):
            raise DatasetError("atom table columns differ in length", source)
        try:
            self.coords = np.array([columns["x"], columns["y"], columns["z"]], dtype=np.float64).T.reshape(n, 3)
        except (TypeError, ValueError):
            raise DatasetError("atom table has non-numeric coordinates", source) from None
        self.chain = [str(c) for c in columns["chain"]]
        self.residue = [str(r) for r in columns["residue"]]
        self.icode = [str(i or "").strip() for i in columns.get("insertion_code", [""] * n)]
        self.resname = [str(r).strip() for r in columns["resname"]]
        self.name = [str(a).strip() for a in columns["name"]]
        self.source = source
        self.element = [self._element(e, i) for i, e in enumerate(columns["element"])]

    def _element(self, raw: Any, row: int) -> str:
        symbol = "H" if str(raw).strip().upper() == "D" else format_element(str(raw))
        if not is_element(symbol):
            raise UnknownElementError(f"atom {self.name[row]!r} has unknown element {raw!r}", self.source, row)
        return symbol

    def __len__(self) -> int:
        return len(self.name)

    def residue_rows(self) -> list[list[int]]:
        """Row lists of residues (chain, number, insertion code) in order of first appearance."""
        rows: dict[tuple[str, str, str], list[int]] = {}
        for i, key in enumerate(zip(self.chain, self.residue, self.icode)):
            rows.setdefault(key, []).append(i)
        return list(rows.values())


def _split_frame(frame: dict, source: str) -> dict[str, list]:
    columns, data = frame["columns"], frame["data"]
    if any(len(row) != len(columns) for row in data):
        raise DatasetError("split-orient atom table has rows of the wrong length", source)
    return {c: [row[j] for row in data] for j, c in enumerate(columns)}


def _row_order(keys) -> list:
    return sorted(keys, key=lambda k: (0, int(k)) if str(k).lstrip("-").isdigit() else (1, str(k)))


def atom_table(obj: Any, source: str) -> AtomTable:
    """An :class:`AtomTable` from any of the serialised frame forms (see the module docstring)."""
    if isinstance(obj, dict) and "columns" in obj and "data" in obj:
        columns = _split_frame(obj, source)
    elif isinstance(obj, dict) and obj:
        columns = {}
        for name, values in obj.items():
            if isinstance(values, dict):
                values = [values[k] for k in _row_order(values)]
            columns[name] = list(values)
    elif isinstance(obj, list) and all(isinstance(r, dict) for r in obj) and obj:
        columns = {name: [row.get(name) for row in obj] for name in obj[0]}
    else:
        raise DatasetError(f"atom table is not a frame (got {type(obj).__name__})", source)
    return AtomTable(columns, source)


# ------------------------------------------------------------------------------ LMDB reading
def _env_path(path: Path) -> tuple[str, bool]:
    if path.name == "data.mdb" and path.is_file():
        path = path.parent  # the data file of a directory environment
    if path.is_dir():
        if not (path / "data.mdb").exists():
            raise DatasetError("directory has no data.mdb (not an LMDB environment)", path)
        return str(path), True
    if path.is_file():
        return str(path), False
    raise DatasetError("LMDB path does not exist", path)


class Atom3DReader:
    """Random access to the records of an ATOM3D LMDB (lazily opened, once per process)."""

    def __init__(self, path: str | os.PathLike):
        self._location, self._subdir = _env_path(Path(path))
        self.path = Path(self._location)
        with self._txn() as txn:
            count = txn.get(b"num_examples")
            fmt = txn.get(b"serialization_format")
        if count is None:
            raise DatasetError("LMDB has no 'num_examples' key (not an ATOM3D dataset?)", self.path)
        self.num_examples = int(count)
        self.format = "json" if fmt is None else fmt.decode()
        if self.format not in ("json", "msgpack"):
            raise DatasetError(f"serialization format {self.format!r} is not supported (json, msgpack)", self.path)

    @property
    def data_file(self) -> Path:
        """The file whose content identifies the dataset (``data.mdb`` or the single file)."""
        return self.path / "data.mdb" if self._subdir else self.path

    def _txn(self):
        return shared_environment(self._location, subdir=self._subdir).begin(buffers=False)

    def __len__(self) -> int:
        return self.num_examples

    def __getitem__(self, index: int) -> dict[str, Any]:
        key = str(index)
        with self._txn() as txn:
            blob = txn.get(key.encode())
        if blob is None:
            raise DatasetError("record missing", self.path, key)
        try:
            raw = gzip.decompress(blob)
            item = json.loads(raw) if self.format == "json" else _msgpack_loads(raw, self.path)
        except (OSError, EOFError, ValueError) as exc:
            raise DatasetError(f"record is not gzip-compressed {self.format}: {exc}", self.path, key) from None
        if not isinstance(item, dict):
            raise DatasetError(f"record is a {type(item).__name__}, not a dict", self.path, key)
        item.setdefault("id", key)
        return item


def _msgpack_loads(raw: bytes, path: Path):
    try:
        import msgpack
    except ImportError:
        raise DatasetError("msgpack-serialised LMDB needs the 'msgpack' package", path) from None
    return msgpack.unpackb(raw)


@functools.lru_cache(maxsize=16)
def open_atom3d(path: str) -> Atom3DReader:
    """A reader per LMDB and process (the builders' entry point)."""
    return Atom3DReader(path)


def _field(item: dict, name: str, source: str, key: str) -> Any:
    if name not in item:
        raise DatasetError(f"record lacks {name!r}", source, key)
    return item[name]


def _neglog_aff(scores: Any, source: str, key: str) -> float:
    if isinstance(scores, dict) and "neglog_aff" in scores:
        value = scores["neglog_aff"]
    elif isinstance(scores, dict) and "index" in scores and "data" in scores and "neglog_aff" in scores["index"]:
        value = scores["data"][scores["index"].index("neglog_aff")]  # a pandas Series, split orient
    else:
        raise DatasetError("record has no scores.neglog_aff", source, key)
    try:
        return float(value)
    except (TypeError, ValueError):
        raise DatasetError(f"neglog_aff {value!r} is not a number", source, key) from None


# ------------------------------------------------------------------------------ blocks
def _residue_blocks(table: AtomTable, rows_list: Sequence[list[int]]) -> list[Block]:
    """Heavy-atom blocks of residues; waters dropped; non-residues become one block per atom."""
    blocks = []
    for rows in rows_list:
        resname = table.resname[rows[0]]
        heavy = [r for r in rows if table.element[r] != "H"]
        if not heavy or resname.upper() in _WATERS:
            continue
        label = f"{table.chain[rows[0]]}:{table.residue[rows[0]]}{table.icode[rows[0]]}:{resname}"
        symbol = residue_block_symbol(resname)
        if symbol is None:
            blocks += _atom_blocks(table, heavy, small_molecule=False, label=label)
            continue
        blocks.append(Block(symbol, tuple(table.element[r] for r in heavy),
                            tuple(position_code(table.name[r], table.element[r]) for r in heavy),
                            table.coords[heavy], tuple(table.name[r] for r in heavy), label))
    return blocks


def _atom_blocks(table: AtomTable, rows: Sequence[int], *, small_molecule: bool, label: str = "") -> list[Block]:
    """One block per atom: symbol = lower-case element, position ``'sm'`` or from the atom name."""
    return [Block(element_block_symbol(table.element[r]), (table.element[r],),
                  ("sm" if small_molecule else position_code(table.name[r], table.element[r]),),
                  table.coords[r:r + 1], (table.name[r],), label or f"ligand:{table.name[r]}") for r in rows]


def ligand_molecule(table: AtomTable, rows: Sequence[int], smiles: str | None, source: str) -> Chem.Mol:
    """RDKit molecule of ligand atoms: bonds from interatomic distances, bond orders from ``smiles``.

    ATOM3D stores ligands as bare atom tables. Connectivity is perceived from the coordinates
    (covalent radii); the record's SMILES then supplies bond orders and aromaticity. If the
    template does not match, the molecule keeps single bonds and a warning says so (fragments
    of such a molecule fall back to smaller, still exact, pieces).
    """
    mol = Chem.RWMol()
    conformer = Chem.Conformer(len(rows))
    for i, r in enumerate(rows):
        mol.AddAtom(Chem.Atom(format_element(table.element[r])))
        conformer.SetAtomPosition(i, table.coords[r].tolist())
    mol = mol.GetMol()
    mol.AddConformer(conformer, assignId=True)
    rdDetermineBonds.DetermineConnectivity(mol)
    if smiles:
        RDLogger.DisableLog("rdApp.*")  # "more than one matching pattern" notes are not errors
        try:
            template = Chem.MolFromSmiles(smiles)
            return AllChem.AssignBondOrdersFromTemplate(Chem.RemoveHs(template), mol)
        except Exception as exc:  # RDKit raises ValueError or its own errors when the graphs differ
            warnings.warn(f"{source}: ligand bond orders not assigned from SMILES ({exc}); single bonds kept",
                          RuntimeWarning, stacklevel=2)
        finally:
            RDLogger.EnableLog("rdApp.*")
    return mol


def lba_graph(item: dict, *, ligand_hydrogens: bool = False, fragments=None, source: str = "") -> BlockGraph:
    """BlockGraph of an ATOM3D LBA record (pocket residues + ligand atoms or fragments), y = neglog_aff.

    ``fragments`` (a :class:`~geomol.data.complexes.fragment.FragmentVocab`) makes fragment blocks of the
    ligand's heavy atoms, with bond orders taken from the record's SMILES.
    """
    key = str(item.get("id", ""))
    pocket = atom_table(_field(item, "atoms_pocket", source, key), f"{source} [{key}] atoms_pocket")
    ligand = atom_table(_field(item, "atoms_ligand", source, key), f"{source} [{key}] atoms_ligand")
    y = _neglog_aff(_field(item, "scores", source, key), source, key)
    if fragments is None:
        rows = [r for r in range(len(ligand)) if ligand_hydrogens or ligand.element[r] != "H"]
        ligand_side = _atom_blocks(ligand, rows, small_molecule=True)
    else:
        heavy = [r for r in range(len(ligand)) if ligand.element[r] != "H"]
        mol = ligand_molecule(ligand, heavy, item.get("smiles"), f"{source} [{key}]")
        ligand_side = ligand_blocks(mol, fragments=fragments, label="ligand")
    return BlockGraph.from_blocks([_residue_blocks(pocket, pocket.residue_rows()), ligand_side], y, name=key,
                                  vocab=fragments.block_vocab() if fragments is not None else VOCAB)


def _lep_conformation(table: AtomTable, *, cutoff: float, ligand_hydrogens: bool, name: str) -> BlockGraph:
    residues = table.residue_rows()
    ligand_rows = residues[-1]
    ligand_heavy = [r for r in ligand_rows if table.element[r] != "H"]
    if not ligand_heavy:
        raise DatasetError("ligand (last residue) has no heavy atom", table.source)
    tree = cKDTree(table.coords[ligand_heavy])
    near = []
    for rows in residues[:-1]:
        heavy = [r for r in rows if table.element[r] != "H"]
        if heavy and np.isfinite(tree.query(table.coords[heavy], k=1, distance_upper_bound=cutoff)[0]).any():
            near.append(rows)
    ligand_kept = ligand_rows if ligand_hydrogens else ligand_heavy
    return BlockGraph.from_blocks([_residue_blocks(table, near),
                                   _atom_blocks(table, ligand_kept, small_molecule=False)], name=name)


def lep_graphs(item: dict, *, cutoff: float = LEP_CUTOFF, ligand_hydrogens: bool = False, source: str = ""
               ) -> dict[str, BlockGraph]:
    """``{'inactive': graph, 'active': graph}`` of an ATOM3D LEP record; y = 1 for 'A', 0 for 'I'."""
    key = str(item.get("id", ""))
    label = str(_field(item, "label", source, key)).strip().upper()
    if label not in ("A", "I"):
        raise DatasetError(f"LEP label must be 'A' or 'I', got {label!r}", source, key)
    graphs = {}
    for state in ("inactive", "active"):
        table = atom_table(_field(item, f"atoms_{state}", source, key), f"{source} [{key}] atoms_{state}")
        graphs[state] = _lep_conformation(table, cutoff=cutoff, ligand_hydrogens=ligand_hydrogens,
                                          name=f"{key}/{state}")
        graphs[state].y = graphs[state].y.new_full((1,), 1.0 if label == "A" else 0.0)
    return graphs


# ------------------------------------------------------------------------------ builders
def build_lba(files: dict, *, index: int, ligand_hydrogens: bool) -> tuple[BlockGraph, dict]:
    reader = open_atom3d(files["lmdb"])
    item = reader[index]
    fragments = load_fragment_vocab(files["fragments"]) if "fragments" in files else None
    graph = lba_graph(item, ligand_hydrogens=ligand_hydrogens, fragments=fragments, source=str(reader.path))
    return graph, {"id": str(item["id"]), "y": float(graph.y), "smiles": str(item.get("smiles") or "")}


def build_lep(files: dict, *, index: int, cutoff: float, ligand_hydrogens: bool) -> tuple[dict, dict]:
    reader = open_atom3d(files["lmdb"])
    item = reader[index]
    graphs = lep_graphs(item, cutoff=cutoff, ligand_hydrogens=ligand_hydrogens, source=str(reader.path))
    return graphs, {"id": str(item["id"]), "y": float(graphs["active"].y)}


def _info_from_meta(info: ItemInfo, meta: dict) -> ItemInfo:
    """The record's own id (PDB code, LEP pair id) and label, known once the record was read."""
    ident = meta.get("id", info.id)
    return replace_info(info, id=ident, ligand=ident, group=ident, y=meta["y"],
                        extra={"smiles": meta["smiles"]} if meta.get("smiles") else {})


class _Atom3DDataset(ProcessedDataset):
    source = ""

    def __init__(self, lmdb_path, builder, params: dict, extra_files: dict | None = None, **kwargs):
        reader = Atom3DReader(lmdb_path)
        data_file = str(reader.data_file)  # its content enters the key; the builder opens it too
        files = {"lmdb": data_file, **(extra_files or {})}
        items = [(Recipe(f"{self.source}:{index}", builder, files, {"index": index, **params},
                         group=data_file), ItemInfo(id=str(index), source=self.source))
                 for index in range(len(reader))]
        kwargs.setdefault("name", f"{self.source}-{Path(lmdb_path).name}")
        super().__init__(items, info_from_meta=_info_from_meta, **kwargs)


class LBADataset(_Atom3DDataset):
    """ATOM3D LBA split (e.g. ``split-by-sequence-identity-30/data/train``) as BlockGraphs (y = pK).

    Args:
        lmdb_path: the LMDB directory (with ``data.mdb``) or file.
        ligand_hydrogens: keep ligand hydrogens (the official GET code does).
        fragments: a FragmentVocab (or its saved file) for fragment ligand blocks; None = atoms.
        **kwargs: :class:`ProcessedDataset` options (``cache_dir``, ``num_workers``, ...).
    """

    source = "lba"

    def __init__(self, lmdb_path: str | os.PathLike, *, ligand_hydrogens: bool = False, fragments=None, **kwargs):
        cache = Path(kwargs["cache_dir"]) if kwargs.get("cache_dir") is not None else default_cache_dir()
        super().__init__(lmdb_path, build_lba, {"ligand_hydrogens": ligand_hydrogens},
                         extra_files=fragment_files(fragments, cache), **kwargs)


class LEPDataset(_Atom3DDataset):
    """ATOM3D LEP split as pairs ``(inactive_graph, active_graph)`` (y = 1 active, 0 inactive).

    Args:
        lmdb_path: the LMDB directory (with ``data.mdb``) or file.
        cutoff: Å; protein residues with a heavy atom this close to the ligand are kept (official: 6).
        ligand_hydrogens: keep ligand hydrogens.
    """

    source = "lep"

    def __init__(self, lmdb_path: str | os.PathLike, *, cutoff: float = LEP_CUTOFF, ligand_hydrogens: bool = False,
                 **kwargs):
        super().__init__(lmdb_path, build_lep, {"cutoff": cutoff, "ligand_hydrogens": ligand_hydrogens}, **kwargs)
