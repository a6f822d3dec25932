"""Checks of prediction inputs that a reader accepts but a model must not be given as they are.

A file can be perfectly readable and still be a wrong input: a ligand drawn flat (2D), atoms
stacked on one point, a whole protein passed as the "ligand", a ligand far from the receptor or
buried in its atoms, a receptor that is neither protein nor nucleic acid. A model returns a
number for all of these; these checks say why that number would mean nothing.

Each check is a plain function of arrays (or a molecule / structure) returning a list of
:class:`Finding` — an ``error`` (the input must not be predicted) or a ``warning`` (the number
may still be useful, the user must know). Thresholds are module constants, stated in the
messages and in ``docs/predict.md``:

=============================  =========  ==========================================================
constant                       value      meaning
=============================  =========  ==========================================================
``COINCIDENT_DISTANCE``        0.5 Å      two atoms of one ligand closer than this: duplicated atoms
``OVERLAP_DISTANCE``           1.0 Å      two atoms of one ligand without a bond between them closer than
                                          this (hydrogens included): overlapping atoms
``FLAT_TOLERANCE``             0.01 Å     spread of z (or of a tetrahedral centre off its neighbours'
                                          plane) below this: coordinates are a 2D drawing
``BOND_LENGTH_RANGE``          0.7–2.6 Å  a bond (between non-metal atoms) outside it: broken geometry
``MAX_LIGAND_HEAVY_ATOMS``     150        more heavy atoms than this: not a drug-sized ligand
``MAX_LIGAND_POLYMER_RESIDUES`` 10        this many amino-acid/nucleotide residues: a polymer
``CLASH_DISTANCE``             1.5 Å      ligand and receptor heavy atoms closer: a clash (error)
``CLOSE_CONTACT_DISTANCE``     2.2 Å      closer than this to a receptor non-metal: a clash warning
``CONTACT_DISTANCE``           4.5 Å      no receptor heavy atom this close: not in a pocket
=============================  =========  ==========================================================

The clash thresholds are what a chemist rejects: heavy atoms of a real complex that are not bonded are
rarely closer than about 2.5 Å (an H-bond's N/O···O is 2.6–3.1 Å), so under 1.5 Å two atoms overlap and
the pose must be re-posed or minimised, and 1.5–2.2 Å is a clash worth a look. The 247 ligands of the
PLB benchmark (10 targets) have no pair under 2.2 Å (closest 2.24 Å) and no overlapping atoms; of the
1,039 non-reference FEP+ benchmark poses (prepared for FEP in one protein conformation) 11.5 % have a
pair under 2.2 Å and 30 one under 1.5 Å (the modelled "stress" BACE series reach 0.89 Å), which are
refused. A ligand with no receptor atom within 4.5 Å is in no pocket the models have seen (the closest
ligand–receptor heavy-atom distance of the training complexes is at most 3.6 Å).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
from rdkit import Chem

from geomol.data.io._source import rdkit_messages, rdkit_reason
from geomol.data.io.molecule import molecule_source
from geomol.data.io.rdkit_hints import sanitisation_hint
from geomol.data.io.structure import Structure, is_polymer_residue

__all__ = ["Finding", "ERROR", "WARNING", "errors_of", "warnings_of", "ligand_geometry_findings",
           "ligand_size_findings", "molecule_findings", "structure_ligand_findings", "receptor_findings",
           "contact_findings", "COINCIDENT_DISTANCE", "FLAT_TOLERANCE", "BOND_LENGTH_RANGE",
           "MAX_LIGAND_HEAVY_ATOMS", "MAX_LIGAND_POLYMER_RESIDUES", "CLASH_DISTANCE", "CLOSE_CONTACT_DISTANCE",
           "CONTACT_DISTANCE", "METALS", "OVERLAP_DISTANCE", "closest_nonbonded_pair", "bond_pairs", "atom_label",
           "overlap_findings"]

ERROR, WARNING = "error", "warning"
COINCIDENT_DISTANCE = 0.5
OVERLAP_DISTANCE = 1.0
FLAT_TOLERANCE = 0.01
BOND_LENGTH_RANGE = (0.7, 2.6)
MAX_LIGAND_HEAVY_ATOMS = 150
MAX_LIGAND_POLYMER_RESIDUES = 10
CLASH_DISTANCE = 1.5
CLOSE_CONTACT_DISTANCE = 2.2
CONTACT_DISTANCE = 4.5
METALS = frozenset(
    "Li Be Na Mg Al K Ca Sc Ti V Cr Mn Fe Co Ni Cu Zn Ga Rb Sr Y Zr Nb Mo Tc Ru Rh Pd Ag Cd In Sn Cs Ba La Ce Pr "
    "Nd Sm Eu Gd Tb Dy Ho Er Tm Yb Lu Hf Ta W Re Os Ir Pt Au Hg Tl Pb Bi".split())
"""Elements whose coordination bonds (1.9–2.5 Å) are not steric clashes."""


@dataclass(frozen=True)
class Finding:
    """One problem found in an input.

    Attributes:
        severity: ``'error'`` (do not predict) or ``'warning'`` (predict, but report it).
        code: a stable identifier (``'not_3d'``, ``'clash'``, ...), for programs.
        message: what is wrong and what to do, in words.
        source: the file and molecule it concerns (``'ligands.sdf [molecule 3 'lig_7']'``).
    """

    severity: str
    code: str
    message: str
    source: str = ""

    def __str__(self) -> str:
        return f"{self.source}: {self.message}" if self.source else self.message


def errors_of(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == ERROR]


def warnings_of(findings: Sequence[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == WARNING]


# ---------------------------------------------------------------------- the ligand alone
def ligand_geometry_findings(coords: np.ndarray, source: str = "") -> list[Finding]:
    """Coordinates that cannot be a 3D pose: all zero, coincident atoms, a flat (2D) drawing.

    Args:
        coords: [N, 3] positions (Å) of every atom of the ligand (hydrogens included if present).
    """
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, 3)
    if len(coords) and not np.abs(coords).max() > 0:
        return [Finding(ERROR, "zero_coordinates", "all atom coordinates are zero: the file holds no pose. Give "
                        "the ligand in its bound 3D pose, in the receptor's frame", source)]
    if len(coords) < 2:
        return []
    found = []
    i, j, distance = closest_nonbonded_pair(coords, ())
    if distance < COINCIDENT_DISTANCE:
        spread = float(np.linalg.norm(coords - coords.mean(0), axis=1).max())
        what = ("all atoms lie on one point (collapsed coordinates)" if spread < COINCIDENT_DISTANCE else
                f"atoms {i + 1} and {j + 1} are {distance:.2f} Å apart (coincident or duplicated atoms; "
                f"no two atoms are closer than {COINCIDENT_DISTANCE} Å)")
        found.append(Finding(ERROR, "coincident_atoms", f"{what}: not a 3D structure", source))
    if len(coords) >= 3 and np.ptp(coords[:, 2]) < FLAT_TOLERANCE:
        found.append(Finding(ERROR, "not_3d", f"every atom has the same z ({coords[0, 2]:.3f} Å): the ligand is a "
                             "flat 2D drawing, not a 3D pose. Dock it or generate 3D coordinates in the pocket "
                             "first", source))
    return found


def closest_nonbonded_pair(coords: np.ndarray, bonds: Sequence[tuple[int, int]]) -> tuple[int, int, float]:
    """(i, j, distance in Å) of the two closest atoms that are not bonded to each other.

    Args:
        coords: [N, 3] atom positions (Å), hydrogens included.
        bonds: the (i, j) atom pairs that are bonded.

    Returns:
        ``(-1, -1, inf)`` when every pair is bonded (or N < 2).
    """
    coords = np.asarray(coords, dtype=np.float64).reshape(-1, 3)
    distances = np.linalg.norm(coords[:, None, :] - coords[None, :, :], axis=-1)  # [N, N]
    distances[np.diag_indices(len(coords))] = np.inf
    if len(bonds):
        i, j = np.asarray(bonds, dtype=np.int64).T
        distances[i, j] = distances[j, i] = np.inf
    if not np.isfinite(distances).any():
        return -1, -1, float("inf")
    i, j = np.unravel_index(int(np.argmin(distances)), distances.shape)
    return int(min(i, j)), int(max(i, j)), float(distances[i, j])


def bond_pairs(mol: Chem.Mol) -> list[tuple[int, int]]:
    """The (i, j) atom indices of every bond of ``mol``."""
    return [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]


def atom_label(mol: Chem.Mol, index: int) -> str:
    """An atom as messages name it: element and 1-based index (``'C12'``)."""
    return f"{mol.GetAtomWithIdx(index).GetSymbol()}{index + 1}"


def overlap_findings(mol: Chem.Mol, source: str = "") -> list[Finding]:
    """Two atoms of one ligand, not bonded to each other, closer than :data:`OVERLAP_DISTANCE` (error).

    Hydrogens count: hydrogens placed on top of each other (or of a heavy atom) make a pose no
    chemist would accept, and the model would read them as they are.
    """
    if mol.GetNumConformers() == 0 or mol.GetNumAtoms() < 2:
        return []
    i, j, distance = closest_nonbonded_pair(mol.GetConformer().GetPositions(), bond_pairs(mol))
    if distance >= OVERLAP_DISTANCE:
        return []
    return [Finding(ERROR, "overlapping_atoms", f"atoms {atom_label(mol, i)} and {atom_label(mol, j)} are "
                    f"{distance:.2f} Å apart without a bond between them (no two non-bonded atoms may be closer "
                    f"than {OVERLAP_DISTANCE} Å): overlapping atoms, not a valid pose. Re-pose or minimise the "
                    "ligand", source or molecule_source(mol))]


def ligand_size_findings(n_heavy: int, n_polymer_residues: int = 0, source: str = "") -> list[Finding]:
    """A "ligand" that is a polymer or far beyond drug size (suggesting the protein–protein mode)."""
    if n_heavy <= MAX_LIGAND_HEAVY_ATOMS and n_polymer_residues < MAX_LIGAND_POLYMER_RESIDUES:
        return []
    what = (f"{n_polymer_residues} amino-acid/nucleotide residues" if n_polymer_residues >= MAX_LIGAND_POLYMER_RESIDUES
            else f"{n_heavy} heavy atoms (more than {MAX_LIGAND_HEAVY_ATOMS})")
    return [Finding(ERROR, "not_small_molecule", f"the ligand has {what}: a polymer or protein, not a drug-sized "
                    "molecule. For a protein or nucleic-acid partner put both in one file and give the partner as "
                    "a chain group (--ligands chain:B, the protein–protein mode)", source)]


def _is_tetrahedral(atom: Chem.Atom) -> bool:
    if atom.GetDegree() == 4 and atom.GetSymbol() in ("C", "N", "Si", "P", "S", "B"):
        return True
    return atom.GetHybridization() == Chem.HybridizationType.SP3 and atom.GetDegree() == 3 \
        and atom.GetSymbol() == "C"


def _flattened_centres(mol: Chem.Mol, coords: np.ndarray) -> tuple[int, int]:
    """(tetrahedral centres, how many lie within FLAT_TOLERANCE of their first three neighbours' plane)."""
    centres = flat = 0
    for atom in (mol.GetAtomWithIdx(i) for i in range(mol.GetNumAtoms())):
        if not _is_tetrahedral(atom):
            continue
        a, b, c = (coords[n.GetIdx()] for n in list(atom.GetNeighbors())[:3])
        normal = np.cross(b - a, c - a)
        if np.linalg.norm(normal) < 1e-6:
            continue
        centres += 1
        flat += abs(float(np.dot(coords[atom.GetIdx()] - a, normal / np.linalg.norm(normal)))) < FLAT_TOLERANCE * 10
    return centres, flat


def _bond_findings(mol: Chem.Mol, coords: np.ndarray, source: str) -> list[Finding]:
    low, high = BOND_LENGTH_RANGE
    bad = []
    for bond in mol.GetBonds():
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        if {mol.GetAtomWithIdx(i).GetSymbol(), mol.GetAtomWithIdx(j).GetSymbol()} & METALS:
            continue
        length = float(np.linalg.norm(coords[i] - coords[j]))
        if not low <= length <= high:
            bad.append((i, j, length))
    if not bad:
        return []
    i, j, length = bad[0]
    example = f"atoms {i + 1}–{j + 1}: {length:.2f} Å"
    return [Finding(ERROR, "bond_lengths", f"{len(bad)} bond(s) outside {low}–{high} Å (e.g. {example}): the "
                    "coordinates do not fit the bonds, not a valid 3D pose", source)]


def molecule_findings(mol: Chem.Mol) -> list[Finding]:
    """Every ligand check of an RDKit molecule read from SDF/MOL2 (see the module notes).

    Beyond :func:`ligand_geometry_findings` and :func:`ligand_size_findings`: a 2D flag in the
    file, tetrahedral centres flattened into a plane (a 2D drawing rotated or moved into the
    pocket), bond lengths that are not physical, several disconnected pieces (warning), and a
    molecule RDKit could not sanitise (warning; see :mod:`geomol.data.io.molecule`).
    """
    source = molecule_source(mol)
    coords = mol.GetConformer().GetPositions()
    found = ligand_geometry_findings(coords, source)
    heavy = sum(a.GetAtomicNum() > 1 for a in mol.GetAtoms())
    found += ligand_size_findings(heavy, 0, source)
    if found:
        return found
    if not mol.GetConformer().Is3D():
        found.append(Finding(ERROR, "not_3d", "the file marks the molecule as 2D (and all z are 0): not a 3D pose. "
                             "Dock it or generate 3D coordinates in the pocket first", source))
    centres, flat = _flattened_centres(mol, coords)
    if centres and flat == centres:
        found.append(Finding(ERROR, "not_3d", f"all {centres} tetrahedral centre(s) lie flat in the plane of their "
                             "neighbours: a 2D drawing moved into 3D, not a 3D pose. Dock it or generate 3D "
                             "coordinates first", source))
    found += _bond_findings(mol, coords, source)
    if not errors_of(found):  # a 2D drawing or broken bonds overlap atoms as a consequence
        found += overlap_findings(mol, source)
    pieces = len(Chem.GetMolFrags(mol)) if mol.GetNumBonds() or mol.GetNumAtoms() > 1 else 1
    if pieces > 1:
        found.append(Finding(WARNING, "fragments", f"{pieces} disconnected pieces (salt, counter-ions or missing "
                             "bonds?); all are scored as one ligand", source))
    problem = _sanitisation_problem(mol)
    if problem:
        found.append(Finding(WARNING, "not_sanitised", f"RDKit could not sanitise it ({problem}); scored from the "
                             "elements and coordinates as written", source))
    return found


def _sanitisation_problem(mol: Chem.Mol) -> str:
    """Why RDKit cannot sanitise the molecule ('' if it can); a file reader records it when reading."""
    if mol.HasProp("_geomol_sanitize_error"):
        return mol.GetProp("_geomol_sanitize_error")
    with rdkit_messages() as messages:
        failed = Chem.SanitizeMol(Chem.Mol(mol), catchErrors=True)
    return "" if failed == Chem.SanitizeFlags.SANITIZE_NONE else sanitisation_hint(rdkit_reason(messages, str(failed)))


def structure_ligand_findings(ligand: Structure) -> list[Finding]:
    """Ligand checks of a ligand read from a PDB/mmCIF file (no bonds: geometry and size only)."""
    polymer = sum(is_polymer_residue(name) for name in ligand.resnames)
    return (ligand_geometry_findings(ligand.coords, ligand.source)
            + ligand_size_findings(int(ligand.is_heavy.sum()), polymer, ligand.source))


# ---------------------------------------------------------------------- the receptor, and the two together
def receptor_findings(resnames: Sequence[str], source: str = "") -> list[Finding]:
    """A receptor without any amino-acid or nucleotide residue (a host–guest system, a lone cofactor)."""
    if any(is_polymer_residue(name) for name in resnames):
        return []
    kinds = sorted(set(resnames))[:5]
    return [Finding(ERROR, "receptor_not_biopolymer", "the receptor has no amino-acid or nucleotide residue "
                    f"(residues: {', '.join(kinds) or 'none'}): the model scores ligands bound to proteins and nucleic acids; "
                    "a host–guest or other non-biomolecular receptor is outside what it knows", source)]


def _not_in_pocket(detail: str, source: str) -> Finding:
    return Finding(ERROR, "not_in_pocket", f"{detail}: the ligand is not in a pocket. Give its pose in the receptor's "
                   "frame (docked or from the same crystal structure)", source)


def contact_findings(ligand: np.ndarray, receptor: np.ndarray, receptor_elements: Sequence[str] | None = None,
                     source: str = "") -> list[Finding]:
    """Ligand placed on top of receptor atoms (clash) or away from any of them (not in a pocket).

    Args:
        ligand: [N, 3] ligand heavy-atom positions (Å).
        receptor: [M, 3] receptor heavy-atom positions (Å), at least those near the ligand.
        receptor_elements: M element symbols (metal contacts are not clashes); None: all non-metal.
    """
    ligand = np.asarray(ligand, dtype=np.float64).reshape(-1, 3)
    receptor = np.asarray(receptor, dtype=np.float64).reshape(-1, 3)
    inside = ((receptor >= ligand.min(0) - CONTACT_DISTANCE) & (receptor <= ligand.max(0) + CONTACT_DISTANCE)
              ).all(axis=1) if len(ligand) else np.zeros(len(receptor), dtype=bool)
    if not inside.any():
        return [_not_in_pocket(f"no receptor heavy atom within {CONTACT_DISTANCE} Å of the ligand", source)]
    near = receptor[inside]
    elements = None if receptor_elements is None else [receptor_elements[k] for k in np.flatnonzero(inside)]
    distances = np.linalg.norm(ligand[:, None, :] - near[None, :, :], axis=-1)  # [N, M']
    closest = float(distances.min())
    if closest > CONTACT_DISTANCE:
        return [_not_in_pocket(f"the closest receptor heavy atom is {closest:.1f} Å away (more than "
                               f"{CONTACT_DISTANCE} Å)", source)]
    overlapping = int((distances.min(1) < CLASH_DISTANCE).sum())
    if overlapping:
        return [Finding(ERROR, "clash", f"{overlapping} ligand heavy atom(s) closer than {CLASH_DISTANCE} Å to "
                        f"receptor heavy atoms (closest {closest:.2f} Å): the ligand clashes with the receptor. "
                        "Re-pose or minimise it in the pocket (and check that the pose belongs to this receptor "
                        "structure)", source)]
    non_metal = np.array([e not in METALS for e in elements]) if elements is not None else np.ones(len(near), bool)
    to_non_metal = distances[:, non_metal].min(1) if non_metal.any() else np.full(len(ligand), np.inf)
    close = to_non_metal < CLOSE_CONTACT_DISTANCE
    if close.any():
        return [Finding(WARNING, "close_contact", f"{int(close.sum())} ligand heavy atom(s) closer than "
                        f"{CLOSE_CONTACT_DISTANCE} Å to receptor non-metal heavy atoms (closest "
                        f"{float(to_non_metal.min()):.2f} Å): a steric clash unless covalently bound; minimise the "
                        "pose in the pocket", source)]
    return []
