"""The model card (and the cross-validation variant) of the GET affinity model ``models/get-plb``.

The model itself is built by ``geomol train-affinity --config models/get-plb.yaml`` (GET on every labelled
complex of ``../shared/data/plb`` and ``../shared/data/fep_benchmark``, nothing held out, a fixed number of epochs
chosen by cross-validation, one member per seed; :mod:`geomol.training.get_members`). This script writes its card,
with the accuracy figures of the cross-validation summary written by ``benchmarks/affinity_cv.py``, and ships the
cross-validation's fold models instead where wanted.

Usage::

    geomol train-affinity --config models/get-plb.yaml --out models/get-plb --runs runs/get-plb --overwrite
    python scripts/train_default_affinity.py card --model-dir models/get-plb --cv benchmarks/results/affinity_cv.json
    python scripts/train_default_affinity.py export --from-cv benchmarks/cv_runs/base   # the CV fold models instead
    python scripts/train_default_affinity.py domain --spread-every 2   # (re)compute the applicability domain only

``card`` rewrites only ``README.md``; ``domain`` recomputes the applicability domain of the shipped model
(``geomol.inference.domain``) and rewrites only ``manifest.json`` (the member weights, and so the predictions, stay
bit-identical).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from geomol.data.paths import shared_data_dir
from geomol.evaluation.model_cards import rebuild_section
from geomol.models.get import GETConfig

REPO = Path(__file__).resolve().parents[1]
MODEL_DIR = REPO / "models" / "get-plb"
REBUILD = "geomol train-affinity --config models/get-plb.yaml --out models/get-plb --runs runs/get-plb --overwrite"


def _training_text(from_cv: bool, members: int, epochs: int) -> str:
    if from_cv:
        return f"""The ensemble is made of the {members} cross-validation models below: each was trained on the
