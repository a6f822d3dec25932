"""``geomol simulate``: generate molecular-dynamics data with real engines (optional extra: pip install -e '.[md]').

Examples::

    geomol simulate molecule aspirin ethanol --out md_data/md17 --frames 40000
    geomol simulate protein ../shared/data/uni_fep/Hermite__FKBP12/protein.pdb.gz --out md_data/fkbp12/seed1 \\
        --ns 0.5 --seed 1

``molecule``: GFN2-xTB Langevin MD by the MD17 protocol (500 K, 0.5 fs steps), one MD17 npz per
molecule (``md17_<name>.npz``: ``R``, ``z``, ``E``, ``F``), read by ``configs/egno_md17.yaml`` and by the
official EGNO loader. ``protein``: OpenMM implicit-solvent MD after PDBFixer, ``trajectory.dcd`` with
``topology.pdb`` and ``topology.pqr`` (charges), read by ``configs/egno_md.yaml`` and ``geomol rollout``.

Runs checkpoint as they go: run the same command again to continue a killed run, or with more
frames to extend a finished one. Each writes a summary JSON (settings, engine version, speed).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.errors import ConfigError, StructureReadError


def _optional_float(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    kinds = parser.add_subparsers(dest="kind", metavar="kind", required=True)
    molecule = kinds.add_parser("molecule", allow_abbrev=False,
                                help="small molecules with GFN2-xTB (tblite), MD17 protocol")
    molecule.add_argument("molecules", nargs="+", metavar="NAME|SMILES",
                          help="known names (the MD17 eight: aspirin, benzene_old, ethanol, malonaldehyde, "
                               "naphthalene, salicylic, toluene, uracil; drug-like ones such as paracetamol, phenol, "
                               "pyridine: geomol.simulate.molecules.MOLECULES) or SMILES")
    molecule.add_argument("--name", help="output name md17_<NAME>.npz for a single SMILES (default: the known name, "
                          "else 'molecule')")
    molecule.add_argument("--frames", type=int, required=True, help="frames in each output (frame 0: the start)")
    molecule.add_argument("--temperature", type=float, default=500.0, help="K (default 500)")
    molecule.add_argument("--timestep", type=float, default=0.5, help="fs (default 0.5)")
    molecule.add_argument("--friction", type=float, default=0.002, help="Langevin γ in 1/fs (default 0.002)")
    molecule.add_argument("--save-every", type=int, default=1, help="steps per frame (default 1)")
    molecule.add_argument("--checkpoint-every", type=int, default=1000, help="frames between checkpoints")
    protein = kinds.add_parser("protein", allow_abbrev=False, help="a protein with OpenMM in implicit solvent")
    protein.add_argument("pdb", help="protein structure (PDB, optionally .gz); PDBFixer adds missing atoms")
    length = protein.add_mutually_exclusive_group(required=True)
    length.add_argument("--frames", type=int, help="frames in the trajectory (frame 0: end of equilibration)")
    length.add_argument("--ns", type=float, help="produced simulation time in ns instead")
    protein.add_argument("--force-field", default="amber99sbildn-obc",
                         help="amber99sbildn-obc (default) or amber14-gbn2")
    protein.add_argument("--cutoff", type=_optional_float, default=2.0, help="nm, or none (default 2.0)")
    protein.add_argument("--hydrogen-mass", type=_optional_float, default=3.0,
                         help="amu for hydrogen mass repartitioning, or none (default 3.0)")
    protein.add_argument("--constraints", default="HBonds", help="HBonds (default), AllBonds, HAngles or none")
    protein.add_argument("--timestep", type=float, default=4.0, help="fs (default 4)")
    protein.add_argument("--frame-interval", type=float, default=1.0, help="ps between frames (default 1)")
    protein.add_argument("--equilibration", type=float, default=20.0, help="ps before frame 0 (default 20)")
    protein.add_argument("--temperature", type=float, default=300.0, help="K (default 300)")
    protein.add_argument("--friction", type=float, default=1.0, help="collision rate in 1/ps (default 1)")
    protein.add_argument("--platform", default="auto", help="OpenMM platform: auto (CUDA, OpenCL, then CPU), CPU, ...")
    protein.add_argument("--checkpoint-every", type=int, default=50, help="frames between checkpoints")
    for sub in (molecule, protein):
        sub.add_argument("--out", required=True, help="output folder")
        sub.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
        sub.add_argument("--threads", type=int, help="CPU threads (tblite's OpenMP or OpenMM's CPU platform; default: "
                         "a resumed protein run's own, else OMP_NUM_THREADS, else the free physical cores)")
        sub.add_argument("--quiet", action="store_true", help="no progress bar or report")


def resume_hint(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves behind (the CLI prints it after 'interrupted')."""
    return f"the frames up to the last checkpoint are kept in {args.out}: the same command continues from there"


