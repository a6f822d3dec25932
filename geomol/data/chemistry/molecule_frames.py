"""A small molecule's frames from any file people have: XYZ, PDB, MOL2, SDF, DCD/XTC with a topology, MD17 npz.

:func:`read_molecule_frames` returns :class:`MoleculeFrames`: atomic numbers, atom names, positions [F, m, 3] (Å)
and bonds, all atoms as the file lists them (hydrogens included where it has them). Bonds come from the file
(an SDF/MOL2 bond block, PDB CONECT records or a topology's bonds, a ``geomol simulate`` npz's ``bonds``), else
they are perceived from the first frame's distances (:func:`~geomol.data.chemistry.covalent_graph.perceive_bonds`);
``bonds_source`` says which. Readers: RDKit for SDF/MOL (one frame per record, all records the same atoms),
NumPy for the MD17 npz (``R``, ``z``), MDAnalysis for everything else (any topology with an optional trajectory).
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from geomol.data.chemistry.covalent_graph import perceive_bonds, selection_bonds
from geomol.data.vocab import ELEMENTS
from geomol.errors import StructureReadError, TrajectoryError, UnknownElementError

__all__ = ["MoleculeFrames", "read_molecule_frames", "atomic_number"]

_RDKIT_SUFFIXES = {".sdf", ".sd", ".mol"}
_SYMBOLS = {symbol.upper(): number for number, symbol in enumerate(ELEMENTS, start=1)}


def atomic_number(symbol: str, source=None) -> int:
    """Atomic number of an element symbol (any case)."""
    try:
        return _SYMBOLS[str(symbol).strip().upper()]
    except KeyError:
        raise UnknownElementError(f"{symbol!r} is not a chemical element", source=source) from None


@dataclass
class MoleculeFrames:
    """All atoms of a molecule over F frames.

    Attributes:
        atomic_numbers: [m]. names: [m] atom names. positions: [F, m, 3] Å. bonds: [B, 2] (i < j).
        bonds_source: "file" or "perceived". frame_interval_ps: time between frames where the file records it.
        source: the file(s), for messages.
    """

    atomic_numbers: np.ndarray
    names: list[str]
    positions: np.ndarray
    bonds: np.ndarray
    bonds_source: str
    frame_interval_ps: float | None
    source: str

    @property
    def heavy(self) -> np.ndarray:
        """[n] indices of the atoms that are not hydrogen, in the file's order."""
        return np.flatnonzero(self.atomic_numbers > 1)

    def __len__(self) -> int:
        return len(self.positions)


def _bonds_or_perceived(bonds, numbers: np.ndarray, first: np.ndarray) -> tuple[np.ndarray, str]:
    if bonds is not None and len(bonds):
        return np.unique(np.sort(np.asarray(bonds, dtype=np.int64).reshape(-1, 2), axis=1), axis=0), "file"
    return perceive_bonds([int(z) for z in numbers], first), "perceived"


def _from_npz(path: Path) -> MoleculeFrames:
    try:
        with np.load(path, allow_pickle=False) as data:
            R, z = np.asarray(data["R"], dtype=np.float64), np.asarray(data["z"], dtype=np.int64)
            bonds = np.asarray(data["bonds"]) if "bonds" in data.files else None
            settings = json.loads(str(data["settings"])) if "settings" in data.files else {}
    except (OSError, ValueError, KeyError) as exc:
        raise StructureReadError(f"not an MD17-layout npz with 'R' [frames, atoms, 3] and 'z' [atoms] ({exc})",
                                 source=path) from None
    if R.ndim != 3 or R.shape[1:] != (len(z), 3) or not len(R):
        raise StructureReadError(f"'R' has shape {R.shape}, expected [frames, {len(z)}, 3]", source=path)
    bonds, origin = _bonds_or_perceived(bonds, z, R[0])
    interval = (settings["timestep"] * settings["save_every"] * 1e-3
                if {"timestep", "save_every"} <= set(settings) else None)
    names = [f"{ELEMENTS[int(a) - 1]}{i + 1}" for i, a in enumerate(z)]
    return MoleculeFrames(z, names, R, bonds, origin, interval, str(path))


def _from_rdkit(path: Path) -> MoleculeFrames:
    from geomol.data.io.molecule import read_ligands

    mols = read_ligands(path, sanitize=False)
    first = mols[0]
    numbers = np.array([a.GetAtomicNum() for a in first.GetAtoms()], dtype=np.int64)
    frames = []
    for index, mol in enumerate(mols):
        if [a.GetAtomicNum() for a in mol.GetAtoms()] != numbers.tolist():
            raise StructureReadError("records hold different atoms: a trajectory file needs the same atoms in every "
                                     "record", source=path, record=index)
        frames.append(mol.GetConformer().GetPositions())
    bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in first.GetBonds()]
    bonds, origin = _bonds_or_perceived(bonds, numbers, frames[0])
    names = [a.GetPropsAsDict().get("_TriposAtomName", f"{a.GetSymbol()}{a.GetIdx() + 1}") for a in first.GetAtoms()]
    return MoleculeFrames(numbers, names, np.asarray(frames, dtype=np.float64), bonds, origin, None, str(path))


def _from_mdanalysis(topology, trajectory) -> MoleculeFrames:
    from geomol.data.io.trajectory import atom_elements, open_selection

    universe, atoms = open_selection(topology, trajectory, "all")
    source = str(topology) if trajectory is None else f"{topology} + {trajectory}"
    numbers = np.array([atomic_number(e, source) for e in atom_elements(atoms)], dtype=np.int64)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            frames = np.stack([atoms.positions.astype(np.float64) for _ in universe.trajectory])
            dt = float(universe.trajectory.dt) if len(universe.trajectory) > 1 else None
        if any("no dt information" in str(w.message) for w in caught):
            dt = None  # MDAnalysis assumes 1 ps for formats without times (XYZ, multi-model PDB)
    except Exception as exc:  # MDAnalysis raises many types for truncated or mismatched trajectories
        raise TrajectoryError(f"cannot read the frames: {exc}", source=source) from None
    bonds, origin = _bonds_or_perceived(selection_bonds(atoms), numbers, frames[0])
    return MoleculeFrames(numbers, [str(n) for n in atoms.names], frames, bonds, origin, dt, source)


def read_molecule_frames(topology: str | os.PathLike, trajectory: str | os.PathLike | None = None) -> MoleculeFrames:
    """Every atom and frame of a small molecule in ``topology`` (with ``trajectory`` where the frames are apart).

    Raises:
        StructureReadError: a missing, unreadable or inconsistent file. TrajectoryError: MDAnalysis cannot open or
            read the files. UnknownElementError: an atom whose element is not an element.
    """
    path = Path(topology)
    if not path.is_file():
        raise StructureReadError("file not found", source=path)
    if trajectory is not None and not Path(trajectory).is_file():
        raise TrajectoryError("file not found", source=trajectory)
    suffixes = [s.lower() for s in path.suffixes]
    if trajectory is None and suffixes[-1:] == [".npz"]:
        return _from_npz(path)
    if trajectory is None and set(suffixes[-2:]) & _RDKIT_SUFFIXES:
        return _from_rdkit(path)
    return _from_mdanalysis(topology, trajectory)
