"""Data protocols of trajectory models: recorded by the data modules, validated on load, and the rollout's
per-state inputs equal to the dataset items (N-body, Mocap; MD is covered by tests/test_rollout.py)."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from geomol.errors import ModelLoadError
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.dynamics.rollout import next_velocity, num_windows
from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.models.egno import EGNO
from geomol.tasks import MocapDataModule, NBodyDataModule
from tests.conftest import shared_path


def _model(protocol: dict, node_features: int) -> DynamicsModel:
    arguments = dict(node_features=node_features, edge_features=2, hidden=16, num_layers=2,
                     num_timesteps=len(protocol["target_offsets"]))
    return DynamicsModel(EGNO(**arguments), arguments, TrajectoryProtocol.from_dict(protocol))


def _same_prediction(model: DynamicsModel, item, charges=None) -> None:
    """Rollout inputs give the dataset item's prediction (features from float32 X here, float64 there: rounding)."""
    with torch.no_grad():
        expected = model.network(item).x
    torch.testing.assert_close(model.predict(item.X, item.V, charges).x, expected, rtol=0, atol=1e-5)


def test_nbody_protocol_and_state_inputs():
    data = NBodyDataModule(num_train=4, num_valid=2, num_test=2, max_train=4, batch_size=2)
    protocol = data.protocol.to_dict()
    assert protocol["kind"] == "nbody" and protocol["target_offsets"] == [2, 4, 6, 8, 10]
    assert protocol["frame_time"] == pytest.approx(0.1) and protocol["num_nodes"] == 5
    model = _model(protocol, node_features=1)
    item = data.splits["test"][1]
    _same_prediction(model, item, charges=item.charge)
    # the seed velocity is in simulator units: displacement over 2 saved frames of 0.1 time units each
    window = torch.randn(5, 5, 3)
    v = next_velocity(model.protocol, window, torch.zeros(5, 3))
    assert torch.allclose(v, (window[-1] - window[-2]) / 0.2)


def test_mocap_protocol_and_state_inputs():
    data = MocapDataModule(path=str(shared_path("mocap_run", "cmu_subject09_run.npz")))
    protocol = data.protocol.to_dict()
    assert protocol["target_offsets"] == [26, 27, 28, 29, 30] and len(protocol["bonds"]) == 30
    assert protocol["height_scale"] == pytest.approx(data.splits["train"].height_scale)
    model = _model(protocol, node_features=2)
    for index in (0, 100):
        _same_prediction(model, data.splits["test"][index])
    # last two offsets are one frame apart: the seed velocity is the last per-frame difference
    window = torch.randn(5, 31, 3)
    assert torch.equal(next_velocity(model.protocol, window, window[0]), window[-1] - window[-2])
    assert num_windows(model.protocol, frames=61) == 3


def test_invalid_protocols_are_refused():
    with pytest.raises(ModelLoadError, match="no data protocol"):
        TrajectoryProtocol.from_dict({}, source="old.ckpt")
    with pytest.raises(ModelLoadError, match="increasing"):
        TrajectoryProtocol.from_dict({"kind": "md", "target_offsets": [3, 3], "selection": "all", "cutoff": 8.0})
    with pytest.raises(ModelLoadError, match="cutoff"):
        TrajectoryProtocol.from_dict({"kind": "md", "target_offsets": [1, 2]})
    with pytest.raises(ModelLoadError, match="predicts 4 frames"):
        DynamicsModel(EGNO(num_timesteps=4), {}, TrajectoryProtocol.from_dict({"kind": "nbody", "target_offsets": [2]}))
    protocol = TrajectoryProtocol.from_dict({"kind": "mocap", "target_offsets": [1, 2], "bonds": [[0, 1]],
                                          "num_nodes": 2})
    assert TrajectoryProtocol.from_dict(protocol.to_dict()) == protocol
    assert np.array_equal(protocol.bonds, [[0, 1]])
