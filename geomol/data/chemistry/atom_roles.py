"""Interaction roles of atoms: what a ligand atom or a receptor atom can do in a contact.

Elements alone do not say whether an oxygen accepts or donates a hydrogen bond, or whether a nitrogen
carries a charge at physiological pH. The contact features (:mod:`geomol.data.chemistry.contact_features`) use
these roles to split hydrogen bonds by direction and to count salt bridges, aromatic stacking and
polar atoms buried against carbon.

* Ligand atoms (:func:`ligand_atom_chemistry`, from the RDKit molecule with its bond orders):
  :data:`LIGAND_CHEMISTRY`, one row per heavy atom. Charges are those a medicinal chemist assumes at
  pH 7: aliphatic amines, amidines and guanidines are cations; carboxylic, phosphonic and sulfonic
  acids and tetrazoles are anions, whether the record draws them neutral or charged.
* Receptor atoms (:func:`receptor_atom_roles`, from the graph of sets: residue type, element and
  position code): :data:`RECEPTOR_ROLES`. Every protein N donates except proline's; every O accepts;
  serine, threonine and tyrosine hydroxyls also donate; histidine's ring N do both; Asp/Glu carboxylate
  O and the C-terminal OXT are anions, Lys NZ and the Arg guanidinium N are cations; ring carbons of
  Phe, Tyr, Trp and His are aromatic. Atoms outside amino-acid blocks (cofactors, nucleotides) get
  roles from their element only (O accepts).

:func:`graph_ligand_chemistry` aligns the ligand rows with a complex graph's ligand atoms by their
coordinates, so it holds whatever order the ligand's blocks (single atoms or fragments) put them in.
"""
from __future__ import annotations

import numpy as np
from rdkit import Chem, RDLogger
from scipy.spatial import cKDTree

from geomol.data.vocab import AMINO_ACIDS, POSITION_CODES, VOCAB, position_index

__all__ = ["LIGAND_CHEMISTRY", "RECEPTOR_ROLES", "ligand_atom_chemistry", "graph_ligand_chemistry",
           "receptor_atom_roles"]

LIGAND_CHEMISTRY = ("donor", "acceptor", "aromatic", "cation", "anion", "ring", "sp3", "hydrogens")
"""Columns of a ligand atom's row: 0/1 flags, and ``hydrogens`` (attached H, 0 … 3)."""
RECEPTOR_ROLES = ("donor", "acceptor", "cation", "anion", "aromatic")

# Ionisable groups at pH 7 (SMARTS on the heavy-atom molecule; every matched atom takes the charge).
_CATIONS = (
    # aliphatic amine N: not on an aromatic ring, a carbonyl/imine/thiocarbonyl C, S/P=O, N, O or a multiple bond
    "[NX3;!a;!$(N-a);!$(N-[#6]=[#7,#8,#16]);!$(N-[#16,#15]);!$(N-[#7,#8]);!$(N-C#N)]",
    "[NX3;!a][CX3;!a]=[NX2;!a]", "[NX2;!a]=[CX3;!a][NX3;!a]",  # amidine and guanidine N
    "[#7+;!$([#7+]~[#8-]);!$([#7+]=[#8])]",  # drawn charged (not a nitro or N-oxide)
)
_ANIONS = (
    "[OX2H1,OX1-][CX3]=[OX1]", "[OX1]=[CX3][OX2H1,OX1-]",  # carboxylic acid / carboxylate O
    "[OX2H1,OX1-][P,S](=O)", "[OX1]=[P,S][OX2H1,OX1-]",  # phosphonic / sulfonic acid O
    "[nH,n-]1nnnc1", "n1[nH,n-]nnc1", "n1n[nH,n-]nc1",  # tetrazole N
    "[#8-;!$([#8-]~[#7+])]", "[#7-,#16-]",  # drawn charged (not a nitro or N-oxide O)
)
_ACCEPTOR_N = "[#7;X1,X2;H0;+0]"  # nitrile, imine, pyridine-like N; an amine N is a cation, an amide N neither
_CATION_PATTERNS, _ANION_PATTERNS, _ACCEPTOR_N_PATTERNS = (
    [Chem.MolFromSmarts(s) for s in group] for group in (_CATIONS, _ANIONS, (_ACCEPTOR_N,)))


