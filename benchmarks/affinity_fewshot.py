"""Few-shot adaptation in the corpus cross-validation: how much k measured ligands of an unseen target help.

For every fold of a GET variant's cross-validation (``benchmarks/affinity_corpus_get.py`` wrote
``CV_DIR/fold{k}_checkpoint/best.ckpt``, chosen on that fold's validation slice), every test target (a
series with at least ``k + --min-rest`` ligands) gets ``--draws`` random draws of ``k`` measured ligands.
The fold's model is fine-tuned on them as ``geomol finetune --steps ...`` does with a fixed setting (the
decided one: ``benchmarks/affinity_fewshot_decision.py``; :func:`geomol.training.finetune.finetune_model`:
encoder frozen, read-out weights and offset fitted with an L2 pull to the base weights) and
scored by Spearman on the target's *other* ligands. On the same remainder the table also scores the fold's
model without fine-tuning, the heavy-atom count (HAC), and a k-shot size fit (the HAC with the sign of its
correlation on the k measured ligands: what k labels give without any model).

Prints mean Spearman over targets (each target: the mean over its draws), expert-pose targets (EP) and all;
writes JSON with per-target rows, the settings and ``geomol.provenance()``. Usage::

    OMP_NUM_THREADS=1 python benchmarks/affinity_fewshot.py --cv-dir runs/corpus_cv/base --variant base \\
        --k 3 5 10 --draws 5 --output benchmarks/results/affinity_fewshot.json
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from geomol.evaluation.fewshot import run_and_write
from geomol.evaluation.get_cv import fewshot_of_folds
from geomol.evaluation.get_variants import VARIANTS
from geomol.training.finetune import FinetuneSettings

REPO = Path(__file__).resolve().parents[1]


def run(args) -> dict:
    return fewshot_of_folds(args.cv_dir, args.folds, variant=args.variant, n_folds=args.n_folds,
                            valid_fraction=args.valid_fraction, series=args.series, cache_dir=args.cache_dir,
                            ks=args.k, draws=args.draws, min_rest=args.min_rest, max_targets=args.max_targets,
                            settings=FinetuneSettings(steps=args.steps, lr=args.lr, anchor=args.anchor),
                            seed=args.seed)


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--cv-dir", type=Path, required=True, help="output folder of affinity_corpus_get.py")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="base", help="the variant trained there")
    parser.add_argument("--folds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="which folds to score")
    parser.add_argument("--n-folds", type=int, default=5, help="folds of the cross-validation that trained them")
    parser.add_argument("--valid-fraction", type=float, default=0.1, help="as in that cross-validation")
    parser.add_argument("--series", nargs="+", default=None, help="as in that cross-validation (a slice)")
    parser.add_argument("--k", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--min-rest", type=int, default=5, help="ligands left to score after drawing k")
    parser.add_argument("--max-targets", type=int, default=None,
                        help="per fold: every expert-pose target and a random sample of others up to this many")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--anchor", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "affinity_fewshot.json")
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    return run_and_write(run, build_args, argv)


if __name__ == "__main__":
    sys.exit(main() and 0)
