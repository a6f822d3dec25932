"""Loaded shipped models predict bit-identically to the numbers recorded before the graph-recipe refactor.

``shipped_predictions.json`` beside this file was written by ``python -m tests.shipped_predictions`` from the
code as it was before (commit 4bc1d60): get-plb on four ligands of the bundled example, and one or two rollout
windows of egno-nbody, egno-mocap-run and egno-adk. The egno-adk entry was re-recorded from main at 574c304,
whose EGNN layer accumulates large radius graphs in chunks (issue 16): a different summation order, not this
refactor. The egno-nbody entry was re-recorded when its weights were re-shipped (issue 15, seed-1 re-training).
Any change in how a shipped model is loaded or how its graphs are built shows up here as a changed bit.
"""
import json
from pathlib import Path

import pytest

from tests import shipped_predictions
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO

RECORDED = json.loads((Path(__file__).parent / "shipped_predictions.json").read_text())


@pytest.mark.skipif(not (REPO / "models" / "get-plb" / "manifest.json").exists(), reason="no shipped models")
def test_shipped_models_predict_bit_identically():
    now = shipped_predictions.record()
    for name, before in RECORDED.items():
        if before is None or now[name] is None:  # shared data absent when recorded or now
            continue
        assert now[name] == before, name


def test_checkpoints_of_the_old_layout_load_and_predict_the_same(tmp_path):
    """Checkpoints written before the refactor carry the task flags (rank_weight, ...) among their
    hyperparameters, no z_requires_grad, and a preprocessing record without a version."""
    import torch

    import geomol
    from tests.affinity_fixtures import PREPROCESSING, lightning_checkpoint

    new = lightning_checkpoint(tmp_path / "new.ckpt", seed=4)
    data = torch.load(new, weights_only=True)
    hyper = {k: v for k, v in data["hyper_parameters"].items() if k not in ("z_requires_grad", "loss_terms",
                                                                              "pretraining")}
    data["hyper_parameters"] = {**hyper, "rank_weight": 0.0, "edge_weight": 0.0, "pretrain_epochs": 0,
                                "denoise_sigma": 1.0}
    data["geomol_preprocessing"] = dict(PREPROCESSING)
    torch.save(data, tmp_path / "old.ckpt")
    ligands = geomol.data.read_ligands(REPO / "data" / "example" / "tnks2_ligands.sdf")[:2]
    receptor = REPO / "data" / "example" / "tnks2_protein.pdb"
    old = geomol.predict_affinity(receptor, ligands, model=str(tmp_path / "old.ckpt"))
    assert [r.pK for r in old] == [r.pK for r in geomol.predict_affinity(receptor, ligands, model=str(new))]
