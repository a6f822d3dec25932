"""Leave-cluster-out cross-validation over the whole affinity corpus: baselines and given predictions.

The protocol every affinity variant is judged by (``docs/evaluation.md``):

* items: the corpus (``read_corpus``: plb, fep_benchmark, uni_fep, ddg_bindingdb), protein clusters
  across sources (``load_protein_clusters``), ``--folds`` leave-cluster-out folds, each with a
  validation slice of its training clusters for model selection (``leave_cluster_out_folds``;
  every fold checked by ``check_corpus_split``);
* targets and metrics: :mod:`geomol.evaluation.targets` (series with >= 10 ligands by default;
  Spearman, Pearson, Kendall per target; means over the expert-pose sources and over all; the
  fraction of targets where the model beats the heavy-atom count; Spearman with the heavy-atom count);
* variants: the heavy-atom count (HAC), ligand-only random forest (``rf``) and gradient boosting
  (``gbm``) on Morgan counts + descriptors (:mod:`geomol.training.ligand_baselines`, hyper-parameters chosen on
  each fold's validation slice), and any ``--predictions NAME=file.csv`` (columns ``id,prediction``
  and optionally ``fold``; ids are ``CorpusItem.id``; or a folder of ``fold*.csv``), e.g. a GET variant's
  out-of-fold predictions from ``benchmarks/affinity_corpus_get.py``. ``--reference NAME`` adds that
  variant's mean Spearman on each row's own targets (``ref`` columns), so that a variant scored on only some
  folds is compared on the same targets.

Prints the variants table; writes JSON (``geomol.provenance()``, the folds, the variants' summaries,
the per-target table, the hyper-parameters each fold chose) and, with ``--write-predictions DIR``,
each baseline's out-of-fold predictions as ``DIR/NAME.csv`` in the ``--predictions`` format.

Usage::

    OMP_NUM_THREADS=1 nice -n 10 python benchmarks/affinity_corpus_cv.py --cache-dir $GEOMOL_CACHE \\
        --output benchmarks/results/affinity_corpus_cv.json [--predictions get_base=preds.csv]
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from geomol.data.splits.corpus import check_corpus_split, item_clusters, leave_cluster_out_folds
from geomol.data.datasets.corpus import read_corpus
from geomol.data.datasets.corpus_items import SOURCES, Corpus
from geomol.data.chemistry.ligand_features import LigandFeaturizer
from geomol.data.paths import shared_data_dir
from geomol.data.splits.protein_clusters import load_protein_clusters
from geomol.errors import ConfigError, DatasetError
from geomol.training.ligand_baselines import LIGAND_MODELS, select_ligand_model
from geomol.evaluation.metrics import mean_of
from geomol.provenance import provenance
from geomol.evaluation.targets import MIN_TARGET_LIGANDS, TARGET_KINDS, evaluate_targets, target_keys

REPO = Path(__file__).resolve().parents[1]
ABOUT = {"hac": "heavy-atom count of the ligand (no training)",
         "rf": "ligand-only random forest, Morgan r=2 counts + descriptors",
         "gbm": "ligand-only gradient boosting, Morgan r=2 counts + descriptors",
         "gbm_series": "ligand-only gradient boosting learning within series: Morgan r=2 counts + descriptors, also "
                       "centred on their series, fitted to the pK minus the series' mean"}
PER_TARGET_SCORES = ("spearman", "pearson", "kendall", "spearman_with_hac")


def load_items(root: Path, sources, series, cache_dir) -> tuple[list, list[str]]:
    """Corpus items (only the named ``series`` when given) and each item's protein cluster."""
    corpus = read_corpus(root, sources)
    if series:
        unknown = sorted(set(series) - {item.series for item in corpus.items})
        if unknown:
            raise ConfigError(f"unknown series {unknown}")
        items = [item for item in corpus.items if item.series in set(series)]
        used = {item.receptor for item in items}
        corpus = Corpus(items, [r for r in corpus.receptors if r.path in used])
    clusters, _ = load_protein_clusters(corpus.receptors, cache_dir=cache_dir)
    return corpus.items, item_clusters(corpus.items, clusters)


