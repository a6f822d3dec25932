"""Kinds of dynamical systems, one registered entry each: how a state becomes a trajectory model's input graph.

A trajectory model's :class:`~geomol.data.dynamics.protocol.TrajectoryProtocol` names its system's ``kind``;
:data:`SYSTEMS` maps the kind to a :class:`DynamicsSystem` that builds the graph of a state (positions, velocities
and what else the kind needs) with the same functions the training datasets use, so one rollout window is the
model's prediction on the corresponding dataset item. A new kind of system is a new entry, not a new branch:

======== ========================================= ============================= =====================
kind     edges                                     edge_attr                     node_attr
======== ========================================= ============================= =====================
md       radius graph of the state, d < cutoff     d (Å) [, coarse edge 0/1]     charge / charge_scale
mocap    skeleton bonds (hop 1) and 2-hop pairs    hop                           (y/10) / height_scale
md17     heavy-atom bonds (hop 1) and 2-hop pairs  z_i, z_j, hop, stick          z / max z
molecule every pair of the molecule's heavy atoms  graph distance (one-hot)      element, degree, ring
nbody    complete graph                            q_i q_j                       none
======== ========================================= ============================= =====================

An MD protocol with ``coarse_cutoff`` adds edges between its coarse atoms (e.g. a protein's Cα) closer than that: the
rollout passes them as ``molecule`` (:class:`CoarseNodes`, found by atom name in the selection).
The models add |v| (node) and d² (edge) themselves (:func:`~geomol.models.dynamics.dynamics_inputs`).
Small-molecule kinds (``md17``, ``molecule``) read molecules: a rollout matches a user's atoms to the model's by the
molecular graph (:mod:`geomol.data.chemistry.molecule_matching`) and ``molecule`` models build the graph of whatever molecule
they are given.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from torch_geometric.data import Data

from geomol.data.dynamics.graphs import bond_edges, complete_graph, md17_edge_features, radius_edges
from geomol.data.chemistry.molecule_graph import molecule_graph
from geomol.errors import ConfigError

__all__ = ["DynamicsSystem", "SYSTEMS", "register_system", "system_of", "MoleculeGraph", "CoarseNodes"]

SYSTEMS: dict[str, "DynamicsSystem"] = {}


def register_system(cls: type["DynamicsSystem"]) -> type["DynamicsSystem"]:
    """Class decorator: add a system kind to :data:`SYSTEMS`."""
    SYSTEMS[cls.kind] = cls()
    return cls


def system_of(kind: str) -> "DynamicsSystem":
    try:
        return SYSTEMS[kind]
    except KeyError:
        raise ConfigError(f"unknown kind of system {kind!r} (known: {', '.join(SYSTEMS)})") from None


@dataclass(frozen=True)
class MoleculeGraph:
    """A molecule's heavy atoms as a ``molecule`` model reads them: atomic numbers [n], bonds [B, 2] among them and
    the hydrogens [n] bonded to each."""

    atomic_numbers: np.ndarray
    bonds: np.ndarray
    hydrogens: np.ndarray


@dataclass(frozen=True)
class CoarseNodes:
    """The nodes of an MD selection that coarse edges join (an MD protocol's ``coarse_atom``, e.g. every Cα).

    Attributes:
        index: [C] their positions in the selection.
    """

    index: torch.Tensor

    @classmethod
    def named(cls, names, atom_name: str, source=None) -> "CoarseNodes":
        """The atoms of the selection (atom names ``names`` [N]) called ``atom_name``.

        Raises:
            ConfigError: none is.
        """
        index = np.flatnonzero(np.asarray(names).astype(str) == atom_name)
        if not len(index):
            raise ConfigError(f"the model joins its {atom_name!r} atoms by coarse edges, but the selection has no "
                              f"atom named {atom_name!r}", source=source)
        return cls(torch.as_tensor(index, dtype=torch.long))


def _tensor(a, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(np.asarray(a), device=like.device).to(like.dtype)


class DynamicsSystem:
    """One kind of system. Subclasses set ``kind`` and implement :meth:`graph` (and :meth:`problems`)."""

    kind: ClassVar[str] = ""
    reads_molecules: ClassVar[bool] = False  # a small molecule's heavy atoms, from any molecule file, matched by graph
    reads_selections: ClassVar[bool] = False  # an atom selection of any trajectory MDAnalysis reads
    fixed_nodes: ClassVar[bool] = True  # the model was trained on a fixed number of nodes (protocol.num_nodes)

    def problems(self, protocol) -> list[str]:
        """What is missing from a protocol of this kind (empty when it is complete)."""
        return []

    def state_graph(self, protocol, x: torch.Tensor, v: torch.Tensor,
                    charges: torch.Tensor | None = None, molecule: MoleculeGraph | None = None) -> Data:
        """``Data`` with ``X``, ``V``, ``edge_index`` [2, M], ``edge_attr`` [M, E_d] and optionally ``node_attr``."""
        if self.fixed_nodes and protocol.num_nodes is not None and x.size(0) != protocol.num_nodes:
            raise ConfigError(f"the state has {x.size(0)} nodes, the {self.kind} model was trained on "
                              f"{protocol.num_nodes}")
        edge_index, edge_attr, node_attr = self.graph(protocol, x, charges, molecule)
        graph = Data(X=x, V=v, edge_index=edge_index.to(x.device), edge_attr=edge_attr, num_nodes=x.size(0))
        if node_attr is not None:
            graph.node_attr = node_attr
        return graph

    def graph(self, protocol, x, charges, molecule):
        raise NotImplementedError


@register_system
class MDSystem(DynamicsSystem):
    kind = "md"
    reads_selections = True
    fixed_nodes = False

    def problems(self, protocol):
        found = [] if protocol.cutoff and protocol.cutoff > 0 and protocol.selection else [
            "an MD protocol needs a selection and a positive cutoff"]
        if protocol.particles != "atom":
            found.append(f"particles={protocol.particles!r}: rollouts write atoms, so only atom particles are "
                         "supported")
        if protocol.coarse_cutoff is not None and not (protocol.coarse_atom and protocol.coarse_cutoff > 0):
            found.append("coarse edges need an atom name and a positive coarse cutoff")
        return found

    def graph(self, protocol, x, charges, molecule):
        coarse = None
        if protocol.coarse_cutoff is not None:
            if not isinstance(molecule, CoarseNodes):
                raise ConfigError(f"the model joins its {protocol.coarse_atom!r} atoms by coarse edges: pass "
                                  f"molecule=protocol.coarse_nodes(atom names) with the state")
            coarse = molecule.index
        edge_index, edge_attr = radius_edges(x, protocol.cutoff, coarse, protocol.coarse_cutoff)
        node_attr = None
        if protocol.charge_scale is not None:
            if charges is None:
                raise ConfigError("the model was trained with a partial-charge feature but the topology has no "
                                  "charges (use a topology with charges, e.g. PSF, TPR, PRMTOP)")
            node_attr = charges.to(x).view(-1, 1) / protocol.charge_scale
        return edge_index, edge_attr, node_attr


@register_system
class MocapSystem(DynamicsSystem):
    kind = "mocap"

    def problems(self, protocol):
        return [] if protocol.bonds else ["a Mocap protocol needs the skeleton's bonds"]

    def graph(self, protocol, x, charges, molecule):
        edge_index, hop = bond_edges(protocol.bonds, x.size(0))
        node_attr = None if protocol.height_scale is None else (x[:, 1:2] / 10) / protocol.height_scale
        return torch.as_tensor(edge_index), _tensor(hop, x).view(-1, 1), node_attr


@register_system
class MD17System(DynamicsSystem):
    kind = "md17"
    reads_molecules = True

    def problems(self, protocol):
        return [] if protocol.bonds and len(protocol.atomic_numbers) == protocol.num_nodes else [
            "an MD17 protocol needs the bonds and one atomic number per heavy atom"]

    def graph(self, protocol, x, charges, molecule):
        edge_index, hop = bond_edges(protocol.bonds, x.size(0))
        z = np.asarray(protocol.atomic_numbers, dtype=np.float64)
        edge_attr = md17_edge_features(z, edge_index, hop, protocol.sticks)
        return torch.as_tensor(edge_index), _tensor(edge_attr, x), _tensor(z / z.max(), x).view(-1, 1)


@register_system
class MoleculeSystem(DynamicsSystem):
    """Any small molecule's heavy atoms (:mod:`geomol.data.chemistry.molecule_graph`); a model trained on one molecule
    records it (``atomic_numbers``, ``bonds``) and is matched to it, a model of many molecules reads any."""

    kind = "molecule"
    reads_molecules = True
    fixed_nodes = False

    def graph(self, protocol, x, charges, molecule):
        if molecule is None:
            if not protocol.atomic_numbers:
                raise ConfigError("a molecule model needs the molecule's atoms and bonds with the state")
            molecule = MoleculeGraph(np.asarray(protocol.atomic_numbers), np.asarray(protocol.bonds).reshape(-1, 2),
                                     np.asarray(protocol.hydrogens))
        if len(molecule.atomic_numbers) != x.size(0):
            raise ConfigError(f"the state has {x.size(0)} atoms, the molecule {len(molecule.atomic_numbers)}")
        edge_index, edge_attr, node_attr = molecule_graph(molecule.atomic_numbers, molecule.bonds, molecule.hydrogens)
        return torch.as_tensor(edge_index), _tensor(edge_attr, x), _tensor(node_attr, x)


@register_system
class NBodySystem(DynamicsSystem):
    kind = "nbody"

    def graph(self, protocol, x, charges, molecule):
        if charges is None:
            raise ConfigError("an N-body model needs the particle charges (its edge feature is q_i q_j)")
        edge_index = torch.as_tensor(complete_graph(x.size(0)), device=x.device)
        q = charges.to(x)
        return edge_index, (q[edge_index[0]] * q[edge_index[1]]).view(-1, 1), None
