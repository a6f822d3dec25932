"""Which atom of a user's file is which atom of a model's molecule: matching by the molecular graph.

A small-molecule trajectory model was trained on one molecule's heavy atoms in one order (MD17-style models), or
reads any molecule (``egno-molecules``). A user's file may list the same atoms in any order, with or without
hydrogens. :class:`MoleculeTemplate` holds the model's heavy-atom graph (atomic numbers and bonds) and, where the
training data gave them, the mean bond lengths; :meth:`MoleculeTemplate.match` finds the graph isomorphism from the
model's atoms to the file's heavy atoms (elements equal, bonds equal, and, where both know them, the hydrogens on
each heavy atom equal). Where the molecule has symmetries (the two oxygens of a carboxylic acid in a file without
hydrogens, a benzene ring's six turns), several isomorphisms exist: the one
whose bond lengths in the file's frame best fit the template's means is chosen, so that a C=O is matched to the
model's C=O and not to its C–O. A file of another molecule is refused with a :class:`~geomol.errors.MoleculeMismatchError`
that says what differs (formula, number of bonds, which atoms are bonded differently).
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from geomol.data.chemistry.molecule_graph import heavy_atom_graph
from geomol.data.vocab import ELEMENTS
from geomol.errors import ConfigError, MoleculeMismatchError

__all__ = ["MoleculeTemplate", "heavy_formula", "MAX_MATCHES"]

MAX_MATCHES = 5000
"""Isomorphisms examined at most when choosing among a molecule's symmetric matches."""


def _symbol(z: int) -> str:
    return ELEMENTS[int(z) - 1] if 1 <= int(z) <= len(ELEMENTS) else f"Z{int(z)}"


def heavy_formula(atomic_numbers: Sequence[int]) -> str:
    """Hill-order formula of the heavy atoms ("C9O4"): carbon first, then the other elements alphabetically."""
    counts = Counter(_symbol(z).capitalize() for z in atomic_numbers if int(z) > 1)
    order = (["C"] if "C" in counts else []) + sorted(k for k in counts if k != "C")
    return "".join(f"{k}{counts[k] if counts[k] > 1 else ''}" for k in order)


def _graph(atomic_numbers: Sequence[int], bonds: np.ndarray, hydrogens=None):
    import networkx as nx

    graph = nx.Graph()
    graph.add_nodes_from((i, {"z": int(z), "h": None if hydrogens is None else int(hydrogens[i])})
                         for i, z in enumerate(atomic_numbers))
    graph.add_edges_from((int(i), int(j)) for i, j in bonds)
    return graph


def _bond_signature(atomic_numbers, bonds) -> Counter:
    """How many bonds of each element pair ("C–O": 4, ...)."""
    return Counter("–".join(sorted((_symbol(atomic_numbers[i]), _symbol(atomic_numbers[j])))) for i, j in bonds)


