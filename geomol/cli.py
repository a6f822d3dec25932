"""The ``geomol`` command.

* ``geomol fit|validate|test|predict --config NAME|configs/<name>.yaml [--key value ...]`` trains and
  evaluates models through Lightning's ``LightningCLI`` (see :mod:`geomol.tasks.cli`); without arguments (or
  with ``--help`` and no config) it lists the shipped configs (:mod:`geomol.shipped_configs`), and
  ``--shared-data DIR`` sets where their data are;
* the other subcommands (``inspect``, ``preprocess``, ``predict-affinity``, ``finetune``, ``rollout``,
  ``simulate``, ``serve``, ``screen``) are plain
  argparse commands in :mod:`geomol.commands`, loaded only when used so that ``geomol --help``
  stays fast.

Every subcommand takes ``--threads N`` (default: :mod:`geomol.commands.threads`), applied before any
heavy work. A :class:`~geomol.errors.GeomolError` ends the command with one line on stderr (what is
wrong and, where known, which option to pass) and exit status 1, never a traceback; warnings that
geomol itself emits (e.g. skipped records) are one ``geomol <command>: warning: ...`` line each.
Ctrl-C ends a command with one line too (exit status 130): ``geomol <command>: interrupted``, and how to
resume where the command can (its module's ``resume_hint(args)``).
"""
from __future__ import annotations

import argparse
import importlib
import os
import shutil
import sys
import warnings
from contextlib import contextmanager

from geomol.errors import GeomolError

LIGHTNING_SUBCOMMANDS = {
    "fit": "train a model from a shipped config (plain 'geomol fit' lists them) or a YAML file",
    "validate": "evaluate a checkpoint on the validation set",
    "test": "evaluate a checkpoint on the test set",
    "predict": "predict the data module's test split; writes predictions.csv and .json in the run",
}
# name -> (module under geomol.commands, one-line help)
COMMANDS = {
    "inspect": ("inspect", "read a complex and summarise its graph of sets (blocks, atoms, edges)"),
    "predict-affinity": ("predict_affinity", "predict binding affinities (pK, ΔG, Kd) of posed ligands (SDF, MOL2, "
                         "PDBQT; SMILES on a reference) with the default model, contact-corpus, or another"),
    "finetune": ("finetune", "adapt an affinity model to your target from a handful of measured ligands"),
    "train-affinity": ("train_affinity", "build an affinity ensemble from a config (as every shipped affinity model)"),
    "fragments": ("fragments", "learn (or list) a principal-subgraph fragment vocabulary for ligand blocks"),
    "preprocess": ("preprocess", "build a config's processed-data store ahead of training (parallel, resumable)"),
    "rollout": ("rollout", "roll a trained EGNO out from an MD trajectory frame and write the predicted trajectory"),
    "simulate": ("simulate", "generate MD data: small molecules with GFN2-xTB, proteins with OpenMM (extra 'md')"),
    "serve": ("serve", "the affinity predictor as a web service and a page (extra 'serve')"),
    "screen": ("screen", "score a compound library against one pocket, locally or on a cluster (Dask; extra 'screen')"),
}


THREADS_HELP = ("every command takes --threads N: CPU threads for torch (default: OMP_NUM_THREADS if set, else the "
                "physical cores this process may use, never more than the load average leaves free). "
                "'geomol fit' alone lists the shipped training configs.")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False,
                                     prog="geomol", description="Geometric deep learning on 3D molecular systems: "
                                     "GET (binding affinity) and EGNO (trajectories) on a graph of sets.",
                                     epilog=THREADS_HELP)
    sub = parser.add_subparsers(dest="command", metavar="command")
    for name, text in LIGHTNING_SUBCOMMANDS.items():
        sub.add_parser(name, allow_abbrev=False, help=f"{text} (see 'geomol {name} --help')", add_help=False)
    for name, (_, text) in COMMANDS.items():
        sub.add_parser(name, allow_abbrev=False, help=text)
    return parser


