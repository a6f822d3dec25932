"""Trajectory files through MDAnalysis: one place that opens topology + trajectory and selects atoms.

Used by the MD datasets (:mod:`geomol.data.datasets.trajectories.md_trajectory`) and by rollouts
(:meth:`geomol.data.dynamics.protocol.TrajectoryProtocol.open_trajectory`), so both read files alike.
"""
from __future__ import annotations

import gc
import os
import sys
import warnings
from contextlib import contextmanager
from typing import Iterator

from geomol.errors import EmptySelectionError, TrajectoryError

__all__ = ["atom_elements", "open_selection", "trajectory_files"]


def trajectory_files(topology, trajectory) -> list[str]:
    """Topology first, then the trajectory file(s): what ``mda.Universe`` takes."""
    if trajectory is None:
        return [str(topology)]
    return [str(topology)] + [str(t) for t in ([trajectory] if isinstance(trajectory, (str, os.PathLike))
                                                else trajectory)]


def open_selection(topology, trajectory=None, selection: str = "backbone"):
    """(Universe, AtomGroup) of ``selection`` in topology + trajectory file(s); bad files and empty selections raise.

    Raises:
        TrajectoryError: MDAnalysis cannot open the files or parse the selection.
        EmptySelectionError: the selection matches no atom.
    """
    import MDAnalysis as mda

    files = trajectory_files(topology, trajectory)
    for file in files:
        if not os.path.isfile(file):  # before MDAnalysis: its half-made reader would print a second traceback
            raise TrajectoryError("file not found" if not os.path.exists(file) else "not a file", source=file)
    error = None
    with _readers_closed_quietly():
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # MDAnalysis warns about guessed masses, missing dt ...
                universe = mda.Universe(*files)
                atoms = universe.select_atoms(selection)
        except Exception as exc:  # MDAnalysis raises many types for unreadable, mismatched files or bad selections
            error = f"cannot open or select {selection!r} with MDAnalysis: {exc}"
    if error is not None:
        raise TrajectoryError(error, source=" + ".join(files))
    if len(atoms) == 0:
        raise EmptySelectionError(f"selection {selection!r} matched no atom", source=topology)
    return universe, atoms


@contextmanager
def _readers_closed_quietly() -> Iterator[None]:
    """Collect, inside, the readers MDAnalysis left half-made when a file could not be read, without the
    "Exception ignored in ReaderBase.__del__" traceback their ``close`` prints (they had nothing to close)."""
    previous = sys.unraisablehook

    def hook(unraisable) -> None:
        if "ReaderBase.__del__" not in getattr(unraisable.object, "__qualname__", ""):
            previous(unraisable)

    sys.unraisablehook = hook
    try:
        yield
        gc.collect()
    finally:
        sys.unraisablehook = previous


def atom_elements(atoms) -> list[str]:
    """Element of each atom: the topology's, else guessed from the atom name (PSF, GRO have none)."""
    try:
        return [str(e) for e in atoms.elements]
    except (AttributeError, ValueError):  # MDAnalysis' NoDataError derives from both
        pass
    try:
        from MDAnalysis.guesser.default_guesser import DefaultGuesser
    except ImportError:  # MDAnalysis < 2.8
        from MDAnalysis.topology.guessers import guess_types

        return [str(e) for e in guess_types(atoms.names)]
    return [str(e) for e in DefaultGuesser(None).guess_types(atoms.names)]
