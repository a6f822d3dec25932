"""Molecular rollouts from and to trajectory files (read and written with MDAnalysis).

The start state is read from a real trajectory: positions of the selection at frame ``start``
and the velocity x[start+1] − x[start] (Å per frame, the training definition), or from a single
structure plus a second structure one frame later (``velocity_from``), or a later frame k of
the same trajectory (velocity (x[k] − x[start]) / (k − start)). Windows are streamed to an
MDAnalysis writer as they are predicted, so memory stays flat however long the rollout.

Frames written: the start frame (``include_start``), then every predicted frame in time order
(``output_frames="all"``) or only the last frame of each window (``"ends"``, evenly spaced by
o_P). With the AdK-style offsets [3, 7, 11, 15] the predicted frames are *not* evenly spaced
(3, 7, 11, 15, 18, 22, ...). Frames keep their true times: XTC and TRR store each frame's time
(ps); DCD and PDB cannot and number frames 0, 1, 2, ...; the JSON summary lists every written
frame's trajectory frame number and time in all cases.

Every rollout measures the chemistry of its predicted frames against the start frame (bond-length
and angle errors, broken bonds, clashes: :mod:`geomol.inference.dynamics.rollout_chemistry`); with
``restore_bonds`` the bond-restoring projection (:mod:`geomol.inference.dynamics.bond_restoring`) corrects
each window before it is written and seeds the next.

Coordinate-only formats (DCD, XTC, TRR, NetCDF) hold the selected atoms only, in topology order;
a PDB of the selection at the start frame (``<out stem>_topology.pdb``) is written beside them so
that VMD, PyMOL and MDAnalysis open the pair.
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.dynamics.systems import system_of
from geomol.data.io.trajectory import open_selection
from geomol.errors import ConfigError, TrajectoryError
from geomol.inference.dynamics.bond_restoring import BondRestoring
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.dynamics.rollout import (OUTPUT_FRAMES, frames_before, iter_windows, kept_frames, num_windows,
                                              progress_bar, state_of_frames)
from geomol.inference.dynamics.rollout_chemistry import ChemistryTracker
from geomol.inference.dynamics.rollout_output import FrameWriter, TrajectoryRollout
from geomol.inference.dynamics.rollout_report import ReferenceComparison, plot_rollout, write_summary
from geomol.provenance import provenance

__all__ = ["TrajectoryRollout", "open_selection", "start_state", "FrameWriter", "rollout_trajectory"]

def _positions(universe, atoms, frame: int, source) -> np.ndarray:
    """[N, 3] float32 positions (Å) of ``atoms`` at trajectory frame ``frame``."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # e.g. a PDB's placeholder unit cell
            universe.trajectory[frame]
    except Exception as exc:
        raise TrajectoryError(f"cannot read frame {frame}: {exc}", source=source) from exc
    return atoms.positions.astype(np.float32, copy=True)


def _trajectory_name(topology, trajectory) -> str:
    return str(trajectory if trajectory is not None else topology)


def _second_structure(topology, path, selection: str):
    """The structure one frame after the start: coordinates for ``topology`` if they fit it, else a file of its own."""
    try:
        return open_selection(topology, path, selection)
    except TrajectoryError:  # e.g. a PDB of the selected atoms only, which does not fit the whole topology
        return open_selection(path, None, selection)


