"""Ship a corpus-trained GET affinity ensemble: the five cross-validation fold models of one variant.

Each member is the best-validation checkpoint of one leave-cluster-out fold
(``benchmarks/affinity_corpus_get.py``), so together they have seen every protein cluster of the
corpus, and each member's accuracy on the clusters it never saw is what the cross-validation reports.
The card is generated from the result files (nothing typed in): the corpus counts, the variants table
of ``benchmarks/affinity_corpus_cv.py`` with its baselines, the shipped variant's per-target table, the
few-shot table of ``benchmarks/affinity_fewshot.py`` and the speed of ``benchmarks/affinity.py speed``::

    python scripts/ship_corpus_affinity.py --from-cv runs/corpus_cv/physics_decoys --row get_physics_decoys \\
        --cv benchmarks/results/affinity_corpus_cv.json --fewshot benchmarks/results/affinity_fewshot.json \\
        --speed benchmarks/results/affinity_speed_corpus.json --name get-corpus
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from geomol.evaluation.model_cards import (corpus_domain_and_metrics, data_section, fewshot_table, per_target_table,
                                           variants_table, verdict)
from geomol.evaluation.model_cards import figure as _f

REPO = Path(__file__).resolve().parents[1]


def card(args, model, cv: dict, folds: list[dict], corpus: dict, fewshot: dict | None, speed: dict | None) -> str:
    shipped = args.row
    row = {r["variant"]: r for r in cv["variants"]}[shipped]
    a = model.arguments
    epochs = folds[0]["epochs"]
    cpu_h = sum(f["train_cpu_seconds"] for f in folds) / 3600
    speed_text = (f"{speed['cpu_seconds_per_ligand']:.3f} CPU s per posed ligand end to end on one thread "
                  f"({speed['ligands']} ligands of {', '.join(r['target'] for r in speed['targets'])}; "
                  f"`{speed['provenance']['command']}`)" if speed else "not measured")
    return f"""# {args.name} — GET affinity ensemble trained on the whole affinity corpus (default of `geomol predict-affinity`)

Predicts the binding affinity (pK = −log10 K/M) of a small molecule in its bound pose. An ensemble of
{len(model.members)} GET models (hidden {a['hidden']}, radial {a['radial_dim']}, {a['num_rbf']} RBFs, {a['num_layers']} layers,
{a['num_heads']} heads, block KNN {a['k_neighbors']}; one block per residue and per ligand heavy atom; pocket = residues with a
heavy atom within {model.recipe.pocket_cutoff:g} Å of the ligand; hydrogens dropped), read-out
`{a['readout'].rpartition('.')[2]}`. The variant: {row['about']}. `pK_std` is the spread over the members.

## Data
{data_section(corpus)}

## Training
Each member is the best-validation checkpoint of one of the 5 leave-cluster-out folds of the cross-validation
below: trained on the other folds' clusters ({epochs} epoch(s), Adam, lr 1e-3 → 1e-5, weight decay 1e-3,
gradient clipping 1.0, ≤ 2000 blocks per batch, seed 12 + fold), selected on a validation slice of 10 % of its
training clusters by mean per-target Spearman, never on its test fold. So every corpus cluster was in the
training data of 4 of the 5 members. {cpu_h:.1f} CPU hours in all (one thread per fold):

    python benchmarks/affinity_corpus_get.py --fold <k> --variant {folds[0]['variant']} --epochs {epochs} --val-check-interval {folds[0]['val_check_interval']} --out-dir {args.from_cv}

## Accuracy on proteins it has not seen
{cv['description']}. Every variant tried for issue 17, on the same folds and items, with the two baselines
(`{cv['provenance']['command']}`; EP: the expert-pose targets of plb and FEP+, {row['expert_pose']['targets']} of them;
all: {row['all']['targets']} targets):

{variants_table(cv, shipped)}

"Spearman with HAC": how far a model's ranking within a target is a ranking by ligand size (1 = the same).
Ensembles average members standardised within each target (no weights fitted).

{verdict(cv, shipped)}

Reference points on five other PLB targets (`../shared/BENCHMARKS.md`): a published pretrained predictor
(PIGNet2) about 0.66, physics-based FEP+ about 0.76.

### Per expert-pose target (Spearman; the fold that held its protein out)
{per_target_table(cv, shipped)}

## Few-shot adaptation to a user's target (`geomol finetune`)
{fewshot_table(fewshot)}

## Speed
{speed_text}.

## Limitations
- Within a target it still ranks partly by size (Spearman with the heavy-atom count
  {_f(row['expert_pose']['spearman_with_hac'], 2)} on the expert-pose targets); read the acceptance table above before trusting
  an order.
- It scores the pose it is given, in the receptor's frame; it does not dock. Poses generated from SMILES
  (`--smiles` with a reference ligand) are good for close analogues of the reference only.
- Absolute pK carries a per-protein offset no model can know for an unseen protein; compare ligands of one
  target, or fine-tune the offset with a few measured ligands (`geomol finetune`).
- Trained on small-molecule ligands of proteins; nucleic-acid receptors, protein–protein complexes and covalent
  ligands are outside its data. `pK_std` is the members' disagreement, not a calibrated error bar.
"""


def main(argv=None) -> None:
    import torch

    from geomol.api import load_model

    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--from-cv", required=True, help="folder of affinity_corpus_get.py (fold*_checkpoint/best.ckpt)")
    parser.add_argument("--row", required=True, help="this variant's row name in the --cv table")
    parser.add_argument("--cv", default=str(REPO / "benchmarks" / "results" / "affinity_corpus_cv.json"))
    parser.add_argument("--corpus", default=str(REPO / "benchmarks" / "results" / "corpus.json"))
    parser.add_argument("--fewshot", default=None)
    parser.add_argument("--speed", default=None)
    parser.add_argument("--name", default="get-corpus")
    parser.add_argument("--spread-every", type=int, default=20, help="ensemble spread on every k-th training complex")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    cv_dir = Path(args.from_cv)
    checkpoints = sorted(str(p) for p in cv_dir.glob("fold*_checkpoint/best.ckpt"))
    folds = [json.loads(p.read_text()) for p in sorted(cv_dir.glob("fold*.json"))]
    if len(checkpoints) != 5 or len(folds) != 5:
        sys.exit(f"need the 5 folds' checkpoints and records under {cv_dir}, found {len(checkpoints)} / {len(folds)}")
    read = lambda path: json.loads(Path(path).read_text()) if path else None  # noqa: E731
    cv, corpus, fewshot, speed = read(args.cv), read(args.corpus), read(args.fewshot), read(args.speed)
    model = load_model(checkpoints)
    metrics = corpus_domain_and_metrics(model, cv, args.row, args.spread_every)
    out = REPO / "models" / args.name
    model.save(out, card=card(args, model, cv, folds, corpus, fewshot, speed), name=args.name,
               description="GET affinity ensemble trained on the affinity corpus (plb, FEP+, Uni-FEP, BindingDB; "
                           "pK of a protein-ligand pose)", metrics=metrics, overwrite=True)
    print(f"{len(checkpoints)} members → {out}")


if __name__ == "__main__":
    main()
