"""Speed of the MD generators: OpenMM protein settings side by side, and GFN2-xTB per step.

Protein: the structure is prepared once (PDBFixer, as ``geomol simulate protein``) and minimised once
(with the default settings), then each setting (force field, cutoff, constraints, hydrogen mass, time
step) builds its system from the minimised positions, runs ``--warmup`` steps and is timed over
``--seconds`` of wall time; the table gives ns/day. The
chosen default of :class:`geomol.simulate.ProteinSettings` is one of the rows.

Small molecules (``--molecules``): milliseconds per GFN2-xTB force call and per Langevin step of the
generator, from its starting structure.

    python benchmarks/simulate_speed.py --pdb ../shared/data/uni_fep/Hermite__FKBP12/protein.pdb.gz \\
        --threads 1 --seconds 30 --molecules aspirin ethanol

Writes ``benchmarks/results/simulate_speed.json`` (provenance, load, every row).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]

PROTEIN_SETTINGS = [  # (force field, cutoff nm, constraints, hydrogen mass amu, time step fs)
    ("amber14-gbn2", None, "HBonds", None, 2.0),
    ("amber99sbildn-obc", None, "HBonds", None, 2.0),
    ("amber99sbildn-obc", 2.0, "HBonds", None, 2.0),
    ("amber99sbildn-obc", 1.6, "HBonds", None, 2.0),
    ("amber99sbildn-obc", 2.0, "HBonds", 3.0, 4.0),
    ("amber14-gbn2", 2.0, "HBonds", 3.0, 4.0),
]


def time_protein(topology, positions, row, platform: str, threads: int | None, warmup: int, seconds: float) -> dict:
    from geomol.simulate.protein import ProteinSettings, make_simulation
    from geomol.simulate.protein_system import build_system

    force_field, cutoff, constraints, hydrogen_mass, timestep = row
    settings = ProteinSettings(force_field=force_field, cutoff_nm=cutoff, constraints=constraints,
                               hydrogen_mass=hydrogen_mass, timestep_fs=timestep)
    system = build_system(topology, force_field, cutoff, constraints, hydrogen_mass)
    simulation = make_simulation(topology, system, settings, platform, threads)
    simulation.context.setPositions(positions)
    simulation.context.setVelocitiesToTemperature(settings.temperature, 1)
    simulation.step(warmup)
    steps, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        simulation.step(50)
        steps += 50
    elapsed = time.perf_counter() - start
    ns = steps * timestep * 1e-6
    return {"force_field": force_field, "cutoff_nm": cutoff, "constraints": constraints,
            "hydrogen_mass_amu": hydrogen_mass, "timestep_fs": timestep, "steps": steps,
            "seconds": round(elapsed, 2), "ms_per_step": round(1e3 * elapsed / steps, 3),
            "ns_per_day": round(ns * 86400 / elapsed, 3), "platform": simulation.context.getPlatform().getName()}


def minimised(topology, positions, platform: str, threads: int | None):
    """Positions after an energy minimisation with the default settings (shared by every row)."""
    from geomol.simulate.protein import ProteinSettings, make_simulation
    from geomol.simulate.protein_system import build_system

    settings = ProteinSettings()
    system = build_system(topology, settings.force_field, settings.cutoff_nm, settings.constraints,
                          settings.hydrogen_mass)
    simulation = make_simulation(topology, system, settings, platform, threads)
    simulation.context.setPositions(positions)
    simulation.minimizeEnergy(maxIterations=500)
    return simulation.context.getState(getPositions=True).getPositions()


def time_molecule(name: str, steps: int) -> dict:
    from geomol.simulate.langevin import LangevinIntegrator
    from geomol.simulate.molecules import starting_structure
    from geomol.simulate.small_molecule import SmallMoleculeSettings
    from geomol.simulate.xtb import XTBForceField

    settings = SmallMoleculeSettings(name)
    structure = starting_structure(name, seed=settings.seed)
    force_field = XTBForceField(structure.numbers, settings.method)
    integrator = LangevinIntegrator(force_field, structure.masses, settings.timestep, settings.temperature,
                                    settings.friction)
    state = integrator.initial_state(structure.positions, settings.seed)
    start = time.perf_counter()
    for _ in range(steps):
        integrator.step(state)
    elapsed = time.perf_counter() - start
    return {"molecule": name, "atoms": len(structure.numbers), "steps": steps,
            "ms_per_step": round(1e3 * elapsed / steps, 2),
            "frames_per_hour": round(3600 * steps / elapsed), "ns_per_day": round(steps * 0.5e-6 * 86400 / elapsed, 4)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.strip().splitlines()[0])
    parser.add_argument("--pdb", type=Path, help="protein to time (PDB or .pdb.gz)")
    parser.add_argument("--platform", default="auto")
    parser.add_argument("--threads", type=int, default=1, help="OpenMM CPU threads (default 1)")
    parser.add_argument("--warmup", type=int, default=20, help="steps before timing")
    parser.add_argument("--seconds", type=float, default=30.0, help="wall seconds timed per setting")
    parser.add_argument("--molecules", nargs="*", default=[], help="MD17 molecules to time with GFN2-xTB")
    parser.add_argument("--molecule-steps", type=int, default=200)
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "simulate_speed.json")
    args = parser.parse_args(argv)

    load_start = os.getloadavg()
    protein_rows, molecule_rows = [], []
    if args.pdb:
        from geomol.simulate.protein_system import prepare_structure

        topology, positions = prepare_structure(args.pdb)
        positions = minimised(topology, positions, args.platform, args.threads)
        print(f"{args.pdb.name}: {topology.getNumAtoms()} atoms, {topology.getNumResidues()} residues")
        print(f"{'force field':>18} {'cutoff':>6} {'constr.':>7} {'H mass':>6} {'dt fs':>5} | {'ms/step':>8} {'ns/day':>8}")
        for row in PROTEIN_SETTINGS:
            result = time_protein(topology, positions, row, args.platform, args.threads, args.warmup, args.seconds)
            protein_rows.append(result)
            print(f"{row[0]:>18} {str(row[1]):>6} {str(row[2]):>7} {str(row[3]):>6} {row[4]:>5} | "
                  f"{result['ms_per_step']:>8} {result['ns_per_day']:>8}", flush=True)
    for name in args.molecules:
        result = time_molecule(name, args.molecule_steps)
        molecule_rows.append(result)
        print(f"{name:>14} ({result['atoms']} atoms): {result['ms_per_step']} ms per step, "
              f"{result['frames_per_hour']} frames per hour", flush=True)
    record = {"benchmark": "simulate_speed", "provenance": provenance(),
              "load_average_1_5_15_min": {"start": [round(x, 2) for x in load_start],
                                          "end": [round(x, 2) for x in os.getloadavg()]},
              "protein_file": args.pdb.name if args.pdb else None, "threads": args.threads,
              "protein": protein_rows, "molecules": molecule_rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=1) + "\n")
    print(f"written {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
