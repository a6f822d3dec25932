"""Rollouts of small-molecule models from and to files, with the molecule's atoms in the file's own order.

:func:`rollout_molecule` reads the start from any file :class:`~geomol.inference.dynamics.molecule_inputs.MoleculeInput`
reads (XYZ, PDB, SDF, MOL2, DCD/XTC with a topology, the MD17 npz), matches its heavy atoms to the model's molecule by
the molecular graph (a model of many molecules reads the file's molecule as it is), rolls the model out window after
window (a generative model draws each window from a seeded random stream: the same seed repeats the rollout) and
streams the predicted frames of the heavy atoms, in the file's order, to any trajectory format MDAnalysis writes
(XYZ keeps the elements; coordinate-only formats get ``<stem>_topology.pdb`` beside them).

The summary records the chemistry of every predicted frame against the start frame
(:class:`~geomol.inference.dynamics.rollout_chemistry.ChemistryTracker`), the speed (simulated ps per CPU second) and, with a
reference run (``reference``: a file, or True for the input trajectory itself), the ensemble comparison of
:class:`~geomol.inference.dynamics.ensemble_comparison.EnsembleComparison`: JS divergences of bonds, angles and torsions with
the MD's own floor and a frozen structure beside them, bonds off their MD mean over time, and whether the model is
better than no motion. With a reference, a PNG plot shows the bond deviations over time and the distributions.
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from geomol.errors import ConfigError
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.dynamics.ensemble_comparison import EnsembleComparison
from geomol.inference.dynamics.molecule_inputs import MoleculeInput
from geomol.inference.dynamics.rollout import OUTPUT_FRAMES, iter_windows, kept_frames, num_windows, progress_bar
from geomol.inference.dynamics.rollout_chemistry import ChemistryTracker
from geomol.inference.dynamics.rollout_output import FrameWriter, TrajectoryRollout
from geomol.inference.dynamics.rollout_report import write_summary
from geomol.provenance import provenance

__all__ = ["rollout_molecule", "reference_frames"]


def reference_frames(inputs: MoleculeInput, topology, trajectory=None) -> tuple[np.ndarray, str]:
    """[F, n, 3] heavy-atom frames of a reference run of the same molecule, in the input file's heavy-atom order."""
    reference = MoleculeInput.open(_input_protocol(inputs), topology, trajectory)
    return reference.to_file_order(reference.positions), reference.source


def _input_protocol(inputs: MoleculeInput):
    """A protocol whose template is the input file's molecule, so that a reference is matched to the input's order."""
    from geomol.data.dynamics.protocol import TrajectoryProtocol

    z = inputs.frames.atomic_numbers[inputs.frames.heavy]
    bonds, x = inputs.covalent_graph().bonds, inputs.to_file_order(inputs.positions[0])
    lengths = np.linalg.norm(x[bonds[:, 0]] - x[bonds[:, 1]], axis=-1)
    return TrajectoryProtocol("molecule", (1,), atomic_numbers=tuple(int(a) for a in z),
                              bonds=tuple(map(tuple, bonds.tolist())), bond_lengths=tuple(map(float, lengths)))


