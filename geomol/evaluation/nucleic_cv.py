"""Leave-cluster-out cross-validation of nucleic-acid affinity models: out-of-fold predictions and the table.

:func:`run_variant` fits one variant (a kind of :data:`~geomol.evaluation.nucleic_models.MODEL_KINDS` with its
settings) on every fold of a :class:`~geomol.evaluation.nucleic_set.NucleicSet` and writes its predictions of each
fold's held-out complexes to ``OUT/<variant>.json`` after every fold (a run interrupted resumes at the first fold
not written). :func:`summarise` scores the files on the same items: pooled over every held-out tier-A complex
(Spearman, Pearson, RMSE, Kendall; the acceptance figures), the heavy-atom count on the same complexes, a 95 %
interval of the Spearman correlation from resampling whole clusters, the mean Spearman within folds and the
Spearman over the held-out tier-B complexes. Ensembles (``name=a+b``) average their members' predictions per
complex.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Sequence

import numpy as np

from geomol.errors import ConfigError
from geomol.metrics.scores import kendall_tau, pearson, rmse, spearman
from geomol.evaluation.nucleic_models import MODEL_KINDS
from geomol.evaluation.nucleic_set import NucleicSet
from geomol.provenance import provenance

__all__ = ["run_variant", "read_variant", "variant_predictions", "ensemble_predictions", "score_predictions",
           "summarise", "format_table"]


def _path(out_dir: Path, name: str) -> Path:
    return Path(out_dir) / f"{name}.json"


def read_variant(out_dir: str | Path, name: str) -> dict | None:
    """A variant's result file (``None`` when it has not been run)."""
    path = _path(Path(out_dir), name)
    return json.loads(path.read_text()) if path.is_file() else None


def _write(path: Path, record: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".json.tmp")
    temporary.write_text(json.dumps(record, indent=1))
    temporary.replace(path)  # atomic: an interrupted write leaves the previous folds intact


def run_variant(data: NucleicSet, name: str, kind: str, settings: dict, out_dir: str | Path, *,
                about: str = "", folds: Sequence[int] | None = None) -> dict:
    """Fit variant ``name`` on every fold (or ``folds``) not yet in ``OUT/<name>.json`` and write each fold's
    held-out predictions as it finishes; return the record.

    Raises:
        ConfigError: an unknown kind, or a result file of the same name written with other settings or folds.
    """
    if kind not in MODEL_KINDS:
        raise ConfigError(f"unknown model kind {kind!r}; kinds: {sorted(MODEL_KINDS)}")
    path = _path(Path(out_dir), name)
    record = read_variant(out_dir, name) or {"variant": name, "kind": kind, "settings": settings, "about": about,
                                              "protocol": data.protocol, "folds": []}
    if record["kind"] != kind or record["settings"] != settings or record["protocol"] != data.protocol:
        raise ConfigError(f"{path} holds variant {name!r} with other settings or folds: remove it or use another "
                          "name", path)
    done = {f["fold"] for f in record["folds"]}
    for k in folds if folds is not None else range(len(data.folds)):
        if k in done:
            continue
        fold = data.folds[k]
        clock = time.process_time()
        pred, chosen = MODEL_KINDS[kind](data, fold, k, settings)
        held = data.held_out(fold)
        record["folds"].append({"fold": k, "ids": [data.ids[i] for i in held], "prediction": np.round(pred, 5).tolist(),
                                "label": data.label[held].tolist(), "tier": data.tiers[held].tolist(),
                                "cluster": data.clusters[held].tolist(), "heavy_atoms": data.heavy[held].tolist(),
                                "chosen": chosen, "cpu_seconds": round(time.process_time() - clock, 1),
                                "train_items": len(fold["train"]), "valid_items": len(fold["valid"])})
        record["folds"].sort(key=lambda f: f["fold"])
        record["provenance"] = provenance()
        _write(path, record)
        print(f"{name} fold {k}: {chosen if len(str(chosen)) < 200 else str(chosen)[:200]} "
              f"({record['folds'][-1]['cpu_seconds']:.0f} CPU s)", flush=True)
    return record


def variant_predictions(record: dict) -> dict[str, dict]:
    """``{item id: {prediction, label, tier, cluster, heavy_atoms, fold}}`` of a variant's result record."""
    items = {}
    for fold in record["folds"]:
        for i, item in enumerate(fold["ids"]):
            items[item] = {key: fold[column][i] for key, column in (
                ("prediction", "prediction"), ("label", "label"), ("tier", "tier"), ("cluster", "cluster"),
                ("heavy_atoms", "heavy_atoms"))} | {"fold": fold["fold"]}
    return items


def ensemble_predictions(members: Sequence[dict[str, dict]]) -> dict[str, dict]:
    """The mean prediction per item over the members' :func:`variant_predictions` (items all of them have)."""
    common = set.intersection(*(set(m) for m in members))
    return {item: {**members[0][item], "prediction": float(np.mean([m[item]["prediction"] for m in members]))}
            for item in sorted(common)}


