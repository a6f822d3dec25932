"""The eight MD17 molecules as SMILES, and a starting conformer of any SMILES from RDKit.

Atom order matters: the MD17 reader (:mod:`geomol.data.datasets.trajectories.md17`) and the official EGNO loader
mark fixed heavy-atom index pairs of each molecule as "sticks" (rigid bonds of the kinematic
decomposition). The SMILES below are written so that, with heavy atoms first in SMILES order
(or in atom-map order where the SMILES carries atom maps) and hydrogens after them, every stick
pair of :data:`geomol.data.datasets.trajectories.md17.STICK_PAIRS` is a chemical bond. The file names
follow the official loader (``md17_<name>.npz``; benzene is ``benzene_old`` there).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geomol.errors import ConfigError, InvalidSmilesError, EmbeddingError

__all__ = ["MD17_MOLECULES", "DRUG_LIKE_MOLECULES", "MOLECULES", "StartingStructure", "molecule_smiles",
           "starting_structure"]

MD17_MOLECULES: dict[str, str] = {
    "aspirin": "[cH:1]1[cH:3][cH:10][c:12]([O:13][C:11]([CH3:5])=[O:8])[c:6]([C:2](=[O:4])[OH:9])[cH:7]1",
    "benzene_old": "c1ccccc1",
    "ethanol": "CCO",
    "malonaldehyde": "O=CCC=O",
    "naphthalene": "c1cccc2c1cccc2",
    "salicylic": "c1(ccccc1C(=O)O)O",
    "toluene": "Cc1ccccc1",
    "uracil": "O=C1C=CNC(=O)N1",
}
"""name (as in ``md17_<name>.npz``) → SMILES in the stick-compatible atom order."""

DRUG_LIKE_MOLECULES: dict[str, str] = {
    # the training set of egno-molecules beside the eight MD17 molecules: aromatic rings (benzene, pyridine,
    # thiophene, imidazole, indole) with their common substituents (OH, OMe, F, Cl, NH2, CHO, COOH, COMe, COOMe, CONH2,
    # acetamido), para- and ortho-disubstituted rings, saturated rings and small chains (acid, ester, amide);
    # neutral closed-shell molecules of C, N, O, F, S, Cl
    "phenol": "Oc1ccccc1",
    "pyridine": "c1ccncc1",
    "benzoic_acid": "OC(=O)c1ccccc1",
    "acetanilide": "CC(=O)Nc1ccccc1",
    "anisole": "COc1ccccc1",
    "fluorobenzene": "Fc1ccccc1",
    "chlorobenzene": "Clc1ccccc1",
    "thiophene": "c1ccsc1",
    "n_methylacetamide": "CNC(C)=O",
    "acetic_acid": "CC(=O)O",
    "imidazole": "c1cnc[nH]1",
    "methyl_acetate": "COC(C)=O",
    "benzaldehyde": "O=Cc1ccccc1",
    "aniline": "Nc1ccccc1",
    # para- and ortho-disubstituted rings, aryl carbonyls (ketone, ester, amide)
    "p_cresol": "Cc1ccc(O)cc1",
    "hydroquinone": "Oc1ccc(O)cc1",
    "acetophenone": "CC(=O)c1ccccc1",
    "methyl_benzoate": "COC(=O)c1ccccc1",
    "benzamide": "NC(=O)c1ccccc1",
    "guaiacol": "COc1ccccc1O",
    # saturated rings
    "piperidine": "C1CCNCC1",
    "cyclohexanol": "OC1CCCCC1",
    "morpholine": "C1COCCN1",
    # fused and heteroaromatic rings with drug-like substituents, benzylic chains, more para-disubstituted rings
    "indole": "c1ccc2[nH]ccc2c1",
    "nicotinamide": "NC(=O)c1cccnc1",
    "aminopyridine": "Nc1ccccn1",
    "benzyl_alcohol": "OCc1ccccc1",
    "phenylacetic_acid": "OC(=O)Cc1ccccc1",
    "p_fluorophenol": "Oc1ccc(F)cc1",
    "p_toluidine": "Cc1ccc(N)cc1",
    # held out from egno-molecules' training, for its zero-shot test
    "paracetamol": "CC(=O)Nc1ccc(O)cc1",
    "methyl_salicylate": "COC(=O)c1ccccc1O",
}
"""name → SMILES of further small drug-like molecules (``geomol simulate molecule paracetamol``)."""

MOLECULES: dict[str, str] = {**MD17_MOLECULES, **DRUG_LIKE_MOLECULES}
"""Every molecule ``geomol simulate`` knows by name."""


@dataclass(frozen=True)
class StartingStructure:
    """A molecule ready to simulate: heavy atoms first, then hydrogens.

    Attributes:
        smiles: the input SMILES. numbers: [n] atomic numbers. masses: [n] amu.
        positions: [n, 3] Å (RDKit ETKDG conformer, MMFF94-relaxed where MMFF knows the molecule).
        bonds: [(i, j)] chemical bonds of the graph, i < j.
    """

    smiles: str
    numbers: np.ndarray
    masses: np.ndarray
    positions: np.ndarray
    bonds: tuple[tuple[int, int], ...]


def molecule_smiles(molecule: str) -> str:
    """SMILES of a molecule name (:data:`MOLECULES`); any other string is taken as a SMILES itself."""
    return MOLECULES.get(molecule, molecule)


def _ordered_molecule(smiles: str):
    from rdkit import Chem

    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        raise InvalidSmilesError(f"RDKit cannot parse SMILES {smiles!r}")
    maps = [atom.GetAtomMapNum() for atom in mol.GetAtoms()]
    if any(maps):
        if sorted(maps) != list(range(1, len(maps) + 1)):
            raise InvalidSmilesError(f"atom maps of {smiles!r} must number every atom 1..{len(maps)}")
        mol = Chem.RenumberAtoms(mol, [int(i) for i in np.argsort(maps)])
        for atom in mol.GetAtoms():
            atom.SetAtomMapNum(0)
    return Chem.AddHs(mol)


def starting_structure(molecule: str, seed: int = 0) -> StartingStructure:
    """Starting structure of an MD17 molecule name or a SMILES (a neutral, closed-shell molecule).

    Args:
        molecule: MD17 name (see :data:`MD17_MOLECULES`) or SMILES.
        seed: RDKit embedding seed (the same seed gives the same conformer).

    Raises:
        InvalidSmilesError: unparseable SMILES. EmbeddingError: no 3D conformer.
    """
    from rdkit.Chem import AllChem

    smiles = molecule_smiles(molecule)
    mol = _ordered_molecule(smiles)
    if sum(atom.GetFormalCharge() for atom in mol.GetAtoms()) != 0:
        raise ConfigError(f"{smiles!r} is charged; the generator simulates neutral molecules")
    params = AllChem.ETKDGv3()
    params.randomSeed = int(seed)
    if AllChem.EmbedMolecule(mol, params) != 0:
        raise EmbeddingError(f"RDKit found no 3D conformer of {smiles!r}")
    if AllChem.MMFFHasAllMoleculeParams(mol):
        AllChem.MMFFOptimizeMolecule(mol, maxIters=2000)
    bonds = tuple(sorted((min(b.GetBeginAtomIdx(), b.GetEndAtomIdx()), max(b.GetBeginAtomIdx(), b.GetEndAtomIdx()))
                         for b in mol.GetBonds()))
    return StartingStructure(smiles, np.array([a.GetAtomicNum() for a in mol.GetAtoms()], dtype=np.int64),
                             np.array([a.GetMass() for a in mol.GetAtoms()], dtype=np.float64),
                             mol.GetConformer().GetPositions().astype(np.float64), bonds)
