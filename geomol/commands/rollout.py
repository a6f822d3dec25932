"""``geomol rollout``: roll a trained EGNO out from a frame of an MD trajectory and write the predicted trajectory.

Small-molecule models (``egno-md17-*``, ``egno-molecules``) read the molecule from any file (XYZ, PDB, SDF, MOL2,
MD17 npz, DCD/XTC with a topology), in any atom order, and write its heavy atoms in the file's order; ``--compare``
(or ``--reference``) then compares the rollout's ensemble with that run (JS divergences of bonds, angles, torsions).

Examples::

    geomol rollout --model egno-md17-aspirin --topology aspirin.xyz --start 3000 --windows 100 --out roll.xyz

    geomol rollout --model egno-fkbp12 --topology topology.pqr --trajectory trajectory.dcd --select backbone \\
        --start 0 --frames 20 --out rollout.xtc --compare
    geomol rollout --model runs/egno_md/version_0/checkpoints/last.ckpt --topology start.pdb \\
        --velocity-from next.pdb --frames 150 --out rollout.dcd
    geomol rollout --topology sys.gro --trajectory run1.xtc --reference run2.xtc --superpose --out pred.pdb

``--frames N`` is the number of frames the output trajectory holds (the start frame and N − 1
predicted frames; N predicted frames with ``--no-start``); ``--horizon F`` instead rolls out until
F frames past the start (the Python API's ``frames=``), ``--windows K`` for K model calls.

Writes the trajectory (any multi-frame format MDAnalysis writes: DCD, XTC, TRR, PDB, NetCDF),
``<out stem>_topology.pdb`` beside coordinate-only formats, and a JSON summary
(``<out stem>.json``: written frames with their frame numbers and times, inputs, model protocol);
with a reference (``--reference`` or ``--compare``) also per-frame RMSD (and the no-motion and linear
baselines') in the summary and a PNG plot (``<out stem>.png``: RMSD over time, per-atom error, bond-length
and angle errors, clashes). Every rollout reports its chemistry (bond-length and angle errors against
the start frame, frames with a broken bond or a clash); ``--restore-bonds`` projects the bonds back to
their start-frame lengths after each window.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.inference.dynamics.rollout import OUTPUT_FRAMES, horizon_for_frames


def add_arguments(parser: argparse.ArgumentParser) -> None:
    inputs = parser.add_argument_group("inputs")
    inputs.add_argument("--topology", required=True, help="topology MDAnalysis reads (PSF, GRO, PDB, TPR, ...)")
    inputs.add_argument("--trajectory", help="trajectory file (DCD, XTC, TRR, ...); omit for a multi-model "
                        "topology or with --velocity-from")
    inputs.add_argument("--select", dest="selection", metavar="SELECTION",
                        help="MDAnalysis atom selection (default: the model's training selection)")
    inputs.add_argument("--start", type=int, default=0, help="input frame (default 0); its velocity is "
                        "x[start+1] − x[start]")
    inputs.add_argument("--velocity-from", metavar="FILE|FRAME",
                        help="velocity from a structure file one frame after the start, or from another frame "
                             "number k: (x[k] − x[start]) / (k − start)")
    model = parser.add_argument_group("model")
    model.add_argument("--model", default="egno-fkbp12", metavar="NAME|PATH",
                       help="shipped model name, model directory or .ckpt checkpoint (default egno-fkbp12)")
    length = model.add_mutually_exclusive_group()
    length.add_argument("--frames", type=int, metavar="N", help="frames in the output trajectory, the start frame "
                        "included unless --no-start (default: one window)")
    length.add_argument("--horizon", type=int, metavar="F", help="roll out until F frames past the start instead")
    length.add_argument("--windows", type=int, metavar="K", help="number of model calls instead")
    model.add_argument("--seed", type=int, default=0, help="random seed of a generative model's windows (default 0: "
                       "the same seed repeats the rollout)")
    model.add_argument("--device", default="cpu", help="torch device (default cpu)")
    model.add_argument("--threads", type=int, help="CPU threads (default: OMP_NUM_THREADS, else the free physical cores)")
    output = parser.add_argument_group("output")
    output.add_argument("--out", required=True, help="predicted trajectory (.dcd, .xtc, .trr, .pdb, .nc, ...)")
    output.add_argument("--output-frames", choices=OUTPUT_FRAMES, default="all",
                        help="all predicted frames in time order, or only window ends (default all)")
    output.add_argument("--no-start", action="store_true", help="do not write the start frame first")
    output.add_argument("--summary", help="JSON summary (default <out stem>.json)")
    output.add_argument("--restore-bonds", action="store_true",
                        help="after each window, restore every bond to its start-frame length (a SHAKE-like "
                             "projection; off by default: it changes the model's predictions)")
    compare = parser.add_argument_group("comparison with a reference (same frame numbering as the input)")
    compare.add_argument("--reference", metavar="TRAJ", help="reference trajectory file")
    compare.add_argument("--reference-topology", metavar="TOP", help="its topology (default --topology)")
    compare.add_argument("--compare", action="store_true", help="compare with the input trajectory itself")
    compare.add_argument("--superpose", action="store_true", help="also RMSD after optimal superposition")
    compare.add_argument("--plot", help="PNG plot (default <out stem>.png when comparing)")
    parser.add_argument("--quiet", action="store_true", help="no progress bar and no report")


def _velocity_from(value: str | None):
    if value is None:
        return None
    return int(value) if value.lstrip("-").isdigit() else value


def run(args: argparse.Namespace) -> int:
    from geomol.api import load_model, rollout
    from geomol.terminal import console
    from geomol.errors import ConfigError

    if args.reference and args.compare:
        raise ConfigError("give --reference or --compare, not both")
    out = Path(args.out)
    reference = True if args.compare else args.reference
    plot = args.plot or (out.with_suffix(".png") if reference else None)
    model = load_model(args.model, device=args.device)
    horizon = args.horizon
    if args.frames is not None and hasattr(model, "protocol"):  # other models: rollout() says what is wrong
        predicted = args.frames - (0 if args.no_start else 1)
        if predicted < 1:
            raise ConfigError(f"--frames {args.frames} leaves no predicted frame (it counts the start frame "
                              "unless --no-start)")
        horizon = horizon_for_frames(model.protocol, predicted, args.output_frames)
    result = rollout(model, args.topology, args.trajectory, out=out, selection=args.selection, start=args.start,
                     frames=horizon, windows=args.windows, velocity_from=_velocity_from(args.velocity_from),
                     reference=reference, reference_topology=args.reference_topology, superpose=args.superpose,
                     plot=plot, summary=args.summary or out.with_suffix(".json"), output_frames=args.output_frames,
                     include_start=not args.no_start, restore_bonds=args.restore_bonds, seed=args.seed,
                     device=args.device, progress=not args.quiet)
    if not args.quiet:
        _report(result, console())
    return 0


def _report(result, console) -> None:
    from geomol.inference.dynamics.rollout_chemistry import chemistry_line

    frames = result.frames
    console.print(f"{len(frames)} frames ({frames[0]} … {frames[-1]}, {result.windows} window(s)) written to "
                  f"{result.out}" + (f" with topology {result.topology_file}" if result.topology_file else ""))
    if result.summary["diverged"]:
        console.print(f"the rollout diverged (non-finite positions) after {result.windows} window(s)", style="yellow")
    reference = result.summary.get("reference")
    if reference and reference["rmsd_A"]:
        line = (f"RMSD to {reference['file']}: mean {reference['mean_rmsd_A']:.2f} Å, "
                f"final {reference['final_rmsd_A']:.2f} Å")
        if "mean_rmsd_superposed_A" in reference:
            line += (f"; after superposition mean {reference['mean_rmsd_superposed_A']:.2f} Å, "
                     f"final {reference['final_rmsd_superposed_A']:.2f} Å")
        if reference.get("mean_rmsd_no_motion_A") is not None:
            line += f"; no motion (start frame kept): mean {reference['mean_rmsd_no_motion_A']:.2f} Å"
        if reference.get("mean_rmsd_linear_A") is not None:
            line += f"; linear extrapolation: mean {reference['mean_rmsd_linear_A']:.2f} Å"
        console.print(line, markup=False)
        still = reference.get("mean_rmsd_no_motion_A")
        if still is not None and reference["mean_rmsd_A"] >= still:
            console.print(f"warning: the model is no better than no motion here (mean RMSD "
                          f"{reference['mean_rmsd_A']:.2f} Å against {still:.2f} Å for keeping the start frame)",
                          markup=False, style="yellow")
    console.print(chemistry_line(result.chemistry), markup=False)
    if reference and reference.get("chemistry"):
        console.print("reference MD " + chemistry_line(reference["chemistry"]), markup=False)
    if result.summary.get("ensemble"):
        from geomol.inference.dynamics.ensemble_comparison import ensemble_line

        ensemble = result.summary["ensemble"]
        console.print(ensemble_line(ensemble), markup=False,
                      style=None if ensemble["verdict"] == "better than no motion" else "yellow")
    speed = result.summary.get("speed")
    if speed and speed.get("simulated_ps_per_cpu_second"):
        console.print(f"{speed['simulated_ps']:.1f} ps simulated in {speed['cpu_seconds']:.1f} CPU s "
                      f"({speed['simulated_ps_per_cpu_second']:.2f} ps per CPU second)", markup=False)
    for label, path in (("summary", result.summary_file), ("plot", result.plot_file)):
        if path is not None:
            console.print(f"{label}: {path}")
