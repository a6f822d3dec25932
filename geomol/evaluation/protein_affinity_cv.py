"""The protein–protein affinity cross-validation: baselines fitted per fold, every model scored on the same folds.

Folds: :func:`~geomol.data.datasets.protein_affinity.cluster_folds` (seed 0, five folds; whole sequence clusters
held out). Rows, all predicting ΔG in kcal/mol for the complexes of each held-out fold:

* PRODIGY as its package predicts (fixed coefficients; nothing fitted here), and the same IC-NIS descriptors
  refitted by least squares on each fold's training side ("PRODIGY refit");
* interface size: residues within 8 Å; buried surface (freesasa): one-feature least squares per fold;
* contact counts: ridge regression on the six residue-class contact counts, its penalty chosen by
  leave-cluster-out cross-validation inside the fold's training side;
* category mean: each category's mean ΔG on the training side (what the category alone predicts);
* GET get-plb frozen + ridge: the protein–ligand GET (member 0 of ``get-plb``) unchanged, its complex embedding
  (``graph_repr``, 32 numbers) and its own pK as features of a ridge regression per fold (a linear probe: does
  what the generalist learned on ligands carry over without training it on proteins?);
* GET rows: out-of-fold predictions written by :mod:`geomol.evaluation.protein_affinity_get`.

Scores: pooled Pearson, Spearman and RMSE (kcal/mol) over the complexes every row predicted, per category and per
PPAB difficulty class (complexes labelled from PPAB v2). Nothing is chosen on a test fold.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Callable, Mapping, Sequence

import numpy as np

from geomol.data.chemistry.interface_features import CONTACT_FEATURES, interface_features
from geomol.data.datasets.protein_affinity import CATEGORIES, ProteinComplex, cluster_folds, read_protein_affinity
from geomol.errors import GeomolError
from geomol.metrics.scores import regression_report
from geomol.evaluation.prodigy import prodigy_version, run_prodigy

__all__ = ["N_FOLDS", "complex_features", "frozen_get_features", "baseline_predictions", "get_predictions", "score_rows",
           "cross_validation_table", "format_table"]

N_FOLDS = 5
PRODIGY_REFIT = ("CC", "AC", "PP", "AP", "nis_apolar", "nis_charged")
"""The descriptors of PRODIGY's IC-NIS model, refitted per fold."""
RIDGE_ALPHAS = (0.1, 1.0, 10.0, 100.0, 1000.0)


def complex_features(root: str | Path, done: Mapping[str, dict] | None = None, progress: bool = False
                     ) -> dict[str, dict]:
    """Per complex id: geomol's interface descriptors and PRODIGY's prediction (``prodigy``) or the reason it
    failed (``prodigy_error``); ``done`` entries are kept as they are (a resumed run)."""
    rows = dict(done or {})
    complexes = [c for c in read_protein_affinity(root) if c.id not in rows]
    for count, item in enumerate(complexes, start=1):
        row: dict = {}
        try:
            row.update(interface_features(item.structure, item.chains_a, item.chains_b))
        except GeomolError as exc:
            row["error"] = str(exc)
        try:
            row["prodigy"] = run_prodigy(item.structure, item.chains_a, item.chains_b)
        except GeomolError as exc:
            row["prodigy_error"] = str(exc)
        rows[item.id] = row
        if progress and count % 25 == 0:
            print(f"features: {count}/{len(complexes)}", flush=True)
    return rows


def frozen_get_features(root: str | Path, model: str = "get-plb", cache_dir: str | None = None,
                        batch_size: int = 16) -> dict[str, list[float]]:
    """Per complex id: ``graph_repr`` of member 0 of a shipped GET model on the 6 Å interface graph, then its pK."""
    import torch

    from geomol.data.datasets.protein_affinity import ProteinAffinityDataset
    from geomol.inference.loading import load_model

    member = load_model(model).members[0]
    dataset = ProteinAffinityDataset(root, cache_dir=cache_dir, progress=False)
    out = {}
    with torch.inference_mode():
        for start in range(0, len(dataset), batch_size):
            graphs = [dataset[i] for i in range(start, min(start + batch_size, len(dataset)))]
            embedded = member.embed(graphs)
            pk = -member.energy(embedded) if hasattr(member, "energy") else member(graphs)
            for graph, row, value in zip(graphs, embedded.graph_repr.tolist(), pk.tolist()):
                out[graph.name] = [*row, value]
    return out


