"""``geomol screen``: score a compound library against one pocket, on this machine or a cluster (Dask).

Examples::

    geomol screen --receptor protein.pdb --reference ref.sdf --library library.smi.gz --out screen/
    geomol screen ... --workers 8 --top 500 --dock
    geomol screen ... --scheduler tcp://head-node:8786           # an existing Dask cluster
    geomol screen ... --cluster slurm --jobs 10 --job-cores 32 --job-memory 64GB --walltime 04:00:00

Each ligand (SMILES, or an SD record) is posed on the reference ligand by its common core and scored with
the affinity model, one shard of ligands per Dask task; results go to ``OUT`` as Parquet shards and
compressed SDF poses, then a ranked top-N table and SDF, a failures table, ``summary.json`` and
``screen.png``. Rerunning the same command after an interruption resumes: completed shards are
skipped. Needs the extra ``screen`` (``pip install 'geomol[screen]'``); see docs/screen.md.
"""
from __future__ import annotations

import argparse
import os

from geomol.errors import ConfigError, StructureReadError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    inputs = parser.add_argument_group("inputs")
    inputs.add_argument("--receptor", required=True, help="receptor PDB/mmCIF file (plain, .gz or .bz2)")
    inputs.add_argument("--reference", required=True, metavar="SDF",
                        help="reference ligand posed in the pocket (SDF/MOL2, first molecule)")
    inputs.add_argument("--library", required=True, metavar="FILE",
                        help="the library: .smi/.smiles (SMILES and name per line), .csv (smiles, name columns) or "
                             ".sdf, plain, .gz or .bz2; streamed, never loaded whole")
    inputs.add_argument("--receptor-chains", nargs="+", metavar="CHAIN", help="use only these receptor chains")
    model = parser.add_argument_group("posing and scoring")
    model.add_argument("--model", default=None, metavar="NAME|PATH",
                       help="affinity model: shipped name or model directory (default: the shipped model trained on "
                            "the receptor's kind: contact-corpus for a protein, na-affinity for RNA or DNA)")
    model.add_argument("--conformers", type=int, help="ETKDG conformers per ligand when posing on the reference "
                       "(default: the posing default, see docs/predict.md)")
    model.add_argument("--no-refine", action="store_true", help="keep poses as embedded on the reference core, "
                       "without relaxing them in the pocket")
    model.add_argument("--min-core-fraction", type=float, default=0.0, metavar="F",
                       help="a ligand whose common core with the reference is less than F of the larger molecule's "
                            "heavy atoms fails (or is docked with --dock); default 0: any core of 5 atoms, a core "
                            "under 40%% is scored with a 'small core' warning")
    model.add_argument("--dock", action="store_true", help="dock ligands without a common core with the reference in "
                       "its box with AutoDock Vina (else they are reported as failures)")
    model.add_argument("--exhaustiveness", type=int, default=8, help="Vina exhaustiveness with --dock (default 8)")
    model.add_argument("--batch-size", type=int, default=32, help="complexes per forward pass (default 32)")
    engine = parser.add_argument_group("engine (Dask; one of --workers, --scheduler, --cluster)")
    engine.add_argument("--workers", type=int, help="local worker processes (default: the free physical cores)")
    engine.add_argument("--scheduler", metavar="ADDRESS", help="join an existing Dask cluster (tcp://host:8786)")
    engine.add_argument("--cluster", choices=("slurm", "pbs"), help="start workers as batch jobs (dask-jobqueue)")
    engine.add_argument("--jobs", type=int, default=1, help="with --cluster: batch jobs (default 1)")
    engine.add_argument("--job-cores", type=int, default=8, help="with --cluster: worker processes per job (default 8)")
    engine.add_argument("--job-memory", default="16GB", help="with --cluster: memory per job (default 16GB)")
    engine.add_argument("--walltime", default="02:00:00", help="with --cluster: walltime per job (default 02:00:00)")
    engine.add_argument("--queue", help="with --cluster: partition/queue")
    engine.add_argument("--account", help="with --cluster: account to charge")
    engine.add_argument("--job-directive", action="append", default=[], metavar="TEXT",
                        help="with --cluster: an extra #SBATCH/#PBS directive (repeatable), e.g. --job-directive=--constraint=cpu")
    engine.add_argument("--job-prologue", action="append", default=[], metavar="COMMAND",
                        help="with --cluster: a shell line run before each worker starts (repeatable), "
                             "e.g. 'source ~/envs/geomol/bin/activate'")
    engine.add_argument("--shard-size", type=int, help="ligands per task (default: the library split into about 4 "
                        "shards per worker thread, 25 to 500 ligands each; a resumed screen keeps its own)")
    output = parser.add_argument_group("output")
    output.add_argument("--out", required=True, metavar="DIR", help="output folder (rerun into it to resume)")
    output.add_argument("--top", type=int, default=100, help="rows of the ranked table and poses (default 100)")
    output.add_argument("--no-plot", action="store_true", help="do not write screen.png")
    output.add_argument("--quiet", action="store_true", help="no progress and no tables")


