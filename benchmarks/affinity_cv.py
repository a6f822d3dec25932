"""Cross-validation of the affinity recipe on proteins the model has not seen.

The labelled complexes of ``../shared/data/plb`` and ``../shared/data/fep_benchmark`` are split into
``--folds`` groups of *proteins* (a protein in both sources counts once; alternative states of a ligand
stay together). For each fold a model is trained on the other proteins (a further 10 % of them held
out for model selection on ``val/mean_target_spearman``) and evaluated on the fold's proteins. The
heavy-atom count of the ligand is scored on the same items as a baseline.

Per target (= protein) with at least ``--min-ligands`` ligands: Pearson and Spearman of predicted vs
measured pK; pooled RMSE over all test items. Results: one JSON per fold under ``--out-dir``, and the
summary (``benchmarks/affinity.py cv`` prints it) in ``--summary``.

Every fold trains through the same config-driven path as ``geomol fit --config configs/get_affinity_default.yaml``
(:func:`geomol.tasks.cli.build_from_config`: the YAML's trainer, model and data sections), with the fold,
the variant and this script's trainer settings merged in. Variants (``VARIANTS``) are config overrides
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
import json
import platform
import sys
import time
from pathlib import Path

import torch

from geomol.data.paths import shared_data_dir
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "get_affinity_default.yaml"

DEFAULT_SEED = 12


def _term(name: str, **init_args) -> dict:
    return {"class_path": f"geomol.tasks.objectives.{name}", "init_args": init_args}


PHYSICS = "geomol.models.physics_readout.PhysicsReadout"
DECOYS = _term("DecoyLoss", weight=1.0, margin=1.0, fraction=0.5, kinds=["shift", "turn", "swap"])
CENTRED = _term("CentredLoss", weight=1.0, group_by="series")

# Variants: model and data init_args merged into the recipe (configs/get_affinity_default.yaml).
VARIANTS: dict[str, dict] = {
    "base": {"model": {}, "data": {}, "about": "the recipe: MSE on pK"},
    "lba_size": {"model": {"d_hidden": 64, "d_radial": 32, "n_rbf": 32, "n_layers": 3}, "data": {},
                 "about": "the larger GET of the LBA configuration (hidden 64, 3 layers)"},
    "rank": {"model": {"loss_terms": [_term("RankingLoss", weight=1.0)]}, "data": {"group_batches": True},
             "about": "+ pairwise ranking loss between ligands of a target's batch"},
    "rank_series": {"model": {"loss_terms": [_term("RankingLoss", weight=1.0, group_by="series")]},
                    "data": {"group_batches": "series"},
                    "about": "+ pairwise ranking loss between ligands of one series (batches hold one series)"},
    "pocket8": {"model": {}, "data": {"pocket_cutoff": 8.0}, "about": "pocket of 8 Å instead of 10 Å"},
    "hydrogens": {"model": {}, "data": {"keep_hydrogens": True}, "about": "hydrogens kept (ligand and pocket)"},
    "fragments": {"model": {}, "data": {},  # + --fragment-vocab (geomol fragments learn)
                  "about": "ligand blocks = principal-subgraph fragments (≤ 12 heavy atoms) instead of atoms"},
    "rbfe": {"model": {"loss_terms": [_term("RelativeEdgeLoss", weight=1.0)]}, "data": {"group_batches": True},
             "about": "+ multi-task: squared error of ΔpK on the series' perturbation (RBFE) edges"},
    "pretrain": {"model": {"pretraining": _term("DenoisingPretraining", epochs=2, sigma=1.0)}, "data": {},
                 "about": "2 epochs of ligand-coordinate denoising (no labels) before the affinity epochs"},
    "pretrain_corpus": {"model": {"pretraining": _term("DenoisingPretraining", epochs=1, sigma=1.0)}, "data": {},
                        "about": "1 epoch of ligand-coordinate denoising (no labels) before the affinity epoch(s); "
                                 "for the corpus, run with one more epoch than the others"},
    "physics": {"model": {"readout": PHYSICS}, "data": {},
                "about": "physics-shaped read-out: ligand-receptor atom-pair vdW, H-bond, hydrophobic and metal "
                         "terms with GET-predicted parameters, over a rotatable-bond divisor"},
    "decoys": {"model": {"loss_terms": [DECOYS]}, "data": {},
               "about": "+ decoy hinge: shifted, turned and other-series ligands must score 1 pK below the true pose"},
    "physics_decoys": {"model": {"readout": PHYSICS, "loss_terms": [DECOYS]}, "data": {},
                       "about": "physics-shaped read-out + decoy hinge"},
    "physics_size_decoys": {"model": {"readout": "geomol.models.readouts.SizeAwarePhysicsReadout",
                                      "loss_terms": [DECOYS]}, "data": {},
                            "about": "physics-shaped read-out + a learned heavy-atom trend, with the decoy hinge"},
    "centred": {"model": {"mse_weight": 0.1, "loss_terms": [CENTRED]}, "data": {"group_batches": "series"},
                "about": "learning within series: MSE after centring on each series' batch mean (+ 0.1 x plain MSE)"},
    "pretrain_centred": {"model": {"pretraining": _term("DenoisingPretraining", epochs=1, sigma=1.0), "mse_weight": 0.1,
                                   "loss_terms": [CENTRED]}, "data": {"group_batches": "series"},
                         "about": "1 epoch of ligand-coordinate denoising on the training folds' structures (no labels), "
                                  "then the centred recipe; run with one more epoch than the others"},
    "size_aware": {"model": {"readout": "geomol.models.readouts.SizeAwareReadout"}, "data": {},
                   "about": "size-aware read-out: learned heavy-atom trend + residual MLP on the complex embedding"},
    "hybrid": {"model": {"readout": "geomol.models.readouts.HybridReadout"}, "data": {},
               "about": "hybrid read-out: heavy-atom trend + MLP of the complex embedding, ligand descriptors and "
                        "Morgan counts"},
}


def fold_overrides(args, variant: dict) -> dict:
    """What a fold changes in the recipe's config: data roots, fold, variant, seed and trainer settings."""
    shared = shared_data_dir()
    data = {**variant["data"], "plb_root": str(shared / "plb"), "fep_root": str(shared / "fep_benchmark"),
            "n_folds": args.folds, "fold": args.fold, "cache_dir": args.cache_dir, "preprocess_workers": 1}
    if args.variant == "fragments":
        if not args.fragment_vocab:
            sys.exit("the fragments variant needs --fragment-vocab (a vocabulary from `geomol fragments learn`)")
        data["fragments"] = args.fragment_vocab
    out = Path(args.out_dir).resolve()  # absolute: not moved below the config's default_root_dir
    checkpoint = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                  "init_args": {"dirpath": str(out / f"fold{args.fold}"), "monitor": "val/mean_target_spearman",
                                "mode": "max", "save_top_k": 1, "filename": "best"}}
    logger = {"class_path": "lightning.pytorch.loggers.CSVLogger",
              "init_args": {"save_dir": str(out), "name": f"fold{args.fold}"}}
    trainer = {"max_epochs": args.epochs, "logger": logger, "callbacks": [checkpoint], "enable_progress_bar": False,
               "enable_model_summary": False}
    return {"seed_everything": args.seed + args.fold, "trainer": trainer, "model": {"init_args": variant["model"]},
            "data": {"init_args": data}}


