"""GET in the protein–protein affinity cross-validation: train one fold, predict its held-out clusters.

A fold trains through the same config-driven path as ``geomol fit --config configs/get_protein_affinity.yaml``
(:class:`~geomol.tasks.ProteinAffinityDataModule`, leave-cluster-out fold ``k``), from scratch or from the
weights of a shipped protein–ligand model (``init: get-plb``, :class:`~geomol.tasks.warm_start.WarmStart`).
The checkpoint with the lowest RMSE on the fold's validation slice (clusters of its training side) is
loaded as users load a model and predicts the fold's test clusters, which nothing was chosen on.
A fold resumes from its ``last.ckpt`` after an interruption.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from geomol.data.paths import shared_data_dir
from geomol.errors import ConfigError
from geomol.inference.loading import load_model
from geomol.provenance import provenance
from geomol.tasks.runs import build_from_config
from geomol.units import KCAL_PER_PK

__all__ = ["RECIPE", "PPAFold", "fold_overrides", "train_fold", "fold_predictions"]

RECIPE = "get_protein_affinity"
"""The shipped config every fold starts from (``configs/get_protein_affinity.yaml``)."""


@dataclass
class PPAFold:
    """One fold of one GET variant.

    Attributes:
        fold, folds: which leave-cluster-out fold of how many (split seed 0: the benchmark's folds).
        out_dir: checkpoints (``fold{k}/``), logs and ``fold{k}.json``.
        init: ``None`` (from scratch) or a shipped model / checkpoint whose weights start the fit (``get-plb``).
        epochs, seed: maximum epochs; fold ``k`` trains with ``seed + k``.
        model: overrides of the model's ``init_args`` (e.g. ``{"lr": 3e-4}``).
        root: the data folder (default ``<shared data>/protein_affinity``); ids: a slice of it; cache_dir: the store.
    """

    fold: int
    out_dir: str
    folds: int = 5
    init: str | None = None
    epochs: int = 4
    seed: int = 12
    model: dict[str, Any] = field(default_factory=dict)
    root: str | None = None
    ids: list[str] | None = None
    cache_dir: str | None = None
    max_blocks: int = 500

    def __post_init__(self):
        if not 0 <= self.fold < self.folds:
            raise ConfigError(f"fold {self.fold} out of range for {self.folds} folds")


def fold_overrides(fold: PPAFold) -> dict:
    """What a fold changes in :data:`RECIPE`: data, fold, seed, model overrides, checkpoints and warm start."""
    out = Path(fold.out_dir).resolve() / f"fold{fold.fold}"
    callbacks = [{"class_path": "lightning.pytorch.callbacks.ModelCheckpoint",
                  "init_args": {"dirpath": str(out), "monitor": "val/rmse", "mode": "min", "save_top_k": 1,
                                "filename": "best", "save_last": True, "enable_version_counter": False}}]
    if fold.init:
        callbacks.append({"class_path": "geomol.tasks.warm_start.WarmStart", "init_args": {"checkpoint": fold.init}})
    data = {"root": fold.root or str(shared_data_dir() / "protein_affinity"), "n_folds": fold.folds,
            "fold": fold.fold, "split_seed": 0, "ids": fold.ids, "cache_dir": fold.cache_dir,
            "preprocess_workers": 1, "max_blocks": fold.max_blocks}
    trainer = {"max_epochs": fold.epochs, "callbacks": callbacks, "enable_progress_bar": False,
               "enable_model_summary": False,
               "logger": {"class_path": "lightning.pytorch.loggers.CSVLogger",
                          "init_args": {"save_dir": str(out.parent), "name": f"fold{fold.fold}_log", "version": 0}}}
    return {"seed_everything": fold.seed + fold.fold, "trainer": trainer, "model": {"init_args": dict(fold.model)},
            "data": {"init_args": data}}


def fold_predictions(model, datamodule, stage: str = "test") -> list[dict]:
    """Rows ``id, category, difficulty, cluster, dG, pred_dG`` (kcal/mol) of a split predicted by ``model``."""
    loader = datamodule.test_dataloader() if stage == "test" else datamodule.val_dataloader()
    dataset = datamodule.splits[stage]
    rows = []
    for batch in loader:
        pred, _ = model.predict(batch)
        for i, graph in enumerate(batch.to_data_list()):
            extra = dataset.info(int(graph.item_index)).extra
            rows.append({"id": graph.name, "category": extra["category"], "cluster": extra["cluster"],
                         "difficulty": extra["difficulty"], "dG": extra["dG_kcal_mol"],
                         "pred_dG": -KCAL_PER_PK * float(pred[i])})
    return rows


def train_fold(fold: PPAFold) -> dict:
    """Train (or resume) one fold, predict its test clusters with the best-validation checkpoint; writes and
    returns ``fold{k}.json`` (rows, split sizes, best validation RMSE in pK, seconds, provenance)."""
    torch.set_num_threads(1)
    cli = build_from_config(RECIPE, fold_overrides(fold))
    out = Path(fold.out_dir).resolve()
    last = out / f"fold{fold.fold}" / "last.ckpt"
    start, cpu = time.time(), time.process_time()
    cli.trainer.fit(cli.model, cli.datamodule, ckpt_path=str(last) if last.is_file() else None)
    checkpoint = cli.trainer.checkpoint_callback
    best = load_model(checkpoint.best_model_path)  # the inference path, as users load it
    result = {"fold": fold.fold, "settings": asdict(fold), "split_sizes": cli.datamodule.split_sizes(),
              "best_checkpoint": str(checkpoint.best_model_path),
              "best_val_rmse_pK": float(checkpoint.best_model_score), "wall_seconds": time.time() - start,
              "cpu_seconds": time.process_time() - cpu, "provenance": provenance(),
              "valid": fold_predictions(best, cli.datamodule, "valid"),
              "test": fold_predictions(best, cli.datamodule, "test")}
    (out / f"fold{fold.fold}.json").write_text(json.dumps(result, indent=1))
    return result
