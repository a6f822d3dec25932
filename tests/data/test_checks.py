"""Input checks of geomol.data.chemistry.checks and the MOL2 / RDKit messages of geomol.data.io, on generated and real files."""
from __future__ import annotations

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem

from geomol.data import read_structure
from geomol.data.chemistry.checks import (
    CLASH_DISTANCE,
    CONTACT_DISTANCE,
    closest_nonbonded_pair,
    contact_findings,
    ligand_geometry_findings,
    molecule_findings,
    overlap_findings,
    receptor_findings,
    structure_ligand_findings,
)
from geomol.data.io import read_ligand
from geomol.errors import StructureReadError
from geomol.testing import random_orthogonal
from tests.conftest import shared_path


def codes(findings) -> dict[str, str]:
    return {f.code: f.severity for f in findings}


def embedded(smiles: str, seed: int = 7) -> Chem.Mol:
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    AllChem.EmbedMolecule(mol, randomSeed=seed)
    mol.SetProp("_Name", smiles)
    return mol


def with_coords(mol: Chem.Mol, coords: np.ndarray) -> Chem.Mol:
    out = Chem.Mol(mol)
    conf = out.GetConformer()
    for i, xyz in enumerate(np.asarray(coords, dtype=float)):
        conf.SetAtomPosition(i, xyz.tolist())
    return out


LIGAND = embedded("CC(C)Cc1ccc(cc1)C(C)C(=O)O")  # ibuprofen: tetrahedral centres and a ring


def test_a_real_3d_molecule_passes():
    assert molecule_findings(LIGAND) == []


def test_zero_collapsed_and_duplicated_coordinates_are_errors():
    coords = LIGAND.GetConformer().GetPositions()
    assert codes(molecule_findings(with_coords(LIGAND, np.zeros_like(coords)))) == {"zero_coordinates": "error"}
    collapsed = molecule_findings(with_coords(LIGAND, np.tile([12.0, -3.0, 40.0], (len(coords), 1))))
    assert codes(collapsed)["coincident_atoms"] == "error" and "one point" in str(collapsed[0])
    duplicated = coords.copy()
    duplicated[5] = duplicated[2] + [0.1, 0.0, 0.0]
    (finding,) = [f for f in molecule_findings(with_coords(LIGAND, duplicated)) if f.code == "coincident_atoms"]
    assert "atoms 3 and 6 are 0.10 Å apart" in finding.message and "'CC(C)Cc1ccc" in finding.source


def test_flat_drawings_are_errors_however_they_are_moved():
    flat = Chem.Mol(LIGAND)
    AllChem.Compute2DCoords(flat)  # z = 0, conformer marked 2D
    assert codes(molecule_findings(flat)) == {"not_3d": "error"}
    shifted = flat.GetConformer().GetPositions() + [30.0, 10.0, -7.5]  # same z everywhere
    assert codes(ligand_geometry_findings(shifted)) == {"not_3d": "error"}
    rotated = with_coords(LIGAND, shifted @ random_orthogonal(True).numpy().T)
    rotated.GetConformer().Set3D(True)
    findings = molecule_findings(rotated)
    assert codes(findings) == {"not_3d": "error"} and "tetrahedral centre" in findings[0].message


def test_flat_aromatic_molecule_is_not_mistaken_for_2d():
    assert molecule_findings(embedded("c1ccc2ccccc2c1")) == []  # naphthalene is planar in 3D


