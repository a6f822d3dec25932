"""A trained trajectory model (EGNO or the EGNN baseline) with the data protocol it was trained on.

:class:`DynamicsModel` is what :func:`geomol.load_model` returns for a ``"dynamics"`` model (a
``geomol fit`` checkpoint of :class:`~geomol.tasks.DynamicsModule`, or a shipped model whose
manifest says ``"task": "dynamics"``). It holds the network, its constructor arguments and the
:class:`~geomol.data.dynamics.protocol.TrajectoryProtocol`; building and saving are those of every
shipped model (:class:`~geomol.inference.shipped.ShippedModel`); the manifest carries both:

.. code-block:: text

    "task": "dynamics", "architecture": "EGNO",
    "hyperparameters": {"node_features": 2, "edge_features": 2, "hidden": 128, "num_layers": 4,
                        "num_timesteps": 4, "num_modes": 2, ...},
    "preprocessing": {"kind": "md", "target_offsets": [3, 7, 11, 15], "selection": "backbone",
                      "cutoff": 8.0, "charge_scale": 0.51, "frame_time": 1.0, "frame_interval": 240.0,
                      "time_unit": "ps", "length_unit": "Å", "node_features": [...], ...}
"""
from __future__ import annotations

import inspect
from typing import Any, Mapping

import torch
from torch import nn

from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.errors import ConfigError, ModelLoadError
from geomol.inference.shipped import ShippedModel
from geomol.models.dynamics import TrajectoryPrediction
from geomol.models.egnn import EGNNDynamics
from geomol.models.egno import EGNO
from geomol.models.egno_flow import EGNOFlow

__all__ = ["DynamicsModel", "ARCHITECTURES"]

ARCHITECTURES: dict[str, type[nn.Module]] = {"EGNO": EGNO, "EGNNDynamics": EGNNDynamics, "EGNOFlow": EGNOFlow}
_MODULE_CHOICE = {"egno": "EGNO", "egnn": "EGNNDynamics", "egno_flow": "EGNOFlow"}  # DynamicsModule(model=...)


