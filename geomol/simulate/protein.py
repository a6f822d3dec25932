"""Implicit-solvent protein MD with OpenMM, written as a DCD trajectory with its topology files.

Recipe: PDBFixer prepares the protein (:mod:`geomol.simulate.protein_system`); the energy is minimised,
velocities drawn at the temperature from the seed, the system equilibrated for ``equilibration_ps``
and then produced with a frame every ``frame_interval_ps`` (Langevin middle integrator). Output in
``out_dir``:

* ``topology.pdb`` (the prepared protein, minimised) and ``topology.pqr`` (the same atoms with the
  force field's partial charges, the topology to give MDAnalysis and ``geomol fit`` / ``rollout``
  when a model uses charges);
* ``trajectory.dcd`` (frame 0: the end of equilibration) and ``trajectory.json`` (settings, OpenMM
  version, platform, frames, simulated ns, wall time, ns/day);
* ``trajectory.work/checkpoint.npz``: OpenMM's checkpoint (positions, velocities and the random
  generator's state, for the platform that wrote it), the frame count, the CPU threads and
  ``checkpoint_every``. A killed run continues from its last checkpoint, the trajectory cut back to
  it; a finished run is extended by asking for more frames (from its last checkpoint, the frames
  after it computed again).

Resuming is bit for bit. OpenMM's state alone is not enough: a context started from a checkpoint
sums forces in another order than the context that wrote it (its neighbour lists and atom order are
built afresh), so a resumed protein run drifted from the uninterrupted one by 1e-10 Å at once and by
Å within thousands of frames. So every run restarts its own context from the state it saves
(``Context.reinitialize(preserveState=True)``) at each checkpoint, at fixed frames (frame 0, then
every ``checkpoint_every`` frames): an interrupted run, resumed from its last checkpoint, goes through
exactly the states of the run that was never interrupted. This holds on the same OpenMM platform
(another is refused), with the same number of CPU threads (the CPU platform's sums depend on it: a
resumed run keeps the checkpoint's unless told otherwise, and is warned when told otherwise) and the
same ``checkpoint_every`` (another is refused).
"""
from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from geomol.errors import ConfigError, SimulationError
from geomol.simulate.dcd import open_dcd_for_append
from geomol.simulate.frame_chunks import save_npz_atomic
from geomol.simulate.progress import SimulationProgress
from geomol.simulate.protein_system import build_system, openmm_modules, prepare_structure, write_topologies
from geomol.simulate.summary import write_summary

__all__ = ["ProteinSettings", "simulate_protein", "make_platform", "make_simulation", "checkpoint_threads"]

CHECKPOINT = Path("trajectory.work") / "checkpoint.npz"


@dataclass(frozen=True)
class ProteinSettings:
    """What defines a protein trajectory (a resumed run must use the same).

    Attributes:
        seed: velocities and the thermostat's noise. force_field: a key of ``FORCE_FIELDS``.
        cutoff_nm: non-periodic cutoff (nm) or None (no cutoff). constraints: "HBonds", ... or None.
        hydrogen_mass: amu (hydrogen mass repartitioning) or None. timestep_fs: integration step.
        temperature: K. friction_per_ps: Langevin collision rate. frame_interval_ps: time between frames.
        equilibration_ps: simulated before frame 0. ph: protonation for PDBFixer.
    """

    seed: int = 1
    force_field: str = "amber99sbildn-obc"
    cutoff_nm: float | None = 2.0
    constraints: str | None = "HBonds"
    hydrogen_mass: float | None = 3.0
    timestep_fs: float = 4.0
    temperature: float = 300.0
    friction_per_ps: float = 1.0
    frame_interval_ps: float = 1.0
    equilibration_ps: float = 20.0
    ph: float = 7.0

    @property
    def steps_per_frame(self) -> int:
        steps = round(self.frame_interval_ps * 1000 / self.timestep_fs)
        if steps < 1 or abs(steps * self.timestep_fs - self.frame_interval_ps * 1000) > 1e-6:
            raise ConfigError(f"frame interval {self.frame_interval_ps} ps is not a whole number of "
                              f"{self.timestep_fs} fs steps")
        return steps


