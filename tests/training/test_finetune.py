"""Few-shot fine-tuning (geomol finetune) of the shipped affinity models (GET and the default contact scorer) on
the tankyrase-2 example: k = 5 measured ligands, a model directory written, re-read and used by predict-affinity."""
from __future__ import annotations

import csv
import json

import pytest
import torch

import geomol
from geomol.cli import main
from geomol.errors import ConfigError
from geomol.inference.affinity import build_complexes
from geomol.inference.ligand_inputs import ligand_inputs
from geomol.inference.tables import read_measured
from geomol.models.get import GETAffinity, GETConfig
from geomol.models.readouts import SHIFTED_READOUT, adapted_readout
from geomol.training.finetune import FinetuneSettings, finetune_model
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
RECEPTOR, LIGANDS = EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf"
MEASURED = read_measured(EXAMPLE / "tnks2_measured.csv")
TRAINING = ["lig_1a", "lig_3a", "lig_5a", "lig_5f", "lig_8a"]  # k = 5; lig_7 is held out


@pytest.fixture(scope="module")
def base():
    return geomol.load_model("get-plb")


@pytest.fixture(scope="module")
def complexes(base):
    records, graphs = build_complexes(str(RECEPTOR), ligand_inputs(str(LIGANDS)), base)
    return {r.name: g for r, g in zip(records, graphs) if g is not None}


def test_shifted_readout_adds_one_constant_per_complex(base, complexes):
    member = base.members[0]
    shifted = GETAffinity(GETConfig.from_mapping({**base.arguments, "readout": SHIFTED_READOUT}))
    shifted.load_state_dict(member.state_dict(), strict=False)
    shifted.readout.offset.data.fill_(1.5)
    graphs = list(complexes.values())  # pockets of different sizes: the constant must not scale with them
    with torch.no_grad():
        torch.testing.assert_close(shifted.eval()(graphs), member(graphs) + 1.5)


@pytest.mark.parametrize("which", ["base", "contact_base"])
def test_offset_only_keeps_the_ranking_and_centres_the_residuals(request, which, complexes):
    base = request.getfixturevalue(which)
    graphs, measured = [complexes[n] for n in TRAINING], [MEASURED[n] for n in TRAINING]
    tuned, report = finetune_model(base, graphs, measured, TRAINING, FinetuneSettings(steps=0))
    shift = torch.tensor(report.after) - torch.tensor(report.before)
    torch.testing.assert_close(shift, shift.mean().expand(5), atol=1e-4, rtol=0)
    assert float(shift.mean()) == pytest.approx(sum(measured) / 5 - sum(report.before) / 5, abs=1e-4)
    assert len(tuned.members) == len(base.members) and tuned.recipe == base.recipe