class DynamicsModel(ShippedModel):
    """One trajectory network and its data protocol.

    Args:
        network: an :class:`~geomol.models.egno.EGNO` or :class:`~geomol.models.egnn.EGNNDynamics`.
        arguments: its constructor arguments. protocol: how its training inputs were built.
        name, description, metrics, origin: metadata for a shipped model's manifest.
    """

    task = "dynamics"
    recipe_type = TrajectoryProtocol
    max_members = 1  # trajectory models are not ensembled
    default_architecture = "EGNO"

    def __init__(self, network: nn.Module | nn.ModuleList | list, arguments: Mapping[str, Any],
                 protocol: TrajectoryProtocol, *, name: str = "", description: str = "",
                 metrics: Mapping[str, Any] | None = None, origin: Mapping[str, Any] | None = None,
                 origins=None):
        members = list(network) if isinstance(network, (list, nn.ModuleList)) else [network]
        if members[0].num_timesteps != protocol.num_timesteps:
            raise ModelLoadError(f"the network predicts {members[0].num_timesteps} frames but the protocol lists "
                                 f"{protocol.num_timesteps} target offsets {protocol.target_offsets}",
                                 source=name or None)
        super().__init__(members, arguments, protocol, name=name, description=description, metrics=metrics,
                         origins=origins if origins is not None else [origin or {}])

    @property
    def network(self) -> nn.Module:
        return self.members[0]

    @property
    def protocol(self) -> TrajectoryProtocol:
        return self.recipe

    @property
    def origin(self) -> dict[str, Any]:
        return self.origins[0]

    def __repr__(self) -> str:
        p = self.protocol
        return (f"DynamicsModel({self.name or 'unnamed'!r}, {self.architecture} {p.kind}, P={p.num_timesteps}, "
                f"offsets {list(p.target_offsets)})")

    # ------------------------------------------------------------------ building
    @classmethod
    def architecture_of(cls, hyperparameters: Mapping[str, Any], source) -> str:
        architecture = _MODULE_CHOICE.get(str(hyperparameters.get("model", "egno")))
        if architecture is None:
            raise ModelLoadError(f"unknown model {hyperparameters.get('model')!r} in the hyperparameters",
                                 source=source)
        return architecture

    @classmethod
    def build_network(cls, architecture: str, hyperparameters: Mapping[str, Any], source) -> tuple[nn.Module, dict]:
        if architecture not in ARCHITECTURES:
            raise ModelLoadError(f"unknown trajectory architecture {architecture!r} ({', '.join(ARCHITECTURES)})",
                                 source=source)
        names = [p for p in inspect.signature(ARCHITECTURES[architecture].__init__).parameters if p != "self"]
        arguments = {k: hyperparameters[k] for k in names if k in hyperparameters}
        try:
            return ARCHITECTURES[architecture](**arguments), arguments
        except (TypeError, ValueError) as exc:
            raise ModelLoadError(f"cannot build {architecture}({arguments}): {exc}", source=source) from None

    def card_facts(self, manifest: Mapping[str, Any]) -> list[str]:
        protocol = manifest["preprocessing"]
        return [f"{manifest['architecture']} trajectory model.",
                f"- architecture: {manifest['architecture']} " + ", ".join(
                    f"{k}={v}" for k, v in manifest["hyperparameters"].items()),
                f"- data: {protocol['kind']}; predicted frames at offsets {protocol['target_offsets']} "
                f"(frames after the input frame)",
                f"- node features: {', '.join(protocol['node_features'])}; edge features: "
                f"{', '.join(protocol['edge_features'])}"]

    # ------------------------------------------------------------------ use
    @property
    def generative(self) -> bool:
        """Whether each window is drawn from a learned distribution (EGNOFlow) rather than predicted as a mean."""
        return getattr(self.network, "generative", False)

    def set_sampling(self, steps: int | None = None, noise: float | None = None) -> None:
        """Steps per window and η of a generative model's sampler (fewer steps: faster, each window nearer the mean
        of its futures; η > 0: the stochastic sampler of :class:`~geomol.models.egno_flow.EGNOFlow`). A shipped
        model records the values it was judged with, and saving records new ones; None keeps a value.

        Raises:
            ConfigError: the model is not generative, ``steps`` < 1 or ``noise`` < 0.
        """
        if not self.generative:
            raise ConfigError(f"{self.name or self.architecture} predicts each window as a mean: it has no sampler")
        if steps is not None:
            if int(steps) < 1:
                raise ConfigError(f"sampling steps must be at least 1, got {steps}")
            self.network.sampling_steps = self.arguments["sampling_steps"] = int(steps)
        if noise is not None:
            if not float(noise) >= 0:
                raise ConfigError(f"the sampling noise η must be ≥ 0, got {noise}")
            self.network.sampling_noise = self.arguments["sampling_noise"] = float(noise)

    @torch.inference_mode()
    def predict(self, x: torch.Tensor, v: torch.Tensor, charges: torch.Tensor | None = None, *, molecule=None,
                generator: torch.Generator | None = None) -> TrajectoryPrediction:
        """One window from one state: x, v [N, 3] → positions x [N, P, 3] at the protocol's target offsets.

        Inputs are moved to the model's device and dtype; ``charges`` and ``molecule`` (the heavy atoms' atomic
        numbers and bonds, for models of many molecules) as in
        :meth:`~geomol.data.dynamics.protocol.TrajectoryProtocol.state_graph`. ``generator``: the random
        stream a generative model draws its window from (the same stream gives the same window).
        """
        x, v = x.to(self.device, self.dtype), v.to(self.device, self.dtype)
        charges = None if charges is None else charges.to(self.device, self.dtype)
        graph = self.protocol.state_graph(x, v, charges, molecule)
        return self.network(graph, generator) if self.generative else self.network(graph)

    @torch.inference_mode()
    def predict_states(self, x: torch.Tensor, v: torch.Tensor, charges: torch.Tensor | None = None, *,
                       molecule=None, generator: torch.Generator | None = None) -> torch.Tensor:
        """Windows of S states of the same system at once: x, v [S, N, 3] → positions [S, P, N, 3].

        One batched model call (faster than S calls for small systems); arguments as :meth:`predict`, with
        ``charges`` [N] and ``molecule`` shared by the states.
        """
        from torch_geometric.data import Batch

        device, dtype = self.device, self.dtype
        x, v = x.to(device, dtype), v.to(device, dtype)
        charges = None if charges is None else charges.to(device, dtype)
        batch = Batch.from_data_list([self.protocol.state_graph(a, b, charges, molecule) for a, b in zip(x, v)])
        out = (self.network(batch, generator) if self.generative else self.network(batch)).x  # [S·N, P, 3]
        return out.view(x.size(0), x.size(1), -1, 3).transpose(1, 2)

    def forward(self, graph) -> TrajectoryPrediction:
        """The network on a ready trajectory graph (a dataset item or batch)."""
        return self.network(graph)
