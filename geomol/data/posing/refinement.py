"""Pose refinement in the pocket: a posed ligand relaxed under MMFF94 against the fixed receptor, its core held.

A pose embedded on the reference core (:mod:`geomol.data.posing.poses`) is chosen among a few ETKDG
conformers of the non-core part, scored against the receptor but never moved by it, and its
hydrogens are placed on the heavy atoms afterwards: some poses keep a substituent against a
receptor atom, or two hydrogens on top of each other. :func:`refine_in_pocket` removes that by a
short local minimisation of

    E(x) = E_MMFF94(ligand with hydrogens; dielectric 4r)
           + Σ_{ligand atom i, pocket atom j} k · max(0, w_ij − |x_i − x_j|)²

over the ligand's atoms, with the pocket's heavy atoms fixed points of the force field and the
core's heavy atoms fixed where the template put them (on the reference). The contact term only
pushes (a wall at ``w_ij``, no attraction): the pose stays where the template put it, it is not
docked. Walls by pair (Å, :class:`RefinementParameters`): heavy–heavy 3.0, N/O–N/O 2.6 (a hydrogen
bond), ligand hydrogen–heavy 2.0, anything–metal 1.9 (coordination). UFF stands in for a molecule
MMFF94 has no parameters for.

A reference pose can itself be too close to the receptor (a core atom 1.5–2.2 Å from a receptor
atom, e.g. a receptor prepared in another conformation): a pose whose core is held exactly there
keeps that contact whatever the rest does. :func:`~geomol.data.posing.core_clashes.relax_core` then relaxes the best pose once more
with the core's heavy atoms *restrained* instead of fixed (free within
:attr:`RefinementParameters.max_core_shift` of where the reference has them, a stiff harmonic
restraint beyond) and walls on the core atoms too, and says by how much the core moved.

:class:`PoseContacts` measures a pose as :mod:`geomol.data.chemistry.checks` judges it at prediction:
the closest ligand–receptor heavy-atom pair (an error under ``CLASH_DISTANCE``, a warning under
``CLOSE_CONTACT_DISTANCE`` for non-metals) and the closest non-bonded pair inside the ligand,
hydrogens included (an error under ``OVERLAP_DISTANCE``).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Iterable, Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdForceFieldHelpers
from scipy.spatial import cKDTree

from geomol.data.chemistry.checks import (
    CLASH_DISTANCE,
    CLOSE_CONTACT_DISTANCE,
    METALS,
    OVERLAP_DISTANCE,
    bond_pairs,
    closest_nonbonded_pair,
)
from geomol.data.io._source import rdkit_messages
from geomol.data.io.structure import Structure
from geomol.errors import ConfigError

__all__ = ["RefinementParameters", "Pocket", "PoseContacts", "pose_contacts", "refine_in_pocket", "best_refined"]

_POLAR = frozenset({"N", "O"})
_DISTANCE_DEPENDENT_DIELECTRIC = 2  # RDKit's MMFF dielectric model code (1: constant, 2: distance-dependent)
_FAR = 100.0  # Å, the upper side of a wall: never reached
_CORE_RESTRAINT = 10000.0  # kcal/mol/Å², beyond max_core_shift: 100 times the walls, so that a wall pushes a core
# atom less than 0.01 Å past it (measured on merck/syk_4puz_fullmap; 1000 let it go 0.05 Å past)


@dataclass(frozen=True)
class RefinementParameters:
    """How a pose is relaxed in the pocket (every default is written here, and only here).

    Attributes:
        iterations: most minimiser iterations per pose (RDKit's BFGS).
        force_constant: kcal/mol/Å², stiffness of the contact walls.
        heavy_distance: Å, wall between a ligand and a receptor heavy atom.
        hbond_distance: Å, wall between a ligand N/O and a receptor N/O (hydrogen-bond partners).
        hydrogen_distance: Å, wall between a ligand hydrogen and a receptor heavy atom.
        metal_distance: Å, wall between a ligand heavy atom and a receptor metal (hydrogens: 0.4 Å more).
        dielectric: relative permittivity ε of the distance-dependent dielectric (ε·r) of MMFF94's
            electrostatics; 0 switches the electrostatic term off.
        candidates: best-scored conformers refined before more are embedded.
        retry_conformers: conformers of a second embedding (another seed) when none of the first
            ``candidates`` refines free of clashes; 0 gives up after the first.
        max_core_shift: Å, how far a core heavy atom may move from the reference's atom when the best pose
            with its core fixed still has a receptor heavy atom under ``CLOSE_CONTACT_DISTANCE`` (2.2 Å)
            (:func:`~geomol.data.posing.core_clashes.relax_core`); 0 keeps the core fixed. The default,
            0.7 Å = ``CLOSE_CONTACT_DISTANCE − CLASH_DISTANCE``, is the least that lets every reference core
            atom not refused outright (≥ 1.5 Å from the receptor) reach 2.2 Å; a reference atom under 1.5 Å
            cannot, and is refused (:func:`~geomol.data.posing.core_clashes.reference_core_clash`). 0.6 Å
            left a ligand of charge_annhil/ephx2 (reference 1.65 Å from the receptor) at 2.19 Å.
        relax_iterations: most minimiser iterations of that relaxation (the whole core moves: 100 left a
            merck/syk_4puz_fullmap pose unconverged at 2.13 Å, 300 reach 2.31 Å, both with a 0.6 Å shift).
    """

    iterations: int = 100
    force_constant: float = 100.0
    heavy_distance: float = 3.0
    hbond_distance: float = 2.6
    hydrogen_distance: float = 2.0
    metal_distance: float = 1.9
    dielectric: float = 4.0
    candidates: int = 3
    retry_conformers: int = 16
    max_core_shift: float = 0.7
    relax_iterations: int = 300

    def __post_init__(self):
        counts = (self.iterations, self.relax_iterations, self.candidates)
        if min(counts) < 1 or self.retry_conformers < 0 or self.max_core_shift < 0:
            raise ConfigError("refinement iterations, relax_iterations and candidates must be ≥ 1, "
                              "retry_conformers and max_core_shift ≥ 0")
        walls = (self.heavy_distance, self.hbond_distance, self.hydrogen_distance, self.metal_distance)
        if min(walls) <= 0 or self.force_constant <= 0 or self.dielectric < 0:
            raise ConfigError("refinement wall distances and force constant must be > 0, dielectric ≥ 0")

    def to_dict(self) -> dict:
        return asdict(self)

    @property
    def reach(self) -> float:
        """Å: pocket atoms farther than this from every ligand atom get no wall (they cannot be reached)."""
        return max(self.heavy_distance, self.hbond_distance, self.metal_distance + 0.4) + 1.5


class Pocket:
    """The receptor's heavy atoms as refinement and its measures see them.

    Args:
        receptor: a :class:`~geomol.data.io.Structure` (elements and residue names known), or [M, 3]
            heavy-atom coordinates in Å (every atom then counts as a non-polar, non-metal heavy atom).
    """

    def __init__(self, receptor: Structure | np.ndarray):
        if isinstance(receptor, Structure):
            self._atoms = np.flatnonzero(receptor.is_heavy)
            elements = [receptor.elements[i] for i in self._atoms]
            self.coords = receptor.coords[self._atoms]
            self._structure = receptor
        else:
            self.coords = np.asarray(receptor, dtype=np.float64).reshape(-1, 3)
            elements, self._structure = ["C"] * len(self.coords), None
        self.polar = np.array([e in _POLAR for e in elements], dtype=bool)  # [M]
        self.metal = np.array([e in METALS for e in elements], dtype=bool)  # [M]
        self.tree = cKDTree(self.coords)

    def __len__(self) -> int:
        return len(self.coords)

    def label(self, j: int) -> str:
        """Receptor heavy atom ``j`` in words (``'LYS 458 NZ (chain A)'``), for messages."""
        if self._structure is None:
            return f"receptor atom {j + 1}"
        atom = int(self._atoms[j])
        s = self._structure
        r = int(np.searchsorted(s.residue_start, atom, side="right") - 1)
        chain = f" (chain {s.chains[r]})" if s.chains[r].strip() else ""
        return f"{s.resnames[r]} {s.numbers[r]}{s.icodes[r]} {s.names[atom]}{chain}"


@dataclass(frozen=True)
class PoseContacts:
    """How close a pose comes to the receptor and to itself (Å), and which atoms do.

    Attributes:
        receptor_distance: closest ligand–receptor heavy-atom pair, metals included (inf without receptor).
        non_metal_distance: closest pair with a receptor non-metal.
        ligand_atom, receptor_atom: the closest pair (ligand atom index, pocket atom index; -1 if none).
        overlap_distance: closest pair of ligand atoms without a bond between them, hydrogens included.
        overlap_atoms: that pair (ligand atom indices; (-1, -1) if none).
        non_metal_atoms: the closest pair with a receptor non-metal (ligand atom, pocket atom; -1 if none).
    """

    receptor_distance: float
    non_metal_distance: float
    ligand_atom: int
    receptor_atom: int
    overlap_distance: float
    overlap_atoms: tuple[int, int]
    non_metal_atoms: tuple[int, int] = (-1, -1)

    @property
    def clean(self) -> bool:
        """Nothing the prediction's checks would flag: no clash warning, no overlap."""
        return self.receptor_clear and self.overlap_distance >= OVERLAP_DISTANCE

    @property
    def receptor_clear(self) -> bool:
        """No ligand–receptor pair the prediction's checks would flag (no clash, no clash warning)."""
        return self.receptor_distance >= CLASH_DISTANCE and self.non_metal_distance >= CLOSE_CONTACT_DISTANCE

    @property
    def acceptable(self) -> bool:
        """Nothing the prediction's checks would refuse (a clash warning at most)."""
        return self.receptor_distance >= CLASH_DISTANCE and self.overlap_distance >= OVERLAP_DISTANCE

    def rank(self) -> tuple:
        """Sort key, best first: clean, then acceptable, then the largest clearance."""
        return (not self.clean, not self.acceptable, -min(self.non_metal_distance, CLOSE_CONTACT_DISTANCE),
                -min(self.overlap_distance, OVERLAP_DISTANCE))


def pose_contacts(mol: Chem.Mol, pocket: Pocket | None) -> PoseContacts:
    """The :class:`PoseContacts` of ``mol``'s (first) conformer; receptor distances are inf without a pocket."""
    xyz = mol.GetConformer().GetPositions()
    i, j, overlap = closest_nonbonded_pair(xyz, bond_pairs(mol))
    heavy = np.array([a.GetIdx() for a in mol.GetAtoms() if a.GetAtomicNum() > 1])
    if pocket is None or not len(pocket) or not len(heavy):
        return PoseContacts(math.inf, math.inf, -1, -1, overlap, (i, j))
    k = min(4, len(pocket))  # the nearest non-metal is among the 4 nearest atoms unless 4 metals are nearer
    distances, nearest = pocket.tree.query(xyz[heavy], k=k)
    distances, nearest = distances.reshape(len(heavy), k), nearest.reshape(len(heavy), k)  # [n, k]
    row, column = np.unravel_index(int(np.argmin(distances)), distances.shape)
    non_metal = np.where(pocket.metal[nearest], np.inf, distances)
    row_n, column_n = np.unravel_index(int(np.argmin(non_metal)), non_metal.shape)
    non_metal_atoms = (int(heavy[row_n]), int(nearest[row_n, column_n])) if np.isfinite(non_metal.min()) else (-1, -1)
    return PoseContacts(float(distances[row, column]), float(non_metal.min()), int(heavy[row]),
                        int(nearest[row, column]), overlap, (i, j), non_metal_atoms)


def _force_field(mol: Chem.Mol, parameters: RefinementParameters):
    """MMFF94 of the molecule (UFF when MMFF94 lacks parameters; None when both do), and its name (the prefix of
    its constraint adders: ``'MMFF'`` or ``'UFF'``)."""
    with rdkit_messages():
        if rdForceFieldHelpers.MMFFHasAllMoleculeParams(mol):
            properties = rdForceFieldHelpers.MMFFGetMoleculeProperties(mol)
            properties.SetMMFFEleTerm(parameters.dielectric > 0)
            if parameters.dielectric > 0:
                properties.SetMMFFDielectricModel(_DISTANCE_DEPENDENT_DIELECTRIC)
                properties.SetMMFFDielectricConstant(parameters.dielectric)
            return rdForceFieldHelpers.MMFFGetMoleculeForceField(mol, properties), "MMFF"
        if rdForceFieldHelpers.UFFHasAllMoleculeParams(mol):
            return rdForceFieldHelpers.UFFGetMoleculeForceField(mol), "UFF"
    return None, ""


def _walls(mol: Chem.Mol, pocket: Pocket, free: np.ndarray, ligand_xyz: np.ndarray,
           parameters: RefinementParameters) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ligand atoms [P], pocket atoms [P], wall distances [P] in Å) of the pairs that get a wall."""
    near = pocket.tree.query_ball_point(ligand_xyz[free], parameters.reach)
    ligand = np.repeat(free, [len(n) for n in near]).astype(np.int64)
    receptor = np.fromiter((k for n in near for k in n), dtype=np.int64, count=len(ligand))
    atomic = np.array([a.GetAtomicNum() for a in mol.GetAtoms()])[ligand]
    polar_ligand = np.isin(atomic, (7, 8))
    walls = np.where(atomic == 1, parameters.hydrogen_distance,
                     np.where(polar_ligand & pocket.polar[receptor], parameters.hbond_distance,
                              parameters.heavy_distance))
    walls = np.where(pocket.metal[receptor], parameters.metal_distance + 0.4 * (atomic == 1), walls)
    return ligand, receptor, walls


def refine_in_pocket(mol: Chem.Mol, fixed_atoms: Sequence[int], pocket: Pocket | None,
                     parameters: RefinementParameters, restrained_atoms: Sequence[int] = ()) -> Chem.Mol:
    """The pose relaxed in the pocket (a new molecule; the input is not changed).

    Args:
        mol: the posed ligand, with hydrogens, one conformer (Å).
        fixed_atoms: atoms that do not move (the core's heavy atoms, on the reference).
        pocket: the receptor (None: the ligand is relaxed on its own, e.g. to separate overlapping hydrogens).
        parameters: :class:`RefinementParameters`.
        restrained_atoms: atoms free within ``parameters.max_core_shift`` of where they are, held by a stiff
            harmonic restraint beyond (the core, in :func:`~geomol.data.posing.core_clashes.relax_core`); they
            get walls like free atoms.

    Returns:
        the molecule with the refined coordinates (unchanged coordinates when no force field has
        parameters for it).
    """
    refined = Chem.Mol(mol)
    # MMFF94's typing re-perceives aromaticity by its own model on the molecule it is given (it de-aromatises
    # e.g. an imidazopyrazine): the force field gets a copy (kept alive while the field points into its
    # conformer), and only the coordinates come back
    typed = Chem.Mol(mol)
    field, kind = _force_field(typed, parameters)
    if field is None:
        return refined
    n_atoms = refined.GetNumAtoms()
    xyz = refined.GetConformer().GetPositions()
    fixed = np.zeros(n_atoms, dtype=bool)
    fixed[list(fixed_atoms)] = True
    free = np.flatnonzero(~fixed)
    if pocket is not None and len(pocket) and len(free):
        ligand, receptor, walls = _walls(refined, pocket, free, xyz, parameters)
        points = {int(k): field.AddExtraPoint(*map(float, pocket.coords[k]), fixed=True) - 1 for k in set(receptor)}
        field.Initialize()
        add_wall = getattr(field, f"{kind}AddDistanceConstraint")
        for i, k, wall in zip(ligand.tolist(), receptor.tolist(), walls.tolist()):
            add_wall(i, points[k], False, wall, _FAR, parameters.force_constant)
    else:
        field.Initialize()
    for i in np.flatnonzero(fixed).tolist():
        field.AddFixedPoint(i)
    add_restraint = getattr(field, f"{kind}AddPositionConstraint")
    for i in restrained_atoms:
        add_restraint(int(i), parameters.max_core_shift, _CORE_RESTRAINT)
    field.Minimize(maxIts=parameters.iterations)
    positions = np.asarray(field.Positions()).reshape(-1, 3)[:n_atoms]
    del field, typed
    conformer = refined.GetConformer()
    for i, position in enumerate(positions.tolist()):
        conformer.SetAtomPosition(i, position)
    return refined


def best_refined(attempts: Iterable[tuple[Any, Chem.Mol, Sequence[int]]], pocket: Pocket | None,
                 parameters: RefinementParameters) -> tuple[Any, Chem.Mol, PoseContacts, int]:
    """Refine poses one after the other until one is clean; the first clean one, else the one with most room.

    Args:
        attempts: ``(key, pose with hydrogens, fixed atoms)``, best first; read only as far as needed
            (a generator can embed more conformers when the first ones fail).

    Returns:
        (key, refined pose, its :class:`PoseContacts`, how many poses were refined).
    """
    best, tried = None, 0
    for key, pose, fixed in attempts:
        refined = refine_in_pocket(pose, fixed, pocket, parameters)
        contacts = pose_contacts(refined, pocket)
        tried += 1
        if best is None or contacts.rank() < best[2].rank():
            best = (key, refined, contacts)
        if contacts.clean:
            break
    if best is None:
        raise ValueError("no pose to refine")
    return (*best, tried)
