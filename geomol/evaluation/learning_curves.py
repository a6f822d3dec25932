"""Learning curves of trainings: read them, choose a checkpoint on them, show them.

A curve is a list of records, one per validated epoch, oldest first (``epoch`` is Lightning's 0-based index).

* GET on a corpus fold (``benchmarks/get_convergence.py``): :func:`learning_curve` reads a run's ``metrics.csv``
  into ``epoch``, ``step``, ``train_loss``, ``val_loss``, ``val_spearman`` and ``cpu_hours``; :func:`plateau` finds
  the best epoch by the validation Spearman (the metric early stopping watches) and how many validated epochs
  followed it; :func:`format_curve` and :func:`plot_curve` show it.
* EGNO (``benchmarks/egno_accuracy.py``, ``scripts/train_egno_models.py``): records ``epoch``, ``val_s2s`` and test
  figures (``test_s2s``, ``test_s2t``, …) at every validation, the official scripts' printed lines read alike
  (:func:`parse_official_log`); :func:`best_so_far` is the scripts' model selection (the lowest validation S2S
  within an epoch budget); :func:`comparison_curves` gathers other trainings of a recipe as card columns;
  :func:`best_validation_checkpoint` finds a run folder's selected checkpoint and :func:`seed_runs` the runs of
  several seeds at one epoch budget (``benchmarks/md17_baselines.py --seeds``).
"""
from __future__ import annotations

import csv
import json
import math
import re
from pathlib import Path

__all__ = ["GET_MONITOR", "learning_curve", "plateau", "format_curve", "plot_curve", "parse_official_log",
           "best_so_far", "comparison_curves", "best_validation_checkpoint", "seed_runs"]

GET_MONITOR = "val/mean_target_spearman"
"""The validation metric GET's corpus runs select their checkpoint and stop early on (higher is better)."""


def _number(text: str | None) -> float | None:
    return float(text) if text not in (None, "") else None


def learning_curve(metrics_csv: Path, monitor: str = GET_MONITOR) -> list[dict]:
    """One record per epoch that validated: ``epoch``, ``step`` (global step at its validation),
    ``train_loss`` (mean of the logged training losses of that epoch), ``val_loss``, ``val_spearman`` (the
    ``monitor`` column) and ``cpu_hours`` (``time/cpu_hours``; ``None`` where the run did not log it)."""
    with open(metrics_csv, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    epochs: dict[int, dict] = {}
    for row in rows:
        epoch = epochs.setdefault(int(row["epoch"]), {"losses": [], "validation": None})
        if _number(row.get("train/loss")) is not None:
            epoch["losses"].append(float(row["train/loss"]))
        if _number(row.get(monitor)) is not None:
            epoch["validation"] = row
    curve = []
    for number, epoch in sorted(epochs.items()):
        validation = epoch["validation"]
        if validation is None:
            continue
        losses = epoch["losses"]
        curve.append({"epoch": number, "step": int(validation["step"]),
                      "train_loss": sum(losses) / len(losses) if losses else None,
                      "val_loss": _number(validation.get("val/loss")), "val_spearman": float(validation[monitor]),
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
    """A printed table of a :func:`learning_curve`, one line per validated epoch."""
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


_OFFICIAL_LOG_LINE = re.compile(r"==> (val|test) epoch (\d+) avg loss: ([0-9.eE+-]+)")


def parse_official_log(text: str) -> list[dict]:
    """[{epoch, val_s2s, test_s2s}] from an official EGNO script's printed evaluation lines (epochs with both)."""
    rows: dict[int, dict] = {}
    for split, epoch, value in _OFFICIAL_LOG_LINE.findall(text):
        rows.setdefault(int(epoch), {"epoch": int(epoch)})[f"{split}_s2s"] = float(value)
    return [rows[e] for e in sorted(rows) if "val_s2s" in rows[e] and "test_s2s" in rows[e]]


def best_so_far(curve: list[dict], upto: int, key: str | None = None) -> dict | None:
    """The evaluation with the lowest validation S2S among epochs ≤ ``upto`` (the first such minimum: the EGNO
    scripts' model selection), among those that hold ``key`` when given; None when there is none."""
    seen = [row for row in curve if row["epoch"] <= upto and (key is None or key in row)]
    return min(seen, key=lambda row: row["val_s2s"]) if seen else None


def comparison_curves(sources: list[str | Path]) -> dict[str, list[dict]]:
    """Card columns (label → curve) of other trainings: a ``benchmarks/egno_accuracy.py`` run directory
    (its ``curve.json``) or result JSON (its geomol curve and, when it ran the official script, that curve too)."""
    columns = {}
    for source in map(Path, sources):
        if source.is_dir():
            columns[f"{source.name} (same recipe)"] = json.loads((source / "curve.json").read_text())
            continue
        record = json.loads(source.read_text())
        seed = record.get("seed")
        changed = "".join(f", {key}={value}" for key, value in (record.get("model_overrides") or {}).items())
        columns[f"geomol seed {seed}{changed}"] = record["geomol_curve"]
        if record.get("official_curve"):
            columns[f"official seed {seed}, run here"] = record["official_curve"]
    return columns


def best_validation_checkpoint(run_dir: Path) -> tuple[Path, int, int]:
    """``(checkpoint, N, last)`` of an EGNO run folder: the ``best-epoch=N.ckpt`` of its best validation epoch N
    (:func:`best_so_far` over its whole ``curve.json``) and the last epoch it reached (its budget − 1; 0-based).

    Chosen from the curve rather than by file name: a run resumed in a copied folder keeps the earlier run's
    ``best-epoch=*.ckpt`` beside its own."""
    curve_file = Path(run_dir) / "curve.json"
    curve = json.loads(curve_file.read_text())
    last = curve[-1]["epoch"]
    epoch = best_so_far(curve, last)["epoch"]
    checkpoint = curve_file.parent / "checkpoints" / f"best-epoch={epoch}.ckpt"
    if not checkpoint.is_file():
        raise FileNotFoundError(f"{checkpoint}: the best validation epoch of {curve_file} has no checkpoint")
    return checkpoint, epoch, last


def seed_runs(runs: Path, template: str, seeds: list[int], **fields) -> tuple[dict, dict]:
    """The runs of one recipe trained with several seeds, at one epoch budget.

    Args:
        runs: the folder of run folders. template: a run folder's name, ``{seed}`` and ``fields`` filled in.
        seeds: the seeds; the first one's run must exist and sets the epoch budget.
    Returns:
        ``({seed: (best checkpoint, its epoch)}, {seed: why skipped})``: a later seed counts only when its run
        exists and reached the same last epoch, so that a shorter training is never averaged in.
    """
    used, skipped, budget = {}, {}, None
    for seed in seeds:
        run_dir = Path(runs) / template.format(seed=seed, **fields)
        if budget is not None and not (run_dir / "curve.json").is_file():
            skipped[seed] = f"no run {run_dir}"
            continue
        checkpoint, epoch, last = best_validation_checkpoint(run_dir)
        if budget is None:
            budget = last + 1
        elif last + 1 != budget:
            skipped[seed] = f"{run_dir} trained {last + 1} epochs, seed {seeds[0]} {budget}"
            continue
        used[seed] = (checkpoint, epoch)
    return used, skipped
