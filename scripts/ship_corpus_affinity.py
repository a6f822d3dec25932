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
import math
import sys
from pathlib import Path

from geomol.training.ligand_baselines import LIGAND_MODELS  # the ligand-only baselines of the corpus CV

REPO = Path(__file__).resolve().parents[1]
BAR = {"spearman": 0.55, "margin": 0.05, "beats_hac": 0.60}  # issue 17's acceptance on the expert-pose targets
SOURCES_ABOUT = {"plb": "protein-ligand-benchmark, expert docked poses",
                 "fep_benchmark": "public FEP+ benchmark series, expert poses",
                 "uni_fep": "Uni-FEP series, SMILES posed on each series' reference ligand by geomol",
                 "ddg_bindingdb": "BindingDB series with docked MOL2 poses"}


def _f(x, digits=3) -> str:
    return "–" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{digits}f}"


def variants_table(cv: dict, shipped: str) -> str:
    lines = ["| variant | what it is | Spearman EP | Spearman all | Pearson EP | Kendall EP | beats HAC EP / all "
             "| Spearman with HAC, EP | CPU h |", "|---|---|---|---|---|---|---|---|---|"]
    for row in cv["variants"]:
        ep, every = row["expert_pose"], row["all"]
        cpu = "–" if row["cpu_seconds"] is None else f"{row['cpu_seconds'] / 3600:.1f}"
        name = f"**{row['variant']}** (shipped)" if row["variant"] == shipped else row["variant"]
        lines.append(f"| {name} | {row['about']} | {_f(ep['spearman'])} | {_f(every['spearman'])} | "
                     f"{_f(ep['pearson'])} | {_f(ep['kendall'])} | {_f(100 * ep['beats_hac_fraction'], 0)} % / "
                     f"{_f(100 * every['beats_hac_fraction'], 0)} % | {_f(ep['spearman_with_hac'], 2)} | {cpu} |")
    return "\n".join(lines)


LIGAND_ONLY_COLUMNS = {"rf": "ligand-only RF", "gbm_series": "ligand-only GBM within series"}


def per_target_table(cv: dict, shipped: str) -> str:
    fields = cv["per_target"]["fields"]
    col = {name: i for i, name in enumerate(fields)}
    others = [k for k in LIGAND_ONLY_COLUMNS if f"{k}:spearman" in col]
    lines = ["| target | source | fold | ligands | this model | heavy-atom count | "
             + " | ".join(LIGAND_ONLY_COLUMNS[k] for k in others) + " |",
             "|---|---|---|---|---|---|" + "---|" * len(others)]
    for row in cv["per_target"]["rows"]:
        if row[col["source"]] not in ("plb", "fep_benchmark"):
            continue
        mine = row[col[f"{shipped}:spearman"]] if f"{shipped}:spearman" in col else None
        ligand_only = " | ".join(_f(row[col[f"{k}:spearman"]], 2) for k in others)
        lines.append(f"| {row[col['target']]} | {row[col['source']]} | {row[col['fold']]} | {row[col['n']]} | "
                     f"{_f(mine, 2)} | {_f(row[col['hac_spearman']], 2)} | {ligand_only} |")
    return "\n".join(lines)


