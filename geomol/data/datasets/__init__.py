"""Datasets: files or simulations to BlockGraphs, one module per dataset family.

Trajectory datasets (items carry X, V, X_target [N, P, 3], edge_index, edge_attr, node_attr;
see :mod:`geomol.data.datasets.trajectories.trajectory`): :class:`NBodyDataset` (charged particles, simulated),
:class:`MocapDataset` (CMU motion capture "Run"), :class:`MD17Dataset` (sGDML npz) and
:class:`MDTrajectoryDataset` (anything MDAnalysis reads; imported lazily because MDAnalysis is slow
to import).
"""
from geomol.data.datasets.trajectories.md17 import MD17Dataset
from geomol.data.datasets.trajectories.mocap import MocapDataset
from geomol.data.datasets.trajectories.nbody import ChargedParticles, NBodyDataset

__all__ = ["NBodyDataset", "ChargedParticles", "MocapDataset", "MD17Dataset", "MDTrajectory", "MDTrajectoryDataset"]


def __getattr__(name: str):
    if name in ("MDTrajectory", "MDTrajectoryDataset"):
        from geomol.data.datasets.trajectories import md_trajectory

        return getattr(md_trajectory, name)
    raise AttributeError(f"module 'geomol.data.datasets' has no attribute {name!r}")