def _error_line(command: str, err: GeomolError) -> str:
    hint = getattr(err, "hint", None)
    return f"geomol {command}: error: {err}" + (f"; {hint}" if hint else "")


_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep


@contextmanager
def _plain_warnings(command: str):
    """Print geomol's own warnings as one line, without the Python source location and code line.

    Only the printed form changes (``warnings.formatwarning``): code that records warnings (tests,
    callers of :func:`main`) still gets the warning objects.
    """
    default = warnings.formatwarning

    def format_warning(message, category, filename, lineno, line=None):
        if os.path.abspath(str(filename)).startswith(_PACKAGE_DIR):
            return f"geomol {command}: warning: {message}\n"
        return default(message, category, filename, lineno, line)

    warnings.formatwarning = format_warning
    try:
        yield
    finally:
        warnings.formatwarning = default


def _threads(argv: list[str], lightning: bool) -> list[str]:
    """Apply ``--threads`` (or its default) and return argv without it for Lightning subcommands."""
    from geomol.commands.threads import apply_threads, resolve_threads, take_threads_option

    try:
        option, rest = take_threads_option(argv, remove=lightning)
    except ValueError as err:
        raise SystemExit(f"geomol {argv[0]}: error: {err}") from None
    if not any(arg in ("-h", "--help") for arg in rest):
        apply_threads(resolve_threads(option))
    return rest


def _lightning_arguments(argv: list[str]) -> list[str] | None:
    """argv for Lightning (``--shared-data`` applied, ``--config`` names resolved, ``--threads`` applied), or None
    after printing the overview of shipped configs (no arguments, or ``--help`` without a config)."""
    from geomol.shipped_configs import overview, resolve_config_arguments, take_shared_data_option

    has_config = any(arg == "--config" or arg.startswith("--config=") for arg in argv)
    if len(argv) == 1 or (not has_config and any(arg in ("-h", "--help") for arg in argv)):
        print(overview(argv[0], shutil.get_terminal_size().columns))
        return None
    try:
        shared, argv = take_shared_data_option(argv)
    except ValueError as err:
        raise SystemExit(f"geomol {argv[0]}: error: {err}") from None
    if shared:  # read where the configs say ${GEOMOL_SHARED_DATA}; DDP ranks inherit it
        os.environ["GEOMOL_SHARED_DATA"] = os.path.abspath(os.path.expanduser(shared))
    return resolve_config_arguments(_threads(argv, lightning=True))


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in LIGHTNING_SUBCOMMANDS:
        argv = _lightning_arguments(argv)
        if argv is None:
            return 0
        from geomol.tasks.cli import run_lightning

        try:
            with _plain_warnings(argv[0]):
                return run_lightning(argv)
        except GeomolError as err:
            print(_error_line(argv[0], err), file=sys.stderr)
            return 1
    if not argv or argv[0] not in COMMANDS:
        _parser().parse_args(argv or ["--help"])
        return 2
    name = argv[0]
    module = importlib.import_module(f"geomol.commands.{COMMANDS[name][0]}")
    # a command may define --threads itself (with its own help); "resolve" lets it replace this one
    description = module.__doc__.strip().splitlines()[0].replace("``", "")  # reST quotes read as noise in a terminal
    parser = argparse.ArgumentParser(allow_abbrev=False,
                                     prog=f"geomol {name}", description=description, conflict_handler="resolve")
    parser.add_argument("--threads", type=int, help="CPU threads for torch (default: see 'geomol --help')")
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        with _plain_warnings(name):
            if hasattr(module, "check_inputs"):  # missing files are reported before torch is imported
                module.check_inputs(args)
            if not getattr(module, "THREADS_IN_WORKERS", False):  # serve: applied in its worker processes only
                _threads(argv, lightning=False)
            return int(module.run(args) or 0)
    except GeomolError as err:
        print(_error_line(name, err), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        hint = getattr(module, "resume_hint", None)
        print(f"geomol {name}: interrupted" + (f"; {hint(args)}" if hint else ""), file=sys.stderr, flush=True)
        return 130


if __name__ == "__main__":
    sys.exit(main())