def heavy_atoms(graph) -> int:
    """Heavy atoms of the ligand (segment 1, global atom excluded; hydrogens not counted)."""
    from geomol.data.blocks import ligand_atom_mask
    from geomol.data.vocab import atom_index

    return int((ligand_atom_mask(graph) & (graph.A != atom_index("H"))).sum())


def train_fold(args) -> dict:
    import geomol
    from geomol.tasks.cli import build_from_config, read_config

    torch.set_num_threads(1)
    variant = VARIANTS[args.variant]
    overrides = fold_overrides(args, variant)
    cli = build_from_config(RECIPE, overrides)
    start = time.time()
    cli.trainer.fit(cli.model, cli.datamodule)
    train_seconds = time.time() - start
    checkpoint = cli.trainer.checkpoint_callback
    best = geomol.load_model(checkpoint.best_model_path)  # the inference path, as users load it
    rows = []
    for batch in cli.datamodule.test_dataloader():
        pred, _ = best.predict(batch)
        for i, graph in enumerate(batch.to_data_list()):
            rows.append({"id": graph.name, "protein": graph.protein, "series": graph.series,
                         "y": float(graph.y), "pred": float(pred[i]), "heavy_atoms": heavy_atoms(graph)})
    config = read_config(RECIPE)
    result = {"fold": args.fold, "variant": args.variant, "about": variant["about"], "epochs": args.epochs,
              "seed": args.seed,
              "model": {**config["model"]["init_args"], **variant["model"]},
              "data": {k: v for k, v in {**config["data"]["init_args"], **overrides["data"]["init_args"]}.items()
                       if k not in ("cache_dir",)},
              "split_sizes": cli.datamodule.split_sizes(), "best_checkpoint": str(checkpoint.best_model_path),
              "best_val_mean_target_spearman": float(checkpoint.best_model_score),
              "train_seconds": train_seconds, "provenance": provenance(), "test": rows}
    out = Path(args.out_dir).resolve()  # absolute: not moved below the config's default_root_dir
    (out / f"fold{args.fold}.json").write_text(json.dumps(result, indent=1))
    return result


