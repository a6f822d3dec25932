"""Trajectory prediction (EGNO, the EGNN baseline, or the generative EGNOFlow) as a LightningModule.

Loss: the reference objective, mean over the P predicted frames of the per-frame MSE; for the generative
:class:`~geomol.models.egno_flow.EGNOFlow` its flow-matching loss (evaluation batches draw their noise from a
generator seeded by the batch index, so validation losses of two epochs compare the same draws), and its
evaluation metrics are those of one sampled window per state. Logged per
evaluation epoch over all samples: ``s2s_mse`` (state-to-state: error at the last frame, the
number the reference scripts report) and ``s2t_mse`` (state-to-trajectory: mean over the P frames).
The data module's :class:`~geomol.data.dynamics.protocol.TrajectoryProtocol` (target offsets, graph
and feature definitions) is stored in every checkpoint, so that a rollout later builds its inputs
exactly as in training.
"""
from __future__ import annotations

from typing import Any, Literal

import torch

from lightning.pytorch.utilities import rank_zero_warn

from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.errors import ConfigError
from geomol.models.dynamics import s2s_mse, s2t_mse, trajectory_loss
from geomol.models.egnn import EGNNDynamics
from geomol.models.egno import EGNO
from geomol.models.egno_flow import EGNOFlow
from geomol.tasks.base import GeomolModule

__all__ = ["DynamicsModule"]


