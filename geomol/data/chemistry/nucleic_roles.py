"""What the atoms of a nucleic-acid receptor offer a ligand: base edges, 2'-OH, phosphates, stacking faces.

A graph of sets keeps each atom's element and a coarse position code (``'P'`` for phosphate oxygens, ``"'"`` for
sugar atoms, ``''`` for every base atom), not its name, so N7 and N1 of a guanine look alike. The base atoms are
recovered from the block's own geometry: its heavy atoms are bonded by distance (covalent radii + 0.4 Å) and the
base template of the block's nucleotide (purine or pyrimidine ring, exocyclic N and O, and the C1' it hangs on)
is matched onto that bond graph, elements fixed (VF2, :mod:`networkx`). A modified base keeps its parent's
template (extra atoms stay unnamed); a block whose base is incomplete gets element-only roles, as before.

Per receptor atom (:func:`nucleic_atom_roles`):

* :data:`~geomol.data.chemistry.atom_roles.RECEPTOR_ROLES` as a protein atom has them: base donors (A N6, G N1
  N2, C N4, U/T N3, the 2'-OH), acceptors (every O; A N1 N3 N7, G N3 N7, C N3), phosphate oxygens as anions,
  base ring atoms as aromatic;
* :data:`NUCLEIC_ATOM_ROLES`: ``phosphate`` (non-bridging phosphate O), ``ribose_2oh`` (O2'), the polar atoms
  of the Leontis–Westhof edges (``watson_crick``: A N1 N6, G N1 N2 O6, C N3 N4 O2, U/T N3 O4 O2;
  ``hoogsteen``: A N6 N7, G O6 N7, C N4, U/T O4; ``sugar_edge``: A N3 O2', G N2 N3 O2', C/U/T O2 O2') and
  ``base_ring`` (the atoms of the base rings, whose faces stack);
* the unit normal of its base plane (rows of base-ring atoms; zeros elsewhere), for stacking geometry.
"""
from __future__ import annotations

from functools import lru_cache

import networkx as nx
import numpy as np
from networkx.algorithms.isomorphism import GraphMatcher

from geomol.data.chemistry.atom_roles import RECEPTOR_ROLES
from geomol.data.vocab import NUCLEOTIDES, VOCAB, position_index

__all__ = ["NUCLEIC_ATOM_ROLES", "METALS", "is_nucleotide_block", "nucleic_atom_roles", "base_atom_names"]

NUCLEIC_ATOM_ROLES = ("phosphate", "ribose_2oh", "watson_crick", "hoogsteen", "sugar_edge", "base_ring")
METALS = frozenset({3, 11, 12, 19, 20, 25, 26, 27, 28, 29, 30, 37, 38, 55, 56})
"""Atomic numbers of the ions crystal structures of nucleic acids carry (Li, Na, Mg, K, Ca, Mn, Fe, Co, Ni, Cu,
Zn, Rb, Sr, Cs, Ba)."""
_NUCLEOTIDE_INDEX = {VOCAB.index(symbol): symbol[1] for symbol in NUCLEOTIDES}  # block type -> base letter
_PURINE = (("N9", "C8"), ("C8", "N7"), ("N7", "C5"), ("C5", "C6"), ("C6", "N1"), ("N1", "C2"), ("C2", "N3"),
           ("N3", "C4"), ("C4", "C5"), ("C4", "N9"), ("C1'", "N9"))
_PYRIMIDINE = (("N1", "C2"), ("C2", "N3"), ("N3", "C4"), ("C4", "C5"), ("C5", "C6"), ("C6", "N1"), ("C1'", "N1"),
               ("C2", "O2"))
_BASE_BONDS = {"A": _PURINE + (("C6", "N6"),), "G": _PURINE + (("C6", "O6"), ("C2", "N2")),
               "C": _PYRIMIDINE + (("C4", "N4"),), "U": _PYRIMIDINE + (("C4", "O4"),),
               "T": _PYRIMIDINE + (("C4", "O4"),)}  # T's methyl left out: 5-bromo/iodo-U map to T as well
