"""Leave-cluster-out cross-validation over the whole affinity corpus: baselines and given predictions.

The protocol every affinity variant is judged by (``docs/evaluation.md``; ``benchmarks/affinity_corpus_cv.py``
is its command line):

* items and folds: :mod:`geomol.evaluation.corpus_folds`;
* targets and metrics: :mod:`geomol.metrics.targets` (series with >= 10 ligands by default; Spearman, Pearson,
  Kendall per target; means over the expert-pose sources and over all; the fraction of targets where the model
  beats the heavy-atom count; Spearman with the heavy-atom count);
* variants: the heavy-atom count (HAC), ligand-only random forest (``rf``) and gradient boosting (``gbm``,
  ``gbm_series``) on Morgan counts + descriptors (:mod:`geomol.training.ligand_baselines`, hyper-parameters
  chosen on each fold's validation slice), any out-of-fold predictions (:mod:`geomol.evaluation.predictions`)
  and equal-weight ensembles of variants standardised within targets (:func:`target_ensemble`).
"""
from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from geomol.data.chemistry.ligand_features import LigandFeaturizer
from geomol.data.datasets.corpus_items import SOURCES
from geomol.data.paths import shared_data_dir
from geomol.errors import ConfigError
from geomol.evaluation.corpus_folds import checked_folds, load_items
from geomol.metrics.scores import mean_of
from geomol.evaluation.predictions import fold_about, read_predictions, training_cpu, write_predictions
from geomol.metrics.targets import MIN_TARGET_LIGANDS, evaluate_targets, target_keys
from geomol.provenance import provenance
from geomol.training.ligand_baselines import LIGAND_MODELS, select_ligand_model

__all__ = ["ABOUT", "corpus_cross_validation", "ligand_model_predictions", "format_variants", "per_target_table",
           "add_reference_scores", "target_ensemble", "dump"]

ABOUT = {"hac": "heavy-atom count of the ligand (no training)",
         "rf": "ligand-only random forest, Morgan r=2 counts + descriptors",
         "gbm": "ligand-only gradient boosting, Morgan r=2 counts + descriptors",
         "gbm_series": "ligand-only gradient boosting learning within series: Morgan r=2 counts + descriptors, also "
                       "centred on their series, fitted to the pK minus the series' mean"}
PER_TARGET_SCORES = ("spearman", "pearson", "kendall", "spearman_with_hac")


def ligand_model_predictions(kind: str, features: np.ndarray, label: np.ndarray, folds: list[dict], keys: list[str],
                             series: np.ndarray, *, min_ligands: int, seed: int,
                             only_folds: Sequence[int] | None = None) -> tuple[np.ndarray, list[dict]]:
    """Out-of-fold predictions of a ligand-only model chosen per fold on its validation slice (``series``: each
    item's series, for the within-series model); with ``only_folds``, fitted for those folds alone (``nan``
    elsewhere)."""
    pred = np.full(len(label), np.nan)
    chosen = []
    for k, fold in enumerate(folds):
        if only_folds is not None and k not in only_folds:
            continue
        selection = select_ligand_model(kind, features, label, fold["train"], fold["valid"],
                                        [keys[i] for i in fold["valid"]], min_ligands=min_ligands, seed=seed + k,
                                        groups=series)
        pred[fold["test"]] = selection.predict(features[fold["test"]], series[fold["test"]])
        chosen.append({"fold": k, "params": selection.params, "valid_spearman": selection.score,
                       "tried": selection.tried})
        print(f"  {kind} fold {k}: {selection.params} (validation {selection.score:.3f})", flush=True)
    return pred, chosen


COLUMNS = (("Sp EP", "expert_pose", "spearman"), ("Sp all", "all", "spearman"), ("Pe EP", "expert_pose", "pearson"),
           ("Pe all", "all", "pearson"), ("Kt EP", "expert_pose", "kendall"), ("Kt all", "all", "kendall"),
           (">HAC EP", "expert_pose", "beats_hac_fraction"), (">HAC all", "all", "beats_hac_fraction"),
           ("~HAC EP", "expert_pose", "spearman_with_hac"), ("~HAC all", "all", "spearman_with_hac"))


