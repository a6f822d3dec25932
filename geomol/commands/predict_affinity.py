"""``geomol predict-affinity``: predict binding affinities (pK, ΔG, Kd) of ligands to a receptor.

Examples::

    geomol predict-affinity --receptor protein.pdb --ligands ligands.sdf --out results.csv
    geomol predict-affinity --receptor dna_complex.pdb --ligands UNK --model runs/.../last.ckpt
    geomol predict-affinity --receptor complex.pdb --receptor-chains A --ligands chain:B
    geomol predict-affinity --pairs screen.csv --out screen.json
    geomol predict-affinity --receptor protein.pdb --ligands ligands.sdf --measured measured.csv --plot fit.png
    geomol predict-affinity --receptor protein.pdb --ligands series.sdf --anchors measured.csv --next 5
    geomol predict-affinity --receptor protein.pdb --reference ref.sdf --ligands series.smi --write-poses poses.sdf
    geomol predict-affinity --receptor protein.pdb --ligands vina_out.pdbqt --smiles "CCOc1ccccc1"
    geomol predict-affinity --complex complex.pdb --partners A,B:C
    geomol predict-affinity --complexes complexes.csv --out complexes.csv

One row per ligand (columns name, pK, dG_kcal_mol, Kd_M, pK_std, n_pocket_blocks, error, warnings); a
ligand that cannot be predicted (unreadable, or failing an input check: 2D, collapsed, not in a pocket,
a protein, ...) is reported with its error and the others are still predicted; ``warnings`` flags a
number from an input outside the model's applicability domain (docs/predict.md). The exit status is
non-zero only when nothing could be predicted. The terminal shows name, pK, ± and the problems in words
(:mod:`geomol.commands.affinity_output`); every column is in ``--out``.
With ``--reference`` the ligands are SMILES (``.smi`` or CSV files, their columns found by common names
such as ``smiles``/``ligand_smiles`` and ``name``/``ligand_name`` or given with ``--smiles-column``, or SMILES
strings), posed on the reference ligand first and relaxed in the pocket (``--no-refine``: as embedded); a
ligand whose pose still clashes with the receptor is reported as an error, not scored; the pose report (core_atoms, core_rmsd,
min_receptor_distance, clashes) is added to the rows. PDBQT docking poses take their bond orders from the
file's REMARK SMILES (meeko) or from ``--smiles``.
Protein–protein complexes (``--complex`` with ``--partners``, or a ``--complexes`` CSV with columns complex,
partners and optional name) are scored by the protein–protein model ``ppa-affinity`` unless ``--model`` says
otherwise; the table shows ΔG ± the ensemble spread (kcal/mol) and Kd with its range
(:mod:`geomol.inference.complex_inputs`: missing chains, a ligand-sized partner and no interface are reported as
errors of that complex).
"""
from __future__ import annotations

import argparse
import os
import sys
from itertools import groupby
from pathlib import Path
from typing import TYPE_CHECKING, Iterator, Sequence

from geomol.errors import ConfigError, DatasetError, GeomolError, StructureReadError

if TYPE_CHECKING:  # the heavy modules (torch, RDKit) load after the input files are checked
    from geomol.api import AffinityPrediction, LigandInput
    from geomol.inference.tables import PairRow