def per_target_plot(cv: dict, shipped: str, path: Path, label: str | None = None) -> None:
    """Scatter of each expert-pose target's Spearman: the heavy-atom count (x) against row ``shipped`` (y),
    written as a PNG to ``path``; ``label`` names the model on the y axis (default the row's name)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    col = {name: i for i, name in enumerate(cv["per_target"]["fields"])}
    rows = [r for r in cv["per_target"]["rows"] if r[col["source"]] in ("plb", "fep_benchmark")
            and r[col["hac_spearman"]] is not None and r[col[f"{shipped}:spearman"]] is not None]
    x, y = [r[col["hac_spearman"]] for r in rows], [r[col[f"{shipped}:spearman"]] for r in rows]
    figure, axes = plt.subplots(figsize=(4.6, 4.4))
    axes.plot([-1, 1], [-1, 1], color="grey", lw=0.8, label="as good as ligand size")
    axes.scatter(x, y, s=[8 + r[col["n"]] for r in rows], alpha=0.7)
    axes.set(xlim=(-1, 1), ylim=(-1, 1), xlabel="Spearman of the heavy-atom count",
             ylabel=f"Spearman of {label or shipped}", title=f"{len(rows)} expert-pose targets, protein held out")
    axes.legend(loc="lower right", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=120)
    plt.close(figure)


def data_section(corpus: dict) -> str:
    """The corpus paragraph and its table of sources (from ``benchmarks/corpus.py``'s result)."""
    counts = corpus["counts"]
    rows = "\n".join(f"| {s} | {SOURCES_ABOUT[s]} | {counts[s]['items']:,} | {counts[s]['series']} | "
                     f"{counts[s]['clusters']} |" for s in SOURCES_ABOUT)
    return (f"The affinity corpus (`configs/get_affinity_corpus.yaml`, `docs/training.md`), {counts['all']['items']:,} "
            f"labelled\nligands in {counts['all']['series']} series on {counts['all']['clusters']} protein clusters "
            "(sequence clusters\nshared across sources):\n\n| source | what | ligands | series | protein clusters |\n"
            f"|---|---|---|---|---|\n{rows}")


def fewshot_table(fewshot: dict | None) -> str:
    if not fewshot:
        return "Not measured for this model."
    lines = [f"{fewshot['description']}; {fewshot['draws']} draws per target, fine-tuning settings "
             f"{fewshot['settings']} (`benchmarks/affinity_fewshot.py`).", "",
             "| k | targets | n | untuned model | fine-tuned | heavy-atom count | k-shot size fit | fine-tuned > untuned |",
             "|---|---|---|---|---|---|---|---|"]
    for row in fewshot["summary"]:
        lines.append(f"| {row['k']} | {row['targets']} | {row['n_targets']} | {_f(row['base'])} | {_f(row['finetuned'])} "
                     f"| {_f(row['hac'])} | {_f(row['hac_k_fit'])} | {_f(100 * row['finetuned_beats_base_fraction'], 0)} % |")
    return "\n".join(lines)


def verdict(cv: dict, shipped: str) -> str:
    rows = {r["variant"]: r for r in cv["variants"]}
    ep = rows[shipped]["expert_pose"]
    hac = rows["hac"]["expert_pose"]["spearman"] if "hac" in rows else float("nan")
    ligand_only = max((rows[k]["expert_pose"]["spearman"] for k in LIGAND_MODELS if k in rows), default=float("nan"))
    checks = [(f"mean per-target Spearman on the expert-pose targets ≥ {BAR['spearman']}", ep["spearman"],
               ep["spearman"] >= BAR["spearman"]),
              (f"at least {BAR['margin']} above the heavy-atom count ({_f(hac)})", ep["spearman"] - hac,
               ep["spearman"] - hac >= BAR["margin"]),
              (f"at least {BAR['margin']} above the best ligand-only model ({_f(ligand_only)})",
               ep["spearman"] - ligand_only, ep["spearman"] - ligand_only >= BAR["margin"]),
              (f"beats the heavy-atom count on ≥ {100 * BAR['beats_hac']:.0f} % of expert-pose targets",
               ep["beats_hac_fraction"], ep["beats_hac_fraction"] >= BAR["beats_hac"])]
    lines = ["| acceptance bar (issue 17) | this model | met |", "|---|---|---|"]
    lines += [f"| {what} | {_f(value)} | {'yes' if ok else '**no**'} |" for what, value, ok in checks]
    return "\n".join(lines)


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
{len(model.members)} GET models (hidden {a['d_hidden']}, radial {a['d_radial']}, {a['n_rbf']} RBFs, {a['n_layers']} layers,
{a['n_head']} heads, block KNN {a['k_neighbors']}; one block per residue and per ligand heavy atom; pocket = residues with a
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

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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


def corpus_domain_and_metrics(model, cv: dict, row_name: str, spread_every: int) -> dict:
    """Set ``model.domain`` from every corpus complex; return the manifest metrics of CV row ``row_name``."""
    from geomol.inference.domain import domain_from_graphs

    graphs = training_graphs()
    model.domain = domain_from_graphs(model, graphs, spread_every=spread_every,
                                      origin=f"the {len(graphs)} corpus complexes; ensemble spread on every "
                                             f"{spread_every}-th")
    row = {r["variant"]: r for r in cv["variants"]}[row_name]
    return {"cross_validation": {"expert_pose": row["expert_pose"], "all": row["all"]},
            "cv_description": cv["description"]}


def training_graphs() -> list:
    """Every corpus complex (from the processed store), to measure the applicability domain on."""
    from geomol.data.datasets.corpus import read_corpus
    from geomol.data.datasets.corpus_dataset import CorpusDataset
    from geomol.data.paths import shared_data_dir
    from geomol.data.splits.protein_clusters import load_protein_clusters

    corpus = read_corpus(shared_data_dir())
    clusters, _ = load_protein_clusters(corpus.receptors)
    dataset = CorpusDataset(corpus, clusters, num_workers=1, progress=False)
    return [dataset[i] for i in range(len(dataset))]


if __name__ == "__main__":
    main()
