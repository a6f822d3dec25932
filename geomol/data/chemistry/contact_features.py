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

With the ligand's chemistry (``graph_atom_contacts(graph, chemistry=True)``), :data:`CHEMISTRY_CONTACT_FEATURES`
follow: the atom's interaction roles (``lig_<role>``, :data:`~geomol.data.chemistry.atom_roles.LIGAND_CHEMISTRY`) and
role-aware sums over receptor heavy atoms within 8 Å (receptor roles from residue, element and position code,
:func:`~geomol.data.chemistry.atom_roles.receptor_atom_roles`): ``hbond_donated`` (ligand donor on a receptor
acceptor) and ``hbond_accepted`` (ligand acceptor from a receptor donor), each Σ clip(−s/0.7, 0, 1);
``salt_bridge`` (opposite charges) Σ clip((5 − d)/1.5, 0, 1) and ``like_charges`` Σ clip((6 − d)/2, 0, 1);
``aromatic_contacts`` (ligand aromatic atom on a receptor ring carbon) Σ clip(5 − d, 0, 1);
``polar_on_carbon`` (a ligand donor or acceptor against receptor carbon, a desolvation cost)
Σ clip(1.5 − s, 0, 1); ``metal`` (a ligand acceptor or anion on a metal) Σ clip((3.2 − d)/0.6, 0, 1).

A ligand atom is hydrophobic as in Vina: a halogen, or a carbon with no bond to N or O; receptor C and S
count as hydrophobic whatever their neighbours (a coarser rule than Vina's, from elements alone: what the
graph of sets stores). Hydrogens and the graph's global atoms are left out on both sides.
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.spatial import cKDTree

from geomol.data.chemistry.atom_roles import LIGAND_CHEMISTRY, RECEPTOR_ROLES, receptor_atom_roles
from geomol.data.chemistry.nucleic_contacts import nucleic_contact_features
from geomol.data.chemistry.nucleic_roles import nucleic_atom_roles
from geomol.data.blocks import ligand_atom_mask
from geomol.data.vocab import atom_index
from geomol.errors import ConfigError, EmptySelectionError

__all__ = ["LIGAND_GROUPS", "RECEPTOR_GROUPS", "VDW_RADII", "ATOM_CONTACT_FEATURES", "CHEMISTRY_CONTACT_FEATURES",
           "COUNT_FEATURES", "RADIAL_BINS", "RECEPTOR_CLASSES", "RADIAL_CONTACT_FEATURES", "atom_contact_features",
           "chemistry_contact_features", "contact_pairs", "graph_atom_contacts", "graph_ligand_bonds",
           "graph_pose_contacts", "ligand_bond_pairs", "ligand_frame", "ligand_heavy_atoms", "radial_contact_features",
           "receptor_classes", "rigid_moves"]

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
CHEMISTRY_CONTACT_FEATURES: tuple[str, ...] = (
    *(f"lig_{name}" for name in LIGAND_CHEMISTRY), "hbond_donated", "hbond_accepted", "salt_bridge", "like_charges",
    "aromatic_contacts", "polar_on_carbon", "metal")
COUNT_FEATURES: tuple[int, ...] = (*range(len(LIGAND_GROUPS), len(ATOM_CONTACT_FEATURES)),
                                   *range(len(ATOM_CONTACT_FEATURES) + len(LIGAND_CHEMISTRY),
                                          len(ATOM_CONTACT_FEATURES) + len(CHEMISTRY_CONTACT_FEATURES)))
"""Columns (of the rows with chemistry) that are sums over receptor atoms (non-negative, heavy-tailed): a model
may ``log1p`` them."""
RECEPTOR_CLASSES = ("carbon", "aromatic_carbon", "sulfur", "donor", "acceptor", "donor_acceptor", "cation", "anion",
                    "other")
"""One class per receptor heavy atom (:func:`receptor_classes`): what it offers a ligand atom touching it."""
RADIAL_BINS = (0.0, 3.3, 4.0, 5.0, 6.5)
"""Å: edges of the distance shells of :func:`radial_contact_features`."""
RADIAL_CONTACT_FEATURES: tuple[str, ...] = tuple(
    f"{name}_{lo:g}_{hi:g}" for name in RECEPTOR_CLASSES for lo, hi in zip(RADIAL_BINS[:-1], RADIAL_BINS[1:]))


