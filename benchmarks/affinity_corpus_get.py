"""GET variants in the corpus cross-validation: train fold ``k``, write its out-of-fold predictions.

Each fold trains through the same config-driven path as ``geomol fit --config configs/get_affinity_corpus.yaml``
(the whole corpus, :class:`~geomol.tasks.CorpusDataModule`), with the variant (``affinity_cv.VARIANTS``:
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
import csv
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling script's variants, however this one is run
from affinity_cv import VARIANTS, heavy_atoms  # noqa: E402
from geomol.data.paths import shared_data_dir  # noqa: E402
from geomol.provenance import provenance  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
RECIPE = REPO / "configs" / "get_affinity_corpus.yaml"
PROTOCOL_SEED = 0  # the fold seed of benchmarks/affinity_corpus_cv.py
FIELDS = ("id", "prediction", "fold", "y", "heavy_atoms")


def fold_overrides(args, variant: dict) -> dict:
    """What a fold changes in the corpus recipe: data root, fold, split seed, variant, seed and trainer settings."""
    data = {**variant["data"], "root": str(shared_data_dir()), "n_folds": args.folds, "fold": args.fold,
            "split_seed": PROTOCOL_SEED, "valid_fraction": args.valid_fraction, "series": args.series,
            "cache_dir": args.cache_dir, "preprocess_workers": 1}
    out = Path(args.out_dir).resolve()  # absolute: not moved below the config's default_root_dir
    checkpoint = {"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                  "init_args": {"dirpath": str(out / f"fold{args.fold}_checkpoint"), "monitor": "val/mean_target_spearman",
                                "mode": "max", "save_top_k": 1, "filename": "best"}}
    logger = {"class_path": "lightning.pytorch.loggers.CSVLogger", "init_args": {"save_dir": str(out),
                                                                                "name": f"fold{args.fold}"}}
    trainer = {"max_epochs": args.epochs, "limit_train_batches": args.limit_train_batches,
               "val_check_interval": args.val_check_interval, "logger": logger, "callbacks": [checkpoint],
               "enable_progress_bar": False, "enable_model_summary": False}
    return {"seed_everything": args.seed + args.fold, "trainer": trainer, "model": {"init_args": variant["model"]},
            "data": {"init_args": data}}


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


def train_fold(args) -> dict:
    import geomol
    from geomol.tasks.cli import build_from_config

    torch.set_num_threads(1)
    variant = VARIANTS[args.variant]
    cli = build_from_config(RECIPE, fold_overrides(args, variant))
    wall, cpu = time.perf_counter(), time.process_time()
    cli.trainer.fit(cli.model, cli.datamodule)
    train_wall, train_cpu = time.perf_counter() - wall, time.process_time() - cpu
    checkpoint = cli.trainer.checkpoint_callback
    denoising = denoising_losses(Path(cli.trainer.logger.log_dir) / "metrics.csv", cli.model)
    best = geomol.load_model(checkpoint.best_model_path)  # the inference path, as users load it
    rows = []
    with torch.inference_mode():
        for batch in cli.datamodule.test_dataloader():
            pred, _ = best.predict(batch)
            rows += [{"id": graph.name, "prediction": f"{float(p):.4f}", "fold": args.fold, "y": float(graph.y),
                      "heavy_atoms": heavy_atoms(graph)} for graph, p in zip(batch.to_data_list(), pred)]
    out = Path(args.out_dir).resolve()
    with open(out / f"fold{args.fold}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(rows)
    result = {"fold": args.fold, "folds": args.folds, "variant": args.variant, "about": variant["about"],
              "epochs": args.epochs, "limit_train_batches": args.limit_train_batches,
              "val_check_interval": args.val_check_interval, "seed": args.seed + args.fold,
              "recipe": RECIPE.relative_to(REPO).as_posix(), "overrides": variant,
              "split_sizes": cli.datamodule.split_sizes(), "steps": cli.trainer.global_step,
              "best_val_mean_target_spearman": float(checkpoint.best_model_score),
              "train_wall_seconds": train_wall, "train_cpu_seconds": train_cpu, "test_items": len(rows),
              "denoising_loss": denoising,
              "provenance": provenance()}
    (out / f"fold{args.fold}.json").write_text(json.dumps(result, indent=1))
    print(json.dumps({k: v for k, v in result.items() if k != "provenance"}, indent=1))
    return result


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
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


def main(argv: list[str] | None = None) -> dict:
    args = build_args(argv)
    if args.variant == "fragments":
        sys.exit("the fragments variant needs a vocabulary of the whole corpus; not wired for the corpus yet")
    Path(args.out_dir).mkdir(parents=True, exist_ok=True)
    return train_fold(args)


if __name__ == "__main__":
    main()
