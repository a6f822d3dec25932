"""A user's small-molecule file as a small-molecule model's input: atoms matched, states built, output in their order.

:meth:`MoleculeInput.open` reads any file :func:`~geomol.data.chemistry.molecule_frames.read_molecule_frames` reads and
takes its heavy atoms (the models see no hydrogen). For a model trained on one molecule (its protocol holds the
molecule: :meth:`~geomol.data.dynamics.protocol.TrajectoryProtocol.template`) the file's heavy atoms are matched to
the model's by the molecular graph, so any atom order works and a file of another molecule is refused
(:class:`~geomol.errors.MoleculeMismatchError`); a model of many molecules reads the file's molecule as it is.
Everything the model sees is in the model's order; everything written back (:meth:`MoleculeInput.to_file_order`) is
in the file's order of its heavy atoms.

The start state at frame t follows the model's velocity definition (:func:`~geomol.inference.dynamics.rollout.state_at`).
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass

import numpy as np

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.chemistry.molecule_graph import heavy_atom_graph
from geomol.data.dynamics.systems import MoleculeGraph
from geomol.data.chemistry.molecule_frames import MoleculeFrames, read_molecule_frames
from geomol.data.chemistry.molecule_matching import MoleculeTemplate
from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.data.vocab import ELEMENTS
from geomol.errors import TrajectoryError
from geomol.inference.dynamics.rollout import state_at

__all__ = ["MoleculeInput", "match_heavy_atoms"]


def match_heavy_atoms(template: MoleculeTemplate, frames: MoleculeFrames) -> np.ndarray:
    """[n] ranks among the file's heavy atoms of the atoms that play the template's atoms 0 … n − 1."""
    matched = template.match(frames.atomic_numbers, frames.bonds, frames.positions[0], source=frames.source)
    rank = np.full(len(frames.atomic_numbers), -1, dtype=np.int64)
    rank[frames.heavy] = np.arange(len(frames.heavy))
    return rank[matched]


@dataclass
class MoleculeInput:
    """The heavy atoms of a file, in the model's order.

    Attributes:
        frames: everything the file holds. order: [n] for model atom k, the rank of its atom among the file's
            heavy atoms. molecule: the heavy-atom graph in the model's order. positions: [F, n, 3] Å, model order.
    """

    frames: MoleculeFrames
    order: np.ndarray
    molecule: MoleculeGraph
    positions: np.ndarray

    @classmethod
    def open(cls, protocol: TrajectoryProtocol, topology: str | os.PathLike,
             trajectory: str | os.PathLike | None = None) -> "MoleculeInput":
        """The heavy atoms of the file(s), matched to the model's molecule where it has one.

        Raises:
            MoleculeMismatchError: another molecule. TrajectoryError: no heavy atom, or a model of many molecules
                given a file without hydrogens (which heavy atoms carry them is one of its inputs).
        """
        frames = read_molecule_frames(topology, trajectory)
        heavy, bonds, hydrogens = heavy_atom_graph(frames.atomic_numbers, frames.bonds)
        if not len(heavy):
            raise TrajectoryError("the file holds no heavy atom", source=frames.source)
        template = protocol.template()
        if template is not None:
            order = match_heavy_atoms(template, frames)
            molecule = MoleculeGraph(np.asarray(template.atomic_numbers), np.asarray(template.bonds).reshape(-1, 2),
                                     np.asarray(template.hydrogens) if template.hydrogens else hydrogens[order])
        else:
            if not (frames.atomic_numbers == 1).any():
                raise TrajectoryError("the file has no hydrogens; a model of many molecules needs them (which heavy "
                                      "atoms carry hydrogens is one of its inputs): give the molecule with its "
                                      "hydrogens", source=frames.source)
            order = np.arange(len(heavy))
            molecule = MoleculeGraph(frames.atomic_numbers[heavy], bonds, hydrogens)
        return cls(frames, order, molecule, frames.positions[:, heavy][:, order])

    @property
    def source(self) -> str:
        return self.frames.source

    def state(self, protocol: TrajectoryProtocol, start: int) -> tuple[np.ndarray, np.ndarray, str]:
        """(x [n, 3], v [n, 3] in the protocol's velocity unit, how v was computed) at frame ``start``."""
        return state_at(protocol, self.positions, start, self.source)

    def to_file_order(self, positions) -> np.ndarray:
        """[..., n, 3] model order → the file's order of its heavy atoms."""
        out = np.empty_like(np.asarray(positions))
        out[..., self.order, :] = positions
        return out

    def heavy_elements(self) -> list[str]:
        """Element symbols of the file's heavy atoms, in the file's order."""
        return [ELEMENTS[int(z) - 1] for z in self.frames.atomic_numbers[self.frames.heavy]]

    def heavy_names(self) -> list[str]:
        return [self.frames.names[i] for i in self.frames.heavy]

    def covalent_graph(self) -> CovalentGraph:
        """The heavy atoms' bonds in the file's order (what the chemistry of a rollout is measured on)."""
        _, bonds, _ = heavy_atom_graph(self.frames.atomic_numbers, self.frames.bonds)
        return CovalentGraph.from_bonds(bonds, self.heavy_elements(),
                                        source="topology" if self.frames.bonds_source == "file" else "perceived")

    def universe(self):
        """An in-memory MDAnalysis Universe of the heavy atoms (file order, names and elements), for writers."""
        import MDAnalysis as mda

        n = len(self.frames.heavy)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            universe = mda.Universe.empty(n, n_residues=1, atom_resindex=np.zeros(n, dtype=int), trajectory=True)
            universe.add_TopologyAttr("names", self.heavy_names())
            universe.add_TopologyAttr("elements", self.heavy_elements())
            universe.add_TopologyAttr("types", self.heavy_elements())
            universe.add_TopologyAttr("resnames", ["MOL"])
        universe.atoms.positions = self.to_file_order(self.positions[0])
        return universe

    def frame_interval(self, protocol: TrajectoryProtocol) -> float | None:
        """ps between the file's frames: the file's (warning where the model was trained at another interval),
        else the model's."""
        trained, dt = protocol.frame_interval, self.frames.frame_interval_ps
        if dt is None or len(self.frames) < 2:
            return trained
        if trained and abs(dt - trained) > 0.01 * trained:
            warnings.warn(f"{self.source}: frames are {dt:g} ps apart but the model was trained on frames {trained:g} "
                          "ps apart; its offsets and velocities are per frame", UserWarning, stacklevel=3)
        return dt
