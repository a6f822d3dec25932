"""The data protocol of a trajectory model: how one state becomes the model's input graph.

A rollout must give the model exactly the inputs it was trained on. :class:`TrajectoryProtocol`
records them (the training data module's ``protocol``, stored in checkpoints as ``to_dict()`` and
in a shipped model's manifest, versioned; records without a version read as version 1):

* ``target_offsets`` o_1..o_P: frames after the input frame of the P predicted frames
  (AdK [3, 7, 11, 15], N-body [2, 4, 6, 8, 10] saved frames, Mocap [26, ..., 30]);
* the velocity unit: ``frame_time`` is the duration of one frame in the velocity's time unit
  (1 when v = x[t+1] − x[t] per frame, MD and Mocap; 0.1 for N-body, whose simulator velocity is per
  unit of simulation time and whose saved frames are 0.1 apart);
* the graph and features of each kind of system (the model adds |v| and d² itself):

  ======  =========================================  =============================  ====================
  kind    edges                                      edge_attr                      node_attr
  ======  =========================================  =============================  ====================
  md      radius graph of the state, d < ``cutoff``  d (Å)                          charge / charge_scale
  mocap   ``bonds`` (hop 1) and 2-hop pairs          hop                            (y/10) / height_scale
  md17    ``bonds`` (hop 1) and 2-hop pairs          z_i, z_j, hop, stick           z / max z
  nbody   complete graph                             q_i q_j                        none
  ======  =========================================  =============================  ====================

:meth:`TrajectoryProtocol.state_graph` builds those inputs with the dataset modules' own functions
(:func:`~geomol.nn.neighbors.radius_graph`, :func:`~geomol.data.datasets.trajectory.complete_graph`,
:func:`~geomol.data.datasets.trajectory.bond_and_two_hop_edges`), so that one window of a rollout
is the model's prediction on the corresponding dataset item.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Mapping

import numpy as np
import torch
from torch_geometric.data import Data

from geomol.data.datasets.trajectory import bond_and_two_hop_edges, complete_graph
from geomol.errors import ConfigError, ModelLoadError
from geomol.nn.neighbors import radius_graph

__all__ = ["KINDS", "PROTOCOL_VERSION", "TrajectoryProtocol"]

KINDS = ("md", "mocap", "nbody", "md17")
PROTOCOL_VERSION = 1


@dataclass(frozen=True)
class TrajectoryProtocol:
    """How the training inputs of a trajectory model were built (see the module docstring).

    Attributes:
        kind: "md" | "mocap" | "nbody" | "md17".
        target_offsets: [P] frames from the input frame to each predicted frame, increasing.
        frame_time: one frame in the velocity's time unit (1.0: velocity per frame).
        frame_interval, time_unit: time between two training frames (ps for MD; None if unknown).
        length_unit, velocity: descriptions of the units.
        node_features, edge_features: what the model's input columns are, in order.
        selection, particles, cutoff, charge_scale: MD (charge_scale None: no charge feature).
        bonds, height_scale: Mocap skeleton (joint pairs) and height scale (None: no height feature);
            MD17: the heavy-atom bonds of the molecule (pairs < 1.6 Å in the data's first frame).
        atomic_numbers, sticks: MD17: [n] atomic numbers of the heavy atoms, and the "stick" pairs.
        num_nodes: Mocap joints / N-body particles / MD17 heavy atoms the model was trained on.
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
        if data.get("version", PROTOCOL_VERSION) != PROTOCOL_VERSION:
            raise ModelLoadError(f"data protocol version {data.get('version')!r} is not supported (this geomol "
                                 f"reads version {PROTOCOL_VERSION})", source=source)
        known = {f for f in cls.__dataclass_fields__}
        values = {k: v for k, v in data.items() if k in known}
        try:
            values["target_offsets"] = tuple(int(o) for o in values.get("target_offsets", ()))
            for key in ("bonds", "sticks"):
                values[key] = tuple((int(i), int(j)) for i, j in values.get(key, ()))
            values["atomic_numbers"] = tuple(int(z) for z in values.get("atomic_numbers", ()))
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
        if self.kind not in KINDS:
            problems.append(f"kind {self.kind!r} is not one of {KINDS}")
        if not len(offsets) or offsets[0] < 1 or np.any(np.diff(offsets) < 1):
            problems.append(f"target_offsets {self.target_offsets} must be positive and increasing")
        if not (math.isfinite(self.frame_time) and self.frame_time > 0):
            problems.append(f"frame_time {self.frame_time} must be positive")
        if self.kind == "md" and not (self.cutoff and self.cutoff > 0 and self.selection):
            problems.append("an MD protocol needs a selection and a positive cutoff")
        if self.kind == "md" and self.particles != "atom":
            problems.append(f"particles={self.particles!r}: rollouts write atoms, so only atom particles are supported")
        if self.kind == "mocap" and not self.bonds:
            problems.append("a Mocap protocol needs the skeleton's bonds")
        if self.kind == "md17" and not (self.bonds and len(self.atomic_numbers) == self.num_nodes):
            problems.append("an MD17 protocol needs the bonds and one atomic number per heavy atom")
        if problems:
            raise ModelLoadError("invalid data protocol: " + "; ".join(problems), source=source)

    def to_dict(self) -> dict[str, Any]:
        out = {"version": PROTOCOL_VERSION, **asdict(self)}
        out["target_offsets"], out["bonds"] = list(self.target_offsets), [list(b) for b in self.bonds]
        out["sticks"], out["atomic_numbers"] = [list(b) for b in self.sticks], list(self.atomic_numbers)
        out["node_features"], out["edge_features"] = list(self.node_features), list(self.edge_features)
        return out

    def open_trajectory(self, topology, trajectory=None, selection: str | None = None):
        """(MDAnalysis Universe, AtomGroup) of ``selection`` (default: the trained one) in the files.

        Raises:
            TrajectoryError, EmptySelectionError: as :func:`~geomol.data.io.trajectory.open_selection`.
        """
        from geomol.data.io.trajectory import open_selection

        return open_selection(topology, trajectory, selection or self.selection or "backbone")

    def state_graph(self, x: torch.Tensor, v: torch.Tensor, charges: torch.Tensor | None = None) -> Data:
        """Model inputs of one state, built as the training dataset built them.

        Args:
            x, v: [N, 3] positions and velocities (velocity in the protocol's unit), float, any device.
            charges: [N] partial charges (MD; required when the model has a charge feature) or
                particle charges (N-body, required), in the training data's units.

        Returns:
            a PyG ``Data`` with ``X``, ``V``, ``edge_index`` [2, M], ``edge_attr`` [M, E_d] and, where
            the protocol has one, ``node_attr`` [N, F_d]; what :meth:`EGNO.forward` reads.
        """
        self._check_nodes(x.size(0))
        node_attr = None
        if self.kind == "md":
            edge_index = radius_graph(x, self.cutoff)
            edge_attr = (x[edge_index[0]] - x[edge_index[1]]).norm(dim=-1, keepdim=True)
            if self.charge_scale is not None:
                if charges is None:
                    raise ConfigError("the model was trained with a partial-charge feature but the topology has no "
                                      "charges (use a topology with charges, e.g. PSF, TPR, PRMTOP)")
                node_attr = charges.to(x).view(-1, 1) / self.charge_scale
        elif self.kind == "mocap":
            edge_index, hop = self._bond_edges(x.size(0))
            edge_attr = torch.as_tensor(hop, dtype=x.dtype, device=x.device).view(-1, 1)
            edge_index = edge_index.to(x.device)
            if self.height_scale is not None:
                node_attr = (x[:, 1:2] / 10) / self.height_scale
        elif self.kind == "md17":
            edge_index, edge_attr, node_attr = self._md17_features(x)
        else:
            if charges is None:
                raise ConfigError("an N-body model needs the particle charges (its edge feature is q_i q_j)")
            edge_index = torch.as_tensor(complete_graph(x.size(0)), device=x.device)
            q = charges.to(x)
            edge_attr = (q[edge_index[0]] * q[edge_index[1]]).view(-1, 1)
        graph = Data(X=x, V=v, edge_index=edge_index, edge_attr=edge_attr, num_nodes=x.size(0))
        if node_attr is not None:
            graph.node_attr = node_attr
        return graph

    def _bond_edges(self, n: int) -> tuple[torch.Tensor, np.ndarray]:
        """edge_index [2, M] of the bonds and 2-hop pairs (the datasets' order) and their hop [M]."""
        adjacency = np.zeros((n, n), dtype=bool)
        bonds = np.asarray(self.bonds)
        adjacency[bonds[:, 0], bonds[:, 1]] = adjacency[bonds[:, 1], bonds[:, 0]] = True
        edges, hop = bond_and_two_hop_edges(adjacency)
        return torch.as_tensor(edges), hop

    def _md17_features(self, x: torch.Tensor):
        """MD17 inputs as :class:`~geomol.data.datasets.md17.MD17Dataset` builds them."""
        edge_index, hop = self._bond_edges(x.size(0))
        z = np.asarray(self.atomic_numbers, dtype=np.float64)
        sticks = {p for a, b in self.sticks for p in ((a, b), (b, a))}
        stick = [float((i, j) in sticks) for i, j in edge_index.T.tolist()]
        columns = np.stack([z[edge_index[0]], z[edge_index[1]], hop, stick], axis=1).astype(np.float32)
        edge_attr = torch.as_tensor(columns, device=x.device).to(x.dtype)
        node_attr = torch.as_tensor(z / z.max(), device=x.device).to(x.dtype).view(-1, 1)
        return edge_index.to(x.device), edge_attr, node_attr

    def _check_nodes(self, n: int) -> None:
        if self.kind in ("mocap", "nbody", "md17") and self.num_nodes is not None and n != self.num_nodes:
            raise ConfigError(f"the state has {n} nodes, the {self.kind} model was trained on {self.num_nodes}")