def score(rows: list[dict], min_ligands: int) -> tuple[dict, dict]:
    """Per-target and summary metrics of test rows (``id, protein, fold, y, pred, heavy_atoms``) against
    the heavy-atom-count baseline on the same items; targets with at least ``min_ligands`` ligands."""
    from geomol.evaluation.metrics import grouped_regression_report, mean_of, rmse

    proteins, y = [r["protein"] for r in rows], [r["y"] for r in rows]
    model = grouped_regression_report([r["pred"] for r in rows], y, proteins)
    baseline = grouped_regression_report([r["heavy_atoms"] for r in rows], y, proteins)
    like_size = grouped_regression_report([r["pred"] for r in rows], [r["heavy_atoms"] for r in rows], proteins)
    fold_of = {r["protein"]: r["fold"] for r in rows}
    per_target = {p: {"fold": fold_of[p], "n": int(m["n"]), "pearson": m["pearson"], "spearman": m["spearman"],
                      "rmse": m["rmse"], "hac_pearson": baseline[p]["pearson"], "hac_spearman": baseline[p]["spearman"]}
                  for p, m in sorted(model.items()) if m["n"] >= min_ligands}
    plb = {p for p in per_target if _in_plb(p, rows)}
    summary = {
        "targets": len(per_target), "items": len(rows),
        "mean_target_spearman": mean_of(t["spearman"] for t in per_target.values()),
        "mean_target_pearson": mean_of(t["pearson"] for t in per_target.values()),
        "hac_mean_target_spearman": mean_of(t["hac_spearman"] for t in per_target.values()),
        "hac_mean_target_pearson": mean_of(t["hac_pearson"] for t in per_target.values()),
        "pooled_rmse": rmse([r["pred"] for r in rows], y),
        "plb_mean_target_spearman": mean_of(per_target[p]["spearman"] for p in plb),
        "plb_hac_mean_target_spearman": mean_of(per_target[p]["hac_spearman"] for p in plb),
        # how much the model's ranking within a target is a ranking by ligand size
        "mean_target_spearman_with_hac": mean_of(like_size[p]["spearman"] for p in per_target),
    }
    return per_target, summary


PREDICTION_FIELDS = ("id", "protein", "fold", "y", "pred", "heavy_atoms")


def summarise(args) -> dict:
    folds = [json.loads(p.read_text()) for p in sorted(Path(args.out_dir).glob("fold*.json"))]
    if not folds:
        sys.exit(f"no fold results in {args.out_dir}")
    rows = [dict(r, fold=f["fold"]) for f in folds for r in f["test"]]
    per_target, summary = score(rows, args.min_ligands)
    summary["train_hours"] = sum(f["train_seconds"] for f in folds) / 3600
    result = {"description": f"{len(folds)}-fold cross-validation grouped by protein over PLB + FEP benchmark; "
                             f"targets with >= {args.min_ligands} ligands",
              "model": folds[0]["model"], "variant": folds[0]["variant"], "epochs": folds[0]["epochs"],
              "seed": folds[0].get("seed", DEFAULT_SEED), "about": VARIANTS[folds[0]["variant"]]["about"],
              "data": _portable(folds[0].get("data", {})),
              "split": "protein_kfold", "machine": f"{platform.processor() or platform.machine()}, 1 thread per fold",
              "folds": [{"fold": f["fold"], "test_targets": sorted({r['protein'] for r in f['test']}),
                         "n": len(f["test"]), "best_val_mean_target_spearman": f["best_val_mean_target_spearman"]}
                        for f in folds],
              "per_target": per_target, "summary": summary,
              "provenance": {"summary": provenance(), "folds": [f.get("provenance") for f in folds]},
              "prediction_fields": list(PREDICTION_FIELDS),
              "predictions": [[r[k] for k in PREDICTION_FIELDS] for r in rows]}
    Path(args.summary).write_text(_dump_with_rows(result, "predictions"))
    print(json.dumps(summary, indent=1))
    return result