def format_variants(rows: list[dict]) -> str:
    """The variants table: mean per-target scores (EP = expert-pose sources), % of targets beating HAC, CPU."""
    columns = COLUMNS + ((("ref EP", "expert_pose", "reference_spearman"), ("ref all", "all", "reference_spearman"))
                         if rows and "reference" in rows[0] else ())
    head = f"{'variant':<22}" + "".join(f"{name:>9}" for name, _, _ in columns) + f"{'targets':>10}{'CPU s':>9}"
    lines = [head]
    for row in rows:
        cells = "".join(f"{row[group][key]:>9.3f}" for _, group, key in columns)
        cpu = "" if row["cpu_seconds"] is None else f"{row['cpu_seconds']:.0f}"
        targets = f"{row['expert_pose']['targets']}/{row['all']['targets']}"
        lines.append(f"{row['variant']:<22}{cells}{targets:>10}{cpu:>9}")
    return "\n".join(lines)


def per_target_table(items, keys, fold_of, evaluations: dict[str, dict]) -> dict:
    """One row per target (all sources): target, source, fold, n, HAC Spearman, then each variant's scores."""
    first = {}
    for i, key in enumerate(keys):
        first.setdefault(key, i)
    names = list(evaluations)
    fields = ["target", "source", "fold", "n", "hac_spearman"] + [f"{n}:{s}" for n in names for s in PER_TARGET_SCORES]
    targets = list(dict.fromkeys(t for e in evaluations.values() for t in e["all"]["per_target"]))
    rows = []
    for target in targets:
        i = first[target]
        scored = [evaluations[n]["all"]["per_target"].get(target) for n in names]
        base = next(s for s in scored if s is not None)
        rows.append([target, items[i].source, int(fold_of[i]), base["n"], _round(base["hac_spearman"])]
                    + [_round(s[k]) if s else None for s in scored for k in PER_TARGET_SCORES])
    return {"fields": fields, "rows": rows}


def _round(x: float) -> float | None:
    return None if math.isnan(x) else round(float(x), 4)


def corpus_cross_validation(*, root: Path | None = None, sources: Sequence[str] = SOURCES,
                            series: Sequence[str] | None = None, cache_dir: str | None = None, folds: int = 5,
                            seed: int = 0, targets: str = "series", min_ligands: int = MIN_TARGET_LIGANDS,
                            baselines: Sequence[str] = ("hac", *LIGAND_MODELS), reference: str | None = None,
                            n_bits: int = 1024, predictions: Mapping[str, Path] | None = None,
                            ensembles: Mapping[str, Sequence[str]] | None = None,
                            only_folds: Sequence[int] | None = None, write_to: Path | None = None) -> dict:
    """The protocol's table: every baseline and given variant scored on the same folds and targets.

    Args:
        root: the shared data folder (default :func:`~geomol.data.paths.shared_data_dir`); sources, series: which
            items (a slice of series for a quick run); cache_dir: the processed store (protein clusters).
        folds, seed: the leave-cluster-out folds; targets, min_ligands: what a target is.
        baselines: ``hac`` and the ligand-only models to fit; n_bits: their Morgan fingerprint length.
        reference: a variant scored again on each other variant's own targets (``reference_spearman``).
        predictions: name → out-of-fold predictions (a CSV or a folder of ``fold*.csv``).
        ensembles: name → the variants it averages (standardised within targets).
        only_folds: score every variant on the test items of these folds only (a side by side with a variant
            trained on some folds; the ligand-only baselines are fitted for these folds alone).
        write_to: a folder for each baseline's out-of-fold predictions (``<name>.csv``).

    Returns:
        The result record: description, folds, each variant's summaries, the hyper-parameters the baselines chose,
        the per-target table and provenance.
    """
    start = time.process_time()
    items, clusters = load_items(root or shared_data_dir(), sources, series, cache_dir)
    fold_list, fold_of = checked_folds(items, clusters, folds, seed)
    keys = target_keys(items, clusters, targets)
    label = np.array([item.label for item in items])
    read_seconds, clock = time.process_time() - start, time.process_time()
    featurizer = LigandFeaturizer(n_bits=n_bits)
    features = featurizer.matrix([item.smiles for item in items], [item.id for item in items])
    heavy = features[:, featurizer.feature_names.index("heavy_atoms")]
    feature_seconds = time.process_time() - clock
    given, predicted, cpu, chosen, about = predictions, {}, {}, {}, dict(ABOUT)
    for kind in baselines:
        clock = time.process_time()
        if kind == "hac":
            predicted[kind] = heavy
        else:
            predicted[kind], chosen[kind] = ligand_model_predictions(
                kind, features, label, fold_list, keys, np.array([item.series for item in items]),
                min_ligands=min_ligands, seed=seed, only_folds=only_folds)
        cpu[kind] = time.process_time() - clock
    for name, path in (given or {}).items():
        predicted[name], cpu[name] = read_predictions(Path(path), items, fold_of), training_cpu(Path(path))
        about.setdefault(name, fold_about(Path(path)) or f"predictions from {Path(path).name}")
    for name, members in (ensembles or {}).items():
        unknown = [m for m in members if m not in predicted]
        if unknown:
            raise ConfigError(f"ensemble {name}: no variant {unknown} (known: {sorted(predicted)})")
        predicted[name] = target_ensemble([predicted[m] for m in members], keys)
        cpu[name], about[name] = None, "mean of " + ", ".join(members) + ", each standardised within targets"
    if only_folds is not None:
        outside = ~np.isin(fold_of, np.asarray(list(only_folds), dtype=int))
        predicted = {name: np.where(outside, np.nan, np.asarray(pred, dtype=float)) for name, pred in predicted.items()}
    item_sources = [item.source for item in items]
    evaluations = {name: evaluate_targets(pred, label, heavy, keys, item_sources, include=~np.isnan(pred),
                                          min_ligands=min_ligands) for name, pred in predicted.items()}
    rows = [{"variant": name, "about": about[name],
             "items_predicted": int((~np.isnan(predicted[name])).sum()), "cpu_seconds": cpu[name],
             "expert_pose": e["expert_pose"]["summary"], "all": e["all"]["summary"]} for name, e in evaluations.items()]
    if reference:
        add_reference_scores(rows, evaluations, reference)
    print(format_variants(rows))
    if write_to:
        for kind in baselines:
            write_predictions(Path(write_to) / f"{kind}.csv", items, predicted[kind], fold_of)
    scored = "" if only_folds is None else f"; scored on test folds {sorted(only_folds)} only"
    return {"description": f"{folds}-fold leave-cluster-out CV over the corpus; targets: {targets} with "
                           f">= {min_ligands} ligands; EP = expert-pose sources (plb, fep_benchmark){scored}",
            "items": len(items), "clusters": len(set(clusters)),
            "folds": [{"fold": k, **{part: len(idx) for part, idx in fold.items()}} for k, fold in enumerate(fold_list)],
            "read_cpu_seconds": read_seconds, "featurise_cpu_seconds": feature_seconds,
            "features": {"morgan_radius": featurizer.radius, "n_bits": featurizer.n_bits,
                         "descriptors": featurizer.feature_names[featurizer.n_bits:]},
            "variants": rows, "chosen_hyperparameters": chosen,
            "per_target": per_target_table(items, keys, fold_of, evaluations), "provenance": provenance()}


