"""Ligand poses from SMILES on a reference ligand, checked against expert poses of the FEP+ benchmark."""
from __future__ import annotations

import gzip

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import rdMolAlign

from geomol.data.io import read_ligands, read_structure
from geomol.data.io.smiles import read_smiles_file
from geomol.data.posing.poses import POSE_COLUMNS, PosedLigand, PoseParameters, PoseTemplate, write_poses
from geomol.data.posing.refinement import Pocket, pose_contacts
from geomol.errors import ConfigError, EmbeddingError, InvalidSmilesError, NoCommonCoreError, StructureReadError
from tests.conftest import shared_path


def fep_series(group: str, scheme: str):
    """A series of the FEP+ benchmark: (expert poses by title, the reference = its first ligand, the receptor)."""
    folder = shared_path("fep_benchmark", group)
    experts = {m.GetProp("_Name"): m for m in read_ligands(folder / f"{scheme}_ligands.sdf")}
    return experts, next(iter(experts.values())), read_structure(folder / f"{scheme}_protein.pdb")


@pytest.fixture(scope="module")
def bace():
    """The BACE series of the FEP+ R-group set: expert poses by title, and a template on the first ligand."""
    experts, reference, receptor = fep_series("jacs_set", "bace")
    return experts, reference, PoseTemplate(reference, receptor), receptor


def smiles_of(mol: Chem.Mol) -> str:
    return Chem.MolToSmiles(Chem.RemoveHs(mol))


def heavy_rmsd(pose: Chem.Mol, expert: Chem.Mol) -> float:
    """Symmetry-aware heavy-atom RMSD in place (no superposition), Å."""
    return rdMolAlign.CalcRMS(Chem.RemoveHs(pose), Chem.RemoveHs(expert))


@pytest.mark.parametrize("name", ["CAT-13a", "CAT-4a", "CAT-13m"])
def test_analogues_are_posed_close_to_the_expert_pose(bace, name):
    experts, reference, template, receptor = bace
    posed = template.pose(smiles_of(experts[name]), name)
    assert posed.ok and posed.name == name
    assert heavy_rmsd(posed.molecule, experts[name]) < 1.0
    assert posed.core_atoms >= 16 and posed.core_rmsd < 0.3
    assert posed.min_receptor_distance > 1.0 and posed.clashes is not None
    mol = posed.molecule
    assert mol.GetNumConformers() == 1 and mol.GetProp("_Name") == name
    assert mol.GetNumAtoms() > mol.GetNumHeavyAtoms()  # hydrogens kept, with coordinates, as read_ligand does
    assert np.isfinite(mol.GetConformer().GetPositions()).all()


@pytest.mark.parametrize("name", ["CAT-4c", "CAT-13k"])
def test_refinement_removes_the_clash_or_overlap_of_the_embedded_pose(bace, name):
    """As embedded, CAT-4c has a carbon 1.8 Å from the receptor and CAT-13k two hydrogens 0.9 Å apart."""
    experts, reference, template, receptor = bace
    smiles = smiles_of(experts[name])
    embedded = PoseTemplate(reference, receptor, PoseParameters(refinement=None)).pose(smiles, name)
    refined = template.pose(smiles, name)
    pocket = Pocket(receptor)
    before, after = pose_contacts(embedded.molecule, pocket), pose_contacts(refined.molecule, pocket)
    assert not before.clean and after.clean  # no heavy-atom pair under 2.2 Å, no atoms under 1.0 Å apart
    assert refined.min_receptor_distance == pytest.approx(after.receptor_distance, abs=1e-3)
    assert refined.core_rmsd < 0.1 and refined.core_atoms == embedded.core_atoms
    assert heavy_rmsd(refined.molecule, experts[name]) < heavy_rmsd(embedded.molecule, experts[name]) + 0.1


def test_the_same_seed_gives_the_same_pose(bace):
    experts, reference, template, receptor = bace
    smiles = smiles_of(experts["CAT-13a"])
    again = PoseTemplate(reference, receptor)
    first, second = template.pose(smiles), again.pose(smiles)
    np.testing.assert_array_equal(first.molecule.GetConformer().GetPositions(),
                                  second.molecule.GetConformer().GetPositions())


