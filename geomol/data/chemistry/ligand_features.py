"""Ligand-only features: folded Morgan count fingerprints plus a few whole-molecule descriptors.

These feed the ligand-only baseline (a model that never sees the protein) and any read-out that
wants the ligand's chemistry next to a structure model. Counts, not bits: how many times a
substructure occurs carries size and repetition, which matter for affinity.

Feature vector of one molecule (float64): ``n_bits`` Morgan counts (radius ``radius``, folded),
then :data:`DESCRIPTOR_NAMES` in that order (units: molecular weight in Da, TPSA in Å², logP as
Crippen's estimate, the rest counts or fractions).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from rdkit import Chem, RDLogger
from rdkit.Chem import Crippen, Descriptors, rdFingerprintGenerator, rdMolDescriptors

from geomol.errors import InvalidSmilesError

__all__ = ["DESCRIPTOR_NAMES", "GRAPH_MORGAN_BITS", "molecule_from_smiles", "heavy_atom_count", "ligand_descriptors",
           "morgan_counts", "graph_ligand_features", "LigandFeaturizer"]

DESCRIPTOR_NAMES = ("heavy_atoms", "mol_weight", "logp", "tpsa", "h_bond_donors", "h_bond_acceptors",
                    "rotatable_bonds", "rings", "aromatic_rings", "formal_charge", "fraction_sp3")


def molecule_from_smiles(smiles: str, source: str | None = None) -> Chem.Mol:
    """The molecule of a SMILES string, sanitised, or partly sanitised when RDKit cannot kekulise it.

    The corpus writes a ligand RDKit cannot sanitise (a MOL2 aromatic ring without its N-H) from its
    raw graph (:func:`~geomol.data.datasets.corpus_items.canonical_smiles`); such a graph still has
    valid atoms, bonds and rings, which is all the fingerprint and the descriptors need.

    Raises:
        InvalidSmilesError: RDKit cannot parse it even unsanitised (naming ``source`` when given).
    """
    RDLogger.DisableLog("rdApp.*")  # the error below says what failed; RDKit's own lines would repeat it
    try:
        mol = Chem.MolFromSmiles(smiles) if smiles else None
        if mol is None and smiles:
            mol = Chem.MolFromSmiles(smiles, sanitize=False)
            if mol is not None:
                mol.UpdatePropertyCache(strict=False)
                Chem.SanitizeMol(mol, Chem.SanitizeFlags.SANITIZE_SYMMRINGS | Chem.SanitizeFlags.SANITIZE_SETCONJUGATION
                                 | Chem.SanitizeFlags.SANITIZE_SETHYBRIDIZATION, catchErrors=True)
    finally:
        RDLogger.EnableLog("rdApp.*")
    if mol is None:
        raise InvalidSmilesError(f"RDKit cannot read SMILES {smiles!r}", source=source)
    return mol


def heavy_atom_count(smiles: str) -> int:
    """Atoms other than hydrogen in the molecule of ``smiles``."""
    return molecule_from_smiles(smiles).GetNumHeavyAtoms()


def ligand_descriptors(mol: Chem.Mol) -> np.ndarray:
    """:data:`DESCRIPTOR_NAMES` of one molecule, shape ``(len(DESCRIPTOR_NAMES),)``."""
    return np.array([
        mol.GetNumHeavyAtoms(),
        Descriptors.MolWt(mol),
        Crippen.MolLogP(mol),
        rdMolDescriptors.CalcTPSA(mol),
        rdMolDescriptors.CalcNumHBD(mol),
        rdMolDescriptors.CalcNumHBA(mol),
        rdMolDescriptors.CalcNumRotatableBonds(mol),
        rdMolDescriptors.CalcNumRings(mol),
        rdMolDescriptors.CalcNumAromaticRings(mol),
        Chem.GetFormalCharge(mol),
        rdMolDescriptors.CalcFractionCSP3(mol),
    ], dtype=np.float64)


GRAPH_MORGAN_BITS = 1024
"""Length of the Morgan count fingerprint a complex graph carries (``ligand_morgan``)."""


def graph_ligand_features(mol: Chem.Mol | None, ligand_xyz: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """What a complex graph carries of its ligand's chemistry, for read-outs that use it.

    ``ligand_descriptors``: [1, len(DESCRIPTOR_NAMES)] float32 (rotatable bonds for an entropy penalty,
    the heavy-atom count and the rest for hybrid read-outs); ``ligand_morgan``: [1, GRAPH_MORGAN_BITS]
    uint8 Morgan counts (radius 2, capped at 255), computed on the heavy-atom graph so that a molecule
    with explicit hydrogens (an SDF) gets the counts of its SMILES. Without a molecule (a ligand read
    from PDB records, a protein partner) or when RDKit cannot compute them (an unsanitisable record),
    descriptors are NaN and counts 0: read-outs that need them refuse such graphs.

    With ``ligand_xyz`` (``(L, 3)`` Å, the graph's ligand heavy atoms) also ``ligand_chemistry``: the atoms'
    interaction roles in that order (:func:`~geomol.data.chemistry.atom_roles.graph_ligand_chemistry`), perceived on
    the same hydrogen-free molecule.
    """
    from geomol.data.chemistry.atom_roles import graph_ligand_chemistry

    descriptors = np.full((1, len(DESCRIPTOR_NAMES)), np.nan, dtype=np.float32)
    counts = np.zeros((1, GRAPH_MORGAN_BITS), dtype=np.uint8)
    heavy = None
    if mol is not None:
        RDLogger.DisableLog("rdApp.*")
        try:
            heavy = Chem.RemoveHs(mol)
            descriptors[0] = ligand_descriptors(heavy)
            counts[0] = np.minimum(morgan_counts(heavy, n_bits=GRAPH_MORGAN_BITS), 255)
        except (RuntimeError, ValueError):  # RDKit's sanitisation errors (Chem.AtomValenceException, ...)
            descriptors[:], counts[:], heavy = np.nan, 0, None
        finally:
            RDLogger.EnableLog("rdApp.*")
    out = {"ligand_descriptors": descriptors, "ligand_morgan": counts}
    if ligand_xyz is not None:
        out["ligand_chemistry"] = graph_ligand_chemistry(ligand_xyz, mol, heavy=heavy)
    return out


def morgan_counts(mol: Chem.Mol, radius: int = 2, n_bits: int = 1024) -> np.ndarray:
    """Folded Morgan count fingerprint, shape ``(n_bits,)``: occurrences of each hashed environment."""
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    return generator.GetCountFingerprintAsNumPy(mol).astype(np.float64)


class LigandFeaturizer:
    """Feature matrix of many SMILES; each distinct SMILES is featurised once (series share ligands).

    Args:
        radius: Morgan radius (2 = ECFP4-like environments).
        n_bits: fingerprint length after folding.
    """

    def __init__(self, radius: int = 2, n_bits: int = 1024):
        self.radius, self.n_bits = radius, n_bits
        self._generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
        self._rows: dict[str, np.ndarray] = {}

    @property
    def feature_names(self) -> list[str]:
        return [f"morgan{self.radius}_{i}" for i in range(self.n_bits)] + list(DESCRIPTOR_NAMES)

    def features(self, smiles: str, source: str | None = None) -> np.ndarray:
        """One molecule's vector, shape ``(n_bits + len(DESCRIPTOR_NAMES),)``."""
        if smiles not in self._rows:
            mol = molecule_from_smiles(smiles, source)
            counts = self._generator.GetCountFingerprintAsNumPy(mol).astype(np.float64)
            self._rows[smiles] = np.concatenate([counts, ligand_descriptors(mol)])
        return self._rows[smiles]

    def matrix(self, smiles: Sequence[str], sources: Sequence[str] | None = None) -> np.ndarray:
        """Features of every SMILES, shape ``(len(smiles), n_bits + len(DESCRIPTOR_NAMES))``.

        Args:
            sources: per SMILES, where it came from (an item id), named in the error of an unreadable one.
        """
        names = sources if sources is not None else [None] * len(smiles)
        return np.stack([self.features(s, name) for s, name in zip(smiles, names)])