_DONORS = {"A": {"N6"}, "G": {"N1", "N2"}, "C": {"N4"}, "U": {"N3"}, "T": {"N3"}}
_ACCEPTOR_N = {"A": {"N1", "N3", "N7"}, "G": {"N3", "N7"}, "C": {"N3"}, "U": set(), "T": set()}
_EDGES = {
    "watson_crick": {"A": {"N1", "N6"}, "G": {"N1", "N2", "O6"}, "C": {"N3", "N4", "O2"}, "U": {"N3", "O4", "O2"},
                     "T": {"N3", "O4", "O2"}},
    "hoogsteen": {"A": {"N6", "N7"}, "G": {"O6", "N7"}, "C": {"N4"}, "U": {"O4"}, "T": {"O4"}},
    "sugar_edge": {"A": {"N3"}, "G": {"N2", "N3"}, "C": {"O2"}, "U": {"O2"}, "T": {"O2"}},
}
_RING = {"N1", "C2", "N3", "C4", "C5", "C6", "N7", "C8", "N9"}
_ROLE = {name: k for k, name in enumerate(RECEPTOR_ROLES)}
_NUCLEIC = {name: k for k, name in enumerate(NUCLEIC_ATOM_ROLES)}
_POS_PHOSPHATE, _POS_SUGAR = position_index("P"), position_index("'")
_COVALENT = {6: 0.76, 7: 0.71, 8: 0.66, 15: 1.07, 16: 1.05}  # Å; other elements 1.2
_BOND_TOLERANCE = 0.4  # Å


def is_nucleotide_block(block_type: np.ndarray) -> np.ndarray:
    """``(n,)`` bool: which block types (vocabulary indices) are DNA or RNA nucleotides."""
    return np.isin(np.asarray(block_type), list(_NUCLEOTIDE_INDEX))


@lru_cache(maxsize=None)
def _template(base: str) -> nx.Graph:
    graph = nx.Graph()
    for a, b in _BASE_BONDS[base]:
        for name in (a, b):
            graph.add_node(name, z={"C": 6, "N": 7, "O": 8}[name[0]])
        graph.add_edge(a, b)
    return graph


def _bond_graph(z: np.ndarray, xyz: np.ndarray) -> nx.Graph:
    """The heavy atoms of one block bonded by distance (node ``i`` is row ``i``; attribute ``z``)."""
    radii = np.array([_COVALENT.get(int(e), 1.2) for e in z])
    distance = np.linalg.norm(xyz[:, None, :] - xyz[None, :, :], axis=-1)
    bonded = distance < radii[:, None] + radii[None, :] + _BOND_TOLERANCE
    graph = nx.Graph()
    graph.add_nodes_from((i, {"z": int(e)}) for i, e in enumerate(z))
    graph.add_edges_from((int(i), int(j)) for i, j in zip(*np.nonzero(np.triu(bonded, 1))))
    return graph


def base_atom_names(base: str, z: np.ndarray, xyz: np.ndarray) -> dict[int, str]:
    """``{row: atom name}`` of the base atoms (and C1') of one nucleotide block, matched on its bond graph; empty
    when the base template does not fit (missing atoms, a base of another kind).

    Args:
        base: ``'A'``, ``'G'``, ``'C'``, ``'U'`` or ``'T'``; z: ``(n,)`` atomic numbers of the block's heavy atoms;
        xyz: ``(n, 3)`` their coordinates (Å).
    """
    matcher = GraphMatcher(_bond_graph(z, xyz), _template(base), node_match=lambda a, b: a["z"] == b["z"])
    for mapping in matcher.subgraph_monomorphisms_iter():
        return {int(row): name for row, name in mapping.items()}
    return {}


def _two_prime_oxygen(graph: nx.Graph, c1: int, z: np.ndarray, sugar: np.ndarray) -> int | None:
    """The row of O2': a sugar oxygen on a carbon bonded to C1' (O4' sits on C1' itself)."""
    for carbon in graph.neighbors(c1):
        if z[carbon] == 6 and sugar[carbon]:
            for oxygen in graph.neighbors(carbon):
                if z[oxygen] == 8 and sugar[oxygen]:
                    return int(oxygen)
    return None


