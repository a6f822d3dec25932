"""Ligand–receptor contact features of a posed complex: what each ligand heavy atom touches.

The input of the contact scorer (:mod:`geomol.models.contact_scorer`): one row per ligand heavy atom,
computed from coordinates and elements only, so it is invariant to rotations, reflections and
translations of the complex and independent of how the receptor was split into blocks.

Row of one ligand atom (:data:`ATOM_CONTACT_FEATURES`, float64):

* ``lig_<group>`` (6): one-hot element group of the atom (:data:`LIGAND_GROUPS`: C, N, O, S/P, F, Cl/Br/I).
* ``near_<group>`` (5) and ``shell_<group>`` (5): receptor heavy atoms at d < 4 Å and 4 ≤ d < 6 Å, by
  element group (:data:`RECEPTOR_GROUPS`: C, N, O, S; ``other``: metals and any other element).
* Empirical terms (AutoDock-Vina-shaped, on the surface distance s = d − R_lig − R_rec in Å with the
  van der Waals radii of :data:`VDW_RADII`, summed over receptor heavy atoms within 8 Å):
  ``gauss1`` = Σ exp(−(s/0.5)²), ``gauss2`` = Σ exp(−((s−3)/2)²), ``repulsion`` = Σ min(s, 0)² (Å²),
  ``hydrophobic`` = Σ clip(1.5 − s, 0, 1) for a C or halogen ligand atom against receptor C/S, and
  ``polar`` = Σ clip(−s/0.7, 0, 1) for a ligand N/O against receptor N/O (an H-bond proxy: without
  bond orders or hydrogens, donors and acceptors are not told apart).
* ``burial``: receptor heavy atoms within 6 Å.
* ``degree`` and ``hetero_bonds``: the atom's bonds to other ligand heavy atoms, and those to N or O,
  perceived from distances (bonded when closer than the sum of covalent radii, :data:`COVALENT_RADII`, + 0.4 Å).

A ligand atom is hydrophobic as in Vina: a halogen, or a carbon with no bond to N or O; receptor C and S
count as hydrophobic whatever their neighbours (a coarser rule than Vina's, from elements alone: what the
graph of sets stores). Hydrogens and the graph's global atoms are left out on both sides.
"""
from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from geomol.data.vocab import atom_index
from geomol.errors import EmptySelectionError

__all__ = ["LIGAND_GROUPS", "RECEPTOR_GROUPS", "VDW_RADII", "ATOM_CONTACT_FEATURES", "COUNT_FEATURES",
           "atom_contact_features", "graph_atom_contacts"]

LIGAND_GROUPS = ("C", "N", "O", "SP", "F", "ClBrI")
_LIGAND_GROUP_OF = {6: 0, 7: 1, 8: 2, 15: 3, 16: 3, 9: 4, 17: 5, 35: 5, 53: 5}  # atomic number -> group
RECEPTOR_GROUPS = ("C", "N", "O", "S", "other")
_RECEPTOR_GROUP_OF = {6: 0, 7: 1, 8: 2, 16: 3}  # anything else: "other"
VDW_RADII = {6: 1.9, 7: 1.8, 8: 1.7, 15: 2.1, 16: 2.0, 9: 1.5, 17: 1.8, 35: 2.0, 53: 2.2}
"""Å, by atomic number (AutoDock Vina's X-Score radii); other elements (metals) take :data:`_OTHER_RADIUS`."""
_OTHER_RADIUS = 1.2
COVALENT_RADII = {6: 0.76, 7: 0.71, 8: 0.66, 15: 1.07, 16: 1.05, 9: 0.57, 17: 1.02, 35: 1.20, 53: 1.39}
"""Å, by atomic number; other elements take 1.2 Å. Used to perceive the ligand's bonds from its pose."""
BOND_TOLERANCE = 0.4  # Å
_HALOGENS, _HYDROPHOBIC_RECEPTOR = (9, 17, 35, 53), (6, 16)
_POLAR = (7, 8)
NEAR, SHELL, CUTOFF = 4.0, 6.0, 8.0  # Å
_TYPE_OFFSET = atom_index("H") - 1  # a graph's atom type is this plus the atomic number

ATOM_CONTACT_FEATURES: tuple[str, ...] = (
    *(f"lig_{g}" for g in LIGAND_GROUPS), *(f"near_{g}" for g in RECEPTOR_GROUPS),
    *(f"shell_{g}" for g in RECEPTOR_GROUPS), "gauss1", "gauss2", "repulsion", "hydrophobic", "polar", "burial",
    "degree", "hetero_bonds")
COUNT_FEATURES: tuple[int, ...] = tuple(range(len(LIGAND_GROUPS), len(ATOM_CONTACT_FEATURES)))
"""Columns that are sums over receptor atoms (non-negative, heavy-tailed): a model may ``log1p`` them."""


def _table(values: dict[int, float], default: float) -> np.ndarray:
    """A per-element property as an array indexed by atomic number (0 … 118)."""
    table = np.full(119, default, dtype=np.float64)
    table[list(values)] = list(values.values())
    return table


_LIGAND_GROUP = _table(_LIGAND_GROUP_OF, 0).astype(np.int64)
_RECEPTOR_GROUP = _table(_RECEPTOR_GROUP_OF, len(RECEPTOR_GROUPS) - 1).astype(np.int64)
_VDW, _COVALENT = _table(VDW_RADII, _OTHER_RADIUS), _table(COVALENT_RADII, _OTHER_RADIUS)