def rollout_molecule(model: DynamicsModel, topology, trajectory=None, *, out, start: int = 0,
                     frames: int | None = None, windows: int | None = None, reference=None, reference_topology=None,
                     plot=None, summary=None, output_frames: str = "all", include_start: bool = True, seed: int = 0,
                     progress: bool = False):
    """Roll a small-molecule model out from frame ``start`` of a file and write the predicted heavy-atom frames.

    See :func:`geomol.api.rollout`. Raises MoleculeMismatchError (the file is another molecule), TrajectoryError
    (unreadable files, too few frames for the start state), ConfigError (bad options).
    """
    protocol = model.protocol
    if output_frames not in OUTPUT_FRAMES:
        raise ConfigError(f"output_frames must be one of {OUTPUT_FRAMES}, got {output_frames!r}")
    if plot is not None and reference is None:
        raise ConfigError("a plot needs a reference run to compare with")
    inputs = MoleculeInput.open(protocol, topology, trajectory)
    x, v, velocity_note = inputs.state(protocol, start)
    dt = inputs.frame_interval(protocol) or 0.0
    total = num_windows(protocol, frames, windows)
    horizon = frames if frames is not None else total * protocol.window_frames
    comparison = None
    if reference is not None:
        ref_topology, ref_trajectory = (topology, trajectory) if reference is True else (
            (reference_topology or reference), reference if reference_topology else None)
        positions, source = reference_frames(inputs, ref_topology, ref_trajectory)
        comparison = EnsembleComparison(inputs.covalent_graph().bonds, positions, source, inputs.to_file_order(x))
    graph = inputs.covalent_graph()
    start_file = inputs.to_file_order(x)
    chemistry = ChemistryTracker(graph, start_file, start)
    universe = inputs.universe()
    generator = torch.Generator(model.device).manual_seed(seed)
    written, times, predicted, done = [], [], [], 0
    cpu = time.process_time()
    with FrameWriter(out, universe.atoms) as writer, progress_bar(total, progress) as advance:
        if include_start:
            writer.write(start_file, start * dt, start)
            written.append(start), times.append(start * dt)
        for window in iter_windows(model, x, v, total, molecule=inputs.molecule, generator=generator):
            for i in kept_frames(window, output_frames, horizon):
                frame = start + int(window.frame_offsets[i])
                positions = inputs.to_file_order(window.positions[i].double().cpu().numpy())
                writer.write(positions, frame * dt, frame)
                written.append(frame), times.append(frame * dt)
                chemistry.add(frame, positions)
                predicted.append(positions)
            done += 1
            advance()
    cpu = time.process_time() - cpu
    result = TrajectoryRollout(Path(out), writer.topology_file, np.asarray(written), np.asarray(times), done)
    record = _record(model, inputs, result, start, dt, velocity_note, output_frames, include_start, horizon, total,
                     seed, cpu)
    record["chemistry"] = result.chemistry = chemistry.results()
    if comparison is not None and predicted:
        record["ensemble"] = comparison.results(np.stack(predicted))
        if plot is not None:
            from geomol.inference.dynamics.ensemble_plot import plot_ensemble

            result.plot_file = plot_ensemble(record, comparison, np.stack(predicted), plot)
    result.summary = record
    if summary is not None:
        result.summary_file = write_summary(record, summary)
    return result


def _record(model, inputs: MoleculeInput, result, start, dt, velocity_note, output_frames, include_start, horizon,
            windows, seed, cpu_seconds) -> dict[str, Any]:
    protocol = model.protocol
    simulated_ps = result.windows * protocol.window_frames * dt
    template = protocol.template()
    return {"model": model.name or None, "architecture": model.architecture, "generative": model.generative,
            "seed": seed if model.generative else None, "protocol": protocol.to_dict(),
            "inputs": {"file": inputs.source, "atoms": len(inputs.frames.atomic_numbers),
                       "heavy_atoms": len(inputs.order), "bonds": inputs.frames.bonds_source,
                       "matched_to": template.describe() if template is not None else "the file's own molecule",
                       "model_atom_to_file_heavy_atom": inputs.order.tolist(), "start_frame": start,
                       "frame_interval_ps": dt, "velocity": velocity_note,
                       "velocity_in_distribution": protocol.seeds_in_distribution},
            "output": {"file": str(result.out), "topology_file": result.topology_file and str(result.topology_file),
                       "atoms": "heavy atoms, in the input file's order", "output_frames": output_frames,
                       "include_start": include_start, "frames_written": len(result.frames)},
            "windows": result.windows, "diverged": result.windows < windows, "horizon_frames": horizon,
            "frames": result.frames.tolist(), "times_ps": result.times_ps.tolist(),
            "speed": {"simulated_ps": simulated_ps, "cpu_seconds": cpu_seconds,
                      "simulated_ps_per_cpu_second": simulated_ps / cpu_seconds if cpu_seconds > 0 else None},
            "provenance": provenance()}
