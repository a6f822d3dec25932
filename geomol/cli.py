"""The ``geomol`` command.

* ``geomol fit|validate|test|predict --config configs/<name>.yaml [--key value ...]`` trains and
  evaluates models through Lightning's ``LightningCLI`` (see :mod:`geomol.tasks.cli`);
* the other subcommands (``inspect``, ``preprocess``, ``predict-affinity``, ``rollout``) are plain
  argparse commands in :mod:`geomol.commands`, loaded only when used so that ``geomol --help``
  stays fast.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from geomol.errors import GeomolError

LIGHTNING_SUBCOMMANDS = {
    "fit": "train a model from a YAML config",
    "validate": "evaluate a checkpoint on the validation set",
    "test": "evaluate a checkpoint on the test set",
    "predict": "run a model over a data module's predict set",
}
# name -> (module under geomol.commands, one-line help)
COMMANDS = {
    "inspect": ("inspect", "read a complex and summarise its graph of sets (blocks, atoms, edges)"),
    "predict-affinity": ("predict_affinity", "predict binding affinities (pK, ΔG, Kd) of ligands with a GET model"),
    "fragments": ("fragments", "learn (or list) a principal-subgraph fragment vocabulary for ligand blocks"),
    "preprocess": ("preprocess", "build a config's processed-data store ahead of training (parallel, resumable)"),
    "rollout": ("rollout", "roll a trained EGNO out from an MD trajectory frame and write the predicted trajectory"),
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="geomol", description="Geometric deep learning on 3D molecular systems: "
                                     "GET (binding affinity) and EGNO (trajectories) on a graph of sets.")
    sub = parser.add_subparsers(dest="command", metavar="command")
    for name, text in LIGHTNING_SUBCOMMANDS.items():
        sub.add_parser(name, help=f"{text} (see 'geomol {name} --help')", add_help=False)
    for name, (_, text) in COMMANDS.items():
        sub.add_parser(name, help=text)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in LIGHTNING_SUBCOMMANDS:
        from geomol.tasks.cli import run_lightning

        return run_lightning(argv)
    if not argv or argv[0] not in COMMANDS:
        _parser().parse_args(argv or ["--help"])
        return 2
    name = argv[0]
    module = importlib.import_module(f"geomol.commands.{COMMANDS[name][0]}")
    parser = argparse.ArgumentParser(prog=f"geomol {name}", description=module.__doc__.strip().splitlines()[0])
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except GeomolError as err:
        print(f"geomol {name}: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
