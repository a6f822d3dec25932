"""Pose refinement in the pocket (geomol.data.posing.refinement) on planted clashes and overlaps."""
from __future__ import annotations

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem

from geomol.data.chemistry.checks import CLOSE_CONTACT_DISTANCE, OVERLAP_DISTANCE
from geomol.data.datasets.corpus_dataset import STORE_POSE_PARAMETERS
from geomol.data.posing.poses import PoseParameters, PoseTemplate
from geomol.data.posing.refinement import (Pocket, RefinementParameters, best_refined, pose_contacts,
                                           refine_in_pocket)
from geomol.errors import ConfigError

PARAMETERS = RefinementParameters()


def embedded(smiles: str, seed: int = 11) -> Chem.Mol:
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    assert AllChem.EmbedMolecule(mol, randomSeed=seed) == 0
    return mol


def positions(mol: Chem.Mol) -> np.ndarray:
    return mol.GetConformer().GetPositions()


def ring_atoms(mol: Chem.Mol) -> list[int]:
    return [a.GetIdx() for a in mol.GetAtoms() if a.GetIsAromatic()]


def test_a_planted_receptor_clash_is_removed_and_the_core_stays_where_it_was():
    """Propylbenzene: a receptor atom 1.2 Å beyond the chain's last carbon; the ring (the core) is held."""
    mol = embedded("CCCc1ccccc1")
    xyz = positions(mol)
    core = ring_atoms(mol)
    outward = xyz[0] - xyz[core].mean(0)
    receptor = xyz[0] + 1.2 * outward / np.linalg.norm(outward)
    pocket = Pocket(receptor[None, :])
    before = pose_contacts(mol, pocket)
    assert before.receptor_distance == pytest.approx(1.2) and before.ligand_atom == 0 and not before.acceptable

    refined = refine_in_pocket(mol, core, pocket, PARAMETERS)
    after = pose_contacts(refined, pocket)
    assert after.clean and after.receptor_distance >= CLOSE_CONTACT_DISTANCE
    assert after.overlap_distance >= OVERLAP_DISTANCE
    np.testing.assert_allclose(positions(refined)[core], xyz[core], atol=1e-6)  # the core did not move
    bonds = [(b.GetBeginAtomIdx(), b.GetEndAtomIdx()) for b in mol.GetBonds()]
    lengths = [np.linalg.norm(positions(refined)[i] - positions(refined)[j]) for i, j in bonds]
    assert 0.9 < min(lengths) and max(lengths) < 1.6  # still a molecule, not a pulled-apart one
    np.testing.assert_array_equal(positions(mol), xyz)  # the input is not changed


def test_overlapping_hydrogens_are_separated_without_a_receptor():
    """Two methyl hydrogens of butane pushed 0.5 Å apart; heavy atoms held."""
    mol = embedded("CCCC")
    xyz = positions(mol)
    h_first = [n.GetIdx() for n in mol.GetAtomWithIdx(0).GetNeighbors() if n.GetAtomicNum() == 1][0]
    h_last = [n.GetIdx() for n in mol.GetAtomWithIdx(3).GetNeighbors() if n.GetAtomicNum() == 1][0]
    xyz[h_first] = xyz[h_last] + [0.5, 0.0, 0.0]
    conformer = mol.GetConformer()
    conformer.SetAtomPosition(h_first, xyz[h_first].tolist())
    before = pose_contacts(mol, None)
    assert before.overlap_distance == pytest.approx(0.5) and set(before.overlap_atoms) == {h_first, h_last}
    heavy = [a.GetIdx() for a in mol.GetAtoms() if a.GetAtomicNum() > 1]
    refined = refine_in_pocket(mol, heavy, None, PARAMETERS)
    assert pose_contacts(refined, None).overlap_distance >= OVERLAP_DISTANCE
    np.testing.assert_allclose(positions(refined)[heavy], xyz[heavy], atol=1e-6)


def test_the_chemistry_is_kept_as_it_was_only_the_coordinates_change():
    """MMFF94 types an imidazopyrazine as non-aromatic; the refined pose keeps RDKit's aromatic flags and bonds."""
    mol = embedded("COc1ccc(Nc2nc(-c3ccc(C(N)=O)c(OC)c3)cn3ccnc23)cc1OC")
    refined = refine_in_pocket(mol, [], None, PARAMETERS)
    assert [a.GetIsAromatic() for a in refined.GetAtoms()] == [a.GetIsAromatic() for a in mol.GetAtoms()]
    assert [b.GetBondType() for b in refined.GetBonds()] == [b.GetBondType() for b in mol.GetBonds()]
    assert Chem.MolToSmiles(refined) == Chem.MolToSmiles(mol)
    assert not np.allclose(positions(refined), positions(mol))  # it was minimised


def test_the_first_clean_pose_is_kept_and_the_search_stops_there():
    mol = embedded("CCCc1ccccc1")
    core = ring_atoms(mol)
    far = Pocket(positions(mol).mean(0)[None, :] + [0.0, 0.0, 30.0])
    tried = []

    def attempts():
        for key in ("first", "second"):
            tried.append(key)
            yield key, mol, core

    key, _, contacts, count = best_refined(attempts(), far, PARAMETERS)
    assert key == "first" and count == 1 and tried == ["first"] and contacts.clean


def test_a_core_clashing_in_the_reference_is_refused_naming_the_ligand_and_the_atom():
    reference = Chem.RemoveHs(embedded("CCc1ccccc1"))
    xyz = positions(reference)
    receptor = xyz[4] + [0.0, 0.0, 1.1]  # a receptor atom 1.1 Å over a ring carbon of the reference
    template = PoseTemplate(reference, receptor[None, :])
    (posed,) = template.pose_all([("analogue-7", "CCCc1ccccc1")])
    assert not posed.ok and posed.error_kind == "PoseClashError"
    assert "analogue-7" in posed.error and "core atom C5 is 1.10 Å" in posed.error
    assert "Minimise the reference" in posed.error
    unrefined = PoseTemplate(reference, receptor[None, :], PoseParameters(refinement=None)).pose("CCCc1ccccc1")
    assert unrefined.ok and unrefined.min_receptor_distance == pytest.approx(1.1, abs=0.05)  # the old behaviour


def test_parameters_are_checked_and_the_store_records_stay_unrefined():
    with pytest.raises(ConfigError):
        RefinementParameters(iterations=0)
    with pytest.raises(ConfigError):
        RefinementParameters(heavy_distance=-1.0)
    record = PoseParameters(refinement=None).to_dict()
    assert "refinement" not in record  # the corpus store's cache keys of unrefined poses are what they were
    assert PoseParameters.from_dict(record).refinement is None
    assert STORE_POSE_PARAMETERS.to_dict() == record
    assert PoseParameters.from_dict(PoseParameters().to_dict()) == PoseParameters()
    assert PoseParameters(refinement={"iterations": 7}).refinement == RefinementParameters(iterations=7)