def test_bad_ligands_raise_their_own_error_and_pose_all_goes_on(bace):
    experts, _, template, _ = bace
    with pytest.raises(InvalidSmilesError, match="C1CC\\(N"):
        template.pose("C1CC(N", source="series.smi [line 2]")
    with pytest.raises(NoCommonCoreError, match="at least 5 needed"):
        template.pose("CCO")
    good = smiles_of(experts["CAT-13a"])
    posed = template.pose_all([("a", "not a smiles"), ("b", good, "series.smi [line 3]"), ("c", "")])
    assert [p.ok for p in posed] == [False, True, False]
    assert "invalid SMILES" in posed[0].error and "empty SMILES" in posed[2].error
    assert posed[0].report() == {"core_atoms": None, "core_rmsd": posed[0].core_rmsd,
                                 "min_receptor_distance": posed[0].min_receptor_distance, "clashes": None}
    assert set(posed[1].report()) == set(POSE_COLUMNS) and posed[1].source == "series.smi [line 3]"


def test_an_impossible_core_geometry_is_an_embedding_error(bace):
    experts, reference, _, _ = bace
    squashed = Chem.Mol(reference)
    conformer = squashed.GetConformer()
    for i, xyz in enumerate(conformer.GetPositions() * 0.4):  # bonds of 0.6 Å: no conformer can hold them
        conformer.SetAtomPosition(i, xyz.tolist())
    with pytest.raises(EmbeddingError, match="no conformer"):
        PoseTemplate(squashed, parameters=PoseParameters(conformers=2)).pose(smiles_of(experts["CAT-13a"]))


def test_without_a_receptor_the_distances_are_not_reported(bace):
    experts, reference, _, _ = bace
    posed = PoseTemplate(reference).pose(smiles_of(experts["CAT-13a"]))
    assert posed.ok and np.isnan(posed.min_receptor_distance) and posed.clashes == 0


def test_invalid_parameters_are_refused():
    with pytest.raises(ConfigError):
        PoseParameters(conformers=0)
    with pytest.raises(ConfigError):
        PoseParameters(clash_distance=-1.0)
    with pytest.raises(ConfigError):
        PoseParameters(embed_attempts=-1)
    with pytest.raises(ConfigError, match="mcs_seed"):
        PoseParameters(mcs_seed="fmcs")


def test_written_poses_read_back_with_their_report(bace, tmp_path):
    experts, _, template, _ = bace
    posed = [template.pose(smiles_of(experts["CAT-13a"]), "CAT-13a"), PosedLigand("bad", "C(", error="invalid")]
    path = tmp_path / "poses.sdf"
    assert write_poses(path, posed) == 1
    (mol,) = read_ligands(path)
    assert mol.GetProp("_Name") == "CAT-13a" and int(mol.GetProp("core_atoms")) == posed[0].core_atoms
    np.testing.assert_allclose(mol.GetConformer().GetPositions(), posed[0].molecule.GetConformer().GetPositions(),
                               atol=1e-3)


# ---------------------------------------------------------------------- SMILES lists
def test_smi_file_with_header_comments_names_and_gzip(tmp_path):
    path = tmp_path / "series.smi.gz"
    path.write_bytes(gzip.compress(b"smiles name\n# a comment\nCCO ethanol\n\nc1ccccc1\nC1CC(N broken one\n"))
    entries = read_smiles_file(path)
    assert [(e.name, e.smiles) for e in entries] == [("ethanol", "CCO"), ("#1", "c1ccccc1"), ("broken one", "C1CC(N")]
    assert entries[1].source.endswith("[line 5]") and entries[2].source.endswith("[line 6 'broken one']")


