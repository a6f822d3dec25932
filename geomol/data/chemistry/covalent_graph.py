"""The covalent bonds of an atom selection, and the angles and excluded pairs that follow from them.

What the chemistry metrics of a trajectory (:mod:`geomol.data.chemistry.trajectory`) and the
bond-restoring projection of a rollout measure against. Bonds come from one of two places, and
:attr:`CovalentGraph.source` says which:

* ``"topology"``: the topology's bonds between two selected atoms (PSF, TPR, PRMTOP, a PDB with
  CONECT records, ...); bonds to atoms outside the selection are left out;
* ``"perceived"``: where the topology has no bonds, or none inside the selection, bonds are
  perceived from distances in one frame (the first frame of the trajectory, or the rollout's start
  frame): atoms i, j are bonded when ‖x_i − x_j‖ < r_i + r_j + :data:`BOND_TOLERANCE`, with the covalent
  radii r of :data:`COVALENT_RADII` by element;
* ``"topology+perceived"``: the topology's bonds, plus perceived bonds of the selected atoms that have
  no topology bond at all (a PDB whose CONECT records cover only the ligand).

Angles are the triplets (i, j, k) of two bonds i–j and j–k sharing the vertex j. The excluded pairs
are the 1-2 (bonded) and 1-3 (ends of an angle) pairs, which a clash count must skip.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from geomol.data.io.trajectory import atom_elements
from geomol.data.vocab import ELEMENTS
from geomol.errors import ConfigError
from geomol.nn.neighbors import radius_search

__all__ = ["COVALENT_RADII", "BOND_TOLERANCE", "CovalentGraph", "angle_triplets", "perceive_bonds", "selection_bonds"]

COVALENT_RADII = {"H": 0.31, "C": 0.76, "N": 0.71, "O": 0.66, "S": 1.05, "P": 1.07, "F": 0.57, "CL": 1.02,
                  "BR": 1.20, "I": 1.39, "SE": 1.20, "B": 0.84, "SI": 1.11}
"""Å, by element symbol (upper case); other elements take :data:`OTHER_RADIUS`."""
OTHER_RADIUS = 1.2  # Å: metals and anything rarer
BOND_TOLERANCE = 0.4  # Å above the sum of the covalent radii


def _symbols(elements: Sequence[str | int]) -> list[str]:
    """Upper-case element symbols from symbols or atomic numbers (MD17's ``z``)."""
    return [ELEMENTS[int(e) - 1].upper() if isinstance(e, (int, np.integer)) else str(e).strip().upper()
            for e in elements]


def perceive_bonds(elements: Sequence[str], positions) -> np.ndarray:
    """[B, 2] int64 bonded pairs (i < j, sorted), perceived from distances in one frame.

    Args:
        elements: [N] element symbols ("C", "N", "H", "Cl", ...; case does not matter) or atomic numbers.
        positions: [N, 3] coordinates (Å) of that frame.
    """
    xyz = torch.as_tensor(np.asarray(positions, dtype=np.float64))
    if xyz.ndim != 2 or xyz.shape[1] != 3 or len(elements) != xyz.shape[0]:
        raise ConfigError(f"need [N, 3] positions and N elements, got {tuple(xyz.shape)} and {len(elements)}")
    if len(elements) < 2:
        return np.zeros((0, 2), dtype=np.int64)
    radii = torch.tensor([COVALENT_RADII.get(e, OTHER_RADIUS) for e in _symbols(elements)], dtype=torch.float64)
    i, j = radius_search(xyz, xyz, float(2 * radii.max() + BOND_TOLERANCE))
    keep = (i < j) & ((xyz[i] - xyz[j]).norm(dim=-1) < radii[i] + radii[j] + BOND_TOLERANCE)
    return torch.stack([i[keep], j[keep]], 1).numpy().astype(np.int64)


def selection_bonds(atoms) -> np.ndarray | None:
    """[B, 2] topology bonds between atoms of an MDAnalysis AtomGroup, as row indices into the group
    (i < j, sorted); None when the topology has no bonds at all."""
    try:
        pairs = np.asarray(atoms.universe.bonds.indices, dtype=np.int64).reshape(-1, 2)
    except (AttributeError, ValueError):  # MDAnalysis' NoDataError derives from both: no bond records
        return None
    row = np.full(atoms.universe.atoms.n_atoms, -1, dtype=np.int64)
    row[atoms.indices] = np.arange(len(atoms))
    rows = row[pairs]
    rows = np.sort(rows[(rows >= 0).all(1)], axis=1)
    return np.unique(rows, axis=0) if len(rows) else np.zeros((0, 2), dtype=np.int64)


def angle_triplets(bonds: np.ndarray) -> np.ndarray:
    """[A, 3] (i, j, k), i < k, of every two bonds i–j, j–k sharing the vertex j."""
    directed = np.concatenate([bonds, bonds[:, ::-1]])  # (vertex, neighbour)
    directed = directed[np.lexsort((directed[:, 1], directed[:, 0]))]
    vertex, neighbour = directed[:, 0], directed[:, 1]
    found = []
    for gap in range(1, int(np.bincount(vertex).max(initial=0))):  # partners gap places later in the vertex's run
        same = vertex[gap:] == vertex[:-gap]
        ends = np.stack([neighbour[:-gap][same], neighbour[gap:][same]], 1)
        found.append(np.column_stack([ends.min(1), vertex[:-gap][same], ends.max(1)]))
    return np.concatenate(found) if found else np.zeros((0, 3), dtype=np.int64)


@dataclass(frozen=True)
class CovalentGraph:
    """Bonds, angles and excluded pairs of N atoms (see the module docstring).

    Attributes:
        bonds: [B, 2] int64 (i < j). angles: [A, 3] int64 (i, vertex j, k).
        heavy: [N] bool, the atoms that are not hydrogen (the ones clashes are counted between).
        excluded: [E] int64 sorted keys i·N + j (i < j) of the 1-2 and 1-3 pairs.
        source: "topology", "perceived" or "topology+perceived" (the bonds' origin).
    """

    bonds: np.ndarray
    angles: np.ndarray
    heavy: np.ndarray
    excluded: np.ndarray
    source: str

    @property
    def num_atoms(self) -> int:
        return len(self.heavy)

    @classmethod
    def from_bonds(cls, bonds, elements: Sequence[str], source: str = "topology") -> "CovalentGraph":
        """From [B, 2] bonded pairs of atoms with ``elements`` [N] (symbols or atomic numbers)."""
        n = len(elements)
        bonds = np.sort(np.asarray(bonds, dtype=np.int64).reshape(-1, 2), axis=1)
        if len(bonds) and (bonds.min() < 0 or bonds.max() >= n or (bonds[:, 0] == bonds[:, 1]).any()):
            raise ConfigError(f"bonds must pair two different atoms among {n}")
        bonds = np.unique(bonds, axis=0)
        angles = angle_triplets(bonds)
        pairs = np.concatenate([bonds, angles[:, [0, 2]]])
        heavy = np.array([e != "H" for e in _symbols(elements)], dtype=bool)
        return cls(bonds, angles, heavy, np.unique(pairs[:, 0] * n + pairs[:, 1]), source)

    @classmethod
    def perceived(cls, elements: Sequence[str], positions) -> "CovalentGraph":
        """Bonds perceived from ``positions`` [N, 3] (Å) of one frame (:func:`perceive_bonds`)."""
        return cls.from_bonds(perceive_bonds(elements, positions), elements, source="perceived")

    @classmethod
    def of_selection(cls, atoms, positions=None) -> "CovalentGraph":
        """The topology's bonds inside an MDAnalysis AtomGroup, else bonds perceived on ``positions`` [N, 3]
        (Å; default: the group's positions at the universe's current frame)."""
        elements = atom_elements(atoms)
        positions = atoms.positions if positions is None else positions
        bonds = selection_bonds(atoms)
        if bonds is None or not len(bonds):
            return cls.perceived(elements, positions)
        unbonded = np.ones(len(elements), dtype=bool)
        unbonded[bonds.ravel()] = False
        if not unbonded.any():
            return cls.from_bonds(bonds, elements, source="topology")
        # e.g. a PDB whose CONECT records cover the ligand only: perceive the bonds of the atoms left out
        perceived = perceive_bonds(elements, positions)
        extra = perceived[unbonded[perceived].any(1)]
        if not len(extra):
            return cls.from_bonds(bonds, elements, source="topology")
        return cls.from_bonds(np.concatenate([bonds, extra]), elements, source="topology+perceived")

    def describe(self) -> str:
        """One line: how many bonds and angles, and where the bonds come from."""
        origin = {"topology": "the topology", "perceived": "distances in the first frame (perceived)",
                  "topology+perceived": "the topology, and perceived from distances for atoms it leaves unbonded"
                  }.get(self.source, self.source)
        return f"{len(self.bonds)} bonds and {len(self.angles)} angles from {origin}"
