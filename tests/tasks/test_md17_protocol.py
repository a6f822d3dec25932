"""The MD17 data protocol: a rollout state graph equals the dataset's sample graph; it survives a round trip."""
from __future__ import annotations

import numpy as np
import torch

from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.tasks import MD17DataModule
from tests import builders


def test_state_graph_is_the_dataset_graph(tmp_path):
    path = builders.write_md17(tmp_path / "md17_ethanol.npz", frames=300)
    data = MD17DataModule(str(path), delta=40, margin=50, num_timesteps=4)
    protocol = data.protocol
    assert protocol.kind == "md17" and protocol.target_offsets == (10, 20, 30, 40)
    assert protocol.atomic_numbers == (6, 6, 8) and protocol.sticks == ((0, 1),)
    restored = TrajectoryProtocol.from_dict(protocol.to_dict())
    assert restored == protocol
    sample = data.splits["test"][3]
    graph = restored.state_graph(sample.X.double(), sample.V.double())
    assert torch.equal(graph.edge_index, sample.edge_index)
    np.testing.assert_array_equal(graph.edge_attr.numpy(), sample.edge_attr.numpy())
    np.testing.assert_allclose(graph.node_attr.numpy(), sample.node_attr.numpy())
