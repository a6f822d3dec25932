"""Ship EGNO models trained on MD data made with ``geomol simulate``: evaluate, write the card, export.

Two kinds, each from checkpoints trained with the shipped configs:

* ``md17``: a small molecule (``configs/egno_md17.yaml`` + ``configs/md17/<molecule>.yaml``), trained by
  ``benchmarks/egno_accuracy.py --dataset md17`` next to the official script. Test windows: the MD17
  split's test starts (``MD17Dataset``), heavy atoms, bonds from the generator's SMILES.
* ``protein``: FKBP12 backbone (``configs/egno_md.yaml`` + ``configs/md/fkbp12.yaml``), trained with
  ``geomol fit``. Test windows: every start of the independent run (seed 2).

Evaluation (:func:`geomol.evaluate_rollouts`): the model, the EGNN baseline (``--egnn``: the same config with
``--model.init_args.model egnn``: one EGNN step per target frame, rolled out), no motion, linear
extrapolation and the reference MD on the same windows, with bond, angle, broken-bond and clash
figures of every predicted frame. Written to ``benchmarks/results/md_model_<name>.json`` and into
the card (``models/<name>/README.md``) with how the data was made, the splits and, for MD17, the
side-by-side table with the official code (``--side-by-side``: result JSONs of ``egno_accuracy.py``).

    python scripts/ship_md_models.py md17 --molecule aspirin --checkpoint RUN/checkpoints/best-epoch=...ckpt \\
        --egnn EGNN_RUN/checkpoints/best-epoch=...ckpt --side-by-side benchmarks/results/egno_accuracy_md17_aspirin_seed*.json
    python scripts/ship_md_models.py protein --checkpoint ... --egnn ... --train-command "geomol fit ..."
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import geomol
from geomol.evaluation.dynamics_cards import evaluation_lines, protein_aim_line, side_by_side_lines
from geomol.evaluation.md17_windows import md17_test_table
from geomol.provenance import provenance, user_command

REPO = Path(__file__).resolve().parents[1]
MD_DATA = REPO / "md_data"
RESULTS = REPO / "benchmarks" / "results"


def protein_evaluation(models: dict, data: Path, restore_bonds: bool = False):
    """Table on every window of the independent run (seed 2)."""
    table = geomol.evaluate_rollouts(models, data / "seed2" / "topology.pqr", data / "seed2" / "trajectory.dcd",
                                     restore_bonds=restore_bonds, progress=True)
    table.notes.append("every start of the independent run (seed 2); the model never saw a frame of it")
    table.source = _shown(Path(table.source))
    return table


def _shown(path: Path) -> str:
    """``path`` relative to the repository when inside it (result files carry no machine paths)."""
    path = path.resolve()
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _summary(path: Path) -> dict:
    summary = json.loads(path.read_text())
    summary["provenance"]["command"] = user_command(summary["provenance"]["command"])
    return summary


def _data_lines_md17(summary: dict) -> list[str]:
    s = summary["settings"]
    return [f"- `{summary['provenance']['command']}`: {summary['frames']} frames of {summary['atoms']} atoms "
            f"({summary['simulated_ps']:.1f} ps), GFN2-xTB (tblite {summary['engine']['version']}), "
            f"BAOAB Langevin at {s['temperature']:.0f} K, {s['timestep']} fs steps, friction {s['friction']} /fs, "
            f"seed {s['seed']}, from an RDKit conformer of `{summary['smiles']}`",
            f"- made in {summary['wall_seconds'] / 60:.0f} min on one CPU thread of a shared, loaded machine "
            f"({summary['ms_per_step']} ms per step, {summary['frames_per_hour']} frames per hour); mean kinetic "
            f"temperature over the run {summary['mean_kinetic_temperature_K']:.0f} K (the first ps heats up from "
            "the conformer)"]


def _data_lines_protein(runs: dict[str, dict]) -> list[str]:
    lines = []
    for label, summary in runs.items():
        s = summary["settings"]
        lines.append(f"- {label}: `{summary['provenance']['command']}`: {summary['frames']} frames "
                     f"({summary['produced_ns']:.3f} ns after {s['equilibration_ps']} ps of equilibration) of "
                     f"{summary['atoms']} atoms, {s['force_field']}, cutoff {s['cutoff_nm']} nm, {s['constraints']} "
                     f"constraints, hydrogen mass {s['hydrogen_mass']} amu, {s['timestep_fs']} fs steps, "
                     f"{s['temperature']:.0f} K, frames every {s['frame_interval_ps']} ps; "
                     f"{summary['wall_seconds'] / 60:.0f} min of production ({summary['ns_per_day']} ns/day) on "
                     f"{summary['threads']} CPU thread(s) of a shared, loaded machine, OpenMM "
                     f"{summary['engine']['version']}")
    return lines


def card(name: str, description: str, data_lines: list[str], split_lines: list[str], table, horizon_text: str,
         extra: list[str], limitations: list[str], reproduce: list[str]) -> str:
    lines = [f"# {name}", "", description, "", "## Data (made here; not shipped)", "", *data_lines, "",
             "## Splits", "", *split_lines, "", *extra, *evaluation_lines(table, horizon_text),
             "## Limitations", "", *[f"- {line}" for line in limitations], "",
             "## Reproduce", "", "```", *reproduce, "```", "",
             "## Use", "", "```python", "import geomol", f"model = geomol.load_model({name!r})",
             "print(model.protocol)  # target offsets, graph and features, units", "```", ""]
    return "\n".join(lines)


def _checkpoint_models(args) -> dict:
    models = {"EGNO (this model)": geomol.load_model(args.checkpoint)}
    if args.egnn:
        models["EGNN baseline, rolled out"] = geomol.load_model(args.egnn)
    return models


def ship_md17(args) -> None:
    name = f"egno-md17-{args.molecule.replace('_', '-')}"
    models = _checkpoint_models(args)
    table = md17_test_table(models, args.molecule, args.data_dir, restore_bonds=args.restore_bonds)
    records = [json.loads(Path(p).read_text()) for p in args.side_by_side]
    summary = _summary(args.data_dir / f"md17_{args.molecule}.json")
    offsets = models["EGNO (this model)"].protocol.target_offsets
    horizon = f"+{', +'.join(map(str, offsets))} frames (0.5 fs each: up to {offsets[-1] * 0.5e-3:.1f} ps)"
    splits = ["- the official MD17 protocol on the 40,000-frame file: start frames drawn from frames 10,000 to "
              "−10,000 with NumPy's legacy RandomState(100) (10 % train, 5 % validation, 5 % test); 500 training "
              f"starts, {len(table.starts)} test starts; targets every 375 frames up to 3,000 (P = 8); heavy atoms"]
    limitations = ["trained on 500 windows of one 20 ps trajectory of one molecule: it knows this molecule at 500 K "
                   "and nothing else", "GFN2-xTB, not the DFT of the original MD17: the dynamics differ from MD17's",
                   f"trained for {args.budget or 'the epochs of the side-by-side table'}, what one shared CPU core "
                   "afforded, far below the official 5,000-epoch protocol"]
    reproduce = [summary["provenance"]["command"],
                 *[r["provenance"]["command"] for r in records], args.train_command or "",
                 f"python scripts/ship_md_models.py md17 --molecule {args.molecule} ..."]
    text = card(name, f"EGNO for {args.molecule} heavy-atom dynamics at 500 K (GFN2-xTB MD made by `geomol simulate`, "
                f"the MD17 protocol): positions at +{offsets[0]} … +{offsets[-1]} frames (0.5 fs each) from one frame "
                "and its per-frame velocity.", _data_lines_md17(summary), splits, table, horizon,
                side_by_side_lines(records), limitations, [line for line in reproduce if line])
    _export(args, name, text, table, {"data": summary, "side_by_side": [r["table"] for r in records]})


def ship_protein(args) -> None:
    name = "egno-fkbp12"
    models = _checkpoint_models(args)
    table = protein_evaluation(models, args.data_dir, args.restore_bonds)
    runs = {f"run {seed} (seed {seed})": _summary(args.data_dir / f"seed{seed}" / "trajectory.json")
            for seed in (1, 2)}
    protocol = models["EGNO (this model)"].protocol
    offsets = protocol.target_offsets
    interval = runs["run 1 (seed 1)"]["settings"]["frame_interval_ps"]
    horizon = f"+{', +'.join(map(str, offsets))} frames ({interval} ps each: up to {_duration(offsets[-1] * interval)})"
    splits = ["- train: the first 80 % of run 1's start frames, validation: the last 20 % (leak-free: no target "
              "frame crosses into the next part); test: every start of run 2, an independent run with another seed",
              f"- {protocol.selection} atoms, {protocol.cutoff:g} Å radius graph, partial charges from the force field "
              "(topology.pqr)"]
    limitations = ["two short runs of one protein at 300 K in implicit solvent: picoseconds, not the "
                   "nanoseconds-to-microseconds of the EGNO paper's AdK data (240 ps per frame)",
                   f"the horizon is {_duration(offsets[-1] * interval)}: a learned integrator of the backbone's fastest "
                   "motions (bond and angle vibrations, librations), not of conformational change; frames further apart "
                   "need nanosecond runs (a GPU's work)",
                   f"trained with the budget one shared CPU core affords: {args.budget}" if args.budget else "",
                   protein_aim_line(table)]
    reproduce = [runs[k]["provenance"]["command"] for k in runs] + [args.train_command or "",
                                                                    "python scripts/ship_md_models.py protein ..."]
    limitations = [line for line in limitations if line]
    text = card(name, "EGNO for FKBP12 backbone dynamics (implicit-solvent MD made by `geomol simulate`): backbone "
                f"positions at +{', +'.join(map(str, offsets))} frames ({interval} ps each) from one frame and its "
                "per-frame velocity.", _data_lines_protein(runs), splits, table, horizon, [], limitations,
                [line for line in reproduce if line])
    _export(args, name, text, table, {"data": runs})


def _duration(ps: float) -> str:
    """A time span in fs below 1 ps, else in ps."""
    return f"{ps * 1000:.0f} fs" if ps < 1 else f"{ps:.1f} ps"


def _export(args, name: str, text: str, table, facts: dict) -> None:
    row = table.rows[0]
    record = {"benchmark": "md_model", "model": name, "provenance": provenance(), "evaluation": table.to_dict(),
              **facts}
    out = RESULTS / f"md_model_{name}.json"
    out.write_text(json.dumps(record, indent=1) + "\n")
    target = geomol.export_model(args.checkpoint, Path(args.out_dir) / name, card=text, overwrite=args.overwrite,
                                 description=text.splitlines()[2],
                                 metrics={"test_s2s_mse": row.s2s_mse, "test_s2t_mse": row.s2t_mse,
                                          "evaluation": str(out.relative_to(REPO))})
    print(table.to_markdown())
    print(f"{name}: exported to {target}; evaluation in {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.strip().splitlines()[0])
    parser.add_argument("kind", choices=["md17", "protein"])
    parser.add_argument("--molecule", default="aspirin", help="md17: the molecule")
    parser.add_argument("--data-dir", type=Path, help="md_data/md17 or md_data/fkbp12_4fs (default by kind)")
    parser.add_argument("--checkpoint", required=True, help="the EGNO checkpoint to ship")
    parser.add_argument("--egnn", help="checkpoint of the EGNN baseline trained on the same data")
    parser.add_argument("--side-by-side", nargs="*", default=[], help="md17: egno_accuracy result JSONs (seeds)")
    parser.add_argument("--restore-bonds", action="store_true",
                        help="also evaluate each model with the bond-restoring projection (rows of their own)")
    parser.add_argument("--train-command", help="the command that trained the checkpoint (for the card)")
    parser.add_argument("--budget", help="the training budget in words (for the card), e.g. '25 min: 9 epochs'")
    parser.add_argument("--out-dir", default=str(REPO / "models"))
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    args.data_dir = args.data_dir or MD_DATA / ("md17" if args.kind == "md17" else "fkbp12_4fs")
    import torch

    torch.set_num_threads(1)
    (ship_md17 if args.kind == "md17" else ship_protein)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
