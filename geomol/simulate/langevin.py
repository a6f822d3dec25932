"""Langevin dynamics with the BAOAB splitting, deterministic from a seed and exactly resumable.

Units: positions Å, velocities Å/fs, time fs, masses amu (g/mol), energies kcal/mol, forces kcal/mol/Å.

One step of length Δt (Leimkuhler & Matthews' BAOAB; friction γ in 1/fs, temperature T in K):

* B: v ← v + (Δt/2) F(x)/m
* A: x ← x + (Δt/2) v
* O: v ← c₁ v + c₂ √(k_B T/m) ξ with c₁ = exp(−γ Δt), c₂ = √(1 − c₁²), ξ ~ N(0, 1) per coordinate
* A: x ← x + (Δt/2) v
* B: v ← v + (Δt/2) F(x)/m with the force at the new positions (kept for the next step).

With ``remove_rigid_body`` (the generator's default) the O step acts on the internal motions only: after
it the centre-of-mass velocity and the rigid rotation about the centre of mass are removed (a
mass-weighted orthogonal projection, :func:`remove_rigid_body_motion`), and the starting velocities
are projected the same way. Internal forces exert no net force or torque, and the A and B steps keep
linear and angular momentum, so the molecule neither drifts nor tumbles while its internal degrees of
freedom (3n − 6) are thermostatted — as under MD17's global thermostat. A plain Langevin thermostat
kicks the whole molecule: at 500 K aspirin then turns by ~70° and drifts by ~3 Å within 1.5 ps, motion
that no model can predict from one state.

The whole state (positions, velocities, the force and energy at the positions, the step and the
random generator's state) is a :class:`LangevinState`; saved with :meth:`LangevinState.to_arrays` and
restored with :meth:`LangevinState.from_arrays`, a run continues with exactly the numbers it would
have drawn without the interruption (the force is a function of the positions alone: see
:mod:`geomol.simulate.xtb`).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable

import numpy as np

from geomol.errors import ConfigError

__all__ = ["BOLTZMANN_KCAL", "ACCEL_PER_KCAL", "LangevinState", "LangevinIntegrator", "maxwell_boltzmann",
           "kinetic_temperature", "remove_rigid_body_motion", "internal_degrees_of_freedom"]

BOLTZMANN_KCAL = 0.0019872042586408316
"""k_B in kcal/mol/K."""
ACCEL_PER_KCAL = 4.184e-4
"""1 kcal/mol/Å per amu in Å/fs²."""

ForceField = Callable[[np.ndarray], tuple[float, np.ndarray]]
"""positions [n, 3] Å → (energy kcal/mol, forces [n, 3] kcal/mol/Å)."""


@dataclass
class LangevinState:
    """Everything a run needs to continue bit for bit.

    Attributes:
        positions, velocities, forces: [n, 3] float64 (Å, Å/fs, kcal/mol/Å); forces at ``positions``.
        energy: potential energy at ``positions`` (kcal/mol).
        step: integration steps taken.
        rng: the NumPy generator whose state is saved (PCG64).
    """

    positions: np.ndarray
    velocities: np.ndarray
    forces: np.ndarray
    energy: float
    step: int
    rng: np.random.Generator

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Arrays for ``np.savez`` (the generator's state as a JSON string; no pickles)."""
        return {"positions": self.positions, "velocities": self.velocities, "forces": self.forces,
                "energy": np.array(self.energy), "step": np.array(self.step, dtype=np.int64),
                "rng_state": np.array(json.dumps(self.rng.bit_generator.state))}

    @classmethod
    def from_arrays(cls, data) -> "LangevinState":
        """Inverse of :meth:`to_arrays` (``data``: a mapping such as an opened npz)."""
        state = json.loads(str(data["rng_state"]))
        if state.get("bit_generator") != "PCG64":
            raise ConfigError(f"checkpoint random generator {state.get('bit_generator')!r} is not PCG64")
        rng = np.random.Generator(np.random.PCG64())
        rng.bit_generator.state = state
        return cls(np.array(data["positions"], dtype=np.float64), np.array(data["velocities"], dtype=np.float64),
                   np.array(data["forces"], dtype=np.float64), float(data["energy"]), int(data["step"]), rng)