@dataclass(frozen=True)
class MoleculeTemplate:
    """The heavy-atom graph of a model's molecule.

    Attributes:
        atomic_numbers: [n] atomic numbers (no hydrogen), in the model's atom order.
        bonds: [(i, j)] heavy-atom bonds, i < j.
        bond_lengths: [B] mean length (Å) of each bond in the training data, or () when unknown.
        name: the molecule's name, for messages.
        hydrogens: [n] hydrogens bonded to each heavy atom, or () when unknown.
    """

    atomic_numbers: tuple[int, ...]
    bonds: tuple[tuple[int, int], ...]
    bond_lengths: tuple[float, ...] = ()
    name: str = ""
    hydrogens: tuple[int, ...] = ()

    def __post_init__(self):
        if any(int(z) <= 1 for z in self.atomic_numbers):
            raise ConfigError("a molecule template holds heavy atoms only (atomic numbers > 1)")
        if self.bond_lengths and len(self.bond_lengths) != len(self.bonds):
            raise ConfigError(f"{len(self.bond_lengths)} bond lengths for {len(self.bonds)} bonds")

    @property
    def formula(self) -> str:
        return heavy_formula(self.atomic_numbers)

    def describe(self) -> str:
        return f"{self.name + ' ' if self.name else ''}({self.formula}, {len(self.bonds)} heavy-atom bonds)"

    def to_dict(self) -> dict[str, Any]:
        return {"atomic_numbers": list(self.atomic_numbers), "bonds": [list(b) for b in self.bonds],
                "bond_lengths": list(self.bond_lengths), "name": self.name, "hydrogens": list(self.hydrogens)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "MoleculeTemplate":
        return cls(tuple(int(z) for z in data["atomic_numbers"]), tuple((int(i), int(j)) for i, j in data["bonds"]),
                   tuple(float(d) for d in data.get("bond_lengths", ())), str(data.get("name", "")),
                   tuple(int(h) for h in data.get("hydrogens", ())))

    def match(self, atomic_numbers: Sequence[int], bonds, positions=None, source=None) -> np.ndarray:
        """[n] indices into the given atoms: entry k is the atom that plays the model's atom k.

        Args:
            atomic_numbers: [m] of the file's atoms (hydrogens are never matched themselves; where the file has
                them and the template knows its hydrogens, each heavy atom must carry as many as its match).
            bonds: [B', 2] the file's bonds among those atoms (from its topology, or perceived).
            positions: [m, 3] Å, one frame: chooses among symmetric matches by bond lengths (else the first).
            source: the file, for messages.

        Raises:
            MoleculeMismatchError: the heavy atoms or their bonds are not the model's molecule.
        """
        from networkx.algorithms.isomorphism import GraphMatcher

        z = np.asarray(atomic_numbers, dtype=np.int64)
        heavy, heavy_bonds, hydrogens = heavy_atom_graph(z, bonds)
        self._check_same_molecule(z[heavy], heavy_bonds, source)
        with_hydrogens = bool(self.hydrogens) and bool((z == 1).any())
        theirs = _graph(z[heavy], heavy_bonds, hydrogens if with_hydrogens else None)
        ours = _graph(self.atomic_numbers, np.asarray(self.bonds).reshape(-1, 2),
                      self.hydrogens if with_hydrogens else None)
        matcher = GraphMatcher(ours, theirs, node_match=lambda a, b: a["z"] == b["z"] and a["h"] == b["h"])
        best, best_cost = None, np.inf
        lengths = None
        if positions is not None and self.bond_lengths:
            x = np.asarray(positions, dtype=np.float64)[heavy]
            ours_bonds = np.asarray(self.bonds, dtype=np.int64).reshape(-1, 2)
            reference = np.asarray(self.bond_lengths)
        for count, mapping in enumerate(matcher.isomorphisms_iter()):
            order = np.array([mapping[k] for k in range(len(self.atomic_numbers))], dtype=np.int64)
            if positions is None or not self.bond_lengths:
                best = order
                break
            lengths = np.linalg.norm(x[order[ours_bonds[:, 0]]] - x[order[ours_bonds[:, 1]]], axis=-1)
            cost = float(((lengths - reference) ** 2).sum())
            if cost < best_cost:
                best, best_cost = order, cost
            if count + 1 >= MAX_MATCHES:
                break
        if best is None:
            raise MoleculeMismatchError(
                f"the heavy atoms have the formula and bond count of {self.describe()} but are bonded "
                "differently" + (" or carry their hydrogens on other atoms" if with_hydrogens else "") +
                ": another isomer or tautomer, or bonds perceived wrongly from a distorted frame", source=source)
        return heavy[best]

    def _check_same_molecule(self, z: np.ndarray, bonds: np.ndarray, source) -> None:
        formula = heavy_formula(z)
        if formula != self.formula:
            raise MoleculeMismatchError(f"the file's heavy atoms are {formula or 'none'}, the model was trained on "
                                        f"{self.describe()}", source=source)
        ours = _bond_signature(self.atomic_numbers, self.bonds)
        theirs = _bond_signature(z, bonds.tolist())
        if ours != theirs:
            differ = ", ".join(f"{k}: {theirs.get(k, 0)} in the file, {ours.get(k, 0)} in the model"
                               for k in sorted(set(ours) | set(theirs)) if ours.get(k, 0) != theirs.get(k, 0))
            raise MoleculeMismatchError(f"same heavy atoms ({formula}) as {self.describe()} but other bonds ({differ})",
                                        source=source)
