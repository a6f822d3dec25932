"""GET in the cross-validations: train a variant's fold, score the folds, compare variants.

* The PLB + FEP+ cross-validation (``benchmarks/affinity_cv.py``): folds of *proteins* over
  ``../shared/data/plb`` and ``../shared/data/fep_benchmark`` (a protein in both sources counts once; alternative
  states of a ligand stay together); each fold's model is chosen on a further 10 % of its training proteins and
  evaluated on the fold's proteins (:func:`train_plb_fold`); per target (protein) with at least ``min_ligands``
  ligands: Pearson and Spearman against the heavy-atom-count baseline, pooled RMSE (:func:`score`,
  :func:`summarise`); several variants (and the ensemble of their predictions) in one table (:func:`compare`).
* The corpus cross-validation (``benchmarks/affinity_corpus_get.py``): a fold of the protocol's leave-cluster-out
  folds, its out-of-fold predictions in the protocol's format (:func:`train_corpus_fold`); a long run's chosen
  checkpoint predicts its fold the same way (:func:`predict_corpus_fold`, ``benchmarks/get_convergence.py``).

Variants and fold settings: :mod:`geomol.evaluation.get_variants`.
"""
from __future__ import annotations

import csv
import json
import platform
import time
from pathlib import Path

import numpy as np
import torch

from geomol.errors import ConfigError
from geomol.evaluation import fewshot
from geomol.evaluation.get_variants import (CORPUS_RECIPE, DEFAULT_SEED, PLB_RECIPE, VARIANTS, GETFold,
                                            corpus_fold_overrides, heavy_atoms, plb_fold_overrides)
from geomol.metrics.scores import grouped_regression_report, mean_of, rmse
from geomol.evaluation.predictions import write_fold
from geomol.metrics.targets import EXPERT_POSE_SOURCES, MIN_TARGET_LIGANDS
from geomol.inference.loading import load_model
from geomol.provenance import provenance
from geomol.shipped_configs import resolve_config
from geomol.config_files import read_config
from geomol.tasks.runs import build_from_config
from geomol.training.finetune import FinetuneSettings
from geomol.version import PACKAGE_DIR

__all__ = ["train_plb_fold", "score", "summarise", "compare", "train_corpus_fold", "predict_corpus_fold",
           "denoising_losses", "PREDICTION_FIELDS", "fold_test_targets", "fewshot_of_folds", "test_predictions"]


def train_plb_fold(fold: GETFold) -> dict:
    """Train one fold of the PLB + FEP+ cross-validation and predict its test proteins with the best-validation
    checkpoint, loaded as users load a model; writes and returns ``fold{k}.json`` (rows, split, provenance)."""
    torch.set_num_threads(1)
    variant = VARIANTS[fold.variant]
    overrides = plb_fold_overrides(fold)
    cli = build_from_config(PLB_RECIPE, overrides)
    start = time.time()
    cli.trainer.fit(cli.model, cli.datamodule)
    train_seconds = time.time() - start
    checkpoint = cli.trainer.checkpoint_callback
    best = load_model(checkpoint.best_model_path)  # the inference path, as users load it
    rows = []
    for batch in cli.datamodule.test_dataloader():
        pred, _ = best.predict(batch)
        for i, graph in enumerate(batch.to_data_list()):
            rows.append({"id": graph.name, "protein": graph.protein, "series": graph.series,
                         "y": float(graph.y), "pred": float(pred[i]), "heavy_atoms": heavy_atoms(graph)})
    config = read_config(PLB_RECIPE)
    result = {"fold": fold.fold, "variant": fold.variant, "about": variant["about"], "epochs": fold.epochs,
              "seed": fold.seed,
              "model": {**config["model"]["init_args"], **variant["model"]},
              "data": {k: v for k, v in {**config["data"]["init_args"], **overrides["data"]["init_args"]}.items()
                       if k not in ("cache_dir",)},
              "split_sizes": cli.datamodule.split_sizes(), "best_checkpoint": str(checkpoint.best_model_path),
              "best_val_mean_target_spearman": float(checkpoint.best_model_score),
              "train_seconds": train_seconds, "provenance": provenance(), "test": rows}
    out = Path(fold.out_dir).resolve()  # absolute: not moved below the config's default_root_dir
    (out / f"fold{fold.fold}.json").write_text(json.dumps(result, indent=1))
    return result