proteins of the other folds (about 4/5 of the data; a further 10 % of those proteins held out to pick the
best epoch on mean per-target Spearman), with seed 12 + fold, up to {epochs} epochs. A complex was in the
training data of at most {members - 1} of the {members} members (never of its own fold's), and each member's
accuracy on the proteins it never saw is what the table below reports:

    python benchmarks/affinity_cv.py train --fold <k> --variant base --epochs {epochs} --out-dir <dir>
    python scripts/train_default_affinity.py export --from-cv <dir> --cv benchmarks/results/affinity_cv.json"""
    return f"""Every complex used for training, {epochs} epochs per member, seeds 0…{members - 1}, each trained by the
plain loop of `geomol.training.get_members` (no Lightning). One command rebuilds it from `models/get-plb.yaml`
(members one after another, about 17 CPU minutes each on one thread; an interrupted build continues from the last
finished epoch of its member), and this script writes the card:

    {REBUILD}
    python scripts/train_default_affinity.py card --model-dir models/get-plb"""


def _variants_text(variants: dict | None) -> str:
    """The card's section on the recipe variants cross-validated (``affinity_cv.py compare``)."""
    if not variants:
        return ""
    rows = variants["rows"]
    lines = "\n".join(f"| {r['variant']} | {r['about']} | {r['epochs'] or '–'} | {r['mean_target_spearman']:.3f} | "
                      f"{r['mean_target_pearson']:.3f} | {r['plb_mean_target_spearman']:.3f} | {r['pooled_rmse']:.2f} | "
                      f"{r['mean_target_spearman_with_hac']:.2f} |"
                      for r in rows)
    hac = rows[0]
    best = max(rows, key=lambda r: r["mean_target_spearman"])
    base_runs = [r["mean_target_spearman"] for r in rows if r["variant"].split(",")[0] == "base"]
    seeds = (f" Two runs of the base recipe that differ only in seed and epochs differ by "
             f"{max(base_runs) - min(base_runs):.3f}: differences of that size between variants are noise."
             if len(base_runs) > 1 else "")
    beats_hac = best["mean_target_spearman"] > hac["hac_mean_target_spearman"]
    verdict = f"{best['variant']} beats the heavy-atom count." if beats_hac else "No variant reaches the heavy-atom count."
    return f"""
## Variants tried in the same cross-validation
The same folds and model selection for every variant, seed 12 + fold unless stated (`python
benchmarks/affinity_cv.py train --variant <name>` per fold, then `summarise` and `compare`;
{variants.get('machine') or 'CPU'}).

| variant | what changed | epochs (max) | mean per-target Spearman | Pearson | PLB targets Spearman | pooled RMSE | Spearman with HAC |
|---|---|---|---|---|---|---|---|
{lines}
| heavy-atom count | the ligand's heavy atoms, no model | – | {hac['hac_mean_target_spearman']:.3f} | {hac['hac_mean_target_pearson']:.3f} | {hac['plb_hac_mean_target_spearman']:.3f} | – | 1 |

"Spearman with HAC": mean per-target Spearman between a variant's predictions and the heavy-atom count,
i.e. how far its ranking is a ranking by size.

Best: {best['variant']} ({best['mean_target_spearman']:.3f}); the heavy-atom count {hac['hac_mean_target_spearman']:.3f}.
{verdict}{seeds}
"""


def _card(cv: dict, members: int, epochs: int, from_cv: bool = False, variants: dict | None = None,
          agreement: dict | None = None) -> str:
    s = cv["summary"]
    rows = "\n".join(f"| {p} | {t['n']} | {t['pearson']:.2f} | {t['spearman']:.2f} | {t['hac_spearman']:.2f} |"
                     for p, t in sorted(cv["per_target"].items()))
    model = GETConfig.from_mapping(cv["model"], source="the cross-validation record").to_dict()  # older: old names
    margin = s["mean_target_spearman"] - s["hac_mean_target_spearman"]
    verdict = (f"better than the heavy-atom count by {margin:.2f} in mean per-target Spearman, and well below FEP"
               if margin > 0.05 else "not reliably better than the heavy-atom count, and well below FEP")
    return f"""# get-plb — GET binding-affinity model trained on PLB + FEP+ (the default before `contact-corpus`; `--model get-plb`, and the base of `geomol finetune`)

Predicts the binding affinity (pK = −log10 K/M) of a small molecule in its bound pose from a
protein–ligand complex: an ensemble of {members} GET models (hidden {model['hidden']}, radial {model['radial_dim']},
{model['num_rbf']} RBFs, {model['num_layers']} layers, {model['num_heads']} heads, block KNN {model['k_neighbors']}; one block per
residue and per ligand heavy atom; pocket = residues with a heavy atom within 10 Å of the ligand;
hydrogens dropped). The uncertainty `pK_std` is the standard deviation over the members.

## Data
Every labelled complex available to the project: the ten targets of the protein-ligand-benchmark
(`../shared/data/plb`: cdk2, cmet, eg5, hif2a, pde2, pfkfb3, ptp1b, syk, thrombin, tnks2; docked poses;
IC50/Ki/pIC50/ΔG converted to pK) and the 83 series of the public FEP+ benchmark
(`../shared/data/fep_benchmark`, experimental ΔG → pK at 298.15 K) — {cv['summary']['items']} ligand poses on
about 45 proteins. Alternative protonation/tautomer states of one ligand are separate poses with one label.

## Training
`models/get-plb.yaml`, the architecture and training of `configs/get_affinity_default.yaml` (Adam, lr 1e-3 → 1e-5 per step, weight decay 1e-3, gradient clipping
1.0, ≤ 2000 blocks per batch). {_training_text(from_cv, members, epochs)}

## Accuracy on proteins the model has not seen
{cv['description']} (`benchmarks/affinity_cv.py`). Each fold's model never saw the test proteins, in
either source. Baseline: the heavy-atom count of the ligand (HAC), scored on the same items.

| | this recipe | heavy-atom count |
|---|---|---|
| mean per-target Spearman ({s['targets']} targets) | {s['mean_target_spearman']:.3f} | {s['hac_mean_target_spearman']:.3f} |
| mean per-target Pearson | {s['mean_target_pearson']:.3f} | {s['hac_mean_target_pearson']:.3f} |
| mean per-target Spearman, the 10 PLB targets | {s['plb_mean_target_spearman']:.3f} | {s['plb_hac_mean_target_spearman']:.3f} |
| pooled RMSE (pK) | {s['pooled_rmse']:.2f} | – |

Reference points (`../shared/BENCHMARKS.md`, on five other PLB targets): a published pretrained
predictor trained on PDBbind (PIGNet2) reaches a mean per-target Spearman of about 0.66, physics-based
FEP+ about 0.76.

Per target (the test fold of its protein):

| target | ligands | Pearson | Spearman | HAC Spearman |
|---|---|---|---|---|
{rows}

{rebuild_section(REBUILD, agreement)}
## Limitations
- Trained on about 1,400 complexes of about 45 proteins, mostly congeneric series of kinases,
  proteases, phosphatases and bromodomains; it has not seen nucleic-acid receptors, protein–protein
  complexes, metalloenzymes beyond these, or covalent ligands. On a new protein, expect ranking
  quality similar to the cross-validation above: {verdict}. Use it to triage, not to decide.
- Within a target it ranks ligands mostly by size: the mean per-target Spearman between its predictions
  and the ligands' heavy-atom counts is {s['mean_target_spearman_with_hac']:.2f}.
- It scores the pose it is given: docked or crystal poses of the ligand in the receptor's frame.
  A wrong pose gives a wrong number; the model does not dock.
- Absolute pK values carry a per-protein offset the model cannot know for an unseen protein
  (pooled RMSE above); compare ligands of one target.
- `pK_std` is the spread of the ensemble, a measure of disagreement between members, not a calibrated
  error bar.
{_variants_text(variants)}"""


def _training_graphs(model, cache_dir: str | None) -> list:
    """Every training complex of the recipe, built with the model's graph recipe (labels in ``y``)."""
    from geomol.data.datasets.combined import CombinedAffinityDataset

    shared = shared_data_dir()
    dataset = CombinedAffinityDataset(shared / "plb", shared / "fep_benchmark", name="plb+fep_benchmark",
                                      recipe=model.recipe, num_workers=1, cache_dir=cache_dir, progress=False)
    return [dataset[i] for i in range(len(dataset))]


def _domain(model, args):
    from geomol.inference.domain import domain_from_graphs

    torch.set_num_threads(1)
    graphs = _training_graphs(model, args.cache_dir)
    spread_on = len(graphs[::args.spread_every])
    which = f"every {args.spread_every}-th complex ({spread_on})" if args.spread_every > 1 else "all of them"
    origin = f"the {len(graphs)} training complexes (plb + fep_benchmark); ensemble spread measured on {which}"
    return domain_from_graphs(model, graphs, spread_every=args.spread_every, origin=origin)


def domain(args) -> None:
    from geomol.api import load_model
    from geomol.inference.model_files import update_manifest

    model = load_model(MODEL_DIR)
    found = _domain(model, args)
    update_manifest(MODEL_DIR, {"domain": found.to_dict()})
    print(json.dumps(found.to_dict(), indent=1))


def _epochs_of(model) -> int:
    """The epochs the members of a train-affinity build were trained for (their recorded origins)."""
    epochs = {origin.get("epochs") for origin in model.origins}
    if len(epochs) != 1 or None in epochs:
        sys.exit(f"the members record no common epoch count ({sorted(map(str, epochs))}): not a train-affinity build")
    return int(epochs.pop())


def card(args) -> None:
    """Rewrite README.md of a model built by ``geomol train-affinity --config models/get-plb.yaml``."""
    from geomol.api import load_model

    model = load_model(args.model_dir)
    cv, variants, agreement = _card_inputs(args)
    text = _card(cv, len(model.members), _epochs_of(model), variants=variants, agreement=agreement)
    (Path(args.model_dir) / "README.md").write_text(text, encoding="utf-8")
    print(f"card → {Path(args.model_dir) / 'README.md'}")


def _card_inputs(args) -> tuple[dict, dict | None, dict | None]:
    """(cross-validation summary, variants table, rebuild agreement) from their files (the last two optional)."""
    cv = json.loads(Path(args.cv).read_text())
    variants = json.loads(Path(args.variants).read_text()) if args.variants and Path(args.variants).exists() else None
    agreement = (json.loads(Path(args.agreement).read_text())
                 if getattr(args, "agreement", None) and Path(args.agreement).exists() else None)
    return cv, variants, agreement


def export(args) -> None:
    """Ship the cross-validation's fold models (``fold*/best.ckpt`` of ``--from-cv``) as get-plb, with its card."""
    from geomol.api import load_model

    checkpoints = sorted(str(p) for p in Path(args.from_cv).glob("fold*/best.ckpt"))
    if not checkpoints:
        sys.exit(f"no fold models (fold*/best.ckpt) under {args.from_cv}")
    cv, variants, agreement = _card_inputs(args)
    # a best checkpoint, saved at validation, holds the 0-based index of its epoch
    epochs = int(cv.get("epochs") or int(torch.load(checkpoints[0], weights_only=True)["epoch"]) + 1)
    metrics = {"cross_validation": cv["summary"], "cv_description": cv["description"]}
    text = _card(cv, len(checkpoints), epochs, from_cv=True, variants=variants, agreement=agreement)
    model = load_model(checkpoints)
    model.domain = _domain(model, args)
    model.save(Path(args.model_dir), card=text, name="get-plb",
               description="GET affinity ensemble trained on the protein-ligand-benchmark and the public FEP+ "
                           "benchmark (pK of a protein-ligand pose)", metrics=metrics, overwrite=True)
    print(f"{len(checkpoints)} members → {args.model_dir}")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("card", allow_abbrev=False, help="write the card of a model built by geomol train-affinity")
    e = sub.add_parser("export", allow_abbrev=False, help="ship the cross-validation's fold models instead")
    e.add_argument("--from-cv", required=True, help="a cross-validation run (fold*/best.ckpt)")
    for command in (c, e):
        command.add_argument("--model-dir", default=str(MODEL_DIR), help="model directory")
        command.add_argument("--cv", default=str(REPO / "benchmarks" / "results" / "affinity_cv.json"))
        command.add_argument("--variants", default=str(REPO / "benchmarks" / "results" / "affinity_cv_variants.json"),
                             help="table of `benchmarks/affinity_cv.py compare` for the card (skipped when absent)")
        command.add_argument("--agreement",
                             default=str(REPO / "benchmarks" / "results" / "rebuild_agreement_get-plb.json"),
                             help="benchmarks/rebuild_agreement.py result of a rebuild (skipped when absent)")
    for command in (e, sub.add_parser("domain", allow_abbrev=False,
                                      help="recompute the applicability domain of the exported model")):
        command.add_argument("--spread-every", type=int, default=1,
                             help="measure the ensemble spread on every k-th training complex (default 1: all)")
        command.add_argument("--cache-dir", default=None, help="processed-data cache (default: geomol's)")
    args = parser.parse_args()
    {"card": card, "export": export, "domain": domain}[args.command](args)


if __name__ == "__main__":
    main()
