"""Cross-validation of the affinity recipe on proteins the model has not seen.

The labelled complexes of ``../shared/data/plb`` and ``../shared/data/fep_benchmark`` are split into
``--folds`` groups of *proteins* (a protein in both sources counts once; alternative states of a ligand
stay together). For each fold a model is trained on the other proteins (a further 10 % of them held
out for model selection on ``val/mean_target_spearman``) and evaluated on the fold's proteins. The
heavy-atom count of the ligand is scored on the same items as a baseline.

Per target (= protein) with at least ``--min-ligands`` ligands: Pearson and Spearman of predicted vs
measured pK; pooled RMSE over all test items. Results: one JSON per fold under ``--out-dir``, and the
summary (``benchmarks/affinity.py cv`` prints it) in ``--summary``.

The command line of :mod:`geomol.evaluation.get_cv`. Every fold trains through the same config-driven path as
``geomol fit --config configs/get_affinity_default.yaml`` (:func:`geomol.tasks.runs.build_from_config`: the YAML's
trainer, model and data sections), with the fold, the variant and this script's trainer settings merged in.
Variants (:data:`geomol.evaluation.get_variants.VARIANTS`) are config overrides
(model and data ``init_args``; auxiliary objectives as :mod:`geomol.tasks.objectives` components);
``compare`` puts several summaries (and the ensemble of their predictions) in one table, the one the
model card shows. The
``fragments`` variant takes a vocabulary: ``benchmarks/results/plb_fep_vocab.json`` was learned with
``geomol fragments learn --max-atoms 12 --out ... ../shared/data/plb/*/02_ligands/ligands.sdf
../shared/data/fep_benchmark/*/*_ligands.sdf`` (ligand structures only, no labels).

Usage (one fold per process, so two cores run two folds)::

    python benchmarks/affinity_cv.py train --fold 0 --variant base --out-dir benchmarks/results/cv_base
    python benchmarks/affinity_cv.py summarise --out-dir benchmarks/results/cv_base \\
        --summary benchmarks/results/affinity_cv.json
    python benchmarks/affinity_cv.py compare benchmarks/results/affinity_cv.json \\
        benchmarks/results/affinity_cv_rank.json ... --out benchmarks/results/affinity_cv_variants.json
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.evaluation.get_cv import compare, summarise, train_plb_fold
from geomol.evaluation.get_variants import DEFAULT_SEED, VARIANTS, GETFold


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", allow_abbrev=False)
    train.add_argument("--fold", type=int, required=True)
    train.add_argument("--folds", type=int, default=5)
    train.add_argument("--epochs", type=int, default=12)
    train.add_argument("--variant", choices=sorted(VARIANTS), default="base")
    train.add_argument("--seed", type=int, default=DEFAULT_SEED, help="fold k trains with seed + k")
    train.add_argument("--out-dir", required=True)
    train.add_argument("--cache-dir", default=None)
    train.add_argument("--fragment-vocab", default=None, help="fragment vocabulary JSON (fragments variant)")
    summary = sub.add_parser("summarise", allow_abbrev=False)
    summary.add_argument("--out-dir", required=True)
    summary.add_argument("--summary", required=True)
    summary.add_argument("--min-ligands", type=int, default=5)
    table = sub.add_parser("compare", allow_abbrev=False, help="one table over variant summaries, plus their ensemble")
    table.add_argument("summaries", nargs="+", help="summary JSON files of `summarise`")
    table.add_argument("--out", help="JSON to write the table to")
    table.add_argument("--min-ligands", type=int, default=5)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = build_args(argv)
    if args.command == "train":
        return train_plb_fold(GETFold(args.fold, args.out_dir, folds=args.folds, variant=args.variant,
                                      epochs=args.epochs, seed=args.seed, cache_dir=args.cache_dir,
                                      fragment_vocab=args.fragment_vocab))
    if args.command == "summarise":
        return summarise(Path(args.out_dir), Path(args.summary), args.min_ligands)
    return compare([Path(p) for p in args.summaries], Path(args.out) if args.out else None, args.min_ligands)


if __name__ == "__main__":
    main()
