"""An affinity model of contact-scorer members: saved and loaded safely, predicting through the same API as GET,
invariant to moving the complex, refusing what it cannot read, and not fine-tuned by mistake."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import geomol
from geomol.data import complex_from_structure, read_ligands, read_structure
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import ConfigError, ModelLoadError
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.finetune import finetune_model
from geomol.models.contact_scorer import ContactScorer, contact_inputs
from geomol.testing import apply_e3, random_e3
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
RECEPTOR, LIGANDS = EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf"


@pytest.fixture(scope="module")
def graphs():
    receptor = read_structure(RECEPTOR)
    return [complex_from_structure(receptor, mol, pocket_cutoff=10.0) for mol in read_ligands(LIGANDS)]


@pytest.fixture(scope="module", params=[(False, 0), (True, 0), (True, 4)], ids=["elements", "roles", "pooled"])
def model(request, graphs):
    """Three calibrated members reading element contacts, or contacts with the atoms' interaction roles (with a
    non-additive pooled term of width 4: ``pooled``)."""
    chemistry, pooled = request.param
    torch.manual_seed(0)
    members = []
    atoms, owner, descriptors = contact_inputs(graphs, chemistry=chemistry)
    measured = torch.linspace(6.0, 9.0, len(graphs))
    for _ in range(3):
        member = ContactScorer(hidden=8, n_atom_features=atoms.shape[1], pooled=pooled)
        member.fit_normalisation(atoms, descriptors)
        with torch.no_grad():
            raw = member(atoms, owner, descriptors)
        member.calibrate(raw, measured, torch.zeros(len(graphs), dtype=torch.long))  # pK on the scale of `measured`
        with torch.no_grad():
            assert float(member(atoms, owner, descriptors).mean()) == pytest.approx(7.5, abs=1e-4)
        members.append(member)
    assert members[0].reads_chemistry == chemistry
    arguments = {"hidden": 8, "n_atom_features": atoms.shape[1], "n_descriptors": descriptors.shape[1],
                 **({"pooled": pooled} if pooled else {})}
    return AffinityModel(members, arguments, ComplexRecipe(pocket_cutoff=10.0), name="contact-test")


def test_saved_and_loaded_weights_only_predicts_the_example(model, tmp_path):
    out = model.save(tmp_path / "contact-test")
    for member in out.glob("member_*.pt"):
        assert all(isinstance(v, torch.Tensor) for v in torch.load(member, weights_only=True).values())
    loaded = geomol.load_model(out)
    assert loaded.is_contact_scorer and "ContactScorer" in repr(loaded)
    records = geomol.predict_affinity(RECEPTOR, LIGANDS, model=loaded)
    direct = model.predict(
        [complex_from_structure(read_structure(RECEPTOR), m, pocket_cutoff=10.0) for m in read_ligands(LIGANDS)])[0]
    assert all(r.error in (None, "") and math.isfinite(r.pK) and r.pK_std > 0 for r in records)
    np.testing.assert_allclose([r.pK for r in records], direct.numpy(), rtol=1e-5)


@pytest.mark.parametrize("reflect", [False, True])
def test_predictions_invariant_to_moving_the_complex(model, graphs, reflect):
    q, t = random_e3(reflect, dtype=torch.float32, generator=torch.Generator().manual_seed(1))
    moved = []
    for graph in graphs:
        copy = graph.clone()
        copy.X = apply_e3(graph.X.double(), q.double(), t.double()).float()
        moved.append(copy)
    torch.testing.assert_close(model.predict(moved)[0], model.predict(graphs)[0], rtol=1e-4, atol=1e-4)


def test_ligand_without_chemistry_is_refused_by_name(model, graphs):
    bare = graphs[0].clone()
    bare.ligand_descriptors = torch.full_like(bare.ligand_descriptors, float("nan"))
    with pytest.raises(ConfigError, match=r"lig\.sdf: .*chemistry"):
        model.check_graph(bare, "lig.sdf")
    model.check_graph(graphs[0], "fine.sdf")  # a ligand read from SDF passes


def test_bad_manifest_arguments_and_a_single_measurement_are_errors(model, graphs):
    with pytest.raises(ModelLoadError, match="integer"):
        AffinityModel.build_network("ContactScorer", {"hidden": "wide"}, "manifest.json")
    with pytest.raises(ConfigError, match="at least 2"):
        finetune_model(model, graphs[:1], [6.0], ["a"])
    tuned, _ = finetune_model(model, graphs[:3], [6.0, 7.0, 8.0], ["a", "b", "c"])
    assert tuned.is_contact_scorer and tuned.members[0].reads_chemistry == model.members[0].reads_chemistry