def atom_contact_features(receptor_z: np.ndarray, receptor_xyz: np.ndarray, ligand_z: np.ndarray,
                          ligand_xyz: np.ndarray) -> np.ndarray:
    """:data:`ATOM_CONTACT_FEATURES` of every ligand atom.

    Args:
        receptor_z: ``(R,)`` atomic numbers of the receptor heavy atoms; receptor_xyz: ``(R, 3)`` Å.
        ligand_z: ``(L,)`` atomic numbers of the ligand heavy atoms; ligand_xyz: ``(L, 3)`` Å.

    Returns:
        ``(L, len(ATOM_CONTACT_FEATURES))`` float64.
    """
    ligand_z, receptor_z = np.asarray(ligand_z, dtype=np.int64), np.asarray(receptor_z, dtype=np.int64)
    n_lig, n_feat = len(ligand_z), len(ATOM_CONTACT_FEATURES)
    out = np.zeros((n_lig, n_feat))
    lig_group = _LIGAND_GROUP[ligand_z]
    out[np.arange(n_lig), lig_group] = 1.0
    degree, hetero_bonds = _ligand_bonds(ligand_z, np.asarray(ligand_xyz, dtype=np.float64))
    out[:, -2], out[:, -1] = degree, hetero_bonds
    if n_lig == 0 or len(receptor_z) == 0:
        return out
    hydrophobic_ligand = np.isin(ligand_z, _HALOGENS) | ((ligand_z == 6) & (hetero_bonds == 0))
    pairs = cKDTree(np.asarray(ligand_xyz, dtype=np.float64)).sparse_distance_matrix(
        cKDTree(np.asarray(receptor_xyz, dtype=np.float64)), CUTOFF, output_type="ndarray")
    i, j, d = pairs["i"], pairs["j"], pairs["v"]
    rec_group = _RECEPTOR_GROUP[receptor_z[j]]
    first = len(LIGAND_GROUPS)
    for offset, mask in ((first, d < NEAR), (first + len(RECEPTOR_GROUPS), (d >= NEAR) & (d < SHELL))):
        np.add.at(out, (i[mask], offset + rec_group[mask]), 1.0)
    s = d - _VDW[ligand_z[i]] - _VDW[receptor_z[j]]
    hydrophobic = hydrophobic_ligand[i] & np.isin(receptor_z[j], _HYDROPHOBIC_RECEPTOR)
    polar = np.isin(ligand_z[i], _POLAR) & np.isin(receptor_z[j], _POLAR)
    terms = (np.exp(-(s / 0.5) ** 2), np.exp(-(((s - 3.0) / 2.0) ** 2)), np.minimum(s, 0.0) ** 2,
             np.where(hydrophobic, np.clip(1.5 - s, 0.0, 1.0), 0.0), np.where(polar, np.clip(-s / 0.7, 0.0, 1.0), 0.0),
             (d < SHELL).astype(np.float64))
    start = first + 2 * len(RECEPTOR_GROUPS)
    for k, term in enumerate(terms):
        out[:, start + k] = np.bincount(i, weights=term, minlength=n_lig)
    return out


def _ligand_bonds(z: np.ndarray, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per ligand atom, ``(bonds, bonds to N or O)`` perceived from distances (``(L,)`` each)."""
    if len(z) < 2:
        return np.zeros(len(z)), np.zeros(len(z))
    radii = _COVALENT[z]
    pairs = cKDTree(xyz).query_pairs(2 * max(radii) + BOND_TOLERANCE, output_type="ndarray")
    i, j = pairs[:, 0], pairs[:, 1]
    bonded = np.linalg.norm(xyz[i] - xyz[j], axis=1) < radii[i] + radii[j] + BOND_TOLERANCE
    i, j = i[bonded], j[bonded]
    ends = np.concatenate([i, j])
    degree = np.bincount(ends, minlength=len(z)).astype(np.float64)
    hetero = np.concatenate([np.isin(z[j], _POLAR), np.isin(z[i], _POLAR)]).astype(np.float64)
    return degree, np.bincount(ends, weights=hetero, minlength=len(z))


def graph_atom_contacts(graph) -> np.ndarray:
    """:func:`atom_contact_features` of a complex graph (segment 0 receptor, segment 1 ligand).

    Args:
        graph: a :class:`~geomol.data.blocks.BlockGraph` of one complex (not a batch).

    Returns:
        ``(L, len(ATOM_CONTACT_FEATURES))`` float64, one row per ligand heavy atom in graph order.

    Raises:
        EmptySelectionError: the graph has no ligand heavy atom.
    """
    atomic_number = graph.A.numpy().astype(np.int64) - _TYPE_OFFSET
    segment = graph.segment[graph.block_id].numpy()
    heavy = atomic_number >= 2  # drops padding, unknown, global atoms and hydrogens
    xyz = graph.X.double().numpy()
    receptor, ligand = heavy & (segment == 0), heavy & (segment == 1)
    if not ligand.any():
        raise EmptySelectionError("the complex has no ligand heavy atom", source=getattr(graph, "name", None))
    return atom_contact_features(atomic_number[receptor], xyz[receptor], atomic_number[ligand], xyz[ligand])
