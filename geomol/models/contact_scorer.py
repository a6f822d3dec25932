"""The contact scorer: a posed ligand's affinity score as a sum over its atoms' contacts.

    score = Σ_{ligand atoms a} MLP(normalised contact features of a) + w · normalised descriptors + b

The per-atom features (:mod:`geomol.data.chemistry.contact_features`) say what each ligand heavy atom touches in
the receptor; the descriptor term (:data:`~geomol.data.chemistry.ligand_features.DESCRIPTOR_NAMES`) carries
whole-molecule properties (size, rotatable bonds, logP, ...). Additive over atoms, the score ranks
the members of a congeneric series by what their differing atoms contribute, which is what the
within-series losses of :mod:`geomol.training.contact_scorer` train it for. An optional non-additive term
(``pooled``) adds an MLP of the ligand's mean atom state and descriptors. Being a function of distances and
elements only, it is invariant to rotations, reflections and translations of the complex.

The normalisation (log1p of the count columns, then means and spreads over training atoms and
ligands) and the calibration to pK (``scale`` and ``offset``, :meth:`ContactScorer.calibrate`) live in
buffers, so a ``state_dict`` is the whole model (``torch.load(weights_only=True)``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch
from torch import nn

from geomol.data.chemistry.contact_features import (ATOM_CONTACT_FEATURES, CHEMISTRY_CONTACT_FEATURES, COUNT_FEATURES,
                                          graph_atom_contacts)
from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES
from geomol.errors import ConfigError
from geomol.nn.scatter import scatter_mean

__all__ = ["NO_CHEMISTRY", "WITH_CHEMISTRY", "ContactScorer", "contact_inputs", "has_ligand_chemistry"]

WITH_CHEMISTRY = len(ATOM_CONTACT_FEATURES) + len(CHEMISTRY_CONTACT_FEATURES)
"""Per-atom input width of a scorer that reads the interaction roles too (``graph_atom_contacts(chemistry=True)``)."""
NO_CHEMISTRY = "the contact scorer needs the ligand's chemistry (its descriptors): give the ligand as SDF, MOL2 or SMILES"


def has_ligand_chemistry(graph) -> bool:
    """Whether a complex graph carries finite ``ligand_descriptors`` (built from a ligand molecule)."""
    values = getattr(graph, "ligand_descriptors", None)
    return values is not None and bool(torch.isfinite(values).all())


def contact_inputs(graphs: Sequence, chemistry: bool = False) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(atoms (N, F), owner (N,), descriptors (B, D))`` of complex graphs, for :meth:`ContactScorer.forward`.

    Args:
        graphs: :class:`~geomol.data.blocks.BlockGraph` complexes (receptor segment 0, ligand segment 1)
            carrying ``ligand_descriptors`` (every graph geomol builds from a ligand molecule does).
        chemistry: with the interaction-role columns (for a scorer with :attr:`ContactScorer.reads_chemistry`).

    Raises:
        ConfigError: a graph whose ligand has no descriptors (built without its chemistry, e.g. from PDB
            records), naming the graph.
    """
    if not graphs:
        raise ConfigError("no complexes to score")
    rows, descriptors = [], []
    for graph in graphs:
        if not has_ligand_chemistry(graph):
            raise ConfigError(NO_CHEMISTRY, source=getattr(graph, "name", None))
        rows.append(graph_atom_contacts(graph, chemistry=chemistry))
        descriptors.append(graph.ligand_descriptors.reshape(-1))
    owner = np.repeat(np.arange(len(rows)), [len(r) for r in rows])
    return (torch.from_numpy(np.concatenate(rows)), torch.from_numpy(owner),
            torch.stack(descriptors).to(torch.float64))


