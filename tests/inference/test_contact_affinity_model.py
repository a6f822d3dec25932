"""An affinity model of contact-scorer members: saved and loaded safely with any featurisation (its contact
recipe travels in the manifest), predicting through the same API as GET, invariant to moving the complex,
refusing what it cannot read (a ligand without chemistry, a pocket narrower than the features)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

import geomol
from geomol.data import complex_from_structure, read_ligands, read_structure
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.errors import ConfigError, ModelLoadError
from geomol.inference.affinity_model import AffinityModel
from geomol.models.contact_scorer import ContactScorer
from geomol.training.finetune import finetune_model
from geomol.testing import apply_e3, random_e3
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
RECEPTOR, LIGANDS = EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf"


@pytest.fixture(scope="module")
def graphs():
    receptor = read_structure(RECEPTOR)
    return [complex_from_structure(receptor, mol, pocket_cutoff=10.0) for mol in read_ligands(LIGANDS)]


def calibrated_model(graphs, recipe: ContactRecipe, pooled: int = 0, message_steps: int = 0) -> AffinityModel:
    """Three members of one featurisation, calibrated so that their mean on ``graphs`` is 7.5 pK."""
    torch.manual_seed(0)
    members = []
    measured = torch.linspace(6.0, 9.0, len(graphs))
    for _ in range(3):
        member = ContactScorer(hidden=8, pooled=pooled, message_steps=message_steps, recipe=recipe)
        batch = member.inputs(graphs)
        member.fit_normalisation(batch.atoms, batch.descriptors)
        with torch.no_grad():
            raw = member(batch)
        member.calibrate(raw, measured, torch.zeros(len(graphs), dtype=torch.long))  # pK on the scale of `measured`
        with torch.no_grad():
            assert float(member(batch).mean()) == pytest.approx(7.5, abs=1e-4)
        members.append(member)
    return AffinityModel(members, members[0].to_config(), ComplexRecipe(pocket_cutoff=10.0), name="contact-test")


@pytest.fixture(scope="module", params=[(False, 0), (True, 0), (True, 4)], ids=["elements", "roles", "pooled"])
def model(request, graphs):
    """Three calibrated members reading element contacts, or contacts with the atoms' interaction roles (with a
    non-additive pooled term of width 4: ``pooled``)."""
    roles, pooled = request.param
    model = calibrated_model(graphs, ContactRecipe(roles=roles), pooled)
    assert model.members[0].reads_chemistry == roles
    return model


def test_saved_and_loaded_weights_only_predicts_the_example(model, tmp_path):
    out = model.save(tmp_path / "contact-test")
    for member in out.glob("member_*.pt"):
        assert all(isinstance(v, torch.Tensor) for v in torch.load(member, weights_only=True).values())
    loaded = geomol.load_model(out)
    assert loaded.architecture == "ContactScorer" and "ContactScorer" in repr(loaded)
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
    assert tuned.architecture == "ContactScorer" and tuned.members[0].recipe == model.members[0].recipe


VARIANTS = {  # every contact-scorer variant of docs/evaluation.md, as a featurisation and scorer options
    "radial": (ContactRecipe(roles=True, radial=True), 0, 0),
    "bond_context": (ContactRecipe(roles=True, bond_context=True), 0, 0),
    "smooth": (ContactRecipe(roles=True, moves=2), 0, 0),
    "augment": (ContactRecipe(roles=True, moves=2, pose_views="augment"), 0, 0),
    "messages": (ContactRecipe(roles=True), 0, 2),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_is_shipped_loaded_and_predicts_as_trained(graphs, variant, tmp_path):
    recipe, pooled, steps = VARIANTS[variant]
    model = calibrated_model(graphs, recipe, pooled, steps)
    loaded = geomol.load_model(model.save(tmp_path / variant))
    assert loaded.members[0].recipe == recipe and loaded.arguments["features"] == recipe.to_dict()
    assert loaded.members[0].message_steps == steps
    expected, spread = model.predict(graphs)
    assert torch.equal(loaded.predict(graphs)[0], expected) and bool((spread > 0).all())
    tuned, _ = finetune_model(loaded, graphs[:3], [6.0, 7.0, 8.0], ["a", "b", "c"])  # every variant adapts
    assert tuned.members[0].recipe == recipe


def test_views_of_moved_poses_average_their_scores(graphs):
    member = calibrated_model(graphs, ContactRecipe(moves=1, pose_views="augment")).members[0]
    batch = member.inputs(graphs[:2])
    assert batch.views == 3 and batch.n_ligands == 2 and int(batch.owner.max()) == 5
    with torch.no_grad():
        per_view = [member(type(batch)(batch.atoms[batch.owner // 2 == v], batch.owner[batch.owner // 2 == v] % 2,
                                       batch.descriptors, 2)) for v in range(3)]
        torch.testing.assert_close(member(batch), torch.stack(per_view).mean(0))


def test_a_pocket_narrower_than_the_features_is_refused(graphs, tmp_path):
    model = calibrated_model(graphs, ContactRecipe(roles=True))
    with pytest.raises(ConfigError, match=r"pocket \(6 Å\) is smaller than the contact features read \(8 Å"):
        AffinityModel(list(model.members), model.arguments, ComplexRecipe(pocket_cutoff=6.0))
    out = model.save(tmp_path / "narrow")
    manifest = (out / "manifest.json").read_text().replace('"pocket_cutoff": 10.0', '"pocket_cutoff": 7.5')
    (out / "manifest.json").write_text(manifest)
    with pytest.raises(ConfigError, match="7.5 Å"):
        geomol.load_model(out)
    small = ContactRecipe(near=3.0, shell=5.0, cutoff=6.0)  # a recipe that reads 6 Å takes a 6 Å pocket
    members = calibrated_model(graphs, small).members
    AffinityModel(list(members), members[0].to_config(), ComplexRecipe(pocket_cutoff=6.0))