def check_inputs(args: argparse.Namespace) -> None:
    if args.kind == "protein" and not Path(args.pdb).is_file():
        raise StructureReadError("file not found", source=args.pdb)
    if args.kind == "molecule":
        for molecule in args.molecules:
            _check_molecule(molecule)


def _check_molecule(molecule: str) -> None:
    """A known name or a SMILES RDKit reads; else the names it may be a typo of."""
    import difflib

    from rdkit import Chem

    from geomol.data.io._source import rdkit_messages
    from geomol.simulate.molecules import MD17_MOLECULES, MOLECULES

    if molecule in MOLECULES:
        return
    with rdkit_messages():
        if Chem.MolFromSmiles(molecule) is not None:
            return
    close = difflib.get_close_matches(molecule.lower(), MOLECULES, n=3, cutoff=0.6)
    raise ConfigError(f"{molecule!r} is neither a molecule name geomol knows nor a SMILES RDKit can read"
                      + (f"; did you mean {' or '.join(close)}?" if close else "")
                      + f" (names: the MD17 {', '.join(MD17_MOLECULES)} and {len(MOLECULES) - len(MD17_MOLECULES)} "
                        "more in geomol.simulate.molecules.MOLECULES; any other molecule as a SMILES, e.g. 'CCO')")


def _protein_frames(args: argparse.Namespace) -> int:
    if args.frames is not None:
        return args.frames
    frames = round(args.ns * 1000 / args.frame_interval) + 1
    if frames < 2:
        raise ConfigError(f"--ns {args.ns} is shorter than one frame interval ({args.frame_interval} ps)")
    return frames


def run(args: argparse.Namespace) -> int:
    from geomol.simulate.summary import simulated_time, speed

    if args.kind == "molecule":
        from geomol.simulate import SmallMoleculeSettings, simulate_small_molecule

        if args.name and len(args.molecules) > 1:
            raise ConfigError("--name names one molecule's output; give one SMILES with it")
        for name in args.molecules:
            settings = SmallMoleculeSettings(name, seed=args.seed, temperature=args.temperature,
                                             timestep=args.timestep, friction=args.friction,
                                             save_every=args.save_every, label=args.name or "")
            summary = simulate_small_molecule(settings, args.out, args.frames, checkpoint_every=args.checkpoint_every,
                                              progress=not args.quiet)
            _report(args, f"{summary['molecule']}: {summary['frames']} frames "
                          f"({simulated_time(summary['simulated_ps'])}) in {Path(args.out) / summary['file']}, "
                          f"{summary['ms_per_step']} ms per step; {_temperature(summary)}")
        return 0
    from geomol.simulate import ProteinSettings, simulate_protein

    constraints = None if args.constraints.lower() == "none" else args.constraints
    settings = ProteinSettings(seed=args.seed, force_field=args.force_field, cutoff_nm=args.cutoff,
                               constraints=constraints, hydrogen_mass=args.hydrogen_mass, timestep_fs=args.timestep,
                               temperature=args.temperature, friction_per_ps=args.friction,
                               frame_interval_ps=args.frame_interval, equilibration_ps=args.equilibration)
    from geomol.commands.threads import resolve_threads

    from geomol.simulate.protein import checkpoint_threads

    # a resumed run keeps its thread count unless told otherwise: OpenMM's CPU sums depend on it (bit for bit)
    threads = args.threads or checkpoint_threads(args.out) or resolve_threads(None)
    summary = simulate_protein(args.pdb, args.out, _protein_frames(args), settings, platform=args.platform,
                               threads=threads, checkpoint_every=args.checkpoint_every, progress=not args.quiet)
    _report(args, f"{summary['frames']} frames ({simulated_time(summary['produced_ns'] * 1e3)} produced, "
                  f"{summary['atoms']} atoms) in {Path(args.out) / 'trajectory.dcd'} with topology.pdb / topology.pqr; "
                  f"{speed(summary['produced_ns'] * 1e3, summary['wall_seconds'])} on {summary['platform']}")
    return 0


def _temperature(summary: dict) -> str:
    """The kinetic temperature after the thermostat's heat-up, or why a short run has none."""
    from geomol.simulate.summary import simulated_time

    target, heat_up = summary["settings"]["temperature"], summary["heat_up_ps"]
    if summary.get("kinetic_temperature_after_heat_up_K") is not None:
        return (f"kinetic temperature {summary['kinetic_temperature_after_heat_up_K']:.0f} K (target {target:.0f} K) "
                f"after the thermostat's {simulated_time(heat_up)} heat-up")
    return (f"mean kinetic temperature {summary['mean_kinetic_temperature_K']:.0f} K (target {target:.0f} K) over a "
            f"run shorter than the thermostat's heat-up ({simulated_time(heat_up)} = 5/friction): the velocities drawn "
            "at the target give about half their energy to the potential at once, and the thermostat warms the run "
            "back up from there")


def _report(args: argparse.Namespace, line: str) -> None:
    if not args.quiet:
        print(line)