class DynamicsModule(GeomolModule):
    """Train EGNO (or EGNN) to predict P future frames from one state.

    Args:
        model: ``"egno"``, ``"egnn"`` or ``"egno_flow"`` (generative, :class:`~geomol.models.egno_flow.EGNOFlow`).
        node_features, edge_features: model input widths, |v| and the squared distance included
            (N-body 1/2, Mocap and MD 2/2, MD17 2/5).
        hidden, num_layers, num_timesteps (P), num_modes, time_embedding_dim, use_time_conv,
            node_attr_norm: see :class:`~geomol.models.egno.EGNO`.
        lr, weight_decay, final_lr: Adam; ``final_lr=None`` keeps the rate constant (reference).
        compile: wrap the model in ``torch.compile``.
        teacher_forcing: EGNN only: train the one-step model with teacher forcing (each step starts from the
            true previous frame, see :meth:`~geomol.models.egnn.EGNNDynamics.forward`) instead of through its own
            rollout; validation, test and prediction roll out freely either way.
        prior_scale: EGNOFlow only: σ_p (Å) of its prior, one value or P; None takes the training data's
            displacement spread from the data module (``prior_scale()``) when training starts.
        sampling_steps: EGNOFlow only: Euler steps of a sample. sampling_noise: EGNOFlow only: η of its stochastic
            sampler (0: the flow's ODE).
        velocity_span: EGNOFlow only: frames between the state and its previous frame, in the velocity's unit of time
            (the model's previous slice is x − velocity_span·v): 1 for the molecule data (v per window spacing), the
            spacing s for MD data whose velocity is a per-frame difference over s frames.
        tau_power: EGNOFlow only: how training draws flow times (:class:`~geomol.models.egno_flow.EGNOFlow`).
    """

    recipe_type = TrajectoryProtocol

    def __init__(self, model: Literal["egno", "egnn", "egno_flow"] = "egno", node_features: int = 1, edge_features: int = 2,
                 hidden: int = 64, num_layers: int = 4, num_timesteps: int = 5, num_modes: int = 2,
                 time_embedding_dim: int = 32, use_time_conv: bool = True,
                 node_attr_norm: Literal["dataset", "batch_max"] = "dataset",
                 lr: float = 1e-4, weight_decay: float = 1e-8, final_lr: float | None = None, compile: bool = False,
                 teacher_forcing: bool = False, prior_scale: float | list[float] | None = None,
                 sampling_steps: int = 10, velocity_span: float = 1.0, tau_power: float = 1.0,
                 sampling_noise: float = 0.0):
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
        elif model == "egno_flow":
            self.model = EGNOFlow(num_modes=num_modes, time_embedding_dim=time_embedding_dim,
                                  prior_scale=1.0 if prior_scale is None else prior_scale,
                                  sampling_steps=sampling_steps, sampling_noise=sampling_noise,
                                  velocity_span=velocity_span, tau_power=tau_power, **common)
        else:
            raise ValueError(f"unknown model {model!r} (egno | egnn | egno_flow)")
        if compile:
            self.model = torch.compile(self.model, dynamic=True)

    @property
    def generative(self) -> bool:
        return getattr(self.model, "generative", False)

    def setup(self, stage: str) -> None:
        super().setup(stage)
        data = getattr(self.trainer, "datamodule", None)
        if stage == "fit" and self.generative and self.hparams.prior_scale is None and hasattr(data, "prior_scale"):
            self.model.prior_scale.copy_(torch.tensor(data.prior_scale()))

    def forward(self, batch, generator: torch.Generator | None = None) -> torch.Tensor:
        """[N, P, 3] predicted positions (teacher-forced while training when so configured; one sampled window
        for a generative model)."""
        if self.hparams.teacher_forcing and self.training:
            return self.model(batch, batch.X_target).x
        if self.generative:
            return self.model(batch, generator).x
        return self.model(batch).x

    def compute(self, batch, batch_idx: int = 0):
        if not self.generative:
            pred = self(batch)
            return trajectory_loss(pred, batch.X_target), batch.num_graphs, pred
        if self.training:
            return self.model.loss(batch), batch.num_graphs, None
        seeded = lambda: torch.Generator(batch.X.device).manual_seed(batch_idx)  # noqa: E731
        return self.model.loss(batch, seeded()), batch.num_graphs, self(batch, seeded())

    def collect(self, batch, pred) -> None:
        still = batch.X.unsqueeze(1).expand_as(batch.X_target)  # no motion: the input frame kept
        self.collector.add(s2s=s2s_mse(pred, batch.X_target, batch.batch, batch.num_graphs),
                           s2t=s2t_mse(pred, batch.X_target, batch.batch, batch.num_graphs),
                           s2s_still=s2s_mse(still, batch.X_target, batch.batch, batch.num_graphs))

    def epoch_metrics(self, cols: dict[str, list]) -> dict[str, float]:
        mean = lambda key: float(torch.tensor(cols[key]).mean())  # noqa: E731
        return {"s2s_mse": mean("s2s"), "s2t_mse": mean("s2t"), "s2s_no_motion": mean("s2s_still")}

    def _finish_epoch(self) -> None:
        super()._finish_epoch()
        if self.stage == "test" and not self.trainer.sanity_checking:
            self._warn_if_no_better("test", "on the test windows")

    def on_fit_end(self) -> None:
        self._warn_if_no_better("val", "after training, on the validation windows")

    def _warn_if_no_better(self, stage: str, where: str) -> None:
        """Say so when a deterministic model's S2S is no lower than keeping the input frame (a generative model's
        sample is judged by its distributions instead: its S2S is that of one draw, not of the mean)."""
        metrics = self.trainer.callback_metrics
        model, still = metrics.get(f"{stage}/s2s_mse"), metrics.get(f"{stage}/s2s_no_motion")
        if not self.generative and model is not None and still is not None and float(model) >= float(still):
            rank_zero_warn(f"the model is no better than no motion {where}: S2S {float(model):.4g} Å² against "
                           f"{float(still):.4g} for keeping the input frame")

    def predict_step(self, batch, batch_idx) -> dict[str, Any]:
        """Per item: ``name``, ``num_nodes``, predicted ``positions`` [N_i, P, 3] and, where the item
        has targets, its ``s2s_mse`` and ``s2t_mse``."""
        pred = self(batch, torch.Generator(batch.X.device).manual_seed(batch_idx)).detach()
        counts = torch.bincount(batch.batch, minlength=batch.num_graphs).tolist()
        names = getattr(batch, "name", None) or [str(i) for i in range(batch.num_graphs)]
        out = {"name": list(names), "num_nodes": counts, "positions": list(pred.cpu().split(counts))}
        if getattr(batch, "X_target", None) is not None:
            out["s2s_mse"] = s2s_mse(pred, batch.X_target, batch.batch, batch.num_graphs).cpu()
            out["s2t_mse"] = s2t_mse(pred, batch.X_target, batch.batch, batch.num_graphs).cpu()
        return out