def test_finetune_command_writes_a_model_that_predict_affinity_uses(base, complexes, tmp_path):
    measured = tmp_path / "measured.csv"
    measured.write_text("name,pK\n" + "".join(f"{n},{MEASURED[n]}\n" for n in TRAINING[:3]))  # too few to validate
    out = tmp_path / "tnks2-model"
    assert main(["finetune", "--model", "get-plb", "--receptor", str(RECEPTOR), "--ligands", str(LIGANDS),
                 "--measured", str(measured), "--out", str(out), "--threads", "1", "--steps", "20"]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    fit = manifest["metrics"]["finetune"]
    assert fit["base_model"] == "get-plb" and fit["ligands"] == 3 and set(fit["measured"]) == set(TRAINING[:3])
    assert fit["decision"]["reason"] == "forced" and "unchecked" in fit["decision"]["message"]
    assert fit["rmse_after"] < fit["rmse_before"]
    assert manifest["hyperparameters"]["readout"] == SHIFTED_READOUT
    assert "fine-tuned on 3 measured ligands" in (out / "README.md").read_text()
    reloaded = geomol.load_model(out)
    assert reloaded.arguments["readout"] == SHIFTED_READOUT and len(reloaded.members) == len(base.members)
    table = tmp_path / "predictions.csv"
    assert main(["predict-affinity", "--model", str(out), "--receptor", str(RECEPTOR), "--ligands", str(LIGANDS),
                 "--out", str(table), "--threads", "1"]) == 0
    tuned = {row["name"]: float(row["pK"]) for row in csv.DictReader(table.open())}
    before = dict(zip(complexes, base.predict(list(complexes.values()))[0].tolist()))
    assert set(tuned) == set(before) and "lig_7" in tuned
    assert all(abs(tuned[n] - before[n]) > 0.05 for n in tuned)  # every ligand moved, the held-out one too


def test_the_command_adapts_the_default_contact_scorer(contact_base, tmp_path):
    measured = tmp_path / "measured.csv"
    measured.write_text("name,pK\n" + "".join(f"{n},{MEASURED[n]}\n" for n in TRAINING))
    out = tmp_path / "tnks2-contact"
    assert main(["finetune", "--receptor", str(RECEPTOR), "--ligands", str(LIGANDS), "--measured", str(measured),
                 "--out", str(out), "--threads", "1", "--steps", "20"]) == 0  # your own setting: used as given
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["metrics"]["finetune"]["decision"]["reason"] == "forced"
    assert manifest["architecture"] == "ContactScorer" and manifest["metrics"]["finetune"]["base_model"] == contact_base.name
    assert "last layer and the ligand-descriptor term" in (out / "README.md").read_text()
    table = tmp_path / "predictions.csv"
    assert main(["predict-affinity", "--model", str(out), "--receptor", str(RECEPTOR), "--ligands", str(LIGANDS),
                 "--out", str(table), "--threads", "1"]) == 0
    assert {row["name"] for row in csv.DictReader(table.open())} >= set(TRAINING) | {"lig_7"}


def test_too_few_usable_measurements_are_refused(base, tmp_path):
    with pytest.warns(UserWarning, match="not-a-ligand"), pytest.raises(ConfigError, match="at least 2"):
        geomol.finetune_affinity(str(RECEPTOR), str(LIGANDS), {"lig_1a": 6.3, "not-a-ligand": 7.0}, base)


def test_readouts_with_their_own_offset_are_adapted_in_place(complexes):
    """A physics-shaped model keeps its read-out class; its weights and offset move, its encoder does not."""
    from geomol.inference.affinity_model import AffinityModel

    physics = "geomol.models.physics_readout.PhysicsReadout"
    arguments = {"hidden": 16, "radial_dim": 8, "num_rbf": 8, "edge_embedding_dim": 8, "num_layers": 1, "num_heads": 2, "readout": physics}
    torch.manual_seed(0)
    member = GETAffinity(GETConfig.from_mapping(arguments)).eval()
    base_model = geomol.load_model("get-plb")
    model = AffinityModel([member], arguments, base_model.recipe, name="physics-test")
    graphs, measured = [complexes[n] for n in TRAINING], [MEASURED[n] for n in TRAINING]
    tuned, report = finetune_model(model, graphs, measured, TRAINING, FinetuneSettings(steps=30, lr=1e-2))
    assert tuned.arguments["readout"] == physics == adapted_readout(arguments)
    new = tuned.members[0]
    before, after = member.state_dict(), new.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before if not k.startswith("readout."))
    assert not torch.equal(before["readout.pair_head.weight"], after["readout.pair_head.weight"])
    assert report.to_dict()["rmse_after"] < report.to_dict()["rmse_before"]
    with pytest.raises(ConfigError, match="offset"):
        adapted_readout({**arguments, "readout": "geomol.models.readouts.GraphReadout"})


@pytest.fixture(scope="module")
def contact_base():
    return geomol.load_model("contact-corpus")


def test_contact_scorer_adapts_its_last_layers_only_and_reloads(contact_base, complexes, tmp_path):
    graphs, measured = [complexes[n] for n in TRAINING], [MEASURED[n] for n in TRAINING]
    tuned, report = finetune_model(contact_base, graphs, measured, TRAINING, FinetuneSettings(steps=200, lr=1e-2))
    before, after = contact_base.members[0].state_dict(), tuned.members[0].state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved == {"atom_mlp.4.weight", "atom_mlp.4.bias", "descriptor_head.weight", "descriptor_head.bias", "offset"}
    fit = report.to_dict()
    assert fit["rmse_after"] < fit["rmse_before"] and fit["spearman_after"] >= fit["spearman_before"]
    out = tuned.save(tmp_path / "contact-tuned", card="fine-tuned\n", name="contact-tuned")
    reloaded = geomol.load_model(out)
    torch.testing.assert_close(reloaded.predict(graphs)[0], tuned.predict(graphs)[0])
    assert reloaded.architecture == "ContactScorer" and reloaded.arguments == contact_base.arguments
