"""The contact scorer in the corpus cross-validation: out-of-fold predictions for every fold.

The command line of :mod:`geomol.evaluation.contact_cv`: reads every complex of the corpus from the processed
store (``geomol preprocess --config configs/get_affinity_corpus.yaml`` builds it; items missing from it are built
here), featurises it by the options' contact recipe, and for each fold of the protocol (``docs/evaluation.md``: 5
leave-cluster-out folds, seed 0, each with a validation slice of its training clusters) trains ``--seeds`` contact
scorers (epoch chosen on the validation slice) and averages their scores on the fold's test items.

Writes ``OUT/fold{k}.csv`` (``id,prediction,fold,y,heavy_atoms``) and ``OUT/fold{k}.json`` (variant, settings,
chosen epochs and validation scores per seed, CPU seconds, provenance), the format
``benchmarks/affinity_corpus_cv.py --predictions NAME=OUT`` reads::

    OMP_NUM_THREADS=1 python benchmarks/affinity_corpus_contact.py --out-dir benchmarks/results/corpus_cv/contact
    python benchmarks/affinity_corpus_cv.py --baselines hac --predictions contact=benchmarks/results/corpus_cv/contact
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.evaluation.contact_cv import ContactCV, contact_fold, corpus_contacts
from geomol.evaluation.fewshot import format_summary, summarise, write_result
from geomol.provenance import provenance
from geomol.training.contact_scorer import CONTACT_LOSSES
from geomol.training.finetune import FinetuneSettings


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--root", default=None, help="shared data folder (default $GEOMOL_SHARED_DATA)")
    parser.add_argument("--sources", nargs="+", default=None, help="corpus sources (default all four)")
    parser.add_argument("--series", nargs="+", default=None, help="only these series (a quick slice)")
    parser.add_argument("--cache-dir", default=None, help="processed store (default $GEOMOL_CACHE)")
    parser.add_argument("--workers", type=int, default=0, help="processes building items missing from the store")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--fold", type=int, nargs="*", default=None, help="only these folds (default all)")
    parser.add_argument("--valid-fraction", type=float, default=0.1,
                        help="share of each fold's training clusters held out to choose the epoch (the protocol's 0.1)")
    parser.add_argument("--train-sources", nargs="+", default=None,
                        help="train on these sources' items only (validation and test items unchanged)")
    parser.add_argument("--model", choices=("mlp", "gbm_series"), default="mlp",
                        help="mlp: the contact scorer; gbm_series: gradient boosting within series on the ligand's "
                             "summed contact features and descriptors (geomol.training.ligand_baselines)")
    parser.add_argument("--loss", choices=sorted(CONTACT_LOSSES), default="ranking")
    parser.add_argument("--compare-within", choices=("series", "protein"), default="series",
                        help="training compares ligands within a series, or within a protein cluster (across its "
                             "assays); validation and test are scored per series either way")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=5, help="models per fold, their scores averaged")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--no-descriptors", action="store_true", help="per-atom contacts only")
    parser.add_argument("--pooled", type=int, default=0,
                        help="width of a non-additive term on the ligand's mean atom state (ContactScorer(pooled=))")
    parser.add_argument("--message-steps", type=int, default=0, metavar="N",
                        help="rounds of messages along the ligand's bonds before the per-atom read-out "
                             "(ContactScorer(message_steps=))")
    parser.add_argument("--chemistry", action="store_true",
                        help="add the interaction-role columns (donors, acceptors, charges, aromatic; "
                             "CHEMISTRY_CONTACT_FEATURES)")
    parser.add_argument("--bond-context", action="store_true",
                        help="append to each ligand atom's row the mean of its bonded neighbours' rows "
                             "(with_bond_context)")
    parser.add_argument("--radial", action="store_true",
                        help="append the receptor atoms by class and distance shell (RADIAL_CONTACT_FEATURES)")
    parser.add_argument("--moves", type=int, default=0, metavar="K",
                        help="K fixed random rigid moves of each ligand and their mirror images (rigid_moves: 2K "
                             "moved poses): its features in the moved poses are averaged with the pose's own "
                             "(--pose-views smooth) or read as augmentation in training and averaged over in "
                             "predictions (--pose-views augment)")
    parser.add_argument("--shift", type=float, default=0.3, help="Å, spread of each move's translation components")
    parser.add_argument("--turn", type=float, default=8.0, help="degrees, spread of each move's rotation angle")
    parser.add_argument("--pose-views", choices=("smooth", "augment"), default="smooth")
    parser.add_argument("--fewshot", type=int, nargs="*", default=None, metavar="K",
                        help="also measure few-shot fine-tuning on K measured ligands of each expert-pose test target")
    parser.add_argument("--fewshot-draws", type=int, default=5, help="draws of K ligands per target")
    parser.add_argument("--variant", default="contact", help="name recorded in the fold records")
    parser.add_argument("--out-dir", required=True)
    args = parser.parse_args(argv)
    if args.fewshot and (args.model != "mlp" or args.message_steps):
        parser.error("--fewshot fine-tunes the contact scorer: use it with --model mlp, without --message-steps")
    return args


def variant_of(args) -> ContactCV:
    """The variant the command line describes."""
    recipe = ContactRecipe(roles=args.chemistry, radial=args.radial, bond_context=args.bond_context, moves=args.moves,
                           shift=args.shift, turn=args.turn, pose_views=args.pose_views)
    return ContactCV(recipe, model=args.model, loss=args.loss, epochs=args.epochs, hidden=args.hidden,
                     pooled=args.pooled, message_steps=args.message_steps, descriptors=not args.no_descriptors,
                     compare_within=args.compare_within, seeds=args.seeds, seed=args.seed,
                     train_sources=args.train_sources, fewshot=args.fewshot, fewshot_draws=args.fewshot_draws,
                     variant=args.variant, folds=args.folds)


def main(argv=None) -> list[dict]:
    args = build_args(argv)
    torch.set_num_threads(1)
    cv = variant_of(args)
    corpus = corpus_contacts(cv.recipe, root=args.root, sources=args.sources, series=args.series,
                             cache_dir=args.cache_dir, workers=args.workers, n_folds=args.folds,
                             valid_fraction=args.valid_fraction, bonds=args.message_steps > 0)
    chosen = range(args.folds) if args.fold is None else args.fold
    records = [contact_fold(k, corpus, cv, Path(args.out_dir)) for k in chosen]
    if args.fewshot:
        rows = [row for record in records for row in record["fewshot_rows"]]
        summary = summarise(rows, args.fewshot)
        print(format_summary(summary))
        write_result({"description": "few-shot fine-tuning of each fold's seed-0 contact scorer on k measured "
                                     "ligands of each expert-pose test target; Spearman on the target's other "
                                     "ligands, mean over draws, then over targets", "variant": args.variant,
                      "k": args.fewshot, "draws": args.fewshot_draws, "settings": vars(FinetuneSettings()),
                      "summary": summary, "rows": rows, "provenance": provenance()},
                     Path(args.out_dir) / "fewshot.json")
    return records


if __name__ == "__main__":
    sys.exit(main() and 0)