def make_platform(name: str = "auto", threads: int | None = None):
    """(OpenMM Platform, its properties); "auto": the fastest available (CUDA, OpenCL, then CPU)."""
    openmm, _, _ = openmm_modules()
    available = [openmm.Platform.getPlatform(i).getName() for i in range(openmm.Platform.getNumPlatforms())]
    if name == "auto":
        name = next(p for p in ("CUDA", "OpenCL", "CPU", "Reference") if p in available)
    if name not in available:
        raise ConfigError(f"OpenMM platform {name!r} is not available here (available: {', '.join(available)})")
    properties = {"Threads": str(threads)} if name == "CPU" and threads else {}
    return openmm.Platform.getPlatformByName(name), properties


def make_simulation(topology, system, settings: ProteinSettings, platform: str = "auto", threads: int | None = None):
    """OpenMM Simulation with the settings' Langevin middle integrator (seeded) on the chosen platform."""
    openmm, app, unit = openmm_modules()
    integrator = openmm.LangevinMiddleIntegrator(settings.temperature * unit.kelvin,
                                                 settings.friction_per_ps / unit.picosecond,
                                                 settings.timestep_fs * unit.femtosecond)
    integrator.setRandomNumberSeed(settings.seed)
    chosen, properties = make_platform(platform, threads)
    return app.Simulation(topology, system, integrator, chosen, properties)


def _equilibrate(simulation, positions, settings: ProteinSettings):
    """Minimise, draw velocities from the seed, run the equilibration; returns the minimised positions."""
    _, _, unit = openmm_modules()
    simulation.context.setPositions(positions)
    simulation.minimizeEnergy()
    minimised = simulation.context.getState(getPositions=True).getPositions()
    simulation.context.setVelocitiesToTemperature(settings.temperature * unit.kelvin, settings.seed)
    simulation.step(round(settings.equilibration_ps * 1000 / settings.timestep_fs))
    return minimised


def _positions_angstrom(simulation) -> np.ndarray:
    state = simulation.context.getState(getPositions=True)
    return np.asarray(state.getPositions(asNumpy=True)._value) * 10.0


def checkpoint_threads(out_dir: str | Path) -> int | None:
    """The CPU threads of the run checkpointed in ``out_dir`` (None: no checkpoint, or not recorded)."""
    try:
        with np.load(Path(out_dir) / CHECKPOINT) as saved:
            return int(saved["threads"]) if "threads" in saved.files and int(saved["threads"]) > 0 else None
    except (OSError, ValueError, KeyError):
        return None


def simulate_protein(pdb: str | Path, out_dir: str | Path, frames: int, settings: ProteinSettings = ProteinSettings(),
                     *, platform: str = "auto", threads: int | None = None, checkpoint_every: int = 50,
                     progress: bool = True) -> dict:
    """Run (or continue) until ``trajectory.dcd`` has ``frames`` frames; returns the summary.

    Args:
        pdb: the protein (PDB, optionally gzip). out_dir: where the files go (see the module notes).
        frames: frames wanted (frame 0 is the end of equilibration).
        platform: OpenMM platform name or "auto". threads: CPU platform threads (None: a resumed run's own,
            else OpenMM's default).
        checkpoint_every: frames between checkpoints (a resumed run must use its run's).

    Raises:
        ConfigError: bad settings, a missing engine, or a run in ``out_dir`` with other settings.
        SimulationError: the system blew up (non-finite positions).
    """
    openmm, app, unit = openmm_modules()
    if frames < 1 or checkpoint_every < 1:
        raise ConfigError(f"frames and checkpoint_every must be ≥ 1 (got {frames}, {checkpoint_every})")
    steps_per_frame = settings.steps_per_frame
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    dcd_path, checkpoint_file = out_dir / "trajectory.dcd", out_dir / CHECKPOINT
    resumed = checkpoint_file.exists()
    threads = threads or (checkpoint_threads(out_dir) if resumed else None)
    topology, positions = prepare_structure(pdb, settings.ph)
    system = build_system(topology, settings.force_field, settings.cutoff_nm, settings.constraints,
                          settings.hydrogen_mass)
    simulation = make_simulation(topology, system, settings, platform, threads)
    platform_name = simulation.context.getPlatform().getName()
    if resumed:
        done, wall, equilibration_seconds = _restore(simulation, checkpoint_file, settings, platform_name,
                                                     checkpoint_every, threads)
        handle = open_dcd_for_append(dcd_path, done)
    else:
        started = time.perf_counter()
        minimised = _equilibrate(simulation, positions, settings)
        write_topologies(topology, minimised, system, out_dir / "topology.pdb", out_dir / "topology.pqr")
        done, wall, handle = 0, 0.0, open(dcd_path, "w+b")
        equilibration_seconds = time.perf_counter() - started
    dt = settings.timestep_fs * unit.femtosecond
    dcd = app.DCDFile(handle, topology, dt, 0, steps_per_frame, append=done > 0)
    session_start = time.perf_counter()

    def checkpoint() -> None:
        """Restart the context from its own state (as a resumed run starts), then save that state."""
        nonlocal wall, session_start
        handle.flush()
        simulation.context.reinitialize(preserveState=True)
        now = time.perf_counter()
        wall, session_start = wall + now - session_start, now
        save_npz_atomic(checkpoint_file, {"openmm_checkpoint": np.frombuffer(simulation.context.createCheckpoint(),
                                                                             dtype=np.uint8),
                                          "frames": np.array(done), "wall_seconds": np.array(wall),
                                          "equilibration_seconds": np.array(equilibration_seconds),
                                          "platform": np.array(platform_name), "threads": np.array(threads or 0),
                                          "checkpoint_every": np.array(checkpoint_every),
                                          "settings": np.array(json.dumps(asdict(settings)))})

    with SimulationProgress(f"protein seed {settings.seed}", done, frames, settings.frame_interval_ps,
                            enabled=progress) as bar:
        try:
            while done < frames:
                if done > 0:
                    simulation.step(steps_per_frame)
                x = _positions_angstrom(simulation)
                if not np.isfinite(x).all():
                    raise SimulationError(f"positions became non-finite before frame {done}", source=dcd_path)
                dcd.writeModel(x * 0.1 * unit.nanometer)
                done += 1
                if (done - 1) % checkpoint_every == 0:  # fixed frames, whatever frame a session began at
                    checkpoint()
                bar.update(done)
        finally:
            handle.close()
    wall += time.perf_counter() - session_start
    summary = _summary(settings, topology, done, wall, platform_name, threads)
    summary["equilibration_wall_seconds"] = round(equilibration_seconds, 1)
    write_summary(out_dir / "trajectory.json", summary)
    return summary