# ---------------------------------------------------------------------- baselines
def _least_squares(x_train: np.ndarray, y_train: np.ndarray, x_test: np.ndarray, alpha: float = 0.0) -> np.ndarray:
    """Linear fit with intercept (ridge penalty ``alpha`` on standardised features; 0 = ordinary least squares)."""
    mean, scale = x_train.mean(0), x_train.std(0)
    scale[scale == 0] = 1.0
    a, b = (x_train - mean) / scale, (x_test - mean) / scale
    centred = y_train - y_train.mean()
    if alpha == 0:  # least squares; the minimum-norm solution when features are collinear
        weights = np.linalg.lstsq(a, centred, rcond=None)[0]
    else:
        weights = np.linalg.solve(a.T @ a + alpha * np.eye(a.shape[1]), a.T @ centred)
    return b @ weights + y_train.mean()


def _ridge(x_train, y_train, x_test, clusters_train: Sequence[str]) -> np.ndarray:
    """Ridge with its penalty chosen by leave-cluster-out CV inside the training side (inner folds)."""
    inner = cluster_folds(clusters_train, min(N_FOLDS, len(set(clusters_train))), valid_fraction=0.0, seed=1)

    def inner_error(alpha: float) -> float:
        return sum(float(((_least_squares(x_train[f["train"]], y_train[f["train"]], x_train[f["test"]], alpha)
                           - y_train[f["test"]]) ** 2).sum()) for f in inner)

    best = min(RIDGE_ALPHAS, key=inner_error)
    return _least_squares(x_train, y_train, x_test, best)


def _category_mean(train: Sequence[ProteinComplex], test: Sequence[ProteinComplex]) -> np.ndarray:
    overall = float(np.mean([c.dg_kcal_mol for c in train]))
    means = {cat: [c.dg_kcal_mol for c in train if c.category == cat] for cat in CATEGORIES}
    return np.array([float(np.mean(means[c.category])) if means[c.category] else overall for c in test])


def _columns(features: Mapping[str, dict], complexes: Sequence[ProteinComplex], names: Sequence[str],
             prodigy: bool = False) -> np.ndarray:
    return np.array([[float((features[c.id]["prodigy"] if prodigy else features[c.id])[n]) for n in names]
                     for c in complexes])


def _baselines(features: Mapping[str, dict]) -> dict[str, Callable]:
    """Row name → ``fit_predict(train complexes, test complexes) -> [n_test] ΔG``."""
    def linear(names, prodigy=False):
        return lambda train, test: _least_squares(_columns(features, train, names, prodigy),
                                                  np.array([c.dg_kcal_mol for c in train]),
                                                  _columns(features, test, names, prodigy))

    def contacts(train, test):
        return _ridge(_columns(features, train, CONTACT_FEATURES), np.array([c.dg_kcal_mol for c in train]),
                      _columns(features, test, CONTACT_FEATURES), [c.cluster for c in train])

    def frozen_get(train, test):
        def x(items):
            return np.array([features[c.id]["get_plb"] for c in items])
        return _ridge(x(train), np.array([c.dg_kcal_mol for c in train]), x(test), [c.cluster for c in train])

    rows = {f"PRODIGY (prodigy-prot {prodigy_version()})":
            lambda train, test: np.array([features[c.id]["prodigy"]["dG_kcal_mol"] for c in test]),
            "PRODIGY refit (IC-NIS per fold)": linear(PRODIGY_REFIT, prodigy=True),
            "interface residues (8 Å)": linear(["interface_residues"]),
            "buried surface (freesasa)": linear(["buried_sasa"]),
            "contact counts (ridge)": contacts,
            "category mean": _category_mean}
    if all("get_plb" in row for row in features.values()):
        rows["GET get-plb frozen + ridge"] = frozen_get
    return rows


def _row(item: ProteinComplex, fold: int, pred: float) -> dict:
    return {"id": item.id, "fold": fold, "category": item.category, "difficulty": item.difficulty,
            "cluster": item.cluster, "dG": item.dg_kcal_mol, "pred_dG": float(pred)}


def baseline_predictions(complexes: Sequence[ProteinComplex], features: Mapping[str, dict]
                         ) -> dict[str, list[dict]]:
    """Out-of-fold rows of every baseline, fitted on each fold's whole training side (train + valid)."""
    usable = [c for c in complexes if "error" not in features[c.id] and "prodigy" in features[c.id]]
    folds = cluster_folds([c.cluster for c in complexes], N_FOLDS, seed=0)
    index = {c.id: i for i, c in enumerate(complexes)}
    out: dict[str, list[dict]] = {}
    for name, fit_predict in _baselines(features).items():
        rows = []
        for k, fold in enumerate(folds):
            test_ids = {complexes[i].id for i in fold["test"]}
            train = [c for c in usable if c.id not in test_ids]
            test = [c for c in usable if c.id in test_ids]
            rows += [_row(c, k, p) for c, p in zip(test, fit_predict(train, test))]
        out[name] = sorted(rows, key=lambda r: index[r["id"]])
    return out


