"""Nucleic-acid–ligand affinity: every model and baseline in one leave-cluster-out cross-validation.

The complexes of ``../shared/data/nucleic_affinity`` (RNA/DNA receptors, tier A: Kd/Ki/IC50, tier B: low-confidence
ΔG) in 5 folds of whole sequence clusters (:func:`geomol.data.splits.nucleic.nucleic_cluster_folds`, seed 0; each
fold's training clusters minus 20 % of their tier-A complexes, the inner validation where every setting, epoch and
tier-B weight is chosen). Each variant (:data:`VARIANTS`) is fitted per fold by the library
(:mod:`geomol.evaluation.nucleic_models`) and its held-out predictions written to ``OUT/<variant>.json`` fold by
fold (an interrupted run resumes); the table scores them all on the same held-out tier-A complexes (pooled
Spearman, Pearson, RMSE; the heavy-atom count on the same folds) and writes the JSON with the run's record::

    nice -n 15 python benchmarks/nucleic_affinity_cv.py run --variants hac ligand_rf contact_rf
    python benchmarks/nucleic_affinity_cv.py table --output benchmarks/results/nucleic_affinity_cv.json
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

from geomol.benchmarking.run_record import run_metadata, write_result
from geomol.data.paths import shared_data_dir
from geomol.evaluation.nucleic_cv import format_table, run_variant, summarise
from geomol.evaluation.nucleic_set import nucleic_set

NUCLEIC = {"roles": True, "nucleic": True}
ROLES = {"roles": True}
VARIANTS: dict[str, tuple[str, dict, str]] = {
    "hac": ("hac", {}, "heavy-atom count of the ligand (no training)"),
    "get_plb_zero_shot": ("shipped", {"model": "get-plb"},
                          "shipped get-plb as it is (protein–ligand data only, never saw a nucleic acid)"),
    "contact_corpus_zero_shot": ("shipped", {"model": "contact-corpus"},
                                 "shipped contact-corpus as it is (the default; protein–ligand data only)"),
    "ligand_rf": ("trees", {"features": "ligand", "algorithm": "rf", "tier_b": "auto"},
                  "ligand-only random forest: Morgan r=2 counts + descriptors"),
    "ligand_et": ("trees", {"features": "ligand", "algorithm": "et", "tier_b": "auto"},
                  "ligand-only extremely randomised trees: Morgan r=2 counts + descriptors"),
    "contact_et_plain": ("trees", {"features": {}, "algorithm": "et", "tier_b": "auto"},
                         "extremely randomised trees on the ligand's summed contact rows (elements, distance shells, "
                         "Vina-like terms; no roles) + descriptors"),
    "contact_et_roles": ("trees", {"features": ROLES, "algorithm": "et", "tier_b": "auto"},
                         "the same with the protein interaction roles (nucleotide atoms by element only)"),
    "contact_et": ("trees", {"features": NUCLEIC, "algorithm": "et", "tier_b": "auto"},
                   "the same with nucleic-acid roles: base edges (Watson–Crick, Hoogsteen, sugar), 2'-OH, phosphates, "
                   "stacking faces, ions"),
    "contact_et_tier_a": ("trees", {"features": NUCLEIC, "algorithm": "et", "tier_b": 0.0},
                          "contact_et trained on tier A only"),
    "contact_et_tier_b1": ("trees", {"features": NUCLEIC, "algorithm": "et", "tier_b": 1.0},
                           "contact_et with tier B at full weight"),
    "contact_rf": ("trees", {"features": NUCLEIC, "algorithm": "rf", "tier_b": "auto"},
                   "random forest on the summed contact rows with nucleic-acid roles + descriptors"),
    "contact_gbm": ("trees", {"features": NUCLEIC, "algorithm": "gbm", "tier_b": "auto"},
                    "gradient boosting on the summed contact rows with nucleic-acid roles + descriptors"),
    "contact_mlp": ("contact_mlp", {"features": NUCLEIC, "hidden": 32, "epochs": 40, "seeds": 3, "tier_b": "auto"},
                    "contact scorer (per-atom MLP with nucleic-acid roles + descriptors), ranking loss over all "
                    "training pairs, 3 seeds"),
    "get_finetuned": ("get", {"start": "get-plb", "lr": 3e-4, "epochs": 15, "tier_b": 0.0},
                      "GET pre-trained on protein–ligand complexes (get-plb member k) fine-tuned on tier A"),
    "get_finetuned_tier_b": ("get", {"start": "get-plb", "lr": 3e-4, "epochs": 15, "tier_b": 0.3},
                             "the same, tier B at weight 0.3"),
    "get_scratch": ("get", {"start": "scratch", "lr": 1e-3, "epochs": 15, "tier_b": 0.0},
                    "GET of the same architecture trained from scratch on tier A"),
}
"""name → (kind, settings, what it is)."""


def _ensembles(texts) -> dict[str, list[str]]:
    out = {}
    for text in texts or ():
        name, _, members = text.partition("=")
        if not members:
            raise SystemExit(f"--ensembles takes NAME=a+b, got {text!r}")
        out[name] = members.split("+")
    return out


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("action", choices=("run", "table"))
    parser.add_argument("--root", default=str(shared_data_dir() / "nucleic_affinity"))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=list(VARIANTS))
    parser.add_argument("--folds", type=int, nargs="*", default=None, help="run only these folds")
    parser.add_argument("--out-dir", default="benchmarks/results/nucleic_cv")
    parser.add_argument("--ensembles", nargs="*", default=None, metavar="NAME=A+B",
                        help="table: also the mean prediction of these variants")
    parser.add_argument("--output", default=None, help="table: write the rows and the run's record here (JSON)")
    parser.add_argument("--cache-dir", default=None, help="processed store (default $GEOMOL_CACHE)")
    return parser.parse_args(argv)


def main(argv=None) -> int:
    args = build_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(1)
    meta = run_metadata(threads=1)
    if args.action == "run":
        data = nucleic_set(args.root, cache_dir=args.cache_dir)
        for name in args.variants:
            kind, settings, about = VARIANTS[name]
            run_variant(data, name, kind, settings, args.out_dir, about=about, folds=args.folds)
    rows = summarise(args.out_dir, [n for n in args.variants if (Path(args.out_dir) / f"{n}.json").is_file()],
                     _ensembles(args.ensembles))
    print(format_table(rows))
    if args.output:
        write_result(Path(args.output), meta, rows, protocol={"folds": "nucleic_cluster_folds", "n_folds": 5, "seed": 0,
                                                              "valid_fraction": 0.2, "out_dir": args.out_dir})
    return 0


if __name__ == "__main__":
    sys.exit(main())
