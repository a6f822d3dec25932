"""Few-shot settings of the contact scorer, compared on validation targets only (never on test folds).

For every fold of the corpus protocol (``docs/evaluation.md``) the shipped recipe's seed-0 scorer is trained on
the fold's training clusters and calibrated (as ``scripts/ship_contact_affinity.py`` does), then fine-tuned as
``geomol finetune`` does on k measured ligands of targets of the fold's *validation* slice (series with at least
``--min-ligands`` ligands, up to ``--max-targets`` per fold), for every ``anchor × lr`` of the grid. Prints and
writes the mean gain in Spearman on each target's other ligands over the model as it is, per setting and k::

    OMP_NUM_THREADS=1 python benchmarks/affinity_fewshot_settings.py --chemistry --hidden 64 \\
        --output benchmarks/results/affinity_fewshot_settings.json
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.evaluation.contact_cv import compare_fewshot_settings, corpus_contacts
from geomol.evaluation.fewshot import write_result
from geomol.provenance import provenance
from geomol.training.finetune import FinetuneSettings


def run(args) -> dict:
    torch.set_num_threads(1)
    contacts = corpus_contacts(ContactRecipe(roles=args.chemistry), sources=args.sources, series=args.series,
                               cache_dir=args.cache_dir, n_folds=args.folds, valid_fraction=args.valid_fraction)
    grid = [FinetuneSettings(anchor=a, lr=lr) for a in args.anchors for lr in args.lrs]
    clock = time.process_time()
    rows = compare_fewshot_settings(contacts, grid, args.k, hidden=args.hidden, draws=args.draws,
                                    min_ligands=args.min_ligands, max_targets=args.max_targets)
    print(f"{'anchor':>8}{'lr':>8}" + "".join(f"{'k=' + str(k):>9}" for k in args.k))
    for s in grid:
        print(f"{s.anchor:>8g}{s.lr:>8g}" + "".join(
            f"{next(r['mean_gain'] for r in rows if (r['anchor'], r['lr'], r['k']) == (s.anchor, s.lr, k)):>9.3f}"
            for k in args.k))
    return {"description": "mean gain in Spearman of few-shot fine-tuning over the calibrated seed-0 contact scorer, "
                           "on validation targets of each fold (never test)", "chemistry": args.chemistry,
            "hidden": args.hidden, "draws": args.draws, "min_ligands": args.min_ligands,
            "max_targets_per_fold": args.max_targets, "rows": rows, "cpu_seconds": time.process_time() - clock,
            "provenance": provenance()}


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--chemistry", action="store_true", help="scorers read the atoms' interaction roles")
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--anchors", type=float, nargs="+", default=[0.1, 1.0, 10.0])
    parser.add_argument("--lrs", type=float, nargs="+", default=[1e-3])
    parser.add_argument("--k", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--min-ligands", type=int, default=15, help="validation series with at least this many ligands")
    parser.add_argument("--max-targets", type=int, default=40, help="validation targets per fold")
    parser.add_argument("--sources", nargs="+", default=None, help="corpus sources (default all four)")
    parser.add_argument("--series", nargs="+", default=None, help="only these series (a quick slice)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--valid-fraction", type=float, default=0.1)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--output", type=Path, default=None)
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    args = build_args(argv)
    result = run(args)
    if args.output:
        write_result(result, args.output)
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