def test_stretched_bonds_fragments_and_bad_valence():
    coords = LIGAND.GetConformer().GetPositions().copy()
    coords[0] += 4.0  # a methyl carbon pulled 7 Å away from its neighbour
    assert codes(molecule_findings(with_coords(LIGAND, coords)))["bond_lengths"] == "error"
    salt = embedded("C[NH3+].[Cl-]")
    salt_coords = salt.GetConformer().GetPositions()
    assert codes(molecule_findings(salt)) == {"fragments": "warning", "overlapping_atoms": "error"}  # Cl⁻ at 0,0,0
    salt_coords[2] = salt_coords[1] + [0.0, 0.0, 3.1]  # the chloride 3.1 Å from the ammonium N
    assert codes(molecule_findings(with_coords(salt, salt_coords))) == {"fragments": "warning"}
    bad = Chem.RWMol(LIGAND)
    bad.GetAtomWithIdx(1).SetFormalCharge(-3)
    found = molecule_findings(bad.GetMol())
    assert codes(found) == {"not_sanitised": "warning"}


def test_protein_file_given_as_ligand_is_not_a_small_molecule():
    protein = read_structure(shared_path("plb", "tnks2", "01_protein", "crd", "protein.pdb"))
    (finding,) = structure_ligand_findings(protein)
    assert finding.code == "not_small_molecule" and finding.severity == "error"
    assert "chain:B" in finding.message and "protein.pdb" in finding.source


def test_contacts_clash_and_not_in_a_pocket():
    receptor = np.array([[0.0, 0.0, 0.0], [3.8, 0.0, 0.0], [0.0, 3.8, 0.0]])
    ligand = np.array([[1.9, 1.9, 3.2], [1.9, 1.9, 4.7]])
    assert contact_findings(ligand, receptor) == []
    assert codes(contact_findings(ligand + [0, 0, 40.0], receptor)) == {"not_in_pocket": "error"}
    near_miss = ligand + [0, 0, CONTACT_DISTANCE - 1.0]  # inside the box, closest atom 5.2 Å away
    assert "not in a pocket" in contact_findings(near_miss, receptor)[0].message
    clash = np.array([[0.0, 0.0, CLASH_DISTANCE / 2], [0.0, 0.0, 2.0]])
    assert codes(contact_findings(clash, receptor)) == {"clash": "error"}
    close = np.array([[0.0, 0.0, 1.7], [0.0, 0.0, 3.2]])
    assert codes(contact_findings(close, receptor)) == {"close_contact": "warning"}
    assert contact_findings(close, receptor, ["Zn", "C", "C"]) == []  # metal coordination is no clash


def test_receptor_must_hold_protein_or_nucleic_acid():
    assert receptor_findings(["ALA", "GLY", "HOH"]) == [] and receptor_findings(["DA", "MG"]) == []
    (finding,) = receptor_findings(["CB7", "CB7"], "host.pdb")
    assert finding.code == "receptor_not_biopolymer" and "host–guest" in str(finding) and "host.pdb" in str(finding)


# ---------------------------------------------------------------------- readers: MOL2 typing, RDKit failures
GAFF_MOL2 = """@<TRIPOS>MOLECULE
phenol_gaff
 7 7 1 0 0
SMALL
bcc

@<TRIPOS>ATOM
      1 C1          1.2100    0.7000    0.0000 ca         1 MOL      -0.1
      2 C2          0.0000    1.4000    0.0000 ca         1 MOL      -0.1
      3 C3         -1.2100    0.7000    0.0000 ca         1 MOL      -0.1
      4 C4         -1.2100   -0.7000    0.0000 ca         1 MOL      -0.1
      5 C5          0.0000   -1.4000    0.0000 ca         1 MOL      -0.1
      6 C6          1.2100   -0.7000    0.0000 ca         1 MOL       0.1
      7 O1          2.4000   -1.4000    0.0000 oh         1 MOL      -0.5
@<TRIPOS>BOND
     1     1     2 ar
     2     2     3 ar
     3     3     4 ar
     4     4     5 ar
     5     5     6 ar
     6     6     1 ar
     7     6     7 1
"""


