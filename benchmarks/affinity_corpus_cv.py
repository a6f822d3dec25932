"""Leave-cluster-out cross-validation over the whole affinity corpus: baselines and given predictions.

The command line of :func:`geomol.evaluation.corpus_cv.corpus_cross_validation`, the protocol every affinity
variant is judged by (``docs/evaluation.md``): the corpus' items and leave-cluster-out folds
(:mod:`geomol.evaluation.corpus_folds`), targets and metrics (:mod:`geomol.metrics.targets`), the heavy-atom
count and the ligand-only baselines fitted per fold, and any ``--predictions NAME=file.csv`` (columns
``id,prediction`` and optionally ``fold``; or a folder of ``fold*.csv``, :mod:`geomol.evaluation.predictions`),
e.g. a GET variant's out-of-fold predictions from ``benchmarks/affinity_corpus_get.py``. ``--reference NAME`` adds
that variant's mean Spearman on each row's own targets (``ref`` columns).

Prints the variants table; writes JSON (``geomol.provenance()``, the folds, the variants' summaries, the
per-target table, the hyper-parameters each fold chose) and, with ``--write-predictions DIR``, each baseline's
out-of-fold predictions as ``DIR/NAME.csv`` in the ``--predictions`` format.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/affinity_corpus_cv.py --cache-dir $GEOMOL_CACHE \\
        --output benchmarks/results/affinity_corpus_cv.json [--predictions get_base=preds.csv]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from geomol.data.datasets.corpus_items import SOURCES
from geomol.evaluation.corpus_cv import corpus_cross_validation, dump
from geomol.metrics.targets import MIN_TARGET_LIGANDS, TARGET_KINDS
from geomol.training.ligand_baselines import LIGAND_MODELS

REPO = Path(__file__).resolve().parents[1]


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None, help="shared data folder (default $GEOMOL_SHARED_DATA)")
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), choices=SOURCES)
    parser.add_argument("--series", nargs="+", default=None, help="only these series (a quick slice)")
    parser.add_argument("--cache-dir", default=None, help="processed-data directory for the clusters ($GEOMOL_CACHE)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", choices=TARGET_KINDS, default="series")
    parser.add_argument("--min-ligands", type=int, default=MIN_TARGET_LIGANDS)
    parser.add_argument("--baselines", nargs="*", default=["hac", *LIGAND_MODELS], choices=["hac", *LIGAND_MODELS])
    parser.add_argument("--reference", default=None, metavar="NAME",
                        help="also score this variant on each variant's own targets (for variants run on some folds)")
    parser.add_argument("--n-bits", type=int, default=1024, help="Morgan fingerprint length")
    parser.add_argument("--predictions", nargs="*", default=[], metavar="NAME=CSV")
    parser.add_argument("--ensembles", nargs="*", default=[], metavar="NAME=A+B",
                        help="equal-weight ensembles of variants above, their predictions standardised within each target")
    parser.add_argument("--only-folds", type=int, nargs="+", default=None, metavar="K",
                        help="score every variant on these test folds only (side by side with a variant run on them)")
    parser.add_argument("--write-predictions", type=Path, default=None, metavar="DIR")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "affinity_corpus_cv.json")
    args = parser.parse_args(argv)
    if any("=" not in spec for spec in args.predictions):
        parser.error("--predictions takes NAME=path.csv")
    if any("=" not in spec or "+" not in spec for spec in args.ensembles):
        parser.error("--ensembles takes NAME=A+B[+C...]")
    return args


def main(argv=None) -> dict:
    args = build_args(argv)
    result = corpus_cross_validation(
        root=args.root, sources=args.sources, series=args.series, cache_dir=args.cache_dir, folds=args.folds,
        seed=args.seed, targets=args.targets, min_ligands=args.min_ligands, baselines=args.baselines,
        reference=args.reference, n_bits=args.n_bits,
        predictions=dict(spec.split("=", 1) for spec in args.predictions),
        ensembles={name: members.split("+") for name, members in (spec.split("=", 1) for spec in args.ensembles)},
        only_folds=args.only_folds, write_to=args.write_predictions)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(dump(result) + "\n")
    print(f"wrote {args.output}")
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
