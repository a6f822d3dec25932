"""``geomol rollout``: roll a trained EGNO out from a frame of an MD trajectory and write the predicted trajectory.

Examples::

    geomol rollout --model egno-adk --topology adk.psf --trajectory adk.dcd --select backbone \\
        --start 0 --frames 200 --out rollout.xtc --compare
    geomol rollout --model runs/egno_md/version_0/checkpoints/last.ckpt --topology start.pdb \\
        --velocity-from next.pdb --frames 150 --out rollout.dcd
    geomol rollout --topology sys.gro --trajectory run1.xtc --reference run2.xtc --superpose --out pred.pdb

Writes the trajectory (any multi-frame format MDAnalysis writes: DCD, XTC, TRR, PDB, NetCDF),
``<out stem>_topology.pdb`` beside coordinate-only formats, and a JSON summary
(``<out stem>.json``: written frames with their frame numbers and times, inputs, model protocol);
with a reference (``--reference`` or ``--compare``) also per-frame RMSD in the summary and a PNG
plot (``<out stem>.png``: RMSD over time, per-atom error).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.inference.rollout import OUTPUT_FRAMES


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
    model.add_argument("--model", default="egno-adk", metavar="NAME|PATH",
                       help="shipped model name, model directory or .ckpt checkpoint (default egno-adk)")
    model.add_argument("--frames", type=int, help="frames past the start to roll out (default: one window)")
    model.add_argument("--windows", type=int, help="number of model calls, instead of --frames")
    model.add_argument("--device", default="cpu", help="torch device (default cpu)")
    model.add_argument("--threads", type=int, help="CPU threads for torch (default: torch's choice)")
    output = parser.add_argument_group("output")
    output.add_argument("--out", required=True, help="predicted trajectory (.dcd, .xtc, .trr, .pdb, .nc, ...)")
    output.add_argument("--output-frames", choices=OUTPUT_FRAMES, default="all",
                        help="all predicted frames in time order, or only window ends (default all)")
    output.add_argument("--no-start", action="store_true", help="do not write the start frame first")
    output.add_argument("--summary", help="JSON summary (default <out stem>.json)")
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
    from rich.console import Console

    from geomol.api import rollout
    from geomol.errors import ConfigError

    if args.reference and args.compare:
        raise ConfigError("give --reference or --compare, not both")
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    out = Path(args.out)
    reference = True if args.compare else args.reference
    plot = args.plot or (out.with_suffix(".png") if reference else None)
    result = rollout(args.model, args.topology, args.trajectory, out=out, selection=args.selection, start=args.start,
                     frames=args.frames, windows=args.windows, velocity_from=_velocity_from(args.velocity_from),
                     reference=reference, reference_topology=args.reference_topology, superpose=args.superpose,
                     plot=plot, summary=args.summary or out.with_suffix(".json"), output_frames=args.output_frames,
                     include_start=not args.no_start, device=args.device, progress=not args.quiet)
    if not args.quiet:
        _report(result, Console())
    return 0


def _report(result, console) -> None:
    frames = result.frames
    console.print(f"{len(frames)} frames ({frames[0]} … {frames[-1]}, {result.windows} window(s)) written to "
                  f"{result.out}" + (f" with topology {result.topology_file}" if result.topology_file else ""))
    if result.summary["diverged"]:
        console.print(f"[yellow]the rollout diverged (non-finite positions) after {result.windows} window(s)[/yellow]")
    reference = result.summary.get("reference")
    if reference and reference["rmsd_A"]:
        line = (f"RMSD to {reference['file']}: mean {reference['mean_rmsd_A']:.2f} Å, "
                f"final {reference['final_rmsd_A']:.2f} Å")
        if "mean_rmsd_superposed_A" in reference:
            line += (f"; after superposition mean {reference['mean_rmsd_superposed_A']:.2f} Å, "
                     f"final {reference['final_rmsd_superposed_A']:.2f} Å")
        console.print(line)
    for label, path in (("summary", result.summary_file), ("plot", result.plot_file)):
        if path is not None:
            console.print(f"{label}: {path}")