def add_arguments(parser: argparse.ArgumentParser) -> None:
    inputs = parser.add_argument_group("inputs (either --receptor with --ligands, or --pairs)")
    inputs.add_argument("--receptor", help="receptor PDB, mmCIF or MOL2 file (protein, DNA or RNA; plain, .gz or .bz2)")
    inputs.add_argument("--ligands", nargs="+", metavar="LIGANDS",
                        help="posed ligands: SDF/MOL2 file(s) (every molecule), PDBQT docking output (every pose), "
                             "ligand PDB file(s), a residue name inside the receptor file (e.g. UNK) or a chain group "
                             "of it (chain:B) for protein–protein; with --reference: SMILES")
    inputs.add_argument("--reference", metavar="SDF", help="reference ligand pose (SDF/MOL2, first molecule): "
                        "--ligands are then SMILES (.smi or .csv files, or SMILES strings), each posed on the "
                        "reference by its common core")
    inputs.add_argument("--smiles-column", metavar="COLUMN", help="with --reference: the CSV column of the SMILES "
                        "(default: found by name: smiles, ligand_smiles, canonical_smiles, ...)")
    inputs.add_argument("--smiles", metavar="SMILES|FILE", help="bond orders of PDBQT poses that carry no REMARK "
                        "SMILES: the ligand's SMILES, or a .smi/.csv file matched by name (PDBQT file name)")
    inputs.add_argument("--receptor-chains", nargs="+", metavar="CHAIN", help="use only these receptor chains")
    inputs.add_argument("--no-refine", action="store_true", help="with --reference: keep each pose as embedded on the "
                        "reference core, without relaxing it in the pocket (docs/predict.md)")
    inputs.add_argument("--min-core-fraction", type=float, default=0.0, metavar="F",
                        help="with --reference: refuse a ligand whose common core with the reference is less than F "
                             "of the larger molecule's heavy atoms (default 0: any core of 5 atoms; a core under "
                             "40 %% is posed with a 'small core' warning)")
    inputs.add_argument("--pairs", metavar="CSV", help="many receptor–ligand pairs: CSV with columns receptor, "
                        "ligands and optional ligand (index or title) and name; paths relative to the CSV")
    complexes = parser.add_argument_group("protein–protein complexes (instead of --receptor or --pairs)")
    complexes.add_argument("--complex", nargs="+", metavar="FILE", help="structure file(s) holding both partners "
                           "(PDB/mmCIF, plain, .gz or .bz2), with --partners")
    complexes.add_argument("--partners", metavar="A,B:C", help="the two partners' chains: A,B:C is chains A and B "
                           "against chain C (AB:C reads one chain per character)")
    complexes.add_argument("--complexes", metavar="CSV", help="many complexes: CSV with columns complex, partners and "
                           "optional name; paths relative to the CSV")
    model = parser.add_argument_group("model")
    model.add_argument("--model", nargs="+", default=None, metavar="NAME|PATH",
                       help="shipped model name, model directory, or one or more .ckpt files (an ensemble); "
                            "default: the shipped default model, contact-corpus, and ppa-affinity for complexes")
    model.add_argument("--pocket-cutoff", type=float, metavar="Å",
                       help="pocket cutoff in Å (default: the value the model was trained with)")
    model.add_argument("--device", default="cpu", help="torch device (default cpu)")
    model.add_argument("--batch-size", type=int, default=32, help="complexes per forward pass (default 32)")
    model.add_argument("--threads", type=int, help="CPU threads (default: OMP_NUM_THREADS, else the free physical cores)")
    series = parser.add_argument_group("measured ligands of the series (lead optimisation, docs/predict.md)")
    series.add_argument("--anchors", metavar="CSV", help="measured values of ligands of this series (columns name and "
                        "pK or dG_kcal_mol): every prediction is made relative to them by the method the model's "
                        "k-shot evaluation chose, with a calibrated ±; a measured ligand is predicted without itself")
    series.add_argument("--anchor-ligands", nargs="+", metavar="LIGANDS", help="poses of the measured ligands when "
                        "they are not among --ligands (files as for --ligands; SMILES with --reference)")
    series.add_argument("--next", type=int, metavar="N", help="list the N ligands to make or test next among those "
                        "not measured (see --select-by)")
    series.add_argument("--select-by", choices=("ucb", "mean"), default="ucb", help="rank candidates for --next by "
                        "the upper confidence bound pK + 1 sd (ucb, default: good or uncertain) or by the expected "
                        "pK (mean)")
    output = parser.add_argument_group("output")
    output.add_argument("--out", metavar="FILE", help="write the results to a .csv or .json file")
    output.add_argument("--write-poses", metavar="SDF", help="with --reference: write the generated poses here")
    output.add_argument("--measured", metavar="CSV", help="measured values (columns name and pK or dG_kcal_mol) "
                        "to compare with, matched by name")
    output.add_argument("--plot", metavar="PNG", help="plot predicted vs measured pK, titled by target and model, "
                        "points named (needs --measured)")
    output.add_argument("--target", metavar="NAME", help="the target's name in titles (default: from the receptor "
                        "file name, e.g. tnks2 from tnks2_protein.pdb)")
    output.add_argument("--max-rows", type=int, default=40, help="rows shown in the terminal table (default 40)")
    output.add_argument("--quiet", action="store_true", help="no progress bar and no table (the summary line stays)")