def get_predictions(run_dir: str | Path) -> list[dict]:
    """The test rows of the ``fold{k}.json`` files a GET run has written so far (each row with its ``fold``)."""
    files = {k: Path(run_dir) / f"fold{k}.json" for k in range(N_FOLDS)}
    return [{**row, "fold": k} for k, f in files.items() if f.is_file() for row in json.loads(f.read_text())["test"]]


def _scores(predictions: Mapping[str, list[dict]], ids: set[str]) -> dict:
    return {name: score_rows([r for r in rows if r["id"] in ids]) for name, rows in predictions.items()}


# ---------------------------------------------------------------------- scores
def _report(rows: Sequence[dict]) -> dict[str, float]:
    report = regression_report([r["pred_dG"] for r in rows], [r["dG"] for r in rows]) if len(rows) > 1 else \
        {"pearson": math.nan, "spearman": math.nan, "rmse": math.nan, "n": len(rows)}
    return {k: (round(float(v), 4) if k != "n" else int(v)) for k, v in report.items() if k != "mae"}


def score_rows(rows: Sequence[dict]) -> dict:
    """Pooled scores, per category and per PPAB difficulty class, of out-of-fold rows (ΔG in kcal/mol)."""
    return {"all": _report(rows),
            "category": {cat: _report([r for r in rows if r["category"] == cat]) for cat in CATEGORIES},
            "difficulty": {d: _report([r for r in rows if r["difficulty"] == d])
                           for d in ("rigid", "medium", "flexible", "")
                           if any(r["difficulty"] == d for r in rows)}}


def cross_validation_table(root: str | Path, features: Mapping[str, dict], get_runs: Mapping[str, str | Path]
                           ) -> dict:
    """Every row scored on the complexes all rows predicted; the rows' predictions included."""
    """Every row scored on the complexes all rows predicted; the rows' predictions included.

    A GET run with only some folds written is left out of ``scores`` and scored with every other row on the
    complexes of the folds it finished (``partial``: ``folds``, ``scored``, ``scores``)."""
    complexes = read_protein_affinity(root)
    predictions = baseline_predictions(complexes, features)
    partial = {}
    for name, run_dir in get_runs.items():
        rows = get_predictions(run_dir)
        if {r["fold"] for r in rows} == set(range(N_FOLDS)):
            predictions[name] = rows
        elif rows:
            partial[name] = rows
    common = set.intersection(*({r["id"] for r in rows} for rows in predictions.values()))
    left_out = {c.id: (features[c.id].get("error") or features[c.id].get("prodigy_error") or "not predicted by a row"
                       ).replace(f"{Path(root).resolve()}/", "") for c in complexes if c.id not in common}
    table = {"description": "leave-cluster-out 5-fold CV over ../shared/data/protein_affinity; ΔG in kcal/mol; "
                            "scores over the complexes every row predicted",
             "complexes": len(complexes), "scored": len(common), "left_out": left_out,
             "folds": N_FOLDS, "scores": _scores(predictions, common), "predictions": {**predictions, **partial}}
    if partial:
        folds = sorted(set.intersection(*({r["fold"] for r in rows} for rows in partial.values())))
        ids = {r["id"] for r in next(iter(partial.values())) if r["fold"] in folds} & common
        table["partial"] = {"folds": folds, "scored": len(ids), "scores": _scores({**predictions, **partial}, ids)}
    return table


def format_table(table: Mapping) -> str:
    """Markdown: one line per row (pooled Pearson, Spearman, RMSE; Pearson per category and difficulty class),
    then the same for the folds that unfinished GET runs completed."""
    text = _markdown(table)
    if "partial" in table:
        part = table["partial"]
        text += (f"\n\nOn the folds {part['folds']} only (GET runs not finished on every fold), "
                 f"{part['scored']} complexes:\n\n" + _markdown({**part, "complexes": table["complexes"]}))
    return text


def _markdown(table: Mapping) -> str:
    diffs = ("rigid", "medium", "flexible")
    head = ["model", "Pearson", "Spearman", "RMSE", *CATEGORIES, *(f"PPAB {d}" for d in diffs)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in table["scores"].items():
        cells = [f"{s['all']['pearson']:.3f}", f"{s['all']['spearman']:.3f}", f"{s['all']['rmse']:.2f}"]
        cells += [f"{s['category'][c]['pearson']:.2f}" for c in CATEGORIES]
        cells += [f"{s['difficulty'].get(d, {}).get('pearson', math.nan):.2f}" for d in diffs]
        lines.append("| " + " | ".join([name, *cells]) + " |")
    counts = next(iter(table["scores"].values()))
    lines.append("")
    lines.append(f"{table['scored']} of {table['complexes']} complexes; n per category: "
                 + ", ".join(f"{c} {counts['category'][c]['n']}" for c in CATEGORIES)
                 + "; PPAB " + ", ".join(f"{d} {counts['difficulty'].get(d, {}).get('n', 0)}" for d in diffs))
    return "\n".join(lines)
