"""Loaded shipped models predict what they predicted when their weights were shipped.

``shipped_predictions.npz`` beside this file holds every value (float64) that ``python -m tests.shipped_predictions``
computes: get-plb and contact-corpus on four ligands of the bundled example, and one or two rollout windows of egno-nbody,
egno-mocap-run, egno-fkbp12 and the two egno-md17 models, and na-affinity on four RNA/DNA complexes (mocap, fkbp12
and na-affinity on inputs from ../shared/data: compared where it is present; md17 where RDKit is installed). Any change in how a shipped model is loaded or how its graphs are
built shows up here. On a machine like the one that recorded the file (the same CPU model and instruction sets and the
same torch: ``machine_signature``) the values must be the same bit for bit; elsewhere to float32 round-off, since the
same code gives results that differ in the last bits on different CPUs (AMD EPYC and Intel Xeon kernels sum in
different orders; up to 1e-6 in pK, and 1.2e-5 on a mocap rollout position near 0.04 among positions up to 25: the
tolerance scales with the largest value). Re-record only when a model's weights are re-shipped, that model alone
(``python -m tests.shipped_predictions tests/inference/shipped_predictions.npz --only egno-fkbp12``, on the machine
that recorded the file).
"""
from pathlib import Path

import numpy as np
import pytest

from tests import shipped_predictions
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, SHARED_DATA

RECORDED = dict(np.load(Path(__file__).parent / "shipped_predictions.npz", allow_pickle=False))
ALWAYS_PRESENT = ("get-plb/pK", "get-plb/pK_std", "contact-corpus/pK", "contact-corpus/pK_std", "egno-nbody/positions",
                  "ppa-affinity/pK_and_std")
WITH_SHARED_DATA = ("egno-mocap-run/positions", "egno-fkbp12/positions", "na-affinity/pK_and_spread")
WITH_RDKIT = ("egno-md17-aspirin/positions", "egno-md17-ethanol/positions")
SAME_MACHINE = str(RECORDED.pop(shipped_predictions.MACHINE, "")) == shipped_predictions.machine_signature()


@pytest.mark.skipif(not (REPO / "models" / "get-plb" / "manifest.json").exists(), reason="no shipped models")
def test_shipped_models_predict_as_recorded():
    now = shipped_predictions.record()
    assert set(ALWAYS_PRESENT) <= set(now) and set(ALWAYS_PRESENT + WITH_SHARED_DATA + WITH_RDKIT) <= set(RECORDED)
    assert set(now) <= set(RECORDED), "a shipped model without recorded predictions"
    if SHARED_DATA.exists():
        assert set(WITH_SHARED_DATA) <= set(now)
    for name in now:
        if SAME_MACHINE:
            np.testing.assert_array_equal(now[name], RECORDED[name], err_msg=f"{name}: not bit-identical")
            continue
        # float32 round-off is relative to the largest values summed (positions up to ~25 in a rollout window)
        atol = max(1e-5, 2e-6 * float(np.abs(RECORDED[name]).max()))
        np.testing.assert_allclose(now[name], RECORDED[name], rtol=1e-5, atol=atol, err_msg=name)


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
