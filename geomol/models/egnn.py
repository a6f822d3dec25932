"""EGNN baseline for trajectory prediction, with EGNO's interface (batch in, [N, P, 3] out).

The classic state-to-state EGNN (Satorras et al., 2021, with the velocity term as in the EGNO
code's ``EGNN``): embed the node features, apply L :class:`~geomol.nn.egnn.EGNNLayer` s and read
the updated positions as the next state. With ``num_timesteps=1`` it predicts the single target
frame in one step, the EGNN-paper protocol (N-body: frame 30 → 40). With P > 1 it rolls out
autoregressively: the state after step p is (x̂_p, s·(x̂_p − x̂_{p−1})), where the learned scalar s
turns the displacement per step into the dataset's velocity unit; |v| and the squared-distance
edge feature are recomputed from that state, while dataset node/edge attributes stay fixed.
"""
from __future__ import annotations

import torch
from torch import nn

from geomol.errors import ConfigError
from geomol.models.dynamics import NodeAttrNorm, TrajectoryPrediction, dynamics_inputs
from geomol.models.egno import _check_widths
from geomol.nn.egnn import EGNNLayer, in_degree

__all__ = ["EGNNDynamics"]


class EGNNDynamics(nn.Module):
    """EGNN next-state predictor.

    Args:
        node_features: F (including |v|). edge_features: E (including d²).
        hidden: H. num_layers: L. num_timesteps: P predicted frames (autoregressive when > 1).
        node_attr_norm: see :func:`geomol.models.dynamics.dynamics_inputs`.
        edge_chunk_elements: see :class:`~geomol.nn.egnn.EGNNLayer`.

    The parameter layout of the embedding and the layers is that of the official ``EGNN``
    (``model/basic.py``), so :func:`geomol.models.egno.load_official_state_dict` loads it when P = 1.
    """

    def __init__(self, node_features: int = 1, edge_features: int = 2, hidden: int = 64, num_layers: int = 4,
                 num_timesteps: int = 1, node_attr_norm: NodeAttrNorm = "dataset", edge_chunk_elements: int = 1 << 23):
        super().__init__()
        if num_timesteps < 1 or num_layers < 1:
            raise ConfigError("num_timesteps and num_layers must be ≥ 1")
        self.node_features, self.edge_features, self.hidden = node_features, edge_features, hidden
        self.num_timesteps, self.node_attr_norm = num_timesteps, node_attr_norm
        self.embedding = nn.Linear(node_features, hidden)
        self.layers = nn.ModuleList(EGNNLayer(hidden, edge_features, edge_chunk_elements=edge_chunk_elements)
                                    for _ in range(num_layers))
        if num_timesteps > 1:
            self.velocity_scale = nn.Parameter(torch.ones(1))

    def step(self, x: torch.Tensor, v: torch.Tensor, h: torch.Tensor, edge_index: torch.Tensor,
             edge_attr: torch.Tensor, degree: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One EGNN pass: x, v [N, 3], h [N, F] → next positions [N, 3] and embeddings [N, H]."""
        x, h, v = x.unsqueeze(1), self.embedding(h).unsqueeze(1), v.unsqueeze(1)
        for layer in self.layers:
            x, h = layer(x, h, v, edge_index, edge_attr, degree)
        return x[:, 0], h[:, 0]

    def _velocity(self, x_next: torch.Tensor, x: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        """[N, 3] velocity of the state at x_next reached from x in one step, s·(x_next − x); with P = 1
        (no next step) the input velocity v."""
        return (x_next - x) * self.velocity_scale if self.num_timesteps > 1 else v

    def forward(self, graph, teacher: torch.Tensor | None = None) -> TrajectoryPrediction:
        """Predict P frames of a (batched) trajectory BlockGraph: x, v [N, P, 3], h [N, P, H].

        ``teacher``: [N, P, 3] true positions of the P target frames, for teacher-forced training: step p + 1
        then starts from the true frame p, (x_p, s·(x_p − x_{p−1})), instead of the model's own prediction,
        and no gradient flows from one step into the next. None (default): a free rollout, each step
        starting from the previous prediction (how the model is evaluated and used either way).
        """
        inputs = dynamics_inputs(graph, self.node_attr_norm)
        _check_widths(self, inputs.h, inputs.edge_attr)
        if teacher is not None and teacher.shape != (inputs.x.size(0), self.num_timesteps, 3):
            raise ConfigError(f"teacher positions have shape {tuple(teacher.shape)}, expected "
                              f"[{inputs.x.size(0)}, {self.num_timesteps}, 3]")
        x, v, h_in, edge_attr = inputs.x, inputs.v, inputs.h, inputs.edge_attr
        row, col = inputs.edge_index
        degree = in_degree(row, x.size(0), x.dtype)
        xs, vs, hs = [], [], []
        for p in range(self.num_timesteps):
            x_pred, h = self.step(x, v, h_in, inputs.edge_index, edge_attr, degree)
            v_pred = self._velocity(x_pred, x, v)
            xs.append(x_pred), vs.append(v_pred), hs.append(h)
            if teacher is None:
                x, v = x_pred, v_pred
            else:  # the true frame p, with its velocity from the true frame before it
                x, v = teacher[:, p], self._velocity(teacher[:, p], x, v)
            h_in = torch.cat([v.norm(dim=-1, keepdim=True).detach(), h_in[:, 1:]], -1)  # detached, as the inputs
            sq_dist = (x[row] - x[col]).pow(2).sum(-1, keepdim=True).detach()
            edge_attr = torch.cat([edge_attr[:, :-1], sq_dist], -1)
        return TrajectoryPrediction(torch.stack(xs, 1), torch.stack(vs, 1), torch.stack(hs, 1))
