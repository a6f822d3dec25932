"""The shipped default affinity model loads safely and predicts the bundled example."""
import csv
import math
from pathlib import Path

import pytest
import torch

import geomol
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
MODEL = REPO / "models" / "get-plb"


@pytest.mark.skipif(not (MODEL / "manifest.json").exists(), reason="no shipped default model")
def test_default_model_predicts_the_example(tmp_path, monkeypatch):
    monkeypatch.delenv("GEOMOL_MODELS", raising=False)
    for member in MODEL.glob("member_*.pt"):
        state = torch.load(member, weights_only=True)  # tensors only
        assert all(isinstance(v, torch.Tensor) for v in state.values())
    model = geomol.load_model("default")
    assert model.architecture == "ContactScorer" and model.members[0].recipe.roles  # contact-corpus reads the roles
    records = geomol.predict_affinity(EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf", model=model)
    measured = {row["name"]: float(row["pK"]) for row in csv.DictReader(open(EXAMPLE / "tnks2_measured.csv"))}
    assert [r.name for r in records] == list(measured)
    for r in records:
        assert r.error in (None, "") and math.isfinite(r.pK) and 2 < r.pK < 13
        assert r.pK_std > 0  # an ensemble: members disagree a little
        assert r.dG_kcal_mol == pytest.approx(-1.36338 * r.pK, rel=1e-3) and r.Kd_M == pytest.approx(10 ** -r.pK)