def test_csv_file_by_column_name_and_its_errors(tmp_path):
    path = tmp_path / "series.csv"
    path.write_text("Name,dG,SMILES\nlig1,-9.1,CCO\nlig2,-8.0,\n")
    entries = read_smiles_file(path)
    assert [(e.name, e.smiles) for e in entries] == [("lig1", "CCO"), ("lig2", "")]
    (tmp_path / "no_smiles.csv").write_text("name,dG\nlig1,-9\n")
    with pytest.raises(StructureReadError, match="no SMILES column"):
        read_smiles_file(tmp_path / "no_smiles.csv")
    (tmp_path / "series.txt").write_text("CCO\n")
    with pytest.raises(StructureReadError, match="expected a SMILES list"):
        read_smiles_file(tmp_path / "series.txt")


def test_a_ring_atom_change_that_times_the_element_search_out_still_finds_the_core():
    """c-Met: pyridine → pyrimidine makes the element-exact search run past its timeout."""
    experts = read_ligands(shared_path("fep_benchmark", "merck", "cmet_ligands.sdf"))
    analogue = next(m for m in experts if m.GetProp("_Name") == "CHEMBL3402754_40")
    posed = PoseTemplate(experts[0], parameters=PoseParameters(mcs_timeout=1, conformers=2)).pose(smiles_of(analogue))
    assert posed.core_atoms >= 20 and posed.core_rmsd < 0.3


def test_the_rascal_seed_finds_the_core_the_unseeded_search_runs_out_of_time_on():
    """Factor Xa (Yoshikawa set): 38 heavy atoms, a 28-atom common core that rdFMCS alone does not reach."""
    experts = read_ligands(shared_path("fep_benchmark", "opls_stress", "fxa_yoshikawa_set_ligands.sdf"))
    reference, analogue = experts[0], smiles_of(experts[1])
    seeded = PoseTemplate(reference, parameters=PoseParameters(conformers=1)).pose(analogue)
    unseeded = PoseTemplate(reference, parameters=PoseParameters(conformers=1, mcs_seed="none", mcs_timeout=1))
    assert seeded.core_atoms >= 28 and seeded.core_rmsd < 0.3
    assert unseeded.pose(analogue).core_atoms < seeded.core_atoms


def test_a_rascal_core_with_part_of_a_ring_is_trimmed_to_a_seed_rdfmcs_accepts():
    """PTP1B: RASCAL matches one atom of a ring that replaced a chain; rdFMCS would refuse that seed
    (and search from scratch), so the seed must lose it and the core found must contain the seed."""
    from rdkit.Chem import rdFMCS

    from geomol.data.posing.common_core import find_mcs, rascal_seed

    experts = read_ligands(shared_path("fep_benchmark", "jacs_set", "ptp1b_ligands.sdf"))
    template = PoseTemplate(experts[0], parameters=PoseParameters(conformers=1))
    analogue = Chem.MolFromSmiles(smiles_of(experts[4]))
    seed = rascal_seed(template.reference, analogue, timeout=2)
    core = find_mcs(template.reference, analogue, rdFMCS.AtomCompare.CompareElements, seed, timeout=2)
    assert Chem.MolFromSmarts(seed).GetNumAtoms() == core.numAtoms == 21  # the benzamide C is not the oxane's
    assert template.pose(smiles_of(experts[4])).core_atoms == 21


def test_mirror_images_join_only_for_ligands_without_stereocentres():
    from rdkit.Chem import AllChem

    from geomol.data.posing.embedding import add_mirror_image, without_stereocentres

    assert without_stereocentres(Chem.MolFromSmiles("CC(O)CC"))  # unassigned: either hand is the molecule
    assert not without_stereocentres(Chem.MolFromSmiles("C[C@H](O)CC"))
    mol = Chem.MolFromSmiles("CC(O)Cc1ccccc1")
    AllChem.EmbedMolecule(mol, randomSeed=1)
    mirror = add_mirror_image(mol, 0)
    a, b = mol.GetConformer(0).GetPositions(), mol.GetConformer(mirror).GetPositions()
    distances = lambda xyz: np.linalg.norm(xyz[:, None] - xyz[None], axis=-1)  # noqa: E731
    assert mol.GetNumConformers() == 2 and np.allclose(distances(a), distances(b))
    volume = lambda xyz: np.linalg.det(xyz[[1, 2, 3]] - xyz[0])  # noqa: E731 - a signed volume flips
    assert np.isclose(volume(a), -volume(b))