def maxwell_boltzmann(masses: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """[n, 3] velocities (Å/fs) drawn at ``temperature`` (K), centre-of-mass motion removed."""
    sigma = np.sqrt(BOLTZMANN_KCAL * temperature * ACCEL_PER_KCAL / masses)[:, None]
    v = sigma * rng.standard_normal((len(masses), 3))
    return v - (masses[:, None] * v).sum(0) / masses.sum()


def _inertia(masses: np.ndarray, centred: np.ndarray) -> np.ndarray:
    """[3, 3] inertia tensor (amu Å²) of positions [n, 3] relative to the centre of mass."""
    squared = (centred ** 2).sum(1)
    return (masses[:, None, None] * (squared[:, None, None] * np.eye(3) - centred[:, :, None] * centred[:, None, :])).sum(0)


def remove_rigid_body_motion(positions: np.ndarray, velocities: np.ndarray, masses: np.ndarray) -> np.ndarray:
    """[n, 3] velocities without their centre-of-mass part and their rigid rotation about the centre of mass.

    v_i − V_com − ω × r_i with ω = I⁻¹ L (pseudo-inverse: a linear molecule has no rotation about its axis).
    """
    weights = masses[:, None] / masses.sum()
    v = velocities - (weights * velocities).sum(0)
    r = positions - (weights * positions).sum(0)
    angular_momentum = (masses[:, None] * np.cross(r, v)).sum(0)
    omega = np.linalg.pinv(_inertia(masses, r)) @ angular_momentum
    return v - np.cross(omega, r)


def internal_degrees_of_freedom(positions: np.ndarray, masses: np.ndarray) -> int:
    """3n − 6 (3n − 5 for a linear molecule): what is left without translation and rotation."""
    r = positions - (masses[:, None] * positions).sum(0) / masses.sum()
    rotations = np.linalg.matrix_rank(_inertia(masses, r), tol=1e-6 * max(1.0, float(masses.sum())))
    return max(1, 3 * len(masses) - 3 - int(rotations))


def heat_up_fs(friction: float) -> float:
    """fs the thermostat takes to bring a run started at rest in its minimum to the target temperature: 5/γ
    (the deficit left then is e⁻⁵ < 1 %); infinite without friction. The velocities drawn at the target
    share their energy with the potential within femtoseconds, so a run starts near half the target and
    warms with the time constant 1/γ: an ethanol run at 500 K, γ = 0.002/fs, averages 327 K over its first
    0.6 ps and 520 K from 2.5 to 5 ps."""
    return 5.0 / friction if friction > 0 else float("inf")


def kinetic_temperature(masses: np.ndarray, velocities: np.ndarray, degrees_of_freedom: int | None = None) -> float:
    """Instantaneous temperature (K) from the kinetic energy (default 3n degrees of freedom)."""
    kinetic = 0.5 * (masses[:, None] * velocities ** 2).sum() / ACCEL_PER_KCAL  # kcal/mol
    return 2 * kinetic / ((degrees_of_freedom or 3 * len(masses)) * BOLTZMANN_KCAL)


class LangevinIntegrator:
    """BAOAB Langevin integrator (see the module notes).

    Args:
        force_field: positions [n, 3] Å → (energy kcal/mol, forces [n, 3] kcal/mol/Å).
        masses: [n] amu.
        timestep: Δt in fs. temperature: K. friction: γ in 1/fs.
        remove_rigid_body: thermostat the internal motions only (see the module notes).
    """

    def __init__(self, force_field: ForceField, masses: np.ndarray, timestep: float, temperature: float,
                 friction: float, remove_rigid_body: bool = False):
        if timestep <= 0 or temperature < 0 or friction < 0:
            raise ConfigError(f"need timestep > 0, temperature ≥ 0, friction ≥ 0 (got {timestep} fs, "
                              f"{temperature} K, {friction} /fs)")
        self.force_field, self.masses = force_field, np.asarray(masses, dtype=np.float64)
        self.timestep, self.temperature, self.friction = timestep, temperature, friction
        self.remove_rigid_body = remove_rigid_body
        self._kick = 0.5 * timestep * ACCEL_PER_KCAL / self.masses[:, None]  # (Δt/2)/m in Å/fs per kcal/mol/Å
        self._c1 = np.exp(-friction * timestep)
        self._noise = (np.sqrt(1 - self._c1 ** 2) *
                       np.sqrt(BOLTZMANN_KCAL * temperature * ACCEL_PER_KCAL / self.masses))[:, None]

    def initial_state(self, positions: np.ndarray, seed: int) -> LangevinState:
        """State at step 0: the given positions, Maxwell–Boltzmann velocities from ``seed``."""
        rng = np.random.Generator(np.random.PCG64(seed))
        positions = np.array(positions, dtype=np.float64)
        velocities = maxwell_boltzmann(self.masses, self.temperature, rng)
        if self.remove_rigid_body:
            velocities = remove_rigid_body_motion(positions, velocities, self.masses)
        energy, forces = self.force_field(positions)
        return LangevinState(positions, velocities, forces, energy, 0, rng)

    def step(self, state: LangevinState) -> LangevinState:
        """Advance ``state`` by one step in place and return it."""
        v = state.velocities + self._kick * state.forces
        x = state.positions + 0.5 * self.timestep * v
        v = self._c1 * v + self._noise * state.rng.standard_normal(v.shape)
        if self.remove_rigid_body:
            v = remove_rigid_body_motion(x, v, self.masses)
        x = x + 0.5 * self.timestep * v
        energy, forces = self.force_field(x)
        state.velocities = v + self._kick * forces
        state.positions, state.forces, state.energy = x, forces, energy
        state.step += 1
        return state