def _matched(mol: Chem.Mol, patterns: list[Chem.Mol]) -> np.ndarray:
    """``(n_atoms,)`` bool: atoms in any match of the patterns."""
    hit = np.zeros(mol.GetNumAtoms(), dtype=bool)
    for pattern in patterns:
        for match in mol.GetSubstructMatches(pattern, uniquify=False):
            hit[list(match)] = True
    return hit


def ligand_atom_chemistry(mol: Chem.Mol, heavy: Chem.Mol | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Interaction roles of a molecule's heavy atoms.

    Args:
        mol: RDKit molecule (with or without explicit hydrogens; with a conformer for the positions).
        heavy: ``mol`` already without hydrogens and sanitised (``Chem.RemoveHs(mol)``), when the caller has it.

    Returns:
        ``(rows, xyz)``: ``(L, len(LIGAND_CHEMISTRY))`` uint8 rows and ``(L, 3)`` float64 positions (Å, zeros
        without a conformer) of the L heavy atoms, in the molecule's atom order.
    """
    RDLogger.DisableLog("rdApp.*")
    try:
        if heavy is None:
            heavy = Chem.RemoveHs(mol, sanitize=False)
            heavy.UpdatePropertyCache(strict=False)
            Chem.FastFindRings(heavy)
        sp3 = Chem.HybridizationType.SP3
        z, hydrogens, aromatic, in_ring, is_sp3 = np.array(
            [(a.GetAtomicNum(), a.GetTotalNumHs(), a.GetIsAromatic(), a.IsInRing(), a.GetHybridization() == sp3)
             for a in heavy.GetAtoms()], dtype=np.int64).reshape(-1, 5).T
        cation = _matched(heavy, _CATION_PATTERNS)
        anion = _matched(heavy, _ANION_PATTERNS) & ~cation
        acceptor = ((z == 8) & ~cation) | _matched(heavy, _ACCEPTOR_N_PATTERNS) | (anion & (z == 7))
        rows = np.stack([
            np.isin(z, (7, 8)) & (hydrogens > 0) | cation & (z == 7),
            acceptor & ~(cation & (z == 7)),
            aromatic, cation, anion, in_ring, is_sp3, np.minimum(hydrogens, 3),
        ], axis=1).astype(np.uint8)
    finally:
        RDLogger.EnableLog("rdApp.*")
    xyz = heavy.GetConformer().GetPositions() if heavy.GetNumConformers() else np.zeros((len(z), 3))
    return rows, np.asarray(xyz, dtype=np.float64)


def graph_ligand_chemistry(ligand_xyz: np.ndarray, mol: Chem.Mol | None, tolerance: float = 1e-2,
                           heavy: Chem.Mol | None = None) -> np.ndarray:
    """:func:`ligand_atom_chemistry` rows in the order of a graph's ligand heavy atoms.

    Args:
        ligand_xyz: ``(L, 3)`` Å, the graph's ligand heavy atoms.
        mol: the molecule the graph's ligand was built from (``None``: all rows zero).
        heavy: ``mol`` sanitised without hydrogens, when the caller has it (saves perceiving it again).
        tolerance: Å, how far a graph atom may sit from its molecule atom (coordinates stored as float32).

    Returns:
        ``(L, len(LIGAND_CHEMISTRY))`` uint8; all zero when there is no molecule, RDKit cannot perceive its
        chemistry, or its atoms are not the graph's (a ligand moved after building).
    """
    out = np.zeros((len(ligand_xyz), len(LIGAND_CHEMISTRY)), dtype=np.uint8)
    if mol is None or len(ligand_xyz) == 0:
        return out
    try:
        rows, xyz = ligand_atom_chemistry(mol, heavy)
    except (RuntimeError, ValueError):  # RDKit's perception errors on an unsanitisable record
        return out
    ligand_xyz = np.asarray(ligand_xyz, dtype=np.float64)
    if len(rows) != len(ligand_xyz):
        return out
    if np.abs(xyz - ligand_xyz).max() <= tolerance:  # one block per atom: the molecule's own order
        return rows
    distance, nearest = cKDTree(xyz).query(ligand_xyz)
    return out if (distance > tolerance).any() else rows[nearest]


_FIRST_AMINO_ACID = VOCAB.index(AMINO_ACIDS[0][0])  # vocabulary index of the first residue block (AMINO_ACIDS order)
_RESIDUE = {three: i for i, (_, three) in enumerate(AMINO_ACIDS)}
_ROLE = {name: k for k, name in enumerate(RECEPTOR_ROLES)}
_SIDE_CHAIN_ROLES = {  # (residue, element, position code) -> roles
    **{(res, 8, pos): ("acceptor", "donor") for res, pos in (("SER", "G"), ("THR", "G"), ("TYR", "H"))},
    **{("HIS", 7, pos): ("acceptor", "donor") for pos in ("D", "E")},
    ("ASP", 8, "D"): ("acceptor", "anion"), ("GLU", 8, "E"): ("acceptor", "anion"),
    ("LYS", 7, "Z"): ("donor", "cation"), ("ARG", 7, "E"): ("donor", "cation"), ("ARG", 7, "H"): ("donor", "cation"),
    **{("PHE", 6, pos): ("aromatic",) for pos in "GDEZ"}, **{("TYR", 6, pos): ("aromatic",) for pos in "GDEZ"},
    **{("TRP", 6, pos): ("aromatic",) for pos in "GDEZH"}, **{("HIS", 6, pos): ("aromatic",) for pos in "GDE"},
}


def _role_table() -> np.ndarray:
    """``(n_amino_acids, 119, n_position_codes, n_roles)`` bool: side-chain and terminal roles by (residue, Z, position)."""
    table = np.zeros((len(AMINO_ACIDS), 119, len(POSITION_CODES), len(RECEPTOR_ROLES)), dtype=bool)
    for (res, z, pos), roles in _SIDE_CHAIN_ROLES.items():
        table[_RESIDUE[res], z, position_index(pos), [_ROLE[r] for r in roles]] = True
    table[:, 8, position_index("XT"), [_ROLE["acceptor"], _ROLE["anion"]]] = True
    return table


_ROLE_TABLE = _role_table()


def receptor_atom_roles(block_type: np.ndarray, atomic_number: np.ndarray, position: np.ndarray) -> np.ndarray:
    """:data:`RECEPTOR_ROLES` of receptor atoms from the graph of sets.

    Args:
        block_type: ``(R,)`` vocabulary index of each atom's block (:data:`~geomol.data.vocab.VOCAB`).
        atomic_number: ``(R,)``; position: ``(R,)`` position-code index (:data:`~geomol.data.vocab.POSITION_CODES`).

    Returns:
        ``(R, len(RECEPTOR_ROLES))`` bool.
    """
    block_type, atomic_number, position = (np.asarray(v, dtype=np.int64) for v in (block_type, atomic_number, position))
    residue = block_type - _FIRST_AMINO_ACID
    amino = (residue >= 0) & (residue < len(AMINO_ACIDS))
    roles = np.zeros((len(block_type), len(RECEPTOR_ROLES)), dtype=bool)
    roles[:, _ROLE["acceptor"]] = atomic_number == 8
    proline_n = (residue == _RESIDUE["PRO"]) & (atomic_number == 7) & (position == position_index(""))
    roles[:, _ROLE["donor"]] = amino & (atomic_number == 7) & ~proline_n
    inside = amino & (atomic_number >= 0) & (atomic_number < 119) & (position >= 0) & (position < len(POSITION_CODES))
    roles[inside] |= _ROLE_TABLE[residue[inside], atomic_number[inside], position[inside]]
    return roles