def check_inputs(args: argparse.Namespace) -> None:
    """Option combinations and input files, before anything heavy is imported."""
    if sum(x is not None for x in (args.workers, args.scheduler, args.cluster)) > 1:
        raise ConfigError("give one of --workers, --scheduler and --cluster")
    for option, value in (("--workers", args.workers), ("--shard-size", args.shard_size), ("--top", args.top),
                          ("--batch-size", args.batch_size), ("--conformers", args.conformers)):
        if value is not None and value < 1:
            raise ConfigError(f"{option} must be ≥ 1, got {value}")
    if not 0 <= args.min_core_fraction <= 1:
        raise ConfigError(f"--min-core-fraction must be between 0 and 1, got {args.min_core_fraction}")
    for option, path in (("--receptor", args.receptor), ("--reference", args.reference), ("--library", args.library)):
        if not os.path.isfile(path):
            raise StructureReadError(f"file not found (given as {option})", source=path)


def _model(args: argparse.Namespace, console) -> str:
    """``--model``, else the shipped model trained on the receptor's kind (said on the terminal when it is not the
    default; :func:`~geomol.inference.model_choice.announced_model_for_receptor_file`)."""
    from geomol.inference.model_choice import announced_model_for_receptor_file

    return args.model or announced_model_for_receptor_file(args.receptor, console.print)


def resume_hint(args: argparse.Namespace) -> str:
    """What Ctrl-C leaves behind (the CLI prints it after 'interrupted')."""
    return f"completed shards are recorded in {args.out}: rerun the same command to resume"


def _settings(args: argparse.Namespace, model: str):
    from geomol.data.posing.poses import PoseParameters
    from geomol.screen.settings import DockSettings, ScreenSettings

    pose = PoseParameters(**({"conformers": args.conformers} if args.conformers else {}),
                          **({"refinement": None} if args.no_refine else {}), min_core_fraction=args.min_core_fraction)
    dock = DockSettings(exhaustiveness=args.exhaustiveness) if args.dock else None
    return ScreenSettings(model=model, receptor_chains=tuple(args.receptor_chains or ()) or None, pose=pose,
                          dock=dock, shard_size=args.shard_size, batch_size=args.batch_size, top=args.top)


def _jobqueue(args: argparse.Namespace):
    from geomol.screen.engine import JobQueueSpec

    if args.cluster is None:
        return None
    return JobQueueSpec(args.cluster, jobs=args.jobs, cores=args.job_cores, memory=args.job_memory,
                        walltime=args.walltime, queue=args.queue, account=args.account,
                        directives=tuple(args.job_directive), prologue=tuple(args.job_prologue))


def run(args: argparse.Namespace) -> int:
    from geomol.commands.threads import default_threads
    from geomol.screen.report import summary_table, top_table
    from geomol.screen.run import screen_library

    workers = args.workers
    if workers is None and args.scheduler is None and args.cluster is None:
        workers = default_threads()
    from geomol.terminal import console as plain_console

    console = plain_console(stderr=True)
    settings = _settings(args, _model(args, console))
    summary = screen_library(args.library, args.receptor, args.reference, args.out, settings, workers=workers,
                             scheduler=args.scheduler, jobqueue=_jobqueue(args), quiet=args.quiet, console=console,
                             plot=not args.no_plot)
    if not args.quiet:
        out = plain_console()
        out.print(summary_table(summary))
        if summary["top"]:
            out.print(top_table(summary["top"], summary.get("top_written")))
    counts = summary["counts"]
    console.print(f"{counts['ligands']} ligands: {counts['scored']} scored, {counts['failed']} failed; results in "
                  f"{args.out} (top.csv, top.sdf, failures.csv, summary.json)")
    if summary["failed_shards"]:
        console.print(f"{len(summary['failed_shards'])} shard(s) failed as a whole; rerun the same command to retry "
                      "them", style="yellow")
    return 0 if counts["scored"] else 1