# A ligand argument naming a file by its suffix (else it may be a residue name, a chain group or a SMILES).
_FILE_SUFFIXES = {".sdf", ".mol2", ".mol", ".pdb", ".pdbqt", ".cif", ".mmcif", ".ent", ".smi", ".csv", ".txt", ".gz",
                  ".bz2"}


def _readable_file_problem(path: str) -> str | None:
    """Why ``path`` cannot be read as an input file, or ``None`` when it can (no parsing, no heavy import)."""
    if not os.path.exists(path):
        return "file not found"
    if os.path.isdir(path):
        return "is a folder, not a file"
    if not os.access(path, os.R_OK):
        return "not readable (permission denied)"
    if os.path.getsize(path) == 0:
        return "file is empty"
    return None


def _looks_like_file(text: str) -> bool:
    return os.sep in text or "/" in text or Path(text).suffix.lower() in _FILE_SUFFIXES


def _check_input_files(args: argparse.Namespace) -> None:
    """Raise at once (before torch, RDKit and the model load) for a missing, empty or unreadable input file.

    The receptor, reference, pairs and measured-values files must be readable. A ligand file that cannot be
    read is reported per ligand while the others are predicted, so the ligands fail here only when every
    ligand argument is such a file (nothing could be predicted).
    """
    for option, path, error in (*(("--complex", p, StructureReadError) for p in args.complex or ()),
                                ("--complexes", args.complexes, DatasetError),
                                ("--receptor", args.receptor, StructureReadError),
                                ("--reference", args.reference, StructureReadError),
                                ("--pairs", args.pairs, DatasetError), ("--measured", args.measured, DatasetError),
                                ("--anchors", args.anchors, DatasetError)):
        problem = path and _readable_file_problem(path)
        if problem:
            raise error(f"{problem} (given as {option})", source=path)
    problems = [(text, _readable_file_problem(text)) for text in args.ligands or ()]
    if problems and all(problem and _looks_like_file(text) for text, problem in problems):
        text, problem = problems[0]
        raise StructureReadError(f"{problem} (given as --ligands"
                                 + (f"; none of the {len(problems)} ligand files can be read)" if len(problems) > 1
                                    else ")"), source=text)


def check_inputs(args: argparse.Namespace) -> None:
    """Argument combinations and input files, checked in milliseconds; the CLI calls this before importing torch
    and before :func:`run`."""
    if sum(bool(v) for v in (args.receptor, args.pairs, args.complex, args.complexes)) != 1:
        raise ConfigError("give --receptor with --ligands, --pairs, --complex with --partners, or --complexes "
                          "(one of them, not both)")
    if bool(args.complex) != bool(args.partners):
        raise ConfigError("--complex and --partners go together (e.g. --complex c.pdb --partners A,B:C)")
    if (args.complex or args.complexes) and (args.pocket_cutoff or args.receptor_chains):
        raise ConfigError("a complex's interface follows the model and its --partners: no --pocket-cutoff or "
                          "--receptor-chains")
    if args.receptor and not args.ligands:
        raise ConfigError("--receptor needs --ligands")
    if args.reference and not args.receptor:
        raise ConfigError("--reference needs --receptor and --ligands (not --pairs)")
    if args.write_poses and not args.reference:
        raise ConfigError("--write-poses needs --reference")
    if args.plot and not args.measured:
        raise ConfigError("--plot needs --measured")
    if (args.anchors or args.next is not None) and not args.receptor:
        raise ConfigError("--anchors and --next concern one series: give --receptor with --ligands")
    if args.anchor_ligands and not args.anchors:
        raise ConfigError("--anchor-ligands needs --anchors (the measured values of those ligands)")
    if args.next is not None and args.next < 1:
        raise ConfigError(f"--next must be at least 1, got {args.next}")
    if args.no_refine and not args.reference:
        raise ConfigError("--no-refine needs --reference (it concerns poses made from SMILES)")
    if args.min_core_fraction and not args.reference:
        raise ConfigError("--min-core-fraction needs --reference (it concerns poses made from SMILES)")
    if not 0 <= args.min_core_fraction <= 1:
        raise ConfigError(f"--min-core-fraction must be between 0 and 1, got {args.min_core_fraction}")
    if args.smiles_column and not args.reference:
        raise ConfigError("--smiles-column needs --reference (SMILES lists are posed on a reference ligand)")
    if args.smiles and args.reference:
        raise ConfigError("--smiles gives the bond orders of PDBQT poses; with --reference the ligands are SMILES "
                          "already")
    _check_input_files(args)


