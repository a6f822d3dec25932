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

from typing import Mapping

import torch
from torch import nn

from geomol.data.blocks import ligand_atom_mask
from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES, GRAPH_MORGAN_BITS
from geomol.data.vocab import ATOM_TYPES
from geomol.errors import ConfigError, InputCheckError
from geomol.models.physics_readout import TYPICAL_PK, PhysicsReadout
from geomol.nn.scatter import scatter_sum

__all__ = ["EnergyReadout", "ShiftedEnergyReadout", "GraphReadout", "SizeAwareReadout", "HybridReadout",
           "PhysicsReadout", "SizeAwarePhysicsReadout", "ligand_heavy_atoms", "READOUTS", "register_readout",
           "readout_class", "adapted_readout", "ENERGY_READOUT", "SHIFTED_READOUT"]

HEAVY_ATOM_SCALE = 25.0  # heavy atoms of a typical drug-like ligand: the size term's unit
# Typical magnitudes of DESCRIPTOR_NAMES, so that every descriptor enters a hybrid read-out near unit scale.
DESCRIPTOR_SCALES = (25.0, 350.0, 3.0, 80.0, 2.0, 5.0, 5.0, 3.0, 2.0, 1.0, 0.3)


class EnergyReadout(nn.Module):
    """pK = −Σ over all blocks (globals included) of ``energy_ffn(block_repr)``: the official read-out.

    Its MLP is the model's own ``energy_ffn`` (so official and shipped weights load unchanged); this
    module holds no parameters.
    """

    def __init__(self, hidden: int):
        super().__init__()

    def forward(self, model, out) -> torch.Tensor:
        return -model.energy(out)


class ShiftedEnergyReadout(EnergyReadout):
    """pK = −Σ blocks ``energy_ffn(block_repr)`` + ``offset``: the official read-out with one learned
    constant per model, as few-shot fine-tuning on a user's target writes it
    (:mod:`geomol.training.finetune`). A per-block bias cannot express a per-complex constant,
    since the sum over blocks would scale it with the pocket's size."""

    def __init__(self, hidden: int):
        super().__init__(hidden)
        self.offset = nn.Parameter(torch.zeros(()))

    def forward(self, model, out) -> torch.Tensor:
        return -model.energy(out) + self.offset


class GraphReadout(nn.Module):
    """pK = MLP(graph_repr): a two-layer MLP on the unit-norm complex embedding (no sum over blocks, so
    the prediction does not grow with the number of blocks)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, model, out) -> torch.Tensor:
        return self.mlp(out.graph_repr).squeeze(-1)


def ligand_heavy_atoms(out) -> torch.Tensor:
    """[B] heavy atoms of each complex's ligand (segment 1, global atom and hydrogens excluded), as floats."""
    g = out.graph
    atoms = (ligand_atom_mask(g) & (g.A != ATOM_TYPES.index("H"))).to(out.H.dtype)
    return scatter_sum(atoms, out.block_batch[g.block_id], out.graph_repr.size(0))


def size_trend(slope: torch.Tensor, out) -> torch.Tensor:
    """[B] the heavy-atom trend ``slope · HAC / 25`` in pK, ``slope`` in pK per 25 heavy atoms."""
    return slope * (ligand_heavy_atoms(out) / HEAVY_ATOM_SCALE)