def add_reference_scores(rows: list[dict], evaluations: dict[str, dict], reference: str) -> None:
    """Give every row's summaries ``reference_spearman``: the reference variant's mean per-target Spearman on
    that row's own targets, the fair comparison for a variant trained on only some folds.

    Raises:
        ConfigError: ``reference`` is not one of the variants.
    """
    if reference not in evaluations:
        raise ConfigError(f"--reference {reference}: no such variant (known: {sorted(evaluations)})")
    for row in rows:
        for group in ("expert_pose", "all"):
            theirs = evaluations[reference][group]["per_target"]
            scores = [theirs[t]["spearman"] for t in evaluations[row["variant"]][group]["per_target"] if t in theirs]
            row[group]["reference_spearman"] = mean_of(scores)
        row["reference"] = reference


def target_ensemble(members: list[np.ndarray], keys: list[str]) -> np.ndarray:
    """The mean of ``members`` (per-item predictions, ``nan`` where missing) after standardising each within
    every target (zero mean, unit spread over the target's items; a constant member counts 0).

    Only the order within a target is scored, so a per-target offset or scale of a member carries no
    information; standardising gives each member an equal say without looking at any label.
    """
    keys_array = np.asarray(keys)
    out = np.zeros(len(keys))
    for pred in members:
        standard = np.full(len(keys), np.nan)
        for key in np.unique(keys_array):
            rows = np.flatnonzero((keys_array == key) & ~np.isnan(pred))
            spread = pred[rows].std()
            standard[rows] = (pred[rows] - pred[rows].mean()) / spread if spread > 0 else 0.0
        out += standard
    return out / len(members)


def dump(result: dict) -> str:
    """JSON with indentation, one line per per-target row."""
    rows = result["per_target"]["rows"]
    text = json.dumps({**result, "per_target": {**result["per_target"], "rows": None}}, indent=1)
    return text.replace('"rows": null', '"rows": [\n  ' + ",\n  ".join(json.dumps(r) for r in rows) + "\n ]")
