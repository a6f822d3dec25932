"""Read-outs of the GET affinity model: how the encoder's output becomes one pK per complex.

A read-out is chosen in the YAML by class path (``model.init_args.readout:
geomol.models.readouts.GraphReadout``) and recorded by that path in checkpoints and shipped-model
manifests. Loading resolves the path through :data:`READOUTS` only, never by importing what a model
file names (a model file cannot run code); a read-out written elsewhere is made choosable with
:func:`register_readout`.

Every read-out is ``forward(model, out) -> [B]`` with ``out`` the :class:`~geomol.models.get.GETOutput`
of B complexes; it is invariant under rotations, reflections and translations of the input because
it reads only invariant features.
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["EnergyReadout", "ShiftedEnergyReadout", "GraphReadout", "READOUTS", "register_readout", "readout_class"]


class EnergyReadout(nn.Module):
    """pK = −Σ over all blocks (globals included) of ``energy_ffn(block_repr)``: the official read-out.

    Its MLP is the model's own ``energy_ffn`` (so official and shipped weights load unchanged); this
    module holds no parameters.
    """

    def __init__(self, d_hidden: int):
        super().__init__()

    def forward(self, model, out) -> torch.Tensor:
        return -model.energy(out)


class ShiftedEnergyReadout(EnergyReadout):
    """pK = −Σ blocks ``energy_ffn(block_repr)`` + ``offset``: the official read-out with one learned
    constant per model, as few-shot fine-tuning on a user's target writes it
    (:mod:`geomol.inference.finetune`). A per-block bias cannot express a per-complex constant,
    since the sum over blocks would scale it with the pocket's size."""

    def __init__(self, d_hidden: int):
        super().__init__(d_hidden)
        self.offset = nn.Parameter(torch.zeros(()))

    def forward(self, model, out) -> torch.Tensor:
        return -model.energy(out) + self.offset


class GraphReadout(nn.Module):
    """pK = MLP(graph_repr): a two-layer MLP on the unit-norm complex embedding (no sum over blocks, so
    the prediction does not grow with the number of blocks)."""

    def __init__(self, d_hidden: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(d_hidden, d_hidden), nn.SiLU(), nn.Linear(d_hidden, 1))

    def forward(self, model, out) -> torch.Tensor:
        return self.mlp(out.graph_repr).squeeze(-1)


READOUTS: dict[str, type[nn.Module]] = {}
"""Class path → read-out class: what configs and model files may name."""


def register_readout(cls: type[nn.Module]) -> type[nn.Module]:
    """Make ``cls`` choosable by its class path (usable as a decorator)."""
    READOUTS[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


for _cls in (EnergyReadout, ShiftedEnergyReadout, GraphReadout):
    register_readout(_cls)


def readout_class(path: str) -> type[nn.Module]:
    """The registered read-out of a class path.

    Raises:
        ValueError: an unregistered path (naming the registered ones).
    """
    if path not in READOUTS:
        raise ValueError(f"unknown read-out {path!r}; registered: {sorted(READOUTS)} (see register_readout)")
    return READOUTS[path]