# ---------------------------------------------------------------------- what to predict
def _pair_inputs(row: "PairRow") -> list["LigandInput"]:  # noqa: F821 (names from TYPE_CHECKING)
    from geomol.api import ligand_inputs, select_ligand

    if row.ligand is not None:
        return [select_ligand(row.ligands, row.ligand, row.name)]
    items = ligand_inputs(row.ligands)
    for item in items:
        if row.name:
            item.name = row.name if len(items) == 1 else f"{row.name}:{item.name}"
    return items


def _complex_records(args: argparse.Namespace, model, console) -> list["AffinityPrediction"]:
    from geomol.inference.complex_inputs import complex_entries, predict_complexes

    entries = complex_entries(args.complexes or args.complex, args.partners)
    return list(predict_complexes(entries, model, batch_size=args.batch_size))


def _plan(args: argparse.Namespace, model) -> list[tuple[str, list["LigandInput"]]]:
    """(receptor, ligand inputs) groups; pairs sharing a receptor in consecutive rows share one parse (with a
    reference ligand, the receptor is read once, for posing and prediction alike: the group holds the structure)."""
    from geomol.api import ligand_inputs, posed_inputs
    from geomol.data.posing.poses import PoseParameters, write_poses
    from geomol.inference.affinity import read_receptor
    from geomol.inference.ligand_inputs import with_unique_names
    from geomol.inference.tables import read_pairs

    if args.reference:
        receptor = read_receptor(args.receptor, model)
        inputs, posed = posed_inputs(receptor, args.ligands, args.reference, receptor_chains=args.receptor_chains,
                                     smiles_column=args.smiles_column,
                                     parameters=PoseParameters(min_core_fraction=args.min_core_fraction,
                                                               **({"refinement": None} if args.no_refine else {})))
        if args.write_poses:
            write_poses(args.write_poses, posed)
        return [(receptor, inputs)]
    if args.receptor:
        return [(args.receptor, ligand_inputs(args.ligands, smiles=args.smiles))]
    rows = read_pairs(args.pairs)
    return [(str(receptor), with_unique_names([item for row in group for item in _pair_inputs(row)]))
            for receptor, group in groupby(rows, key=lambda r: r.receptor)]


def _predict_group(receptor, items: Sequence["LigandInput"], model, args) -> Iterator["AffinityPrediction"]:
    from geomol.api import AffinityPrediction, iter_affinity

    done = 0
    try:
        for record in iter_affinity(receptor, list(items), model, pocket_cutoff=args.pocket_cutoff, device=args.device,
                                    batch_size=args.batch_size, receptor_chains=args.receptor_chains):
            done += 1
            yield record
    except GeomolError as exc:
        if not args.pairs:
            raise
        for item in items[done:]:  # an unreadable receptor fails its own pairs, not the screen
            yield AffinityPrediction(item.name, receptor=receptor, source=item.source, error=str(exc))