def start_state(universe, atoms, start: int, velocity_from=None, *, topology=None, source: str = "",
                selection: str = "", protocol=None) -> tuple[np.ndarray, np.ndarray, str]:
    """Positions x [N, 3], velocity v [N, 3] (Å per frame) at frame ``start``, and how v was obtained.

    ``velocity_from``: None (the model's own definition: frame start + 1, or for a model trained on a backward
    difference over s frames, frame start − s; :func:`~geomol.inference.dynamics.rollout.state_at`), a frame number
    k, or a structure file one frame later (coordinates for ``topology``, or a standalone structure file).
    """
    n_frames = len(universe.trajectory)
    if start < 0:
        raise ConfigError(f"start frame must be ≥ 0, got {start}")
    if velocity_from is None and protocol is not None and frames_before(protocol):
        before = start - frames_before(protocol)
        if before < 0 or start >= n_frames:
            raise TrajectoryError(f"has {n_frames} frame(s): the start state at frame {start} needs frames {before} … "
                                  f"{start} (the model's velocity is a backward difference)", source=source)
        return state_of_frames(protocol, _positions(universe, atoms, start, source),
                               _positions(universe, atoms, before, source), start)
    if isinstance(velocity_from, (int, np.integer)) and not isinstance(velocity_from, bool):
        later = int(velocity_from)
        if later == start or later < 0:
            raise ConfigError(f"velocity_from must be a frame number ≥ 0 other than the start frame, got {later}")
        needed, note = max(start, later), f"(x[{later}] − x[{start}]) / {later - start}"
    elif velocity_from is not None:
        needed, note = start, f"x({Path(velocity_from).name}) − x[{start}]"
    else:
        needed, note = start + 1, f"x[{start + 1}] − x[{start}]"
    if needed >= n_frames:
        raise TrajectoryError(f"has {n_frames} frame(s), too few: the start state needs frame {needed} "
                              f"(start {start}, velocity {note})", source=source)
    x = _positions(universe, atoms, start, source)
    if velocity_from is None:
        return x, _positions(universe, atoms, start + 1, source) - x, note
    if isinstance(velocity_from, (int, np.integer)):
        return x, (_positions(universe, atoms, int(velocity_from), source) - x) / (int(velocity_from) - start), note
    other_universe, other = _second_structure(topology, velocity_from, selection)
    if len(other) != len(atoms):
        raise ConfigError(f"selection {selection!r} has {len(other)} atoms in {velocity_from} but {len(atoms)} "
                          "in the start structure", source=velocity_from)
    return x, _positions(other_universe, other, 0, velocity_from) - x, note