def checked_folds(items, clusters: list[str], n_folds: int, seed: int, valid_fraction: float = 0.1
                  ) -> tuple[list[dict], np.ndarray]:
    """Leave-cluster-out folds, each checked for leakage, and the test fold of every item."""
    folds = leave_cluster_out_folds(clusters, n_folds, valid_fraction=valid_fraction, seed=seed)
    for fold in folds:
        check_corpus_split(fold, items, clusters)
    check_corpus_split({f"fold{k}": fold["test"] for k, fold in enumerate(folds)}, items, clusters)
    fold_of = np.empty(len(items), dtype=int)
    for k, fold in enumerate(folds):
        fold_of[fold["test"]] = k
    return folds, fold_of


def ligand_model_predictions(kind: str, features: np.ndarray, label: np.ndarray, folds: list[dict], keys: list[str],
                             series: np.ndarray, *, min_ligands: int, seed: int) -> tuple[np.ndarray, list[dict]]:
    """Out-of-fold predictions of a ligand-only model chosen per fold on its validation slice (``series``: each
    item's series, for the within-series model)."""
    pred = np.full(len(label), np.nan)
    chosen = []
    for k, fold in enumerate(folds):
        selection = select_ligand_model(kind, features, label, fold["train"], fold["valid"],
                                        [keys[i] for i in fold["valid"]], min_ligands=min_ligands, seed=seed + k,
                                        groups=series)
        pred[fold["test"]] = selection.predict(features[fold["test"]], series[fold["test"]])
        chosen.append({"fold": k, "params": selection.params, "valid_spearman": selection.score,
                       "tried": selection.tried})
        print(f"  {kind} fold {k}: {selection.params} (validation {selection.score:.3f})", flush=True)
    return pred, chosen


def read_predictions(path: Path, items, fold_of: np.ndarray) -> np.ndarray:
    """Per item the prediction of ``path`` (``nan`` for items it does not cover): a CSV, or a folder
    whose ``fold*.csv`` files are read together (``benchmarks/affinity_corpus_get.py`` writes one per fold).

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


def _fold_records(path: Path) -> list[dict]:
    """The ``fold*.json`` records beside a folder's fold predictions (``affinity_corpus_get.py``), if any."""
    return [json.loads(f.read_text()) for f in sorted(path.glob("fold*.json"))] if path.is_dir() else []


def training_cpu(path: Path) -> float | None:
    """CPU seconds of training summed over a folder's folds (``None`` for a plain CSV or unrecorded)."""
    records = _fold_records(path)
    seconds = [r.get("train_cpu_seconds") for r in records]
    return float(sum(seconds)) if records and None not in seconds else None


def fold_about(path: Path) -> str | None:
    """What a folder's variant is, from its fold records (``None`` when it has none)."""
    records = _fold_records(path)
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


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", type=Path, default=None, help="shared data folder (default $GEOMOL_SHARED_DATA)")
    parser.add_argument("--sources", nargs="+", default=list(SOURCES), choices=SOURCES)
    parser.add_argument("--series", nargs="+", default=None, help="only these series (a quick slice)")
    parser.add_argument("--cache-dir", default=None, help="processed-data directory for the clusters ($GEOMOL_CACHE)")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--targets", choices=TARGET_KINDS, default="series")
    parser.add_argument("--min-ligands", type=int, default=MIN_TARGET_LIGANDS)
    parser.add_argument("--baselines", nargs="*", default=["hac", *LIGAND_MODELS], choices=["hac", *LIGAND_MODELS])
    parser.add_argument("--reference", default=None, metavar="NAME",
                        help="also score this variant on each variant's own targets (for variants run on some folds)")
    parser.add_argument("--n-bits", type=int, default=1024, help="Morgan fingerprint length")
    parser.add_argument("--predictions", nargs="*", default=[], metavar="NAME=CSV")
    parser.add_argument("--ensembles", nargs="*", default=[], metavar="NAME=A+B",
                        help="equal-weight ensembles of variants above, their predictions standardised within each target")
    parser.add_argument("--write-predictions", type=Path, default=None, metavar="DIR")
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "affinity_corpus_cv.json")
    args = parser.parse_args(argv)
    if any("=" not in spec for spec in args.predictions):
        parser.error("--predictions takes NAME=path.csv")
    if any("=" not in spec or "+" not in spec for spec in args.ensembles):
        parser.error("--ensembles takes NAME=A+B[+C...]")
    return args