def _base_normal(xyz: np.ndarray) -> np.ndarray:
    """Unit normal of the best plane through ``(n, 3)`` points (sign arbitrary)."""
    centred = xyz - xyz.mean(axis=0)
    return np.linalg.svd(centred, full_matrices=False)[2][-1]


def _block_roles(base: str, z: np.ndarray, xyz: np.ndarray, position: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(receptor roles, nucleic roles, normals) of one nucleotide block's heavy atoms."""
    n = len(z)
    roles = np.zeros((n, len(RECEPTOR_ROLES)), dtype=bool)
    nucleic = np.zeros((n, len(NUCLEIC_ATOM_ROLES)), dtype=bool)
    normals = np.zeros((n, 3))
    roles[:, _ROLE["acceptor"]] = z == 8
    phosphate = (z == 8) & (position == _POS_PHOSPHATE)
    roles[phosphate, _ROLE["anion"]] = True
    nucleic[phosphate, _NUCLEIC["phosphate"]] = True
    names = base_atom_names(base, z, xyz)
    if not names:
        return roles, nucleic, normals
    row_of = {name: row for row, name in names.items()}
    for row, name in names.items():
        roles[row, _ROLE["donor"]] = name in _DONORS[base]
        roles[row, _ROLE["acceptor"]] |= name in _ACCEPTOR_N[base]
        for edge, atoms in _EDGES.items():
            nucleic[row, _NUCLEIC[edge]] = name in atoms[base]
    ring = [row for row, name in names.items() if name in _RING]
    roles[ring, _ROLE["aromatic"]] = True
    nucleic[ring, _NUCLEIC["base_ring"]] = True
    normals[ring] = _base_normal(xyz[ring])
    o2 = _two_prime_oxygen(_bond_graph(z, xyz), row_of["C1'"], z, position == _POS_SUGAR)
    if o2 is not None:
        roles[o2, [_ROLE["donor"], _ROLE["acceptor"]]] = True
        nucleic[o2, [_NUCLEIC["ribose_2oh"], _NUCLEIC["sugar_edge"]]] = True
    return roles, nucleic, normals


def nucleic_atom_roles(block_type: np.ndarray, atom_block: np.ndarray, atomic_number: np.ndarray,
                       position: np.ndarray, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Roles of receptor heavy atoms, nucleotides read by their base templates (module notes).

    Args:
        block_type: ``(R,)`` vocabulary index of each atom's block; atom_block: ``(R,)`` the block each atom
            belongs to (atoms of one block share a value); atomic_number: ``(R,)``; position: ``(R,)``
            position-code indices; xyz: ``(R, 3)`` Å.

    Returns:
        ``(updates, nucleic, normals)``: ``(R,)`` bool, the atoms of nucleotide blocks (whose
        :data:`~geomol.data.chemistry.atom_roles.RECEPTOR_ROLES` come from here: ``roles[updates]``), stacked
        with those roles as ``(R, len(RECEPTOR_ROLES) + len(NUCLEIC_ATOM_ROLES))`` bool in ``nucleic``
        (receptor roles first), and ``(R, 3)`` base normals (zeros off the base rings).
    """
    block_type, atom_block = np.asarray(block_type), np.asarray(atom_block)
    z, position, xyz = np.asarray(atomic_number), np.asarray(position), np.asarray(xyz, dtype=np.float64)
    updates = is_nucleotide_block(block_type)
    out = np.zeros((len(z), len(RECEPTOR_ROLES) + len(NUCLEIC_ATOM_ROLES)), dtype=bool)
    normals = np.zeros((len(z), 3))
    for block in np.unique(atom_block[updates]):
        rows = np.flatnonzero(atom_block == block)
        roles, nucleic, block_normals = _block_roles(_NUCLEOTIDE_INDEX[int(block_type[rows[0]])], z[rows], xyz[rows],
                                                     position[rows])
        out[rows] = np.concatenate([roles, nucleic], axis=1)
        normals[rows] = block_normals
    return updates, out, normals
