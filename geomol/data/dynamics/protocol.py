"""The data protocol of a trajectory model: how one state becomes the model's input graph.

A rollout must give the model exactly the inputs it was trained on. :class:`TrajectoryProtocol`
records them (the training data module's ``protocol``, stored in checkpoints as ``to_dict()`` and
in a shipped model's manifest, versioned; records without a version read as version 1):

* ``target_offsets`` o_1..o_P: frames after the input frame of the P predicted frames
  (AdK [3, 7, 11, 15], N-body [2, 4, 6, 8, 10] saved frames, Mocap [26, ..., 30]);
* the velocity unit: ``frame_time`` is the duration of one frame in the velocity's time unit
  (1 when v = x[t+1] − x[t] per frame, MD and Mocap; 0.1 for N-body, whose simulator velocity is per
  unit of simulation time and whose saved frames are 0.1 apart);
* the velocity: ``velocity_span`` s and ``velocity_direction``: "forward" v = (x[t+s] − x[t]) / (s·frame_time)
  (the official protocols: s = 1), or "backward" v = (x[t] − x[t−s]) / (s·frame_time), which is what a rollout
  knows at the end of a predicted window: with s = o_P − o_{P−1} every window after the first starts from the
  velocity the model was trained on;
* the graph and features of each kind of system: :data:`geomol.data.dynamics.systems.SYSTEMS` (md, mocap, md17,
  molecule, nbody), one registered entry per kind.

:meth:`TrajectoryProtocol.state_graph` builds those inputs with the system's builder, the one its training
dataset uses, so that one window of a rollout is the model's prediction on the corresponding dataset item.
Small-molecule models (md17, molecule) also hold their molecule (:meth:`TrajectoryProtocol.template`), to which a
user's atoms are matched by the molecular graph.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np
import torch
from torch_geometric.data import Data

from geomol.data.dynamics.systems import SYSTEMS, CoarseNodes, MoleculeGraph, system_of
from geomol.data.chemistry.molecule_matching import MoleculeTemplate
from geomol.errors import ModelLoadError

__all__ = ["KINDS", "PROTOCOL_VERSION", "TrajectoryProtocol"]

KINDS = tuple(SYSTEMS)
PROTOCOL_VERSION = 2
READABLE_VERSIONS = (1, 2)  # version 2 added the velocity span and direction, bond lengths, hydrogens, the molecule
VELOCITY_DIRECTIONS = ("forward", "backward")


@dataclass(frozen=True)
class TrajectoryProtocol:
    """How the training inputs of a trajectory model were built (see the module docstring).

    Attributes:
        kind: a key of :data:`~geomol.data.dynamics.systems.SYSTEMS` ("md", "mocap", "nbody", "md17", "molecule").
        target_offsets: [P] frames from the input frame to each predicted frame, increasing.
        frame_time: one frame in the velocity's time unit (1.0: velocity per frame).
        frame_interval, time_unit: time between two training frames (ps for MD; None if unknown).
        length_unit, velocity: descriptions of the units.
        node_features, edge_features: what the model's input columns are, in order.
        selection, particles, cutoff, charge_scale: MD (charge_scale None: no charge feature).
        coarse_atom, coarse_cutoff: MD: the atom name of the coarse nodes (e.g. ``CA``) and the distance (Å) within
            which they are joined by coarse edges as well (:func:`~geomol.data.dynamics.graphs.radius_edges`);
            None: no coarse edges.
        bonds, height_scale: Mocap skeleton (joint pairs) and height scale (None: no height feature);
            MD17: the heavy-atom bonds of the molecule (pairs < 1.6 Å in the data's first frame).
        atomic_numbers, sticks: MD17 (and a one-molecule ``molecule`` model): [n] atomic numbers of the heavy
            atoms, and the MD17 "stick" pairs.
        num_nodes: Mocap joints / N-body particles / MD17 heavy atoms the model was trained on.
        velocity_span, velocity_direction: how the velocity was computed (module docstring).
        bond_lengths: [B] mean length (Å) of each of ``bonds`` in the training data (chooses among a molecule's
            symmetric atom matches). molecule: the molecule's name, or the molecules a model was trained on.
        hydrogens: [n] hydrogens bonded to each heavy atom of the molecule (small-molecule kinds).
    """

    kind: str
    target_offsets: tuple[int, ...]
    frame_time: float = 1.0
    frame_interval: float | None = None
    time_unit: str = "frame"
    length_unit: str = ""
    velocity: str = ""
    node_features: tuple[str, ...] = ()
    edge_features: tuple[str, ...] = ()
    selection: str | None = None
    particles: str = "atom"
    cutoff: float | None = None
    charge_scale: float | None = None
    bonds: tuple[tuple[int, int], ...] = field(default=())
    height_scale: float | None = None
    num_nodes: int | None = None
    atomic_numbers: tuple[int, ...] = ()
    sticks: tuple[tuple[int, int], ...] = field(default=())
    velocity_span: int = 1
    velocity_direction: str = "forward"
    bond_lengths: tuple[float, ...] = ()
    molecule: str = ""
    hydrogens: tuple[int, ...] = ()
    coarse_atom: str = ""
    coarse_cutoff: float | None = None

    @property
    def num_timesteps(self) -> int:
        return len(self.target_offsets)

    @property
    def window_frames(self) -> int:
        """o_P: frames one window advances."""
        return self.target_offsets[-1]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, source=None) -> "TrajectoryProtocol":
        """From a checkpoint's ``geomol_preprocessing`` or a manifest's ``preprocessing``; validated."""
        if not data:
            raise ModelLoadError("no data protocol is recorded with this trajectory model (it was trained before "
                                 "geomol stored one, or with a data module that has none, e.g. MD17), so a rollout "
                                 "cannot rebuild its inputs; retrain it with geomol fit", source=source)
        if data.get("version", 1) not in READABLE_VERSIONS:
            raise ModelLoadError(f"data protocol version {data.get('version')!r} is not supported (this geomol "
                                 f"reads versions {', '.join(map(str, READABLE_VERSIONS))})", source=source)
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        try:
            values["target_offsets"] = tuple(int(o) for o in values.get("target_offsets", ()))
            for key in ("bonds", "sticks"):
                values[key] = tuple((int(i), int(j)) for i, j in values.get(key, ()))
            values["atomic_numbers"] = tuple(int(z) for z in values.get("atomic_numbers", ()))
            values["bond_lengths"] = tuple(float(d) for d in values.get("bond_lengths", ()))
            values["hydrogens"] = tuple(int(h) for h in values.get("hydrogens", ()))
            for key in ("node_features", "edge_features"):
                values[key] = tuple(str(s) for s in values.get(key, ()))
            protocol = cls(**values)
        except (TypeError, ValueError) as exc:
            raise ModelLoadError(f"malformed data protocol {dict(data)!r}: {exc}", source=source) from None
        protocol._validate(source)
        return protocol

    def _validate(self, source) -> None:
        offsets = np.asarray(self.target_offsets)
        problems = []
        if self.kind not in SYSTEMS:
            problems.append(f"kind {self.kind!r} is not one of {KINDS}")
        else:
            problems += system_of(self.kind).problems(self)
        if not len(offsets) or offsets[0] < 1 or np.any(np.diff(offsets) < 1):
            problems.append(f"target_offsets {self.target_offsets} must be positive and increasing")
        if not (math.isfinite(self.frame_time) and self.frame_time > 0):
            problems.append(f"frame_time {self.frame_time} must be positive")
        if self.velocity_span < 1 or self.velocity_direction not in VELOCITY_DIRECTIONS:
            problems.append(f"velocity span {self.velocity_span} must be ≥ 1 and its direction one of "
                            f"{VELOCITY_DIRECTIONS}")
        if self.bond_lengths and len(self.bond_lengths) != len(self.bonds):
            problems.append(f"{len(self.bond_lengths)} bond lengths for {len(self.bonds)} bonds")
        if self.hydrogens and len(self.hydrogens) != len(self.atomic_numbers):
            problems.append(f"{len(self.hydrogens)} hydrogen counts for {len(self.atomic_numbers)} heavy atoms")
        if problems:
            raise ModelLoadError("invalid data protocol: " + "; ".join(problems), source=source)

    @property
    def seeds_in_distribution(self) -> bool:
        """Whether a rollout's later windows start from the velocity the model was trained on: a backward
        difference over the last two predicted frames' spacing (module docstring)."""
        gap = self.target_offsets[-1] - (self.target_offsets[-2] if len(self.target_offsets) > 1 else 0)
        return self.velocity_direction == "backward" and self.velocity_span == gap

    def coarse_nodes(self, names, source=None) -> CoarseNodes | None:
        """The coarse nodes of a selection whose atom names are ``names`` [N] (None: the model has no coarse edges);
        what an MD rollout passes as ``molecule``.

        Raises:
            ConfigError: the selection has no atom of that name.
        """
        return None if self.coarse_cutoff is None else CoarseNodes.named(names, self.coarse_atom, source)

    def template(self) -> MoleculeTemplate | None:
        """The model's molecule (small-molecule kinds trained on one molecule), else None."""
        if not system_of(self.kind).reads_molecules or not self.atomic_numbers:
            return None
        return MoleculeTemplate(self.atomic_numbers, self.bonds, self.bond_lengths, self.molecule, self.hydrogens)

    def to_dict(self) -> dict[str, Any]:
        out = {"version": PROTOCOL_VERSION, **asdict(self)}
        out["target_offsets"], out["bonds"] = list(self.target_offsets), [list(b) for b in self.bonds]
        out["sticks"], out["atomic_numbers"] = [list(b) for b in self.sticks], list(self.atomic_numbers)
        out["bond_lengths"], out["hydrogens"] = list(self.bond_lengths), list(self.hydrogens)
        out["node_features"], out["edge_features"] = list(self.node_features), list(self.edge_features)
        return out

    def open_trajectory(self, topology, trajectory=None, selection: str | None = None):
        """(MDAnalysis Universe, AtomGroup) of ``selection`` (default: the trained one) in the files.

        Raises:
            TrajectoryError, EmptySelectionError: as :func:`~geomol.data.io.trajectory.open_selection`.
        """
        from geomol.data.io.trajectory import open_selection

        return open_selection(topology, trajectory, selection or self.selection or "backbone")

    def state_graph(self, x: torch.Tensor, v: torch.Tensor, charges: torch.Tensor | None = None,
                    molecule: MoleculeGraph | CoarseNodes | None = None) -> Data:
        """Model inputs of one state, built as the training dataset built them (by the system's builder).

        Args:
            x, v: [N, 3] positions and velocities (velocity in the protocol's unit), float, any device.
            charges: [N] partial charges (MD; required when the model has a charge feature) or
                particle charges (N-body, required), in the training data's units.
            molecule: the heavy atoms' atomic numbers and bonds (``molecule`` models of many molecules), or an MD
                model's :class:`~geomol.data.dynamics.systems.CoarseNodes` (:meth:`coarse_nodes`).

        Returns:
            a PyG ``Data`` with ``X``, ``V``, ``edge_index`` [2, M], ``edge_attr`` [M, E_d] and, where
            the protocol has one, ``node_attr`` [N, F_d]; what :meth:`EGNO.forward` reads.
        """
        return system_of(self.kind).state_graph(self, x, v, charges, molecule)