def run(args: argparse.Namespace) -> dict:
    start = time.process_time()
    items, clusters = load_items(args.root or shared_data_dir(), args.sources, args.series, args.cache_dir)
    folds, fold_of = checked_folds(items, clusters, args.folds, args.seed)
    keys = target_keys(items, clusters, args.targets)
    label = np.array([item.label for item in items])
    read_seconds, clock = time.process_time() - start, time.process_time()
    featurizer = LigandFeaturizer(n_bits=args.n_bits)
    features = featurizer.matrix([item.smiles for item in items], [item.id for item in items])
    heavy = features[:, featurizer.feature_names.index("heavy_atoms")]
    feature_seconds = time.process_time() - clock
    predictions, cpu, chosen, about = {}, {}, {}, dict(ABOUT)
    for kind in args.baselines:
        clock = time.process_time()
        if kind == "hac":
            predictions[kind] = heavy
        else:
            predictions[kind], chosen[kind] = ligand_model_predictions(
                kind, features, label, folds, keys, np.array([item.series for item in items]),
                min_ligands=args.min_ligands, seed=args.seed)
        cpu[kind] = time.process_time() - clock
    for spec in args.predictions:
        name, path = spec.split("=", 1)
        predictions[name], cpu[name] = read_predictions(Path(path), items, fold_of), training_cpu(Path(path))
        about.setdefault(name, fold_about(Path(path)) or f"predictions from {Path(path).name}")
    for spec in args.ensembles:
        name, members = spec.split("=", 1)
        unknown = [m for m in members.split("+") if m not in predictions]
        if unknown:
            raise ConfigError(f"ensemble {name}: no variant {unknown} (known: {sorted(predictions)})")
        predictions[name] = target_ensemble([predictions[m] for m in members.split("+")], keys)
        cpu[name], about[name] = None, "mean of " + ", ".join(members.split("+")) + ", each standardised within targets"
    sources = [item.source for item in items]
    evaluations = {name: evaluate_targets(pred, label, heavy, keys, sources, include=~np.isnan(pred),
                                          min_ligands=args.min_ligands) for name, pred in predictions.items()}
    rows = [{"variant": name, "about": about[name],
             "items_predicted": int((~np.isnan(predictions[name])).sum()), "cpu_seconds": cpu[name],
             "expert_pose": e["expert_pose"]["summary"], "all": e["all"]["summary"]} for name, e in evaluations.items()]
    if args.reference:
        add_reference_scores(rows, evaluations, args.reference)
    print(format_variants(rows))
    if args.write_predictions:
        for kind in args.baselines:
            write_predictions(args.write_predictions / f"{kind}.csv", items, predictions[kind], fold_of)
    return {"description": f"{args.folds}-fold leave-cluster-out CV over the corpus; targets: {args.targets} with "
                           f">= {args.min_ligands} ligands; EP = expert-pose sources (plb, fep_benchmark)",
            "items": len(items), "clusters": len(set(clusters)),
            "folds": [{"fold": k, **{part: len(idx) for part, idx in fold.items()}} for k, fold in enumerate(folds)],
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


def main(argv=None) -> dict:
    args = build_args(argv)
    result = run(args)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(dump(result) + "\n")
    print(f"wrote {args.output}")
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
