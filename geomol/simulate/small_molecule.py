"""Ab initio MD of a small molecule by the MD17 protocol, written as an MD17 (sGDML-layout) npz.

The MD17 recipe: NVT at 500 K, 0.5 fs steps, a Langevin thermostat (on the internal motions: the
molecule neither drifts nor tumbles, see :mod:`geomol.simulate.langevin`), here with GFN2-xTB energies
and forces (``tblite``) instead of DFT, starting from an RDKit conformer of the SMILES. Output
``<out>/md17_<name>.npz`` holds what the MD17 reader and the official EGNO loader read,

* ``R`` [F, n, 3] float64 positions (Å), one frame every ``save_every`` steps (frame 0: the start);
* ``z`` [n] atomic numbers (heavy atoms first, then hydrogens);
* ``E`` [F, 1] potential energy (kcal/mol) and ``F`` [F, n, 3] forces (kcal/mol/Å);

plus ``name``, ``theory``, ``smiles``, ``bonds`` [b, 2] (the SMILES' bonds) and ``settings`` (JSON:
temperature, timestep, friction, seed, engine and version). A summary JSON (``md17_<name>.json``)
records frames, simulated time, wall time and speed, and the mean kinetic temperature (of the internal
degrees of freedom) over the run and after the thermostat's heat-up
(:func:`~geomol.simulate.langevin.heat_up_fs`: a run starts well below its target, so a short run's mean
is not the target's). Working files live in ``md17_<name>.work/``:
a checkpoint (the whole integrator state, :class:`~geomol.simulate.langevin.LangevinState`) and frame
chunks, so a killed run continues where its last checkpoint was, and a finished run is extended by
asking for more frames.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from geomol.errors import ConfigError, SimulationError
from geomol.simulate.frame_chunks import FrameChunks, save_npz_atomic
from geomol.simulate.langevin import (LangevinIntegrator, LangevinState, heat_up_fs, internal_degrees_of_freedom,
                                      kinetic_temperature)
from geomol.simulate.molecules import MOLECULES, starting_structure
from geomol.simulate.progress import SimulationProgress
from geomol.simulate.summary import write_summary
from geomol.simulate.xtb import XTBForceField, tblite_version

__all__ = ["SmallMoleculeSettings", "simulate_small_molecule"]

PER_FRAME = ("R", "E", "F")
_STATS = ("wall_seconds", "temperature_sum", "temperature_count", "warm_temperature_sum", "warm_temperature_count")
"""What a checkpoint keeps of a run's bookkeeping (the kinetic temperature over the run and after the heat-up)."""
MAX_BOND_STRETCH = 2.0
"""A bond longer than this many times its starting length means the molecule broke apart."""


@dataclass(frozen=True)
class SmallMoleculeSettings:
    """What defines a trajectory (a resumed run must use the same).

    Attributes:
        molecule: a known name (:data:`~geomol.simulate.molecules.MOLECULES`) or a SMILES. seed: velocities, noise
            and the RDKit conformer.
        temperature: K. timestep: fs. friction: Langevin γ in 1/fs. save_every: steps per frame.
        method: tblite method. remove_rigid_body: thermostat internal motions only, so the molecule neither
            drifts nor tumbles (:mod:`geomol.simulate.langevin`).
        label: the output's name (``md17_<label>.npz``) for a SMILES; a known name names itself.
    """

    molecule: str
    seed: int = 1
    temperature: float = 500.0
    timestep: float = 0.5
    friction: float = 0.002
    save_every: int = 1
    method: str = "GFN2-xTB"
    remove_rigid_body: bool = True
    label: str = ""

    @property
    def name(self) -> str:
        return self.label or (self.molecule if self.molecule in MOLECULES else "molecule")

    @property
    def frame_ps(self) -> float:
        return self.timestep * self.save_every * 1e-3


def _check_settings(saved: dict, settings: SmallMoleculeSettings, source: Path) -> None:
    defaults = {f.name: f.default for f in fields(SmallMoleculeSettings)}  # runs saved before a setting existed
    differ = {k: (saved.get(k, defaults[k]), v) for k, v in asdict(settings).items() if saved.get(k, defaults[k]) != v}
    if differ:
        text = ", ".join(f"{k}: {old!r} there, {new!r} asked" for k, (old, new) in differ.items())
        raise ConfigError(f"the run to continue has other settings ({text}); use another output folder or the "
                          f"same settings", source=source)


def _check_intact(positions: np.ndarray, bonds: np.ndarray, start_lengths: np.ndarray, step: int) -> None:
    if not np.isfinite(positions).all():
        raise SimulationError(f"positions became non-finite at step {step}")
    lengths = np.linalg.norm(positions[bonds[:, 0]] - positions[bonds[:, 1]], axis=1)
    worst = int(np.argmax(lengths / start_lengths))
    if lengths[worst] > MAX_BOND_STRETCH * start_lengths[worst]:
        i, j = bonds[worst]
        raise SimulationError(f"bond {i}-{j} stretched to {lengths[worst]:.2f} Å at step {step} (started at "
                              f"{start_lengths[worst]:.2f} Å): the molecule broke apart")