class SizeAwareReadout(nn.Module):
    """pK = b + s · HAC / 25 + MLP(graph_repr): a learned heavy-atom-count trend plus a residual that
    cannot grow with size (it reads the unit-norm complex embedding). On a protein it has never seen,
    such a model starts from the size trend every series shows and has to earn each deviation from it.
    b starts at a typical pK and s at 1 pK per 25 heavy atoms."""

    def __init__(self, hidden: int):
        super().__init__()
        self.offset = nn.Parameter(torch.tensor(TYPICAL_PK - 1.0))
        self.size_slope = nn.Parameter(torch.tensor(1.0))
        self.residual = nn.Sequential(nn.Linear(hidden, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def forward(self, model, out) -> torch.Tensor:
        return self.offset + size_trend(self.size_slope, out) + self.residual(self.residual_input(out)).squeeze(-1)

    def residual_input(self, out) -> torch.Tensor:
        """[B, hidden] what the residual MLP reads: the unit-norm complex embedding."""
        return out.graph_repr


class HybridReadout(SizeAwareReadout):
    """The size-aware read-out whose residual also sees the ligand's chemistry: MLP([graph_repr,
    descriptors / typical scale, W log(1 + Morgan counts)]), from the graph's ``ligand_descriptors``
    and ``ligand_morgan`` (:func:`~geomol.data.chemistry.ligand_features.graph_ligand_features`)."""

    def __init__(self, hidden: int):
        super().__init__(hidden)
        self.register_buffer("descriptor_scales", torch.tensor(DESCRIPTOR_SCALES), persistent=False)
        self.morgan = nn.Linear(GRAPH_MORGAN_BITS, hidden)
        n_in = 2 * hidden + len(DESCRIPTOR_NAMES)
        self.residual = nn.Sequential(nn.Linear(n_in, hidden), nn.SiLU(), nn.Linear(hidden, 1))

    def residual_input(self, out) -> torch.Tensor:
        """[B, 2·hidden + 11] the embedding, the scaled descriptors and the projected Morgan counts."""
        g = out.graph
        descriptors = g.ligand_descriptors.to(out.H.dtype)
        if torch.isnan(descriptors).any():
            raise InputCheckError("this model's hybrid read-out needs the ligand's bonds (descriptors and "
                                  "fingerprint): give the ligand as SDF or MOL2, not as PDB records",
                                  getattr(g, "name", None))
        return torch.cat([out.graph_repr, descriptors / self.descriptor_scales,
                          self.morgan(torch.log1p(g.ligand_morgan.to(out.H.dtype)))], dim=-1)


class SizeAwarePhysicsReadout(PhysicsReadout):
    """The physics-shaped read-out plus the size-aware read-out's learned heavy-atom trend:
    pK = −ΔG / 1.364 + b + s · HAC / 25 (s starts at 0). With decoys of the same ligand in training, the
    trend cannot tell a decoy from its complex, so the pair terms must; the trend carries the size effect
    that every series shows, which pair sums alone overstate or understate."""

    def __init__(self, hidden: int, cutoff: float = 8.0):
        super().__init__(hidden, cutoff)
        self.size_slope = nn.Parameter(torch.zeros(()))

    def terms(self, model, out) -> dict[str, torch.Tensor]:
        terms = super().terms(model, out)
        terms["pK"] = terms["pK"] + size_trend(self.size_slope, out)
        return terms


READOUTS: dict[str, type[nn.Module]] = {}
"""Class path → read-out class: what configs and model files may name."""


def register_readout(cls: type[nn.Module]) -> type[nn.Module]:
    """Make ``cls`` choosable by its class path (usable as a decorator)."""
    READOUTS[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


for _cls in (EnergyReadout, ShiftedEnergyReadout, GraphReadout, SizeAwareReadout, HybridReadout, PhysicsReadout,
             SizeAwarePhysicsReadout):
    register_readout(_cls)


def readout_class(path: str) -> type[nn.Module]:
    """The registered read-out of a class path.

    Raises:
        ValueError: an unregistered path (naming the registered ones).
    """
    if path not in READOUTS:
        raise ValueError(f"unknown read-out {path!r}; registered: {sorted(READOUTS)} (see register_readout)")
    return READOUTS[path]


ENERGY_READOUT = "geomol.models.readouts.EnergyReadout"
SHIFTED_READOUT = "geomol.models.readouts.ShiftedEnergyReadout"


def adapted_readout(config) -> str:
    """The read-out path a fine-tuned GET has (``config``: a :class:`~geomol.models.get.GETConfig` or its
    mapping): an energy read-out gains an offset (:class:`ShiftedEnergyReadout`), others keep theirs.

    Raises:
        ConfigError: a read-out without an ``offset`` parameter (nothing to fix the target's level with).
    """
    values = config if isinstance(config, Mapping) else vars(config)
    readout = values.get("readout", ENERGY_READOUT)
    if readout in (ENERGY_READOUT, SHIFTED_READOUT):
        return SHIFTED_READOUT
    if "offset" not in dict(readout_class(readout)(int(values.get("hidden", 32))).named_parameters()):
        raise ConfigError(f"fine-tuning needs a read-out with an offset; this model's read-out is {readout}")
    return readout