def _table(values: dict[int, float], default: float) -> np.ndarray:
    """A per-element property as an array indexed by atomic number (0 … 118)."""
    table = np.full(119, default, dtype=np.float64)
    table[list(values)] = list(values.values())
    return table


_LIGAND_GROUP = _table(_LIGAND_GROUP_OF, 0).astype(np.int64)
_RECEPTOR_GROUP = _table(_RECEPTOR_GROUP_OF, len(RECEPTOR_GROUPS) - 1).astype(np.int64)
_VDW, _COVALENT = _table(VDW_RADII, _OTHER_RADIUS), _table(COVALENT_RADII, _OTHER_RADIUS)


def contact_pairs(ligand_xyz: np.ndarray, receptor_xyz: np.ndarray,
                  cutoff: float = CUTOFF) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(i, j, d)``: every ligand atom ``i`` and receptor atom ``j`` closer than ``cutoff`` (Å), and their
    distance (Å)."""
    pairs = cKDTree(np.asarray(ligand_xyz, dtype=np.float64)).sparse_distance_matrix(
        cKDTree(np.asarray(receptor_xyz, dtype=np.float64)), cutoff, output_type="ndarray")
    return pairs["i"], pairs["j"], pairs["v"]


def atom_contact_features(receptor_z: np.ndarray, receptor_xyz: np.ndarray, ligand_z: np.ndarray,
                          ligand_xyz: np.ndarray, pairs: tuple | None = None, near: float = NEAR,
                          shell: float = SHELL) -> np.ndarray:
    """:data:`ATOM_CONTACT_FEATURES` of every ligand atom.

    Args:
        receptor_z: ``(R,)`` atomic numbers of the receptor heavy atoms; receptor_xyz: ``(R, 3)`` Å.
        ligand_z: ``(L,)`` atomic numbers of the ligand heavy atoms; ligand_xyz: ``(L, 3)`` Å.
        pairs: :func:`contact_pairs` of these atoms, when the caller has them.
        near, shell: Å, the distance shells of the element counts (and ``shell`` the burial radius).

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
    i, j, d = pairs if pairs is not None else contact_pairs(ligand_xyz, receptor_xyz)
    rec_group = _RECEPTOR_GROUP[receptor_z[j]]
    first = len(LIGAND_GROUPS)
    for offset, mask in ((first, d < near), (first + len(RECEPTOR_GROUPS), (d >= near) & (d < shell))):
        np.add.at(out, (i[mask], offset + rec_group[mask]), 1.0)
    s = d - _VDW[ligand_z[i]] - _VDW[receptor_z[j]]
    hydrophobic = hydrophobic_ligand[i] & np.isin(receptor_z[j], _HYDROPHOBIC_RECEPTOR)
    polar = np.isin(ligand_z[i], _POLAR) & np.isin(receptor_z[j], _POLAR)
    terms = (np.exp(-(s / 0.5) ** 2), np.exp(-(((s - 3.0) / 2.0) ** 2)), np.minimum(s, 0.0) ** 2,
             np.where(hydrophobic, np.clip(1.5 - s, 0.0, 1.0), 0.0), np.where(polar, np.clip(-s / 0.7, 0.0, 1.0), 0.0),
             (d < shell).astype(np.float64))
    start = first + 2 * len(RECEPTOR_GROUPS)
    for k, term in enumerate(terms):
        out[:, start + k] = np.bincount(i, weights=term, minlength=n_lig)
    return out


def ligand_bond_pairs(z: np.ndarray, xyz: np.ndarray) -> np.ndarray:
    """``(B, 2)`` int64: the bonded pairs (i < j) of ligand heavy atoms, perceived from distances (closer than
    the sum of their covalent radii, :data:`COVALENT_RADII`, + :data:`BOND_TOLERANCE`).

    Args:
        z: ``(L,)`` atomic numbers; xyz: ``(L, 3)`` coordinates in Å.
    """
    z, xyz = np.asarray(z, dtype=np.int64), np.asarray(xyz, dtype=np.float64)
    if len(z) < 2:
        return np.zeros((0, 2), dtype=np.int64)
    radii = _COVALENT[z]
    pairs = cKDTree(xyz).query_pairs(2 * max(radii) + BOND_TOLERANCE, output_type="ndarray")
    i, j = pairs[:, 0], pairs[:, 1]
    bonded = np.linalg.norm(xyz[i] - xyz[j], axis=1) < radii[i] + radii[j] + BOND_TOLERANCE
    return pairs[bonded].astype(np.int64)


