"""A trained trajectory model (EGNO or the EGNN baseline) with the data protocol it was trained on.

:class:`DynamicsModel` is what :func:`geomol.load_model` returns for a ``"dynamics"`` model (a
``geomol fit`` checkpoint of :class:`~geomol.tasks.DynamicsModule`, or a shipped model whose
manifest says ``"task": "dynamics"``). It holds the network, its constructor arguments and the
:class:`~geomol.inference.rollout_protocol.RolloutProtocol`; ``save`` writes a shipped-model
directory whose manifest carries both:

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
from os import PathLike
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

import geomol
from geomol.errors import ModelLoadError
from geomol.inference.affinity_model import _card_text
from geomol.inference.model_files import CheckpointContents, read_member_weights, write_model_dir
from geomol.inference.rollout_protocol import RolloutProtocol, state_graph
from geomol.models.dynamics import TrajectoryPrediction
from geomol.models.egnn import EGNNDynamics
from geomol.models.egno import EGNO

__all__ = ["DynamicsModel", "ARCHITECTURES"]

ARCHITECTURES: dict[str, type[nn.Module]] = {"EGNO": EGNO, "EGNNDynamics": EGNNDynamics}
_MODULE_CHOICE = {"egno": "EGNO", "egnn": "EGNNDynamics"}  # DynamicsModule(model=...) → architecture


def _arguments(architecture: str, hyperparameters: Mapping[str, Any], source) -> dict[str, Any]:
    """The constructor arguments of ``architecture`` among saved hyperparameters (lr etc. dropped)."""
    if architecture not in ARCHITECTURES:
        raise ModelLoadError(f"unknown trajectory architecture {architecture!r} ({', '.join(ARCHITECTURES)})",
                             source=source)
    names = [p for p in inspect.signature(ARCHITECTURES[architecture].__init__).parameters if p != "self"]
    return {k: hyperparameters[k] for k in names if k in hyperparameters}


def _network(architecture: str, arguments: dict[str, Any], state: dict[str, torch.Tensor], source) -> nn.Module:
    try:
        network = ARCHITECTURES[architecture](**arguments)
        network.load_state_dict(state)
    except (TypeError, ValueError, RuntimeError) as exc:
        reason = str(exc).strip().splitlines()
        raise ModelLoadError(f"weights do not fit {architecture}({arguments}): "
                             f"{reason[-1].strip() if reason else type(exc).__name__}", source=source) from None
    return network


class DynamicsModel(nn.Module):
    """One trajectory network and its data protocol.

    Args:
        network: an :class:`~geomol.models.egno.EGNO` or :class:`~geomol.models.egnn.EGNNDynamics`.
        arguments: its constructor arguments. protocol: how its training inputs were built.
        name, description, metrics, origin: metadata for a shipped model's manifest.
    """

    task = "dynamics"

    def __init__(self, network: nn.Module, arguments: Mapping[str, Any], protocol: RolloutProtocol, *,
                 name: str = "", description: str = "", metrics: Mapping[str, Any] | None = None,
                 origin: Mapping[str, Any] | None = None):
        super().__init__()
        if network.num_timesteps != protocol.num_timesteps:
            raise ModelLoadError(f"the network predicts {network.num_timesteps} frames but the protocol lists "
                                 f"{protocol.num_timesteps} target offsets {protocol.target_offsets}",
                                 source=name or None)
        self.network, self.arguments, self.protocol = network, dict(arguments), protocol
        self.name, self.description = name, description
        self.metrics, self.origin = dict(metrics or {}), dict(origin or {})
        self.eval()

    @property
    def architecture(self) -> str:
        return type(self.network).__name__

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    def __repr__(self) -> str:
        p = self.protocol
        return (f"DynamicsModel({self.name or 'unnamed'!r}, {self.architecture} {p.kind}, P={p.num_timesteps}, "
                f"offsets {list(p.target_offsets)})")

    # ------------------------------------------------------------------ building
    @classmethod
    def from_checkpoints(cls, checkpoints: Sequence[CheckpointContents], sources: Sequence[str | PathLike],
                         name: str = "") -> "DynamicsModel":
        """From one Lightning checkpoint of a DynamicsModule (trajectory models are not ensembled)."""
        if len(checkpoints) != 1:
            raise ModelLoadError(f"{len(checkpoints)} checkpoints given: a trajectory model is one checkpoint",
                                 source=sources[0])
        contents, source = checkpoints[0], sources[0]
        architecture = _MODULE_CHOICE.get(str(contents.hyperparameters.get("model", "egno")))
        if architecture is None:
            raise ModelLoadError(f"unknown model {contents.hyperparameters.get('model')!r} in the hyperparameters",
                                 source=source)
        arguments = _arguments(architecture, contents.hyperparameters, source)
        protocol = RolloutProtocol.from_dict(contents.preprocessing, source)
        network = _network(architecture, arguments, contents.state_dict, source)
        return cls(network, arguments, protocol, name=name, origin=contents.origin)

    @classmethod
    def from_manifest(cls, model_dir: Path, manifest: Mapping[str, Any]) -> "DynamicsModel":
        """A shipped model directory (see :mod:`geomol.inference.model_files`)."""
        if len(manifest["members"]) != 1:
            raise ModelLoadError("a trajectory model directory holds exactly one member", source=model_dir)
        architecture = str(manifest.get("architecture", "EGNO"))
        arguments = _arguments(architecture, manifest["hyperparameters"], model_dir)
        protocol = RolloutProtocol.from_dict(manifest["preprocessing"], model_dir)
        entry = manifest["members"][0]
        network = _network(architecture, arguments, read_member_weights(model_dir, entry), model_dir)
        return cls(network, arguments, protocol, name=str(manifest.get("name", model_dir.name)),
                   description=str(manifest.get("description", "")), metrics=manifest.get("metrics"),
                   origin=entry.get("source", {}) if isinstance(entry, Mapping) else {})

    # ------------------------------------------------------------------ use
    @torch.inference_mode()
    def predict(self, x: torch.Tensor, v: torch.Tensor, charges: torch.Tensor | None = None) -> TrajectoryPrediction:
        """One window from one state: x, v [N, 3] → positions x [N, P, 3] at the protocol's target offsets.

        Inputs are moved to the model's device and dtype; ``charges`` as in
        :func:`~geomol.inference.rollout_protocol.state_graph`.
        """
        x, v = x.to(self.device, self.dtype), v.to(self.device, self.dtype)
        charges = None if charges is None else charges.to(self.device, self.dtype)
        return self.network(state_graph(self.protocol, x, v, charges))

    def forward(self, graph) -> TrajectoryPrediction:
        """The network on a ready trajectory graph (a dataset item or batch)."""
        return self.network(graph)

    # ------------------------------------------------------------------ saving
    def manifest(self, **overrides: Any) -> dict[str, Any]:
        """The manifest entries of this model (the member file is added by the writer)."""
        return {"name": self.name, "task": self.task, "description": self.description,
                "architecture": self.architecture, "hyperparameters": self.arguments,
                "preprocessing": self.protocol.to_dict(), "metrics": self.metrics,
                "geomol_version": geomol.__version__, **overrides, "members": [{"source": self.origin}]}

    def save(self, out_dir: str | PathLike, *, card: str | PathLike | None = None, name: str | None = None,
             description: str | None = None, metrics: Mapping[str, Any] | None = None,
             overwrite: bool = False) -> Path:
        """Write this model as a shipped-model directory (manifest, ``member_0.pt``, README.md); returns its path."""
        out_dir = Path(out_dir)
        manifest = self.manifest(name=name or self.name or out_dir.name,
                                 description=self.description if description is None else description,
                                 metrics=self.metrics if metrics is None else dict(metrics))
        text = _card_text(card) if card is not None else _facts_card(manifest)
        return write_model_dir(out_dir, manifest, [self.network.state_dict()], text, overwrite=overwrite)


def _facts_card(manifest: Mapping[str, Any]) -> str:
    """A model card of the recorded facts, for a model exported without a written card."""
    protocol = manifest["preprocessing"]
    lines = [f"# {manifest['name']}", "", manifest["description"] or f"{manifest['architecture']} trajectory model.",
             "", "No card text was given when this model was exported; the facts below come from its manifest.", "",
             f"- architecture: {manifest['architecture']} " + ", ".join(
                 f"{k}={v}" for k, v in manifest["hyperparameters"].items()),
             f"- data: {protocol['kind']}; predicted frames at offsets {protocol['target_offsets']} "
             f"(frames after the input frame)",
             f"- node features: {', '.join(protocol['node_features'])}; edge features: "
             f"{', '.join(protocol['edge_features'])}"]
    lines += [f"- {key}: {value}" for key, value in manifest["metrics"].items()]
    return "\n".join(lines) + "\n"