def score(rows: list[dict], min_ligands: int) -> tuple[dict, dict]:
    """Per-target and summary metrics of test rows (``id, protein, fold, y, pred, heavy_atoms``) against
    the heavy-atom-count baseline on the same items; targets with at least ``min_ligands`` ligands."""
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


def summarise(out_dir: Path, summary_path: Path, min_ligands: int = 5) -> dict:
    """The folds' results of ``out_dir`` scored together (:func:`score`), written to ``summary_path``.

    Raises:
        ConfigError: no fold results in ``out_dir``.
    """
    folds = [json.loads(p.read_text()) for p in sorted(Path(out_dir).glob("fold*.json"))]
    if not folds:
        raise ConfigError(f"no fold results in {out_dir}")
    rows = [dict(r, fold=f["fold"]) for f in folds for r in f["test"]]
    per_target, summary = score(rows, min_ligands)
    summary["train_hours"] = sum(f["train_seconds"] for f in folds) / 3600
    result = {"description": f"{len(folds)}-fold cross-validation grouped by protein over PLB + FEP benchmark; "
                             f"targets with >= {min_ligands} ligands",
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
    Path(summary_path).write_text(_dump_with_rows(result, "predictions"))
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


def compare(summaries: list[Path], out: Path | None = None, min_ligands: int = 5) -> dict:
    """One table over the summaries of several variants, plus their ensemble (the mean prediction
    of all variants per item: every variant's fold model saw the same training proteins)."""
    results = [json.loads(Path(p).read_text()) for p in summaries]
    table = [{"variant": _label(r), "about": VARIANTS[r["variant"]]["about"], "epochs": r["epochs"],
              "file": Path(path).name, **r["summary"]} for r, path in zip(results, summaries)]
    with_predictions = [r for r in results if "predictions" in r]
    if len(with_predictions) >= 2:
        tables = [{row[0]: dict(zip(r["prediction_fields"], row)) for row in r["predictions"]}
                  for r in with_predictions]
        common = sorted(set.intersection(*(set(t) for t in tables)))
        rows = [dict(tables[0][i], pred=sum(t[i]["pred"] for t in tables) / len(tables)) for i in common]
        _, summary = score(rows, min_ligands)
        name = "ensemble(" + " + ".join(_label(r) for r in with_predictions) + ")"
        table.append({"variant": name, "about": "mean prediction of the variants above, per item", "epochs": None,
                      "file": None, **summary})
    keys = ("mean_target_spearman", "mean_target_pearson", "plb_mean_target_spearman", "pooled_rmse",
            "mean_target_spearman_with_hac")
    print(f"{'variant':<40} {'Spearman':>9} {'Pearson':>8} {'PLB Sp.':>8} {'RMSE':>8} {'~HAC':>8}   (HAC Spearman)")
    for row in table:
        print(f"{row['variant']:<40} " + " ".join(f"{row[k]:>8.3f}" for k in keys)
              + f"   ({row['hac_mean_target_spearman']:.3f})")
    table_record = {"description": "variants of the affinity recipe in the same protein-grouped cross-validation",
                    "machine": results[0].get("machine"), "provenance": provenance(), "rows": table}
    if out:
        Path(out).write_text(json.dumps(table_record, indent=1))
    return table_record


def _in_plb(protein: str, rows) -> bool:
    return any(r["protein"] == protein and r["id"].startswith("plb/") for r in rows)


def denoising_losses(metrics_csv: Path, module) -> dict | None:
    """The denoising pre-training's logged training loss (1 = returning the noisy input, 0 = perfect): its
    first and last logged values and the mean of the last 10; ``None`` without pre-training."""
    stage = getattr(module, "pretraining_stage", None)
    if stage is None or not metrics_csv.exists():
        return None
    with open(metrics_csv, newline="", encoding="utf-8") as handle:
        losses = [float(row["train/loss"]) for row in csv.DictReader(handle)
                  if row.get("train/loss") and int(row["epoch"]) < stage.epochs]
    if not losses:
        return None
    return {"first": losses[0], "last": losses[-1], "mean_last_10": sum(losses[-10:]) / len(losses[-10:]),
            "logged_steps": len(losses)}


def test_predictions(checkpoint: str | Path, datamodule) -> list[tuple[str, float, float, int]]:
    """A checkpoint's predictions on a data module's test split, the model loaded as users load it
    (:func:`~geomol.inference.loading.load_model`): one ``(id, predicted pK, measured pK, ligand heavy
    atoms)`` per test complex."""
    model = load_model(checkpoint)
    rows = []
    with torch.inference_mode():
        for batch in datamodule.test_dataloader():
            pred, _ = model.predict(batch)
            rows += [(graph.name, float(p), float(graph.y), heavy_atoms(graph))
                     for graph, p in zip(batch.to_data_list(), pred)]
    return rows


def train_corpus_fold(fold: GETFold) -> dict:
    """Train one fold of a GET variant in the corpus cross-validation and write its out-of-fold predictions (the
    best-validation checkpoint on the fold's test items, loaded as users load a model) and record.

    Raises:
        ConfigError: the ``fragments`` variant (it needs a vocabulary of the whole corpus, not wired yet).
    """
    if fold.variant == "fragments":
        raise ConfigError("the fragments variant needs a vocabulary of the whole corpus; not wired for the corpus yet")
    torch.set_num_threads(1)
    variant = VARIANTS[fold.variant]
    cli = build_from_config(CORPUS_RECIPE, corpus_fold_overrides(fold))
    wall, cpu = time.perf_counter(), time.process_time()
    cli.trainer.fit(cli.model, cli.datamodule)
    train_wall, train_cpu = time.perf_counter() - wall, time.process_time() - cpu
    checkpoint = cli.trainer.checkpoint_callback
    denoising = denoising_losses(Path(cli.trainer.logger.log_dir) / "metrics.csv", cli.model)
    rows = test_predictions(checkpoint.best_model_path, cli.datamodule)
    result = {"fold": fold.fold, "folds": fold.folds, "variant": fold.variant, "about": variant["about"],
              "epochs": fold.epochs, "limit_train_batches": fold.limit_train_batches,
              "val_check_interval": fold.val_check_interval, "seed": fold.seed + fold.fold,
              "recipe": CORPUS_RECIPE.relative_to(PACKAGE_DIR.parent).as_posix(), "overrides": variant,
              "split_sizes": cli.datamodule.split_sizes(), "steps": cli.trainer.global_step,
              "best_val_mean_target_spearman": float(checkpoint.best_model_score),
              "train_wall_seconds": train_wall, "train_cpu_seconds": train_cpu, "test_items": len(rows),
              "denoising_loss": denoising,
              "provenance": provenance()}
    _write_test_fold(Path(fold.out_dir).resolve(), fold.fold, rows, result)
    print(json.dumps({k: v for k, v in result.items() if k != "provenance"}, indent=1))
    return result


def _write_test_fold(out_dir: Path, fold: int, rows: list[tuple[str, float, float, int]], record: dict) -> None:
    """:func:`test_predictions` rows and their record as the protocol's ``fold{k}.csv`` / ``fold{k}.json``."""
    ids, pred, label, heavy = zip(*rows) if rows else ((), (), (), ())
    write_fold(out_dir, fold, ids, pred, label, heavy, record)


def predict_corpus_fold(config: str | Path, checkpoint: str | Path, out_dir: str | Path) -> dict:
    """A chosen checkpoint of a long corpus run (a ``geomol fit`` config of the corpus recipe, its fold in
    ``data.init_args.fold``) on that fold's test complexes, loaded as users load a model, written in the
    protocol's format (``out_dir/fold{k}.csv`` and its record ``fold{k}.json``: fold, variant and what it is, config,
    checkpoint, its epoch and step, the training CPU seconds its ``CPUTime`` callback counted, test items, prediction
    seconds, provenance). Returns the record."""
    torch.set_num_threads(1)
    settings = read_config(resolve_config(str(config)))
    quiet = {"trainer": {"logger": False, "callbacks": [], "enable_progress_bar": False}}
    cli = build_from_config(settings, quiet)
    cli.datamodule.setup("test")
    fold = int(settings["data"]["init_args"]["fold"])
    stored = torch.load(checkpoint, map_location="cpu", weights_only=True)  # tensors and plain values only
    wall, cpu = time.perf_counter(), time.process_time()
    rows = test_predictions(checkpoint, cli.datamodule)
    epochs = int(stored.get("epoch", 0)) + 1  # a checkpoint saved at validation holds its 0-based epoch
    record = {"fold": fold, "model": "GET", "variant": Path(config).stem,
              "about": f"the long run of {Path(config).name}, its checkpoint chosen on the validation slice",
              "epochs": epochs, "config": str(config), "checkpoint": str(checkpoint),
              "epoch": stored.get("epoch"), "global_step": stored.get("global_step"),
              "train_cpu_seconds": stored.get("callbacks", {}).get("CPUTime", {}).get("cpu_seconds"),
              "test_items": len(rows),
              "predict_wall_seconds": time.perf_counter() - wall, "predict_cpu_seconds": time.process_time() - cpu,
              "provenance": provenance()}
    _write_test_fold(Path(out_dir), fold, rows, record)
    return record


def fold_test_targets(fold: GETFold, min_ligands: int = MIN_TARGET_LIGANDS) -> dict[str, list]:
    """A corpus fold's test complexes grouped by series, the targets with at least ``min_ligands`` ligands (as
    the fold's data module builds them: the few-shot measurement reads the fold's held-out targets)."""
    overrides = corpus_fold_overrides(fold)
    overrides["trainer"] = {"logger": False, "callbacks": [], "enable_progress_bar": False}
    cli = build_from_config(CORPUS_RECIPE, overrides)
    cli.datamodule.setup("test")
    targets: dict[str, list] = {}
    for graph in cli.datamodule.splits["test"]:
        targets.setdefault(graph.series, []).append(graph)
    return {key: graphs for key, graphs in targets.items() if len(graphs) >= min_ligands}


def fewshot_of_folds(cv_dir: Path, folds: list[int], *, variant: str = "base", n_folds: int = 5,
                     valid_fraction: float = 0.1, series: list[str] | None = None, cache_dir: str | None = None,
                     ks: list[int] = (3, 5, 10), draws: int = 5, min_rest: int = 5, max_targets: int | None = None,
                     settings: FinetuneSettings = FinetuneSettings(), seed: int = 0) -> dict:
    """Few-shot fine-tuning of a GET variant's fold models (``cv_dir/fold{k}_checkpoint/best.ckpt``, written by
    :func:`train_corpus_fold`) on k measured ligands of each of the fold's held-out targets
    (:mod:`geomol.evaluation.fewshot`); with ``max_targets``, per fold every expert-pose target and a random sample
    of the others up to that many. Returns the result record (rows per target and k, summary, provenance)."""
    torch.set_num_threads(1)
    rng = np.random.default_rng(seed)
    rows, clock = [], time.process_time()
    for fold in folds:
        model = load_model(str(Path(cv_dir) / f"fold{fold}_checkpoint" / "best.ckpt"))
        targets = fold_test_targets(GETFold(fold, str(cv_dir), folds=n_folds, variant=variant, cache_dir=cache_dir,
                                            series=series, valid_fraction=valid_fraction))
        keys = sorted(targets)
        if max_targets is not None:
            expert = [t for t in keys if targets[t][0].source in EXPERT_POSE_SOURCES]
            others = [t for t in keys if t not in set(expert)]
            rng.shuffle(others)
            keys = expert + others[:max(0, max_targets - len(expert))]
        for key in keys:
            graphs = targets[key]
            for k in ks:
                if len(graphs) < k + min_rest:
                    continue
                scores = fewshot.score_draws(model, graphs, [heavy_atoms(g) for g in graphs], k, draws, rng, settings)
                rows.append({"target": key, "source": graphs[0].source, "fold": fold, "n": len(graphs), "k": k,
                             **{m: round(float(v), 4) for m, v in scores.items()}})
        print(f"fold {fold}: {len(keys)} targets scored", flush=True)
    summary = fewshot.summarise(rows, ks)
    print(fewshot.format_summary(summary))
    return {"description": "few-shot fine-tuning on k measured ligands of each held-out target; Spearman on the "
                           "target's other ligands, mean over draws, then over targets",
            "cv_dir": str(cv_dir), "variant": variant, "k": list(ks), "draws": draws, "min_rest": min_rest,
            "settings": vars(settings), "cpu_seconds": time.process_time() - clock, "summary": summary, "rows": rows,
            "provenance": provenance()}