def test_gaff_typed_mol2_names_file_molecule_and_remedy(tmp_path):
    path = tmp_path / "phenol_gaff.mol2"
    path.write_text(GAFF_MOL2)
    with pytest.raises(StructureReadError) as caught:
        read_ligand(path)
    text = str(caught.value)
    assert "phenol_gaff.mol2" in text and "molecule 0 'phenol_gaff'" in text
    assert "GAFF" in text and "'ca'" in text and "SYBYL" in text and "SDF" in text
    sybyl = GAFF_MOL2.replace(" ca ", " C.ar").replace(" oh ", " O.3")
    (tmp_path / "phenol.mol2").write_text(sybyl)
    assert read_ligand(tmp_path / "phenol.mol2").GetNumAtoms() == 7


def test_unsanitisable_record_warns_with_a_remedy(tmp_path):
    block = Chem.MolToMolBlock(Chem.MolFromSmiles("C[N+](C)(C)C")).replace("  1  0  0  0  0  0", "  0  0")
    block = block.replace("M  CHG  1   2   1\n", "")  # a 4-bonded N without its + charge
    path = tmp_path / "quat.sdf"
    path.write_text(block + "$$$$\n")
    with pytest.warns(UserWarning, match="formal charge"):
        mol = read_ligand(path)
    assert "valence" in mol.GetProp("_geomol_sanitize_error")


def test_clash_thresholds_by_hand_computed_distances():
    """A receptor carbon at the origin; one ligand heavy atom at a chosen distance, the other 4 Å away."""
    receptor = np.zeros((1, 3))

    def found(distance: float, elements=None):
        ligand = np.array([[distance, 0.0, 0.0], [distance + 4.0, 0.0, 0.0]])
        return contact_findings(ligand, receptor, elements, source="series.smi [line 4 'lig-12']")

    (error,) = found(1.49)
    assert (error.code, error.severity) == ("clash", "error") and "closest 1.49 Å" in error.message
    assert "Re-pose or minimise" in error.message and "'lig-12'" in error.source
    (warning,) = found(1.51)
    assert (warning.code, warning.severity) == ("close_contact", "warning") and "closest 1.51 Å" in warning.message
    assert codes(found(2.19)) == {"close_contact": "warning"}
    assert found(2.21) == []
    assert found(1.9, ["Zn"]) == [] and codes(found(1.4, ["Zn"])) == {"clash": "error"}


def test_overlapping_atoms_inside_a_ligand_hydrogens_included():
    """Ethane's hydrogens: one moved to a hand-set distance from a hydrogen of the other carbon."""
    ethane = embedded("CC")
    ethane.SetProp("_Name", "ethane-3")
    coords = ethane.GetConformer().GetPositions()
    first = [n.GetIdx() for n in ethane.GetAtomWithIdx(0).GetNeighbors() if n.GetAtomicNum() == 1][0]
    second = [n.GetIdx() for n in ethane.GetAtomWithIdx(1).GetNeighbors() if n.GetAtomicNum() == 1][0]
    assert closest_nonbonded_pair(coords, [(0, 1)])[2] > 1.0  # as embedded: no overlap

    def moved(distance: float) -> Chem.Mol:  # on the line from the second carbon through its hydrogen
        placed = coords.copy()
        outward = placed[second] - placed[1]
        placed[first] = placed[second] + distance * outward / np.linalg.norm(outward)
        return with_coords(ethane, placed)

    found = overlap_findings(moved(0.56))
    assert codes(found) == {"overlapping_atoms": "error"}
    labels = sorted((f"H{first + 1}", f"H{second + 1}"), key=lambda label: int(label[1:]))
    assert f"atoms {labels[0]} and {labels[1]} are 0.56 Å apart" in found[0].message
    assert "'ethane-3'" in found[0].source and "Re-pose or minimise" in found[0].message
    assert overlap_findings(moved(1.01)) == []
    i, j, distance = closest_nonbonded_pair(np.array([[0.0, 0, 0], [0.8, 0, 0], [0.0, 1.5, 0]]), [(0, 1)])
    assert (i, j) == (0, 2) and distance == pytest.approx(1.5)  # a bond at 0.8 Å is no overlap
