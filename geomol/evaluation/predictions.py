"""Out-of-fold predictions as files: one CSV per fold (``id,prediction,fold,...``) and the fold's record.

The format every cross-validation variant writes (:func:`write_fold`) and the protocol's table reads
(:func:`read_predictions`): a folder of ``fold{k}.csv`` files with at least ``id`` and ``prediction``
(and ``fold``, checked against the protocol's folds), and beside each a ``fold{k}.json`` record (variant, what it
is, settings, CPU seconds, provenance). A single CSV (e.g. a baseline's) is read the same way.
"""
from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Sequence

import numpy as np

from geomol.errors import DatasetError

__all__ = ["FOLD_FIELDS", "read_predictions", "write_predictions", "write_fold", "fold_records", "training_cpu",
           "fold_about"]

FOLD_FIELDS = ("id", "prediction", "fold", "y", "heavy_atoms")
"""Columns of a fold's predictions."""


def read_predictions(path: Path, items, fold_of: np.ndarray) -> np.ndarray:
    """Per item the prediction of ``path`` (``nan`` for items it does not cover): a CSV, or a folder
    whose ``fold*.csv`` files are read together (:func:`write_fold` writes one per fold).

    Raises:
        DatasetError: an unknown or repeated id, a value that is not a number, or a ``fold`` that is
            not the item's test fold here (predictions from another split would not be out-of-fold).
    """
    index = {item.id: i for i, item in enumerate(items)}
    pred = np.full(len(items), np.nan)
    files = sorted(path.glob("fold*.csv")) if path.is_dir() else [path]
    if not files:
        raise DatasetError("no fold*.csv files in this folder", path)
    for file in files:
        try:
            with open(file, newline="", encoding="utf-8") as handle:
                reader = csv.DictReader(handle)
                if not reader.fieldnames or not {"id", "prediction"} <= set(reader.fieldnames):
                    raise DatasetError(f"needs columns id,prediction[,fold]; header is {reader.fieldnames}", file)
                for line, row in enumerate(reader, start=2):
                    _place(row, index, pred, fold_of, file, line)
        except OSError as exc:
            raise DatasetError(f"cannot read predictions: {exc.strerror}", file) from None
    return pred


def fold_records(path: Path) -> list[dict]:
    """The ``fold*.json`` records beside a folder's fold predictions, if any."""
    return [json.loads(f.read_text()) for f in sorted(path.glob("fold*.json"))] if path.is_dir() else []


def training_cpu(path: Path) -> float | None:
    """CPU seconds of training summed over a folder's folds (``None`` for a plain CSV or unrecorded)."""
    records = fold_records(path)
    seconds = [r.get("train_cpu_seconds") for r in records]
    return float(sum(seconds)) if records and None not in seconds else None


def fold_about(path: Path) -> str | None:
    """What a folder's variant is, from its fold records (``None`` when it has none)."""
    records = fold_records(path)
    if not records:
        return None
    first = records[0]
    return f"{first.get('model', 'GET')} {first['variant']}: {first['about']} ({first['epochs']} epoch(s))"


def _place(row: dict, index: dict, pred: np.ndarray, fold_of: np.ndarray, path: Path, line: int) -> None:
    i = index.get(row["id"])
    if i is None:
        raise DatasetError(f"id {row['id']!r} is not a corpus item", path, line)
    if not math.isnan(pred[i]):
        raise DatasetError(f"id {row['id']!r} given twice", path, line)
    if row.get("fold") not in (None, "") and int(row["fold"]) != fold_of[i]:
        raise DatasetError(f"{row['id']} is in test fold {fold_of[i]} here, not {row['fold']}", path, line)
    try:
        pred[i] = float(row["prediction"])
    except ValueError:
        raise DatasetError(f"prediction {row['prediction']!r} is not a number", path, line) from None


def write_predictions(path: Path, items, pred: np.ndarray, fold_of: np.ndarray) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "prediction", "fold"])
        writer.writerows([item.id, f"{p:.4f}", int(k)] for item, p, k in zip(items, pred, fold_of) if not np.isnan(p))


def write_fold(out_dir: Path, k: int, ids: Sequence[str], pred: Sequence[float], label: Sequence[float],
               heavy_atoms: Sequence[int], record: dict) -> None:
    """Fold ``k``'s predictions (``fold{k}.csv``, :data:`FOLD_FIELDS`) and its record (``fold{k}.json``)."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    with open(out_dir / f"fold{k}.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(FOLD_FIELDS)
        writer.writerows([i, f"{p:.4f}", k, f"{y:.4f}", int(h)] for i, p, y, h in zip(ids, pred, label, heavy_atoms))
    (out_dir / f"fold{k}.json").write_text(json.dumps(record, indent=1))