def _cluster_interval(pred: np.ndarray, label: np.ndarray, clusters: np.ndarray, draws: int = 1000,
                      seed: int = 0) -> list[float]:
    """The 2.5 and 97.5 percentiles of the Spearman correlation over resamples of whole clusters."""
    rng = np.random.default_rng(seed)
    names = np.unique(clusters)
    members = [np.flatnonzero(clusters == c) for c in names]
    values = []
    for _ in range(draws):
        idx = np.concatenate([members[j] for j in rng.integers(len(names), size=len(names))])
        value = spearman(pred[idx], label[idx])
        if np.isfinite(value):
            values.append(value)
    return [round(float(np.percentile(values, q)), 3) for q in (2.5, 97.5)]


def score_predictions(items: dict[str, dict]) -> dict:
    """The table's figures for one variant's :func:`variant_predictions` (module notes)."""
    rows = list(items.values())
    column = lambda name, tier: np.asarray([r[name] for r in rows if r["tier"] == tier])  # noqa: E731
    pred, label, heavy, clusters = (column(n, "A") for n in ("prediction", "label", "heavy_atoms", "cluster"))
    folds = column("fold", "A")
    within = [spearman(pred[folds == f], label[folds == f]) for f in np.unique(folds)]
    tier_b = (column("prediction", "B"), column("label", "B"))
    out = {"complexes": len(pred), "spearman": spearman(pred, label), "pearson": pearson(pred, label),
           "rmse": rmse(pred, label), "kendall": kendall_tau(pred, label),
           "hac_spearman": spearman(heavy, label), "spearman_with_hac": spearman(pred, heavy),
           "spearman_interval": _cluster_interval(pred, label, clusters),
           "mean_fold_spearman": float(np.nanmean(within)), "tier_b_complexes": len(tier_b[0]),
           "tier_b_spearman": spearman(*tier_b) if len(tier_b[0]) > 1 else float("nan")}
    out["gain_over_hac"] = out["spearman"] - out["hac_spearman"]
    return {key: round(value, 4) if isinstance(value, float) else value for key, value in out.items()}


def _selection_score(chosen: Sequence[dict]) -> float | None:
    """The mean over folds of the score each fold chose by (inner cross-validation or validation slice), the only
    figure a choice between variants may use; None for a variant that chose nothing."""
    scores = [c.get("inner_spearman", c.get("valid_spearman")) for c in chosen]
    return round(float(np.mean(scores)), 4) if scores and None not in scores else None


def summarise(out_dir: str | Path, names: Sequence[str], ensembles: dict[str, Sequence[str]] | None = None) -> list[dict]:
    """One row per variant (and ensemble): its settings, what was chosen and :func:`score_predictions`.

    Raises:
        ConfigError: a variant not run, or not on the same held-out complexes as the first.
    """
    rows, predictions = [], {}
    for name in names:
        record = read_variant(out_dir, name)
        if record is None:
            raise ConfigError(f"variant {name!r} has no result file in {out_dir}")
        predictions[name] = variant_predictions(record)
        chosen = [f["chosen"] for f in record["folds"]]
        rows.append({"variant": name, "kind": record["kind"], "about": record.get("about", ""),
                     "settings": record["settings"], "cpu_hours": round(sum(f["cpu_seconds"] for f in record["folds"])
                                                                        / 3600, 3),
                     "chosen": chosen, "selection_spearman": _selection_score(chosen),
                     **score_predictions(predictions[name])})
    first = set(predictions[names[0]]) if names else set()
    uneven = [name for name in names if set(predictions[name]) != first]
    if uneven:
        raise ConfigError(f"variants {uneven} were not scored on the same complexes as {names[0]!r} (unfinished folds?)")
    for name, members in (ensembles or {}).items():
        unknown = [m for m in members if m not in predictions]
        if unknown:
            raise ConfigError(f"ensemble {name!r}: unknown member(s) {unknown}")
        rows.append({"variant": name, "kind": "ensemble", "about": f"mean prediction of {', '.join(members)}",
                     "settings": {"members": list(members)}, "cpu_hours": None, "chosen": [],
                     **score_predictions(ensemble_predictions([predictions[m] for m in members]))})
    return rows


def format_table(rows: Sequence[dict]) -> str:
    """The rows as a Markdown table (pooled tier-A figures first)."""
    head = ("| variant | what it is | Spearman | 95 % (clusters) | Pearson | RMSE | vs HAC | mean fold Spearman "
            "| tier-B Spearman | Spearman with HAC | selection score |\n|---|---|---|---|---|---|---|---|---|---|---|")
    lines = [head]
    for r in rows:
        low, high = r["spearman_interval"]
        selection = "–" if r.get("selection_spearman") is None else f"{r['selection_spearman']:.3f}"
        lines.append(f"| {r['variant']} | {r['about']} | {r['spearman']:.3f} | {low:.2f}–{high:.2f} | "
                     f"{r['pearson']:.3f} | {r['rmse']:.2f} | {r['gain_over_hac']:+.3f} | {r['mean_fold_spearman']:.3f} "
                     f"| {r['tier_b_spearman']:.3f} | {r['spearman_with_hac']:.2f} | {selection} |")
    return "\n".join(lines)
