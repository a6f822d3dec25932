"""GET trained to convergence on one corpus fold: the learning curve, and the fold's test predictions.

A long run of ``configs/get_affinity_corpus_long.yaml`` (resumed with ``--ckpt_path last`` after every
interruption) writes its learning curve to ``metrics.csv``. Two steps read it:

``curve``
    one row per epoch: steps so far, mean training loss, validation loss and mean per-target Spearman (the
    metric early stopping watches), CPU hours so far (``time/cpu_hours``, :class:`geomol.tasks.callbacks.CPUTime`);
    the best epoch and how many epochs have passed since (a plateau when that reaches the early-stopping
    patience); a plot of both validation metrics against the epoch::

        python benchmarks/get_convergence.py curve runs/get_affinity_corpus_long/fold0 \\
            --output benchmarks/results/get_convergence_fold0.json --plot docs/images/get_convergence_fold0.png

``predict``
    the chosen checkpoint (the best validation score, chosen on the validation slice only) on the fold's test
    complexes, loaded as users load a model, written in the cross-validation's format (``OUT/fold{k}.csv``)::

        python benchmarks/get_convergence.py predict --config configs/get_affinity_corpus_long.yaml \\
            --checkpoint runs/get_affinity_corpus_long/fold0/checkpoints/best-epoch=3.ckpt --out-dir runs/corpus_cv/get_long

    The side-by-side table on the same fold and targets is then the protocol's own::

        python benchmarks/affinity_corpus_cv.py --predictions get_long=runs/corpus_cv/get_long \\
            contact=runs/corpus_cv/contact --ensembles get_long_contact=get_long+contact --reference get_long
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import time
from pathlib import Path

import torch

from geomol.evaluation.get_cv import test_predictions
from geomol.evaluation.predictions import write_fold
from geomol.provenance import provenance
from geomol.tasks.cli import build_from_config, read_config, resolve_config

MONITOR = "val/mean_target_spearman"


def _number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def learning_curve(metrics_csv: Path) -> list[dict]:
    """One record per epoch that validated: ``epoch``, ``step`` (global step at its validation),
    ``train_loss`` (mean of the logged training losses of that epoch), ``val_loss``, ``val_spearman`` and
    ``cpu_hours`` (``None`` where the run did not log it)."""
    with open(metrics_csv, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    epochs: dict[int, dict] = {}
    for row in rows:
        epoch = epochs.setdefault(int(row["epoch"]), {"losses": [], "validation": None})
        if _number(row.get("train/loss")) is not None:
            epoch["losses"].append(float(row["train/loss"]))
        if _number(row.get(MONITOR)) is not None:
            epoch["validation"] = row
    curve = []
    for number, epoch in sorted(epochs.items()):
        validation = epoch["validation"]
        if validation is None:
            continue
        losses = epoch["losses"]
        curve.append({"epoch": number, "step": int(validation["step"]),
                      "train_loss": sum(losses) / len(losses) if losses else None,
                      "val_loss": _number(validation.get("val/loss")), "val_spearman": float(validation[MONITOR]),
                      "cpu_hours": _number(validation.get("time/cpu_hours"))})
    return curve


def plateau(curve: list[dict]) -> dict:
    """The best epoch by the validation Spearman and the number of validated epochs after it."""
    if not curve:
        return {"best_epoch": None, "best_val_spearman": None, "epochs_since_best": None}
    best = max(curve, key=lambda row: row["val_spearman"])
    return {"best_epoch": best["epoch"], "best_val_spearman": best["val_spearman"],
            "epochs_since_best": sum(row["epoch"] > best["epoch"] for row in curve)}


def format_curve(curve: list[dict]) -> str:
    def cell(value, digits):
        return "-" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"

    lines = [f"{'epoch':>5} {'step':>6} {'train loss':>10} {'val loss':>9} {'val Spearman':>12} {'CPU h':>6}"]
    lines += [f"{r['epoch']:>5} {r['step']:>6} {cell(r['train_loss'], 3):>10} {cell(r['val_loss'], 3):>9} "
              f"{cell(r['val_spearman'], 3):>12} {cell(r['cpu_hours'], 2):>6}" for r in curve]
    return "\n".join(lines)


def plot_curve(curve: list[dict], path: Path, title: str) -> None:
    """Validation mean per-target Spearman and validation loss against the epoch, best epoch marked."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    epochs = [row["epoch"] for row in curve]
    figure, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4))
    left.plot(epochs, [row["val_spearman"] for row in curve], marker="o")
    best = plateau(curve)["best_epoch"]
    left.axvline(best, color="grey", linestyle=":", label=f"best epoch {best}")
    left.set(xlabel="epoch", ylabel="validation mean per-target Spearman")
    left.legend(frameon=False)
    right.plot(epochs, [row["val_loss"] for row in curve], marker="o", label="validation")
    right.plot(epochs, [row["train_loss"] for row in curve], marker=".", linestyle="--", label="training (mean)")
    right.set(xlabel="epoch", ylabel="loss (MSE on pK)")
    right.legend(frameon=False)
    figure.suptitle(title)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=120)
    plt.close(figure)