def _portable(data_args: dict) -> dict:
    """Data arguments without this machine's paths: no data roots, the fragment vocabulary by file name."""
    out = {k: v for k, v in data_args.items() if k not in ("plb_root", "fep_root", "fold", "cache_dir")}
    if out.get("fragments"):
        out["fragments"] = Path(out["fragments"]).name
    return out


def _dump_with_rows(result: dict, key: str) -> str:
    """JSON with indentation, except one line per row of ``result[key]`` (a long list of lists)."""
    text = json.dumps({**result, key: None}, indent=1)
    rows = ",\n  ".join(json.dumps(row) for row in result[key])
    return text.replace(f'"{key}": null', f'"{key}": [\n  {rows}\n ]')


def _label(summary: dict) -> str:
    """A variant's name, with its seed when not the default one."""
    seed = summary.get("seed", DEFAULT_SEED)
    return summary["variant"] if seed == DEFAULT_SEED else f"{summary['variant']}, seed {seed}"


def compare(args) -> dict:
    """One table over the summaries of several variants, plus their ensemble (the mean prediction
    of all variants per item: every variant's fold model saw the same training proteins)."""
    results = [json.loads(Path(p).read_text()) for p in args.summaries]
    table = [{"variant": _label(r), "about": VARIANTS[r["variant"]]["about"], "epochs": r["epochs"],
              "file": Path(path).name, **r["summary"]} for r, path in zip(results, args.summaries)]
    with_predictions = [r for r in results if "predictions" in r]
    if len(with_predictions) >= 2:
        tables = [{row[0]: dict(zip(r["prediction_fields"], row)) for row in r["predictions"]}
                  for r in with_predictions]
        common = sorted(set.intersection(*(set(t) for t in tables)))
        rows = [dict(tables[0][i], pred=sum(t[i]["pred"] for t in tables) / len(tables)) for i in common]
        _, summary = score(rows, args.min_ligands)
        name = "ensemble(" + " + ".join(_label(r) for r in with_predictions) + ")"
        table.append({"variant": name, "about": "mean prediction of the variants above, per item", "epochs": None,
                      "file": None, **summary})
    keys = ("mean_target_spearman", "mean_target_pearson", "plb_mean_target_spearman", "pooled_rmse",
            "mean_target_spearman_with_hac")
    print(f"{'variant':<40} {'Spearman':>9} {'Pearson':>8} {'PLB Sp.':>8} {'RMSE':>8} {'~HAC':>8}   (HAC Spearman)")
    for row in table:
        print(f"{row['variant']:<40} " + " ".join(f"{row[k]:>8.3f}" for k in keys)
              + f"   ({row['hac_mean_target_spearman']:.3f})")
    out = {"description": "variants of the affinity recipe in the same protein-grouped cross-validation",
           "machine": results[0].get("machine"), "provenance": provenance(), "rows": table}
    if args.out:
        Path(args.out).write_text(json.dumps(out, indent=1))
    return out


def _in_plb(protein: str, rows) -> bool:
    return any(r["protein"] == protein and r["id"].startswith("plb/") for r in rows)


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train")
    train.add_argument("--fold", type=int, required=True)
    train.add_argument("--folds", type=int, default=5)
    train.add_argument("--epochs", type=int, default=12)
    train.add_argument("--variant", choices=sorted(VARIANTS), default="base")
    train.add_argument("--seed", type=int, default=DEFAULT_SEED, help="fold k trains with seed + k")
    train.add_argument("--out-dir", required=True)
    train.add_argument("--cache-dir", default=None)
    train.add_argument("--fragment-vocab", default=None, help="fragment vocabulary JSON (fragments variant)")
    summary = sub.add_parser("summarise")
    summary.add_argument("--out-dir", required=True)
    summary.add_argument("--summary", required=True)
    summary.add_argument("--min-ligands", type=int, default=5)
    table = sub.add_parser("compare", help="one table over variant summaries, plus their ensemble")
    table.add_argument("summaries", nargs="+", help="summary JSON files of `summarise`")
    table.add_argument("--out", help="JSON to write the table to")
    table.add_argument("--min-ligands", type=int, default=5)
    return parser.parse_args(argv)


def main() -> None:
    args = build_args()
    {"train": train_fold, "summarise": summarise, "compare": compare}[args.command](args)


if __name__ == "__main__":
    main()