def _restore(simulation, checkpoint_file: Path, settings: ProteinSettings, platform_name: str,
             checkpoint_every: int, threads: int | None) -> tuple[int, float, float]:
    with np.load(checkpoint_file) as saved:
        old = json.loads(str(saved["settings"]))
        differ = {k: (old.get(k), v) for k, v in asdict(settings).items() if old.get(k) != v}
        if "checkpoint_every" in saved.files and int(saved["checkpoint_every"]) != checkpoint_every:
            differ["checkpoint_every"] = (int(saved["checkpoint_every"]), checkpoint_every)
        if differ:
            text = ", ".join(f"{k}: {a!r} there, {b!r} asked" for k, (a, b) in differ.items())
            raise ConfigError(f"the run to continue has other settings ({text})", source=checkpoint_file)
        if str(saved["platform"]) != platform_name:
            raise ConfigError(f"the checkpoint was written on the {saved['platform']} platform; continue it there "
                              f"(--platform {saved['platform']})", source=checkpoint_file)
        before = int(saved["threads"]) if "threads" in saved.files else 0
        if platform_name == "CPU" and before and threads != before:
            warnings.warn(f"{checkpoint_file}: the run began with {before} CPU threads and continues with "
                          f"{threads}: OpenMM's CPU sums depend on them, so the continuation is not bit for bit "
                          f"the run that was never interrupted (--threads {before} would be)", stacklevel=3)
        simulation.context.loadCheckpoint(saved["openmm_checkpoint"].tobytes())
        return int(saved["frames"]), float(saved["wall_seconds"]), float(saved["equilibration_seconds"])


def _summary(settings: ProteinSettings, topology, frames: int, wall: float, platform: str,
             threads: int | None) -> dict:
    openmm, _, _ = openmm_modules()
    produced_ns = (frames - 1) * settings.frame_interval_ps * 1e-3
    return {"kind": "protein", "trajectory": "trajectory.dcd", "topology": "topology.pdb",
            "topology_with_charges": "topology.pqr", "atoms": topology.getNumAtoms(),
            "residues": topology.getNumResidues(), "frames": frames, "frame_interval_ps": settings.frame_interval_ps,
            "produced_ns": round(produced_ns, 6),
            "wall_seconds": round(wall, 1), "ns_per_day": round(produced_ns * 86400 / wall, 4) if wall > 0 else None,
            "settings": asdict(settings), "platform": platform, "threads": threads,
            "engine": {"name": "OpenMM", "version": openmm.__version__}}