def simulate_small_molecule(settings: SmallMoleculeSettings, out_dir: str | Path, frames: int, *,
                            checkpoint_every: int = 1000, progress: bool = True) -> dict:
    """Run (or continue) the trajectory until it has ``frames`` frames; returns the summary.

    Args:
        settings: the trajectory's settings. out_dir: folder of ``md17_<name>.npz`` and its work files.
        frames: frames wanted in the output (frame 0 is the starting structure).
        checkpoint_every: frames between checkpoints (each writes a chunk file).
        progress: progress bar (terminal) or a line a minute (log file).

    Raises:
        ConfigError: bad settings, or an earlier run in ``out_dir`` with other settings.
        SimulationError: the engine failed or the molecule broke apart.
    """
    if frames < 1 or checkpoint_every < 1 or settings.save_every < 1:
        raise ConfigError(f"frames, checkpoint_every and save_every must be ≥ 1 (got {frames}, "
                          f"{checkpoint_every}, {settings.save_every})")
    out_dir = Path(out_dir)
    out = out_dir / f"md17_{settings.name}.npz"
    work = out_dir / f"md17_{settings.name}.work"
    checkpoint_file = work / "checkpoint.npz"
    structure = starting_structure(settings.molecule, seed=settings.seed)
    integrator = LangevinIntegrator(XTBForceField(structure.numbers, settings.method), structure.masses,
                                    settings.timestep, settings.temperature, settings.friction,
                                    settings.remove_rigid_body)
    dof = (internal_degrees_of_freedom(structure.positions, structure.masses) if settings.remove_rigid_body
           else 3 * len(structure.masses))
    chunks = FrameChunks(out, work, PER_FRAME)
    if checkpoint_file.exists():
        with np.load(checkpoint_file) as saved:
            _check_settings(json.loads(str(saved["settings"])), settings, checkpoint_file)
            state, done = LangevinState.from_arrays(saved), int(saved["frames"])
            stats = {k: float(saved[k]) if k in saved.files else 0.0 for k in _STATS}  # older runs: fewer
        chunks.drop_after(done)
    else:
        state, done = integrator.initial_state(structure.positions, settings.seed), 0
        stats = dict.fromkeys(_STATS, 0.0)
    heat_up = heat_up_fs(settings.friction)
    bonds = np.array(structure.bonds, dtype=np.int64)
    start_lengths = np.linalg.norm(structure.positions[bonds[:, 0]] - structure.positions[bonds[:, 1]], axis=1)
    buffer = {key: [] for key in PER_FRAME}
    first = done
    boundary = state.to_arrays()  # the state at the last whole frame: what a checkpoint saves

    def record() -> None:
        nonlocal boundary
        buffer["R"].append(state.positions.copy())
        buffer["E"].append([state.energy])
        buffer["F"].append(state.forces.copy())
        boundary = state.to_arrays()

    def checkpoint() -> None:
        nonlocal first, session_start
        if buffer["R"]:
            chunks.write(first, {k: np.asarray(v, dtype=np.float64) for k, v in buffer.items()})
        now = time.perf_counter()
        stats["wall_seconds"] += now - session_start
        session_start, first = now, done
        for values in buffer.values():
            values.clear()
        save_npz_atomic(checkpoint_file, {**boundary, "frames": np.array(done),
                                          "settings": np.array(json.dumps(asdict(settings))),
                                          **{k: np.array(v) for k, v in stats.items()}})

    session_start = time.perf_counter()
    if done == 0:
        record()
        done = 1
    with SimulationProgress(settings.name, done, frames, settings.frame_ps, enabled=progress) as bar:
        try:
            while done < frames:
                temperatures = [kinetic_temperature(structure.masses, integrator.step(state).velocities, dof)
                                for _ in range(settings.save_every)]
                _check_intact(state.positions, bonds, start_lengths, state.step)
                stats["temperature_sum"] += sum(temperatures)
                stats["temperature_count"] += len(temperatures)
                if state.step * settings.timestep >= heat_up:  # the thermostat has brought the run to temperature
                    stats["warm_temperature_sum"] += sum(temperatures)
                    stats["warm_temperature_count"] += len(temperatures)
                record()
                done += 1
                if done - first >= checkpoint_every:
                    checkpoint()
                bar.update(done)
        finally:  # also on Ctrl-C or a failure: keep every whole frame computed so far
            checkpoint()
    metadata = _metadata(settings, structure)
    chunks.assemble(done, metadata)
    summary = {"kind": "small_molecule", "file": out.name, "molecule": settings.name, "smiles": structure.smiles,
               "atoms": int(len(structure.numbers)), "frames": done, "steps": state.step,
               "simulated_ps": round(state.step * settings.timestep * 1e-3, 6),
               "frame_interval_fs": settings.timestep * settings.save_every,
               "mean_kinetic_temperature_K": round(stats["temperature_sum"] / max(stats["temperature_count"], 1), 2),
               "heat_up_ps": heat_up * 1e-3, "kinetic_temperature_after_heat_up_K":
                   round(stats["warm_temperature_sum"] / stats["warm_temperature_count"], 2)
                   if stats["warm_temperature_count"] else None,
               "wall_seconds": round(stats["wall_seconds"], 1),
               "ms_per_step": round(1e3 * stats["wall_seconds"] / max(state.step, 1), 2),
               "frames_per_hour": round(3600 * (done - 1) / max(stats["wall_seconds"], 1e-9)),
               "settings": asdict(settings), "engine": {"name": "tblite", "version": tblite_version()}}
    write_summary(out.with_suffix(".json"), summary)
    return summary


def _metadata(settings: SmallMoleculeSettings, structure) -> dict[str, np.ndarray]:
    engine = f"{settings.method} (tblite {tblite_version()})"
    return {"z": structure.numbers, "name": np.array(settings.name), "theory": np.array(engine),
            "smiles": np.array(structure.smiles), "bonds": np.array(structure.bonds, dtype=np.int64).reshape(-1, 2),
            "settings": np.array(json.dumps({**asdict(settings), "engine": "tblite", "engine_version": tblite_version(),
                                             "units": {"R": "Å", "E": "kcal/mol", "F": "kcal/mol/Å",
                                                       "timestep": "fs", "friction": "1/fs", "temperature": "K"}}))}