def _predict_all(plan, model, args, console) -> list["AffinityPrediction"]:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    total = sum(len(items) for _, items in plan)
    columns = (TextColumn("predicting"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    records = []
    with Progress(*columns, console=console, disable=args.quiet, transient=True) as progress:
        task = progress.add_task("ligands", total=total)
        for receptor, items in plan:
            for record in _predict_group(receptor, items, model, args):
                records.append(record)
                progress.advance(task)
    return records


# ---------------------------------------------------------------------- showing results
def _target(args) -> str:
    from geomol.commands.affinity_output import target_label

    return args.target or (target_label(args.receptor) if args.receptor else "")


def _compare(records, args, console, model_name: str) -> None:
    from geomol.inference.tables import plot_predicted_vs_measured, read_measured
    from geomol.metrics.scores import regression_report

    measured = read_measured(args.measured)
    pairs = [(r.pK, measured[r.name]) for r in records if r.ok and r.name in measured]
    if len(pairs) < 2:
        console.print(f"only {len(pairs)} predicted ligand(s) match a name in {args.measured}: no comparison",
                      style="yellow", markup=False)
        return
    pred, true = zip(*pairs)
    report = regression_report(pred, true)
    console.print(f"vs measured ({len(pairs)} ligands): Pearson {report['pearson']:.3f}, Spearman "
                  f"{report['spearman']:.3f}, RMSE {report['rmse']:.2f} pK")
    if args.plot:
        plot_predicted_vs_measured(records, measured, args.plot, title=" · ".join(filter(None, (_target(args), model_name))))
        console.print(f"plot written to {args.plot}", markup=False)


def _typical_error(model) -> str:
    """What ± means, and the model's held-out error where its manifest records one."""
    held_out = model.metrics.get("cross_validation", {}).get("rmse_kcal_mol")
    text = "± is the spread of the ensemble members (one standard deviation), not the error"
    if held_out:
        text += f"; on held-out sequence clusters the RMSE was {held_out:.1f} kcal/mol (model card)"
    return text


def _default_model(args: argparse.Namespace, complexes: bool, console) -> str:
    """The shipped model used without ``--model``: ppa-affinity for complexes; for one receptor file, the model
    trained on pockets of its kind (:func:`~geomol.inference.model_choice.announced_model_for_receptor_file`:
    protein, the default; RNA or DNA, the model that saw them, said on the terminal); else the default."""
    from geomol.inference.model_choice import announced_model_for_receptor_file

    if complexes:
        return "ppa-affinity"
    return announced_model_for_receptor_file(args.receptor, console.print) if args.receptor else "default"


def run(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    from geomol.api import load_model
    from geomol.commands.series_anchors import anchored_for_args, print_next_best
    from geomol.commands.affinity_output import complex_table, problem_lines, results_table, summary_line
    from geomol.inference.tables import output_format, read_measured, write_predictions

    if args.out:
        output_format(args.out)  # a bad extension fails now, not after the predictions
    if args.measured:
        read_measured(args.measured)  # unreadable measured values fail before the predictions
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    console = Console(stderr=True)
    complexes = bool(args.complex or args.complexes)
    names = args.model or [_default_model(args, complexes, console)]
    model = load_model(names[0] if len(names) == 1 else names, device=args.device)
    if complexes:
        records = _complex_records(args, model, console)
    else:
        plan = _plan(args, model)
        if args.anchors:
            model = anchored_for_args(args, model, plan, console)
        records = _predict_all(plan, model, args, console)
    if args.out:
        write_predictions(records, args.out, with_receptor=bool(args.pairs) or complexes)
    model_name = model.name or Path(names[0]).name
    if not args.quiet:
        out = Console()
        out.print(escape("binding affinity · " + " · ".join(filter(None, (_target(args), model_name)))), style="bold")
        out.print(complex_table(records, max_rows=args.max_rows, out=args.out) if complexes else
                  results_table(records, with_receptor=bool(args.pairs), max_rows=args.max_rows, out=args.out))
        if complexes:
            console.print(_typical_error(model))
        for line in problem_lines(records):
            console.print(line)
    console.print(escape(summary_line(records, args.out, "complex(es)" if complexes else "ligand(s)")))
    failed = [r for r in records if not r.ok]
    if len(failed) == len(records):
        detail = "see the errors above" if not args.quiet else f"first error: {failed[0].error}"
        print(f"geomol predict-affinity: error: nothing could be predicted ({detail})", file=sys.stderr)
        return 1
    if args.measured:
        _compare(records, args, console, model_name)
    if args.next is not None:
        print_next_best(records, args.next, args.select_by, console)
    return 0