class ContactScorer(nn.Module):
    """Per-atom MLP summed over each ligand, plus a linear ligand-descriptor term.

    Args:
        hidden: width of the per-atom MLP's two hidden layers.
        n_atom_features: columns of the per-atom input (default :data:`ATOM_CONTACT_FEATURES`).
        n_descriptors: columns of the descriptor input (default :data:`DESCRIPTOR_NAMES`); 0 for none.
        pooled: width of an optional non-additive term (0: none): an MLP of the ligand's mean per-atom hidden
            state (the atom MLP's last hidden layer) and its normalised descriptors, added to the score.
        message_steps: rounds of messages along the ligand's bonds (0: none) before the per-atom read-out: each
            updates an atom's hidden state by ``h += SiLU(W [h, mean of its bonded neighbours' h])``, so an atom's
            term also reads what the atoms around it touch.
    """

    def __init__(self, hidden: int = 32, n_atom_features: int = len(ATOM_CONTACT_FEATURES),
                 n_descriptors: int = len(DESCRIPTOR_NAMES), pooled: int = 0, message_steps: int = 0):
        super().__init__()
        self.atom_mlp = nn.Sequential(nn.Linear(n_atom_features, hidden), nn.SiLU(), nn.Linear(hidden, hidden),
                                      nn.SiLU(), nn.Linear(hidden, 1))
        self.messages = nn.ModuleList(nn.Sequential(nn.Linear(2 * hidden, hidden), nn.SiLU())
                                      for _ in range(message_steps))
        self.descriptor_head = nn.Linear(n_descriptors, 1) if n_descriptors else None
        self.pooled_mlp = (nn.Sequential(nn.Linear(hidden + n_descriptors, pooled), nn.SiLU(), nn.Linear(pooled, 1))
                           if pooled else None)
        log_columns = torch.zeros(n_atom_features, dtype=torch.bool)
        if n_atom_features in (len(ATOM_CONTACT_FEATURES), WITH_CHEMISTRY):
            log_columns[[c for c in COUNT_FEATURES if c < n_atom_features]] = True
        self.register_buffer("log_columns", log_columns)
        for name, width in (("atom", n_atom_features), ("descriptor", n_descriptors)):
            self.register_buffer(f"{name}_mean", torch.zeros(width))
            self.register_buffer(f"{name}_std", torch.ones(width))
        self.register_buffer("scale", torch.ones(()))
        self.register_buffer("offset", torch.zeros(()))

    @property
    def message_steps(self) -> int:
        """Rounds of messages along the ligand's bonds (0: the atoms are scored independently)."""
        return len(self.messages)

    @property
    def reads_chemistry(self) -> bool:
        """Whether the per-atom input has the interaction-role columns (:data:`WITH_CHEMISTRY` wide)."""
        return self.atom_mlp[0].in_features == WITH_CHEMISTRY

    def _atom_inputs(self, atoms: torch.Tensor) -> torch.Tensor:
        return torch.where(self.log_columns, torch.log1p(atoms.clamp_min(0)), atoms)

    @torch.no_grad()
    def fit_normalisation(self, atoms: torch.Tensor, descriptors: torch.Tensor | None) -> None:
        """Set the input normalisation from training data: ``atoms`` ``(N, F)``, ``descriptors`` ``(B, D)``."""
        inputs = self._atom_inputs(atoms.to(self.atom_mean.dtype))
        self.atom_mean.copy_(inputs.mean(0))
        self.atom_std.copy_(inputs.std(0).clamp_min(1e-6))
        if self.descriptor_head is not None and descriptors is not None:
            descriptors = descriptors.to(self.descriptor_mean.dtype)
            self.descriptor_mean.copy_(descriptors.mean(0))
            self.descriptor_std.copy_(descriptors.std(0).clamp_min(1e-6))

    @torch.no_grad()
    def calibrate(self, raw: torch.Tensor, label: torch.Tensor, groups: torch.Tensor) -> None:
        """Map raw scores to pK: ``scale`` by least squares within groups, ``offset`` to the labels' mean.

        A within-series loss fixes neither the level (no protein's pK level can be known) nor, for the
        ranking loss, the spread. The scale makes differences within a series pK differences (the slope
        of centred labels on centred scores); the offset puts the mean at the training labels' mean.

        Args:
            raw: ``(n,)`` scores with the current ``scale`` 1 and ``offset`` 0; label: ``(n,)`` pK;
            groups: ``(n,)`` long series index of each item.
        """
        raw, label = raw.double(), label.double()
        count = torch.zeros(int(groups.max()) + 1, dtype=raw.dtype).index_add(0, groups, torch.ones_like(raw))
        centred = [v - (torch.zeros_like(count).index_add(0, groups, v) / count)[groups] for v in (raw, label)]
        slope = float((centred[0] * centred[1]).sum() / (centred[0] ** 2).sum().clamp_min(1e-12))
        self.scale.fill_(slope)
        self.offset.fill_(float(label.mean() - slope * raw.mean()))

    def forward(self, atoms: torch.Tensor, owner: torch.Tensor, descriptors: torch.Tensor | None = None,
                n_ligands: int | None = None, bonds: torch.Tensor | None = None) -> torch.Tensor:
        """Scores of a batch of ligands.

        Args:
            atoms: ``(N, F)`` contact features of all ligand atoms of the batch.
            owner: ``(N,)`` long, the ligand (0 … B−1) of each atom.
            descriptors: ``(B, D)`` ligand descriptors (required when the model has a descriptor term).
            n_ligands: B (default: from ``descriptors``, else ``owner.max() + 1``).
            bonds: ``(E, 2)`` long bonded rows of ``atoms`` (required when the model passes messages).

        Returns:
            ``(B,)`` scores: pK once :meth:`calibrate` has run (only differences within one receptor's
            series are informative), raw training scores before.
        """
        if self.descriptor_head is not None and descriptors is None:
            raise ConfigError("this contact scorer has a descriptor term: pass the ligands' descriptors")
        dtype = self.atom_mean.dtype
        n = n_ligands if n_ligands is not None else (len(descriptors) if descriptors is not None
                                                     else int(owner.max()) + 1)
        hidden = self.atom_mlp[:-1]((self._atom_inputs(atoms.to(dtype)) - self.atom_mean) / self.atom_std)
        if self.messages:
            if bonds is None:
                raise ConfigError("this contact scorer passes messages along the ligand's bonds: pass the bonds")
            ends, others = torch.cat([bonds[:, 0], bonds[:, 1]]), torch.cat([bonds[:, 1], bonds[:, 0]])
            for step in self.messages:
                neighbours = scatter_mean(hidden[others], ends, len(hidden))
                hidden = hidden + step(torch.cat([hidden, neighbours], 1))
        per_atom = self.atom_mlp[-1](hidden).squeeze(-1)
        score = torch.zeros(n, dtype=per_atom.dtype, device=per_atom.device).index_add(0, owner, per_atom)
        normalised = None
        if self.descriptor_head is not None:
            normalised = (descriptors.to(dtype) - self.descriptor_mean) / self.descriptor_std
            score = score + self.descriptor_head(normalised).squeeze(-1)
        if self.pooled_mlp is not None:
            mean = scatter_mean(hidden, owner, n)
            pooled_input = mean if normalised is None else torch.cat([mean, normalised], 1)
            score = score + self.pooled_mlp(pooled_input).squeeze(-1)
        return self.scale * score + self.offset