def _frame_interval(universe, model: DynamicsModel, source) -> float:
    """ps between the input's frames (MDAnalysis assumes 1 ps for files without times); warn when the model
    was trained at another interval."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "Reader has no dt information, set to 1.0 ps"
            dt = float(universe.trajectory.dt)
    except Exception:  # some readers have no time information at all
        dt = 1.0
    trained = model.protocol.frame_interval
    if model.protocol.time_unit == "ps" and trained and abs(dt - trained) > 0.01 * trained:
        warnings.warn(f"{source}: frames are {dt:g} ps apart but {model.name or 'the model'} was trained on frames "
                      f"{trained:g} ps apart; its offsets and velocities are per frame, so its predictions only mean "
                      "something at the training interval", UserWarning, stacklevel=3)
    return dt


def rollout_trajectory(model: DynamicsModel, topology, trajectory=None, *, out, selection: str | None = None,
                       start: int = 0, frames: int | None = None, windows: int | None = None, velocity_from=None,
                       reference=None, reference_topology=None, superpose: bool = False, plot=None, summary=None,
                       output_frames: str = "all", include_start: bool = True, restore_bonds: bool = False,
                       seed: int = 0, progress: bool = False) -> TrajectoryRollout:
    """Roll ``model`` out from a frame of a molecular trajectory and write the predicted trajectory.

    See :func:`geomol.api.rollout` for the arguments. Small-molecule models (``md17``, ``molecule`` kinds) go
    to :func:`~geomol.inference.dynamics.molecule_rollout.rollout_molecule`. Raises EmptySelectionError (no atom
    selected), TrajectoryError (unreadable files, too few frames for the start state or for the
    reference comparison), ConfigError (bad options, a model of particles or joints).
    """
    protocol = model.protocol
    if system_of(protocol.kind).reads_molecules:
        unused = [name for name, value in (("selection", selection), ("velocity_from", velocity_from),
                                           ("superpose", superpose), ("restore_bonds", restore_bonds)) if value]
        if unused:
            raise ConfigError(f"{', '.join(unused)}: not for small-molecule models, which take the file's heavy "
                              "atoms and the velocity they were trained on")
        from geomol.inference.dynamics.molecule_rollout import rollout_molecule

        return rollout_molecule(model, topology, trajectory, out=out, start=start, frames=frames, windows=windows,
                                reference=reference, reference_topology=reference_topology, plot=plot,
                                summary=summary, output_frames=output_frames, include_start=include_start, seed=seed,
                                progress=progress)
    if not system_of(protocol.kind).reads_selections:
        raise ConfigError(f"{model!r} is a {protocol.kind} model; file rollouts need a molecular model "
                          "(use geomol.rollout_arrays for N-body and Mocap states)")
    if plot is not None and reference is None:
        raise ConfigError("a plot needs a reference trajectory to compare with")
    if output_frames not in OUTPUT_FRAMES:
        raise ConfigError(f"output_frames must be one of {OUTPUT_FRAMES}, got {output_frames!r}")
    selection = selection or protocol.selection
    source = _trajectory_name(topology, trajectory)
    total = num_windows(protocol, frames, windows)
    horizon = frames if frames is not None else total * protocol.window_frames
    last_offset = _last_offset(protocol, horizon, output_frames)
    universe, atoms = protocol.open_trajectory(topology, trajectory, selection)
    x, v, velocity_note = start_state(universe, atoms, start, velocity_from, topology=topology, source=source,
                                      selection=selection, protocol=protocol)
    dt = _frame_interval(universe, model, source)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        t0 = float(universe.trajectory[start].time)
    charges = np.asarray(atoms.charges, dtype=np.float64) if hasattr(atoms, "charges") else None
    graph = CovalentGraph.of_selection(atoms, x)
    chemistry = ChemistryTracker(graph, x, start)
    restoring = BondRestoring(graph, x) if restore_bonds else None
    comparison = None
    if reference is not None:
        ref_topology, ref_trajectory = reference_topology or topology, trajectory if reference is True else reference
        comparison = ReferenceComparison(*open_selection(ref_topology, ref_trajectory, selection),
                                         _trajectory_name(ref_topology, ref_trajectory), len(atoms),
                                         last_frame=start + last_offset, superpose=superpose, still=x,
                                         velocity=v, start=start, graph=graph)
    written, times, done = [], [], 0
    with FrameWriter(out, atoms) as writer, progress_bar(total, progress) as advance:
        if include_start:
            writer.write(x, t0, start)
            written.append(start), times.append(t0)
        generator = torch.Generator(model.device).manual_seed(seed)
        for window in iter_windows(model, x, v, total, charges, constrain=restoring, generator=generator,
                                   molecule=protocol.coarse_nodes(atoms.names, source)):
            for i in kept_frames(window, output_frames, horizon):
                frame, positions = start + int(window.frame_offsets[i]), window.positions[i].float().cpu().numpy()
                writer.write(positions, t0 + (frame - start) * dt, frame)
                written.append(frame), times.append(t0 + (frame - start) * dt)
                chemistry.add(frame, positions)
                if comparison is not None:
                    comparison.add(frame, positions)
            done += 1
            advance()
    result = TrajectoryRollout(Path(out), writer.topology_file, np.asarray(written), np.asarray(times), done)
    inputs = {"topology": str(topology), "trajectory": None if trajectory is None else str(trajectory),
              "selection": selection, "n_atoms": len(atoms), "start_frame": start, "start_time_ps": t0,
              "frame_interval_ps": dt, "velocity": velocity_note}
    _report(result, model, inputs, comparison, output_frames, include_start, horizon, total, plot, summary,
            chemistry, restoring)
    return result


def _last_offset(protocol, horizon: int, output_frames: str) -> int:
    """Offset of the last frame the rollout writes (what a reference must reach)."""
    step = protocol.window_frames
    ends = output_frames == "ends"
    offsets = [k * step + o for k in range(-(-horizon // step)) for o in protocol.target_offsets[-1 if ends else 0:]]
    reached = [o for o in offsets if o <= horizon]
    if not reached:
        raise ConfigError(f"frames={horizon} ends before the first {'window end' if ends else 'predicted frame'} "
                          f"(offset {offsets[0]}): nothing to write")
    return max(reached)


def _report(result: TrajectoryRollout, model: DynamicsModel, inputs, comparison, output_frames, include_start,
            horizon, windows, plot, summary, chemistry: ChemistryTracker, restoring: BondRestoring | None) -> None:
    """Fill the result's summary; write the JSON and the plot where asked."""
    record = {"model": model.name or None, "architecture": model.architecture,
              "protocol": model.protocol.to_dict(), "inputs": inputs,
              "output": {"file": str(result.out), "topology_file": result.topology_file and str(result.topology_file),
                         "output_frames": output_frames, "include_start": include_start,
                         "frames_written": len(result.frames)},
              "windows": result.windows, "diverged": result.windows < windows, "horizon_frames": horizon,
              "frames": result.frames.tolist(), "times_ps": result.times_ps.tolist()}
    record["chemistry"] = result.chemistry = chemistry.results()
    record["bond_restoring"] = None if restoring is None else {
        "what": "bond lengths restored to the start frame's after each window (SHAKE-like projection)",
        "tolerance_A": restoring.tolerance, "max_sweeps": restoring.max_sweeps,
        "most_sweeps_used": restoring.most_sweeps, "largest_bond_error_left_A": restoring.worst_residual}
    record["provenance"] = provenance()
    if comparison is not None:
        record["reference"] = comparison.results()
        result.rmsd = np.asarray(record["reference"]["rmsd_A"])
        if plot is not None and len(result.rmsd):
            result.plot_file = plot_rollout(record, plot)
    result.summary = record
    if summary is not None:
        result.summary_file = write_summary(record, summary)
