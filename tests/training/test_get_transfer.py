"""Fine-tuning GET on nucleic-acid complexes: a tiny run on real RNA complexes whose loss falls, the weights of
tier-B items, and the epoch chosen on validation."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from geomol.data.datasets.nucleic_affinity import NucleicAffinityDataset
from geomol.errors import ConfigError
from geomol.models.get import GETAffinity
from geomol.training.get_transfer import fit_get_transfer, predict_member
from tests.affinity_fixtures import TINY_GET
from tests.data.test_nucleic_affinity import _copy_subset

IDS = ["1ARJ", "1AJU", "1F27", "1Y27", "2B57", "1FMN", "2ESI", "1EHT"]


@pytest.fixture(scope="module")
def complexes(tmp_path_factory):
    folder = tmp_path_factory.mktemp("nucleic")
    (folder / "data").mkdir()
    _copy_subset(folder / "data", IDS)
    dataset = NucleicAffinityDataset(folder / "data", cache_dir=folder / "cache", progress=False)
    return [dataset[i] for i in range(len(dataset))]


def test_a_tiny_training_run_lowers_its_loss(complexes):
    torch.manual_seed(0)
    label = np.array([float(g.y) for g in complexes])
    start = GETAffinity(num_block_types=150, **TINY_GET)
    before = predict_member(start, complexes)
    fit = fit_get_transfer(start, complexes, label, train=range(6), valid=[6, 7], epochs=8, lr=3e-3, batch_size=3)
    assert len(fit.losses) == len(fit.curve) == 8
    assert fit.losses[-1] < 0.8 * fit.losses[0] and fit.losses[-1] < min(fit.losses[:3]), fit.losses
    assert np.allclose(predict_member(start, complexes), before)  # the start is left unchanged
    assert fit.epoch == -1 or fit.score == max(fit.curve)  # the chosen epoch is the best on validation
    assert not fit.model.training


def test_weights_of_zero_leave_items_out(complexes):
    label = np.array([float(g.y) for g in complexes])
    start = GETAffinity(num_block_types=150, **TINY_GET)
    weights = np.array([1.0] * 3 + [0.0] * 5)
    fit = fit_get_transfer(start, complexes, label, range(6), [6, 7], weights=weights, epochs=1, batch_size=2)
    assert np.isfinite(fit.losses[0])
    with pytest.raises(ConfigError, match="training and"):
        fit_get_transfer(start, complexes, label, range(6), [6, 7], weights=np.zeros(8), epochs=1)
