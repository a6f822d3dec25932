"""GET variants in the corpus cross-validation: train fold ``k``, write its out-of-fold predictions.

Each fold trains through the same config-driven path as ``geomol fit --config configs/get_affinity_corpus.yaml``
(the whole corpus, :class:`~geomol.tasks.CorpusDataModule`), with the variant
(:data:`geomol.evaluation.get_variants.VARIANTS`:
model and data ``init_args``), the fold and this script's trainer settings merged in. The data module
draws its folds exactly as the protocol does (``split_seed`` 0 over all corpus records, ``docs/evaluation.md``),
so the checkpoint is chosen on the fold's validation slice and the test clusters are never seen.

Writes ``OUT/fold{k}.csv`` (``id,prediction,fold,y,heavy_atoms``: the best-validation checkpoint on the
fold's test items, loaded as users load a model) and ``OUT/fold{k}.json`` (variant, recipe, split sizes,
best validation score, wall and CPU seconds, provenance). The protocol's table takes the folder::

    python benchmarks/affinity_corpus_get.py --fold 0 --variant base --epochs 1 --out-dir runs/corpus_cv/base
    ...                                       (folds 1-4; one fold per process, one thread each)
    python benchmarks/affinity_corpus_cv.py --predictions get_corpus=runs/corpus_cv/base
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.evaluation.get_cv import train_corpus_fold
from geomol.evaluation.get_variants import VARIANTS, GETFold


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--fold", type=int, required=True)
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="base")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--limit-train-batches", type=float, default=1.0,
                        help="fraction of the training batches per epoch (Lightning's limit_train_batches): a budget")
    parser.add_argument("--val-check-interval", type=float, default=0.25,
                        help="validate every this fraction of an epoch (model selection on the validation slice)")
    parser.add_argument("--seed", type=int, default=12, help="fold k trains with seed + k")
    parser.add_argument("--out-dir", required=True)
    parser.add_argument("--cache-dir", default=None, help="processed store ($GEOMOL_CACHE)")
    parser.add_argument("--series", nargs="+", default=None, help="only these series (a quick slice)")
    parser.add_argument("--valid-fraction", type=float, default=0.1, help="validation slice of the training clusters")
    return parser.parse_args(argv)


def fold_of(args) -> GETFold:
    """The fold the command line describes."""
    return GETFold(args.fold, args.out_dir, folds=args.folds, variant=args.variant, epochs=args.epochs,
                   seed=args.seed, cache_dir=args.cache_dir, series=args.series, valid_fraction=args.valid_fraction,
                   limit_train_batches=args.limit_train_batches, val_check_interval=args.val_check_interval)


def main(argv: list[str] | None = None) -> dict:
    args = build_args(argv)
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    return train_corpus_fold(fold_of(args))


if __name__ == "__main__":
    main()