def _ligand_bonds(z: np.ndarray, xyz: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per ligand atom, ``(bonds, bonds to N or O)`` perceived from distances (``(L,)`` each)."""
    bonds = ligand_bond_pairs(z, xyz)
    i, j = bonds[:, 0], bonds[:, 1]
    ends = np.concatenate([i, j])
    degree = np.bincount(ends, minlength=len(z)).astype(np.float64)
    hetero = np.concatenate([np.isin(z[j], _POLAR), np.isin(z[i], _POLAR)]).astype(np.float64)
    return degree, np.bincount(ends, weights=hetero, minlength=len(z))


def graph_ligand_bonds(graph) -> np.ndarray:
    """:func:`ligand_bond_pairs` of a complex graph's ligand heavy atoms, indexed as the rows of
    :func:`graph_atom_contacts`."""
    ligand = ligand_heavy_atoms(graph).numpy()
    atomic_number = graph.A.numpy().astype(np.int64)[ligand] - _TYPE_OFFSET
    return ligand_bond_pairs(atomic_number, graph.X.double().numpy()[ligand])


def ligand_heavy_atoms(graph) -> torch.Tensor:
    """``(N,)`` bool: a complex graph's ligand heavy atoms (segment 1; no hydrogens, padding or global atoms)."""
    return ligand_atom_mask(graph) & (graph.A - _TYPE_OFFSET >= 2)


def chemistry_contact_features(receptor_roles: np.ndarray, receptor_z: np.ndarray, receptor_xyz: np.ndarray,
                               ligand_chemistry: np.ndarray, ligand_z: np.ndarray, ligand_xyz: np.ndarray,
                               pairs: tuple | None = None) -> np.ndarray:
    """:data:`CHEMISTRY_CONTACT_FEATURES` of every ligand atom: its roles and the role-aware pair terms.

    Args:
        receptor_roles: ``(R, len(RECEPTOR_ROLES))`` bool
            (:func:`~geomol.data.chemistry.atom_roles.receptor_atom_roles`);
            receptor_z: ``(R,)`` atomic numbers; receptor_xyz: ``(R, 3)`` Å.
        ligand_chemistry: ``(L, len(LIGAND_CHEMISTRY))``
            (:func:`~geomol.data.chemistry.atom_roles.ligand_atom_chemistry`);
            ligand_z: ``(L,)``; ligand_xyz: ``(L, 3)`` Å.
        pairs: :func:`contact_pairs` of these atoms, when the caller has them.

    Returns:
        ``(L, len(CHEMISTRY_CONTACT_FEATURES))`` float64.
    """
    ligand_z, receptor_z = np.asarray(ligand_z, dtype=np.int64), np.asarray(receptor_z, dtype=np.int64)
    chem = np.asarray(ligand_chemistry, dtype=np.float64)
    out = np.zeros((len(ligand_z), len(CHEMISTRY_CONTACT_FEATURES)))
    out[:, :len(LIGAND_CHEMISTRY)] = chem
    if len(ligand_z) == 0 or len(receptor_z) == 0:
        return out
    i, j, d = pairs if pairs is not None else contact_pairs(ligand_xyz, receptor_xyz)
    s = d - _VDW[ligand_z[i]] - _VDW[receptor_z[j]]
    lig = {name: chem[i, k] > 0 for k, name in enumerate(LIGAND_CHEMISTRY[:-1])}
    rec = {name: np.asarray(receptor_roles)[j, k] for k, name in enumerate(RECEPTOR_ROLES)}
    hbond = np.clip(-s / 0.7, 0.0, 1.0)
    polar_ligand = lig["donor"] | lig["acceptor"]
    terms = (
        np.where(lig["donor"] & rec["acceptor"], hbond, 0.0),
        np.where(lig["acceptor"] & rec["donor"], hbond, 0.0),
        np.where(lig["cation"] & rec["anion"] | lig["anion"] & rec["cation"], np.clip((5.0 - d) / 1.5, 0.0, 1.0), 0.0),
        np.where(lig["cation"] & rec["cation"] | lig["anion"] & rec["anion"], np.clip((6.0 - d) / 2.0, 0.0, 1.0), 0.0),
        np.where(lig["aromatic"] & rec["aromatic"], np.clip(5.0 - d, 0.0, 1.0), 0.0),
        np.where(polar_ligand & (receptor_z[j] == 6), np.clip(1.5 - s, 0.0, 1.0), 0.0),
        np.where((lig["acceptor"] | lig["anion"]) & (_RECEPTOR_GROUP[receptor_z[j]] == len(RECEPTOR_GROUPS) - 1),
                 np.clip((3.2 - d) / 0.6, 0.0, 1.0), 0.0),
    )
    for k, term in enumerate(terms):
        out[:, len(LIGAND_CHEMISTRY) + k] = np.bincount(i, weights=term, minlength=len(ligand_z))
    return out


def graph_atom_contacts(graph, chemistry: bool = False, radial: bool = False,
                        moves: tuple[np.ndarray, np.ndarray] | None = None, **radii: float) -> np.ndarray:
    """:func:`atom_contact_features` of a complex graph (segment 0 receptor, segment 1 ligand).

    Args:
        graph: a :class:`~geomol.data.blocks.BlockGraph` of one complex (not a batch).
        chemistry: append :func:`chemistry_contact_features` (the graph must carry ``ligand_chemistry``).
        radial: append :func:`radial_contact_features` (counts of receptor atoms by class and distance shell).
        moves: rigid moves of the ligand (:func:`rigid_moves`): the rows are then averaged over the pose as given
            and the pose moved by each of them, a smoothing of the features over small pose errors.
        radii: ``near``, ``shell`` and ``cutoff`` in Å (default :data:`NEAR`, :data:`SHELL`, :data:`CUTOFF`);
            :class:`~geomol.data.chemistry.contact_recipe.ContactRecipe` records them with a model.

    Returns:
        ``(L, F)`` float64, one row per ligand heavy atom in graph order; F = ``len(ATOM_CONTACT_FEATURES)``,
        plus ``len(CHEMISTRY_CONTACT_FEATURES)`` with ``chemistry``, plus ``len(RADIAL_CONTACT_FEATURES)`` with
        ``radial``.

    Raises:
        EmptySelectionError: the graph has no ligand heavy atom.
        ConfigError: ``chemistry`` asked of a graph without ``ligand_chemistry`` (built by an older geomol).
    """
    poses = graph_pose_contacts(graph, chemistry, radial, moves, **radii)
    return poses[0] if len(poses) == 1 else np.mean(poses, axis=0)


def graph_pose_contacts(graph, chemistry: bool = False, radial: bool = False,
                        moves: tuple[np.ndarray, np.ndarray] | None = None, near: float = NEAR, shell: float = SHELL,
                        cutoff: float = CUTOFF, nucleic: bool = False) -> list[np.ndarray]:
    """The rows of :func:`graph_atom_contacts` (without averaging) for the ligand's pose as given, then for the
    pose moved by each of ``moves`` (:func:`rigid_moves`: rotations about the ligand's heavy-atom centroid and
    shifts, both in its own frame, :func:`ligand_frame`): ``1 + len(moves[0])`` ``(L, F)`` arrays. With ``nucleic``
    (needs ``chemistry``) nucleotide atoms take their roles from their base templates
    (:func:`~geomol.data.chemistry.nucleic_roles.nucleic_atom_roles`) and the
    :data:`~geomol.data.chemistry.nucleic_contacts.NUCLEIC_CONTACT_FEATURES` follow the role columns."""
    atomic_number = graph.A.numpy().astype(np.int64) - _TYPE_OFFSET
    segment = graph.segment[graph.block_id].numpy()
    heavy = atomic_number >= 2  # drops padding, unknown, global atoms and hydrogens
    xyz = graph.X.double().numpy()
    receptor, ligand = heavy & (segment == 0), ligand_heavy_atoms(graph).numpy()  # ligand: the rows ligand_chemistry has
    if not ligand.any():
        raise EmptySelectionError("the complex has no ligand heavy atom", source=getattr(graph, "name", None))
    ligand_chemistry = getattr(graph, "ligand_chemistry", None)
    if nucleic and not chemistry:
        raise ConfigError("the nucleic-acid contact columns read the ligand's roles: ask for chemistry too")
    if chemistry and (ligand_chemistry is None or len(ligand_chemistry) != int(ligand.sum())):
        raise ConfigError("the graph has no ligand_chemistry rows for its ligand atoms: rebuild it with this geomol",
                          source=getattr(graph, "name", None))
    receptor_z, receptor_xyz, ligand_z = atomic_number[receptor], xyz[receptor], atomic_number[ligand]
    if chemistry or radial:
        block_type, position = graph.B[graph.block_id].numpy()[receptor], graph.atom_pos.numpy()[receptor]
        roles = receptor_atom_roles(block_type, receptor_z, position)
    if nucleic:
        nucleotide, nucleic_roles, normals = nucleic_atom_roles(block_type, graph.block_id.numpy()[receptor],
                                                                receptor_z, position, receptor_xyz)
        roles[nucleotide] = nucleic_roles[nucleotide, :len(RECEPTOR_ROLES)]
    classes = receptor_classes(roles, receptor_z) if radial else None

    def rows(ligand_xyz: np.ndarray) -> np.ndarray:
        pairs = contact_pairs(ligand_xyz, receptor_xyz, cutoff)  # one neighbour search for every set of columns
        parts = [atom_contact_features(receptor_z, receptor_xyz, ligand_z, ligand_xyz, pairs, near, shell)]
        if chemistry:
            parts.append(chemistry_contact_features(roles, receptor_z, receptor_xyz, ligand_chemistry.numpy(),
                                                    ligand_z, ligand_xyz, pairs))
        if nucleic:
            surface = pairs[2] - _VDW[ligand_z[pairs[0]]] - _VDW[receptor_z[pairs[1]]]
            parts.append(nucleic_contact_features(nucleic_roles, normals, nucleotide, receptor_z, receptor_xyz,
                                                  ligand_chemistry.numpy(), ligand_xyz, pairs, surface))
        if radial:
            parts.append(radial_contact_features(classes, len(ligand_z), pairs))
        return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=1)

    posed = xyz[ligand]
    if moves is None:
        return [rows(posed)]
    centre, frame = posed.mean(0), ligand_frame(posed)
    return [rows(posed), *(rows((posed - centre) @ (frame @ rotation @ frame.T).T + centre + frame @ shift)
                           for rotation, shift in zip(*moves))]


