"""Trajectory prediction (EGNO or the EGNN baseline) as a LightningModule.

Loss: the reference objective, mean over the P predicted frames of the per-frame MSE. Logged per
evaluation epoch over all samples: ``s2s_mse`` (state-to-state: error at the last frame, the
number the reference scripts report) and ``s2t_mse`` (state-to-trajectory: mean over the P frames).
The data module's :class:`~geomol.data.trajectory_protocol.TrajectoryProtocol` (target offsets, graph
and feature definitions) is stored in every checkpoint, so that a rollout later builds its inputs
exactly as in training.
"""
from __future__ import annotations

from typing import Any, Literal

import torch

from geomol.data.trajectory_protocol import TrajectoryProtocol
from geomol.errors import ConfigError
from geomol.models.dynamics import s2s_mse, s2t_mse, trajectory_loss
from geomol.models.egnn import EGNNDynamics
from geomol.models.egno import EGNO
from geomol.tasks.base import GeomolModule

__all__ = ["DynamicsModule"]


class DynamicsModule(GeomolModule):
    """Train EGNO (or EGNN) to predict P future frames from one state.

    Args:
        model: ``"egno"`` or ``"egnn"``.
        node_features, edge_features: model input widths, |v| and the squared distance included
            (N-body 1/2, Mocap and MD 2/2, MD17 2/5).
        hidden, num_layers, num_timesteps (P), num_modes, time_embedding_dim, use_time_conv,
            node_attr_norm: see :class:`~geomol.models.egno.EGNO`.
        lr, weight_decay, final_lr: Adam; ``final_lr=None`` keeps the rate constant (reference).
        compile: wrap the model in ``torch.compile``.
        teacher_forcing: EGNN only: train the one-step model with teacher forcing (each step starts from the
            true previous frame, see :meth:`~geomol.models.egnn.EGNNDynamics.forward`) instead of through its own
            rollout; validation, test and prediction roll out freely either way.
    """

    recipe_type = TrajectoryProtocol

    def __init__(self, model: Literal["egno", "egnn"] = "egno", node_features: int = 1, edge_features: int = 2,
                 hidden: int = 64, num_layers: int = 4, num_timesteps: int = 5, num_modes: int = 2,
                 time_embedding_dim: int = 32, use_time_conv: bool = True,
                 node_attr_norm: Literal["dataset", "batch_max"] = "dataset",
                 lr: float = 1e-4, weight_decay: float = 1e-8, final_lr: float | None = None, compile: bool = False,
                 teacher_forcing: bool = False):
        super().__init__()
        self.save_hyperparameters()
        if teacher_forcing and model != "egnn":
            raise ConfigError(f"teacher_forcing is for the EGNN baseline; {model} predicts all frames in one pass")
        common = dict(node_features=node_features, edge_features=edge_features, hidden=hidden,
                      num_layers=num_layers, num_timesteps=num_timesteps, node_attr_norm=node_attr_norm)
        if model == "egno":
            self.model = EGNO(num_modes=num_modes, time_embedding_dim=time_embedding_dim,
                              use_time_conv=use_time_conv, **common)
        elif model == "egnn":
            self.model = EGNNDynamics(**common)
        else:
            raise ValueError(f"unknown model {model!r} (egno | egnn)")
        if compile:
            self.model = torch.compile(self.model, dynamic=True)

    def forward(self, batch) -> torch.Tensor:
        """[N, P, 3] predicted positions (teacher-forced while training when so configured)."""
        if self.hparams.teacher_forcing and self.training:
            return self.model(batch, batch.X_target).x
        return self.model(batch).x

    def compute(self, batch):
        pred = self(batch)
        return trajectory_loss(pred, batch.X_target), batch.num_graphs, pred

    def collect(self, batch, pred) -> None:
        self.collector.add(s2s=s2s_mse(pred, batch.X_target, batch.batch, batch.num_graphs),
                           s2t=s2t_mse(pred, batch.X_target, batch.batch, batch.num_graphs))

    def epoch_metrics(self, cols: dict[str, list]) -> dict[str, float]:
        return {"s2s_mse": float(torch.tensor(cols["s2s"]).mean()), "s2t_mse": float(torch.tensor(cols["s2t"]).mean())}

    def predict_step(self, batch, batch_idx) -> dict[str, Any]:
        """Per item: ``name``, ``num_nodes``, predicted ``positions`` [N_i, P, 3] and, where the item
        has targets, its ``s2s_mse`` and ``s2t_mse``."""
        pred = self(batch).detach()
        counts = torch.bincount(batch.batch, minlength=batch.num_graphs).tolist()
        names = getattr(batch, "name", None) or [str(i) for i in range(batch.num_graphs)]
        out = {"name": list(names), "num_nodes": counts, "positions": list(pred.cpu().split(counts))}
        if getattr(batch, "X_target", None) is not None:
            out["s2s_mse"] = s2s_mse(pred, batch.X_target, batch.batch, batch.num_graphs).cpu()
            out["s2t_mse"] = s2t_mse(pred, batch.X_target, batch.batch, batch.num_graphs).cpu()
        return out
