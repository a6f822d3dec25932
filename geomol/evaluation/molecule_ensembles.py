"""Small-molecule trajectory models judged as MD is judged: long rollouts from several starts against a reference run.

:func:`judge_model` rolls a model out for ``windows`` windows from each of several start frames of a run it never
trained on (all starts batched into one model call per window), pools the predicted frames and compares them with
that run's own frames (:class:`~geomol.inference.dynamics.ensemble_comparison.EnsembleComparison`: Jensen–Shannon divergences
of bond lengths, angles and torsions with the run's half-against-half floor and a frozen structure; bonds off their
MD means over time). Clashes between non-bonded heavy atoms are counted per frame. Speed is simulated picoseconds
per CPU second of the rollout, and :func:`engine_speed` measures the engine (GFN2-xTB through ``geomol simulate``'s
integrator) on the same molecule in the same process, so the two are compared on the same machine and load.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch

from geomol.data.chemistry.trajectory import count_clashes
from geomol.errors import ConfigError
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.dynamics.ensemble_comparison import EnsembleComparison
from geomol.inference.dynamics.molecule_inputs import MoleculeInput
from geomol.inference.dynamics.rollout import frames_before, iter_windows, state_frames

__all__ = ["MoleculeRollouts", "rollout_starts", "judge_model", "engine_speed", "evenly_spaced_starts"]


@dataclass
class MoleculeRollouts:
    """Rollouts of one model from S starts: ``frames`` [S, F, n, 3] (Å, the file's heavy-atom order), the start
    frames, the CPU seconds they took and the simulated time (ps) each start covered."""

    frames: np.ndarray
    starts: list[int]
    cpu_seconds: float
    simulated_ps_per_start: float
    diverged: bool

    @property
    def simulated_ps_per_cpu_second(self) -> float:
        return len(self.starts) * self.simulated_ps_per_start / max(self.cpu_seconds, 1e-9)


def evenly_spaced_starts(inputs: MoleculeInput, model: DynamicsModel, count: int, skip_frames: int = 2000) -> list[int]:
    """``count`` start frames spread evenly over the run after ``skip_frames`` (each with the frames its state needs)."""
    first = skip_frames + frames_before(model.protocol)
    last = len(inputs.positions) - 1 - (state_frames(model.protocol, 0)[1])
    if last < first:
        raise ConfigError(f"{inputs.source}: {len(inputs.positions)} frames leave no start after {skip_frames}")
    return [int(s) for s in np.linspace(first, last, count)]


def rollout_starts(model: DynamicsModel, inputs: MoleculeInput, starts: Sequence[int], windows: int,
                   seed: int = 0) -> MoleculeRollouts:
    """Roll ``model`` out ``windows`` windows from each start frame of ``inputs`` at once (one batched call per window)."""
    states = [inputs.state(model.protocol, s) for s in starts]
    x = torch.as_tensor(np.stack([s[0] for s in states]))
    v = torch.as_tensor(np.stack([s[1] for s in states]))
    generator = torch.Generator(model.device).manual_seed(seed)
    frames, done = [], 0
    cpu = time.process_time()
    for window in iter_windows(model, x, v, windows, molecule=inputs.molecule, generator=generator):
        frames.append(window.positions.double().cpu().numpy())  # [S, P, n, 3]
        done += 1
    cpu = time.process_time() - cpu
    if not frames:
        raise ConfigError(f"the rollout of {model!r} diverged in its first window")
    positions = inputs.to_file_order(np.concatenate(frames, axis=1))
    interval = model.protocol.frame_interval or 0.0
    return MoleculeRollouts(positions, list(starts), cpu, done * model.protocol.window_frames * interval,
                            done < windows)


def _clash_fraction(frames: np.ndarray, graph) -> float:
    """Fraction of frames [F, n, 3] with two non-bonded heavy atoms (not 1-2 or 1-3) closer than 2 Å."""
    return float((count_clashes(frames, graph) > 0).mean())


def judge_model(model: DynamicsModel, topology, trajectory=None, *, starts: int | Sequence[int] = 5,
                windows: int = 100, seed: int = 0, skip_frames: int = 2000, reference_stride: int = 10,
                extra_references: dict[str, Any] | None = None) -> dict[str, Any]:
    """Long rollouts of ``model`` from a run it never saw, judged against that run (module docstring).

    Args:
        model: a small-molecule model (``md17`` or ``molecule`` kind). topology, trajectory: the run (any file
            :class:`MoleculeInput` reads). starts: start frames, or how many to spread evenly after ``skip_frames``.
        windows: windows per start. seed: a generative model's random stream.
        reference_stride: every how many frames of the run (after ``skip_frames``) the reference keeps.
        extra_references: {label: [F, n, 3] frames in the run's heavy-atom order}: further ensembles (another MD run of
            the molecule, a baseline) compared with the same reference, reported beside the model.

    Returns:
        a JSON-ready record: the divergences, floor and frozen structure, bonds off their MD means, clashes, speed.
    """
    inputs = MoleculeInput.open(model.protocol, topology, trajectory)
    chosen = evenly_spaced_starts(inputs, model, starts, skip_frames) if isinstance(starts, int) else list(starts)
    rollouts = rollout_starts(model, inputs, chosen, windows, seed)
    reference = inputs.to_file_order(inputs.positions[skip_frames::reference_stride])
    graph = inputs.covalent_graph()
    comparison = EnsembleComparison(graph.bonds, reference, inputs.source,
                                    start=inputs.to_file_order(inputs.positions[chosen[0]]))
    pooled = rollouts.frames.reshape(-1, *rollouts.frames.shape[2:])
    record = comparison.results(pooled)
    record.pop("bond_deviation_per_frame_max_A")
    per_start = rollouts.frames.shape[1]
    deviation = np.asarray(comparison.compare(pooled)["bond_deviation_per_frame_max_A"]).reshape(len(chosen), per_start)
    record.update(model=model.name or repr(model), generative=model.generative, starts=chosen, windows=windows,
                  frames_per_start=per_start, diverged=rollouts.diverged, seed=seed,
                  largest_bond_deviation_by_window=deviation.reshape(len(chosen), -1,
                                                                     model.protocol.num_timesteps).max(axis=(0, 2)).tolist(),
                  clash_frame_fraction=_clash_fraction(pooled, graph),
                  speed={"simulated_ps_per_start": rollouts.simulated_ps_per_start,
                         "cpu_seconds": rollouts.cpu_seconds, "starts_batched": len(chosen),
                         "simulated_ps_per_cpu_second": rollouts.simulated_ps_per_cpu_second})
    if model.generative:
        record["sampling"] = {"steps": model.network.sampling_steps, "noise": model.network.sampling_noise}
    for label, frames in (extra_references or {}).items():
        record.setdefault("other_ensembles", {})[label] = comparison.compare(np.asarray(frames))["js_divergence"]
    return record


def engine_speed(molecule: str, steps: int = 200, seed: int = 1, method: str = "GFN2-xTB",
                 timestep_fs: float = 0.5, temperature: float = 500.0, friction: float = 0.002) -> dict[str, float]:
    """Simulated ps per CPU second of ``geomol simulate``'s integrator with ``method`` on ``molecule`` (a known name
    or SMILES), measured over ``steps`` steps in this process (needs the ``md`` extra: tblite)."""
    from geomol.simulate.langevin import LangevinIntegrator
    from geomol.simulate.molecules import starting_structure
    from geomol.simulate.xtb import XTBForceField

    structure = starting_structure(molecule, seed=seed)
    integrator = LangevinIntegrator(XTBForceField(structure.numbers, method), structure.masses, timestep_fs,
                                    temperature, friction, True)
    state = integrator.initial_state(structure.positions, seed)
    integrator.step(state)  # the first call sets the engine up
    cpu = time.process_time()
    for _ in range(steps):
        integrator.step(state)
    cpu = time.process_time() - cpu
    simulated_ps = steps * timestep_fs * 1e-3
    return {"molecule": molecule, "atoms": int(len(structure.numbers)), "steps": steps, "cpu_seconds": cpu,
            "simulated_ps_per_cpu_second": simulated_ps / cpu}