def rigid_moves(count: int, shift: float, turn: float, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``2 count`` fixed random rigid moves of a ligand, in its own frame (:func:`ligand_frame`), for
    :func:`graph_atom_contacts`: ``count`` drawn moves, then each one's mirror image through the frame's third
    axis, so the set is the same whichever handedness the frame has (features stay invariant to reflections).

    Args:
        count: moves drawn; shift: spread (Å) of each translation component (normal, mean 0);
        turn: spread (degrees) of the rotation angle (normal, mean 0) about a uniformly random axis;
        seed: the random draw (the same moves for every ligand, so features are a fixed function of the pose).

    Returns:
        ``(rotations (2 count, 3, 3), shifts (2 count, 3))``, float64; rotations are proper (det +1).
    """
    rng = np.random.default_rng(seed)
    axes = rng.normal(size=(count, 3))
    axes /= np.linalg.norm(axes, axis=1, keepdims=True)
    angles = np.deg2rad(rng.normal(scale=turn, size=count))
    cross = np.zeros((count, 3, 3))
    cross[:, [2, 0, 1], [1, 2, 0]] = axes  # K[2,1] = x, K[0,2] = y, K[1,0] = z
    cross = cross - cross.transpose(0, 2, 1)
    sin, cos = np.sin(angles)[:, None, None], np.cos(angles)[:, None, None]
    rotations = np.eye(3) + sin * cross + (1 - cos) * cross @ cross  # Rodrigues
    shifts = rng.normal(scale=shift, size=(count, 3))
    mirror = np.diag([1.0, 1.0, -1.0])
    return np.concatenate([rotations, mirror @ rotations @ mirror]), np.concatenate([shifts, shifts @ mirror])


def ligand_frame(xyz: np.ndarray) -> np.ndarray:
    """``(3, 3)`` proper rotation whose columns are a ligand's principal axes (largest spread first), each
    pointing where the atoms' third moment along it is positive, the third the cross product of the first two:
    it turns with the ligand, so moves expressed in it (:func:`rigid_moves`) do not depend on the lab frame.
    Where the frame is not unique (two principal spreads equal, or a third moment of zero: a ligand symmetric
    along that axis) it is one of the possible frames, and features of moved poses may depend on which.

    Args:
        xyz: ``(L, 3)`` heavy-atom coordinates in Å.
    """
    centred = np.asarray(xyz, dtype=np.float64) - np.mean(xyz, axis=0)
    _, vectors = np.linalg.eigh(centred.T @ centred)
    first, second = vectors[:, 2], vectors[:, 1]
    first, second = (axis if np.sum((centred @ axis) ** 3) >= 0 else -axis for axis in (first, second))
    return np.stack([first, second, np.cross(first, second)], axis=1)


def receptor_classes(receptor_roles: np.ndarray, receptor_z: np.ndarray) -> np.ndarray:
    """``(R,)`` int64 index into :data:`RECEPTOR_CLASSES` of every receptor heavy atom.

    Charged atoms are ``cation`` / ``anion`` whatever else they do; other N and O are ``donor``,
    ``acceptor`` or ``donor_acceptor`` by their roles; carbon is ``aromatic_carbon`` on a ring of Phe, Tyr,
    Trp or His, else ``carbon``; elements other than C, N, O and S (metals, P of cofactors) are ``other``.

    Args:
        receptor_roles: ``(R, len(RECEPTOR_ROLES))`` bool
            (:func:`~geomol.data.chemistry.atom_roles.receptor_atom_roles`).
        receptor_z: ``(R,)`` atomic numbers.
    """
    roles = {name: np.asarray(receptor_roles)[:, k] for k, name in enumerate(RECEPTOR_ROLES)}
    z = np.asarray(receptor_z, dtype=np.int64)
    index = {name: k for k, name in enumerate(RECEPTOR_CLASSES)}
    out = np.full(len(z), index["other"], dtype=np.int64)
    polar = np.isin(z, _POLAR)
    out[z == 6] = index["carbon"]
    out[(z == 6) & roles["aromatic"]] = index["aromatic_carbon"]
    out[z == 16] = index["sulfur"]
    out[polar & roles["donor"]] = index["donor"]
    out[polar & roles["acceptor"]] = index["acceptor"]
    out[polar & roles["donor"] & roles["acceptor"]] = index["donor_acceptor"]
    out[roles["cation"]] = index["cation"]
    out[roles["anion"]] = index["anion"]
    return out


def radial_contact_features(classes: np.ndarray, n_ligand: int, pairs: tuple) -> np.ndarray:
    """:data:`RADIAL_CONTACT_FEATURES`: per ligand atom, the receptor heavy atoms of every class
    (:func:`receptor_classes`) in every distance shell of :data:`RADIAL_BINS`.

    Args:
        classes: ``(R,)`` receptor classes; n_ligand: L; pairs: :func:`contact_pairs` ``(i, j, d)``.

    Returns:
        ``(L, len(RADIAL_CONTACT_FEATURES))`` float64 counts (class-major: all shells of ``carbon`` first).
    """
    i, j, d = pairs
    n_bins = len(RADIAL_BINS) - 1
    shell = np.searchsorted(RADIAL_BINS, d, side="right") - 1
    inside = shell < n_bins
    out = np.zeros((n_ligand, len(RADIAL_CONTACT_FEATURES)))
    np.add.at(out, (i[inside], np.asarray(classes)[j[inside]] * n_bins + shell[inside]), 1.0)
    return out