def run_curve(args: argparse.Namespace) -> dict:
    curve = learning_curve(args.run / "metrics.csv")
    result = {"run": str(args.run), "monitor": MONITOR, "curve": curve, **plateau(curve), "provenance": provenance()}
    print(format_curve(curve))
    print({key: result[key] for key in ("best_epoch", "best_val_spearman", "epochs_since_best")})
    if args.plot:
        plot_curve(curve, args.plot, f"GET on corpus {args.run.name}: learning curve")
    return result


def run_predict(args: argparse.Namespace) -> dict:
    torch.set_num_threads(1)
    config = read_config(resolve_config(str(args.config)))
    quiet = {"trainer": {"logger": False, "callbacks": [], "enable_progress_bar": False}}
    cli = build_from_config(config, quiet)
    cli.datamodule.setup("test")
    fold = int(config["data"]["init_args"]["fold"])
    stored = torch.load(args.checkpoint, map_location="cpu", weights_only=True)  # tensors and plain values only
    wall, cpu = time.perf_counter(), time.process_time()
    rows = test_predictions(args.checkpoint, cli.datamodule)
    record = {"fold": fold, "config": str(args.config), "checkpoint": str(args.checkpoint),
              "epoch": stored.get("epoch"), "global_step": stored.get("global_step"), "test_items": len(rows),
              "predict_wall_seconds": time.perf_counter() - wall, "predict_cpu_seconds": time.process_time() - cpu,
              "provenance": provenance()}
    ids, pred, label, heavy = zip(*rows) if rows else ((), (), (), ())
    write_fold(args.out_dir, fold, ids, pred, label, heavy, record)
    print(json.dumps({k: v for k, v in record.items() if k != "provenance"}, indent=1))
    return record


def build_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    steps = parser.add_subparsers(dest="step", required=True)
    curve = steps.add_parser("curve", help="the learning curve of a run folder (its metrics.csv)")
    curve.add_argument("run", type=Path, help="the run's version folder, e.g. runs/get_affinity_corpus_long/fold0")
    curve.add_argument("--output", type=Path, default=None, help="JSON of the curve")
    curve.add_argument("--plot", type=Path, default=None, help="PNG of the curve")
    predict = steps.add_parser("predict", help="a checkpoint's predictions on the fold's test complexes")
    predict.add_argument("--config", type=Path, required=True, help="the run's geomol fit config (data and fold)")
    predict.add_argument("--checkpoint", type=Path, required=True)
    predict.add_argument("--out-dir", type=Path, required=True, help="writes fold{k}.csv and fold{k}.json")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> dict:
    args = build_args(argv)
    result = run_curve(args) if args.step == "curve" else run_predict(args)
    if getattr(args, "output", None):
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(result, indent=1))
    return result


if __name__ == "__main__":
    main()
