"""The core relaxed off the reference when the reference pose itself is too close to the receptor (issue 43)."""
from __future__ import annotations

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem

from geomol.data.chemistry.checks import CLOSE_CONTACT_DISTANCE, WARNING
from geomol.data.posing.poses import PoseParameters, PoseTemplate
from geomol.data.posing.refinement import Pocket, RefinementParameters, pose_contacts
from geomol.errors import ConfigError
from geomol.inference.smiles_inputs import posed_inputs
from tests.data.test_poses import fep_series, smiles_of

CORE_HELD = PoseParameters(refinement=RefinementParameters(max_core_shift=0.0))  # the posing before issue 43
MAX_SHIFT = RefinementParameters().max_core_shift


@pytest.fixture(scope="module")
def syk():
    """merck/syk_4puz_fullmap: its reference (first ligand) has a core carbon 1.78 Å from Leu377 O."""
    ligands, reference, receptor = fep_series("merck", "syk_4puz_fullmap")
    return ligands, reference, receptor, Pocket(receptor)


def heavy_xyz(mol: Chem.Mol) -> np.ndarray:
    return Chem.RemoveHs(mol).GetConformer().GetPositions()


def test_a_contact_the_reference_has_is_cleared_by_moving_the_core_less_than_allowed(syk):
    ligands, reference, receptor, pocket = syk
    assert pose_contacts(reference, pocket).non_metal_distance == pytest.approx(1.78, abs=0.01)
    smiles = smiles_of(ligands["CHEMBL3265020"])
    held = PoseTemplate(reference, receptor, CORE_HELD).pose(smiles, "CHEMBL3265020")
    (item,), (relaxed,) = posed_inputs(receptor, [("CHEMBL3265020", smiles)], reference)  # the default parameters
    assert pose_contacts(held.molecule, pocket).non_metal_distance < CLOSE_CONTACT_DISTANCE  # the issue
    assert held.core_relaxation is None
    after = pose_contacts(relaxed.molecule, pocket)
    assert after.clean and after.non_metal_distance >= CLOSE_CONTACT_DISTANCE

    # the core: the held pose's heavy atoms that sit on a reference atom; measured here, not taken from the report
    reference_xyz = heavy_xyz(reference)
    to_reference = np.linalg.norm(heavy_xyz(held.molecule)[:, None] - reference_xyz[None], axis=-1).min(1)
    core = np.flatnonzero(to_reference < 0.1)
    assert len(core) == held.core_atoms
    shifts = np.linalg.norm(heavy_xyz(relaxed.molecule)[core] - heavy_xyz(held.molecule)[core], axis=1)
    assert np.sqrt(np.mean(shifts ** 2)) < MAX_SHIFT and shifts.max() < MAX_SHIFT + 0.05
    report = relaxed.core_relaxation
    assert report.max_shift == pytest.approx(shifts.max(), abs=0.05) and report.max_shift > 0.2
    assert report.after == pytest.approx(after.non_metal_distance)
    message = relaxed.molecule.GetProp("core_relaxed")
    assert message.startswith("the reference pose is 1.78 Å from LEU 377 O (chain A) (its core atom where this ligand")

    # the chemist sees it as a warning of the prediction input
    assert [(f.severity, f.code, f.message) for f in item.findings] == [(WARNING, "core_relaxed", message)]


def test_a_clean_pose_is_exactly_what_it_was_with_the_core_fixed(syk):
    ligands, reference, receptor, pocket = syk
    smiles = smiles_of(ligands["CHEMBL3265015"])
    held = PoseTemplate(reference, receptor, CORE_HELD).pose(smiles)
    default = PoseTemplate(reference, receptor).pose(smiles)
    assert pose_contacts(held.molecule, pocket).clean
    np.testing.assert_array_equal(default.molecule.GetConformer().GetPositions(),
                                  held.molecule.GetConformer().GetPositions())
    assert default.core_relaxation is None and not default.molecule.HasProp("core_relaxed")


def test_a_reference_atom_under_1_5_A_is_refused_unless_the_allowed_shift_can_reach_2_2_A():
    reference = Chem.AddHs(Chem.MolFromSmiles("CCc1ccccc1"))
    assert AllChem.EmbedMolecule(reference, randomSeed=11) == 0
    reference = Chem.RemoveHs(reference)
    receptor = (reference.GetConformer().GetPositions()[4] + [0.0, 0.0, 1.2])[None, :]  # 1.2 Å over a ring carbon
    refused = PoseTemplate(reference, receptor).pose_all([("analogue", "CCCc1ccccc1")])[0]
    assert refused.error_kind == "PoseClashError"
    assert f"within {MAX_SHIFT} Å, too little to reach {CLOSE_CONTACT_DISTANCE} Å" in refused.error

    far_enough = PoseParameters(refinement=RefinementParameters(max_core_shift=1.2))  # 1.2 + 1.2 ≥ 2.2
    posed = PoseTemplate(reference, receptor, far_enough).pose("CCCc1ccccc1")
    assert posed.core_relaxation is not None and posed.min_receptor_distance >= CLOSE_CONTACT_DISTANCE
    assert posed.core_relaxation.max_shift < 1.2 + 0.05


def test_the_new_parameters_are_checked():
    with pytest.raises(ConfigError):
        RefinementParameters(max_core_shift=-0.1)
    with pytest.raises(ConfigError):
        RefinementParameters(relax_iterations=0)
