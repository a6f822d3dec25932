"""Prediction tables on disk: results (CSV / JSON), measured affinities, receptor–ligand pair lists, plots.

* Results: one row per ligand with :data:`~geomol.inference.affinity.COLUMNS` (plus ``receptor``
  when several receptors were screened, and the records' extra columns, such as the pose report
  of ligands posed from SMILES, after them). CSV leaves a missing number empty; JSON is a list of
  objects with ``null`` for it. ``warnings`` is a JSON list; in CSV its items are joined by
  :data:`WARNING_SEPARATOR`.
* Measured values: CSV with ``name`` and ``pK`` or ``dG_kcal_mol`` (converted to pK at 298.15 K).
* Pairs (virtual screening): CSV with ``receptor`` and ``ligands`` (paths relative to the CSV's
  folder; a residue name or ``chain:<id>`` also works), optional ``ligand`` (index or title of
  one molecule in the file) and ``name`` (reported instead of the molecule title).
"""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Sequence

from geomol.units import pk_from_dg
from geomol.data.posing.poses import POSE_COLUMNS
from geomol.errors import ConfigError, DatasetError
from geomol.inference.affinity import COLUMNS, AffinityPrediction
from geomol.inference.anchored_series import ANCHOR_COLUMNS
from geomol.inference.ligand_inputs import is_in_receptor_spec

__all__ = ["OUTPUT_FORMATS", "output_format", "write_predictions", "read_predictions", "read_measured",
           "PairRow", "read_pairs", "plot_predicted_vs_measured", "csv_rows"]

OUTPUT_FORMATS = {".csv": "csv", ".json": "json"}
_NUMERIC = ("pK", "dG_kcal_mol", "Kd_M", "pK_std")
_EXTRA_NUMERIC = POSE_COLUMNS + ANCHOR_COLUMNS  # read back as floats (NaN when missing) when present
WARNING_SEPARATOR = " | "


def output_format(path: str | PathLike) -> str:
    """``'csv'`` or ``'json'`` from the file extension; :class:`ConfigError` otherwise."""
    fmt = OUTPUT_FORMATS.get(Path(path).suffix.lower())
    if fmt is None:
        raise ConfigError("output must end in .csv or .json", source=path)
    return fmt


def _row(record: AffinityPrediction, columns: Sequence[str]) -> dict:
    row = {c: getattr(record, c) if c in COLUMNS or c == "receptor" else record.extra.get(c) for c in columns}
    return {c: None if isinstance(v, float) and not math.isfinite(v) else v for c, v in row.items()}


def _csv_cell(value) -> str:
    if isinstance(value, list):
        return WARNING_SEPARATOR.join(value)
    return "" if value is None else (f"{value:.6g}" if isinstance(value, float) else value)


def write_predictions(records: Sequence[AffinityPrediction], path: str | PathLike, *,
                      with_receptor: bool = False) -> Path:
    """Write one row per record (CSV or JSON by extension, atomically); returns the path."""
    path = Path(path)
    fmt = output_format(path)
    extra = tuple(dict.fromkeys(c for r in records for c in r.extra if c not in COLUMNS))
    columns = (("receptor",) if with_receptor else ()) + COLUMNS + extra
    rows = [_row(r, columns) for r in records]
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    with open(tmp, "w", encoding="utf-8", newline="") as handle:
        if fmt == "json":
            json.dump(rows, handle, indent=1)
            handle.write("\n")
        else:
            writer = csv.DictWriter(handle, fieldnames=columns)
            writer.writeheader()
            writer.writerows({c: _csv_cell(v) for c, v in row.items()} for row in rows)
    os.replace(tmp, path)
    return path


def read_predictions(path: str | PathLike) -> list[dict]:
    """Rows of a file written by :func:`write_predictions`, numbers as floats (NaN when missing)."""
    fmt = output_format(path)
    with open(path, encoding="utf-8", newline="") as handle:
        rows = json.load(handle) if fmt == "json" else list(csv.DictReader(handle))
    for row in rows:
        for c in _NUMERIC + tuple(c for c in _EXTRA_NUMERIC if c in row):
            row[c] = math.nan if row.get(c) in (None, "") else float(row[c])
        blocks = row.get("n_pocket_blocks")
        row["n_pocket_blocks"] = None if blocks in (None, "") else int(blocks)
        row["error"] = row.get("error") or ""
        found = row.get("warnings") or []
        row["warnings"] = found.split(WARNING_SEPARATOR) if isinstance(found, str) else list(found)
    return rows


def csv_rows(path: str | PathLike, required: Sequence[str], what: str) -> list[dict]:
    """Rows of a CSV (keys and values stripped) that has the ``required`` columns; ``what`` names it in errors.

    Raises:
        DatasetError: missing or unreadable file, no rows, a required column missing.
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            fields = [(f or "").strip() for f in reader.fieldnames or []]
    except FileNotFoundError:
        raise DatasetError(f"{what} file not found", source=path) from None
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DatasetError(f"cannot read the {what} CSV: {exc}", source=path) from None
    if not rows:
        raise DatasetError(f"the {what} CSV has no rows", source=path)
    rows = [{(k or "").strip(): (v or "").strip() for k, v in row.items()} for row in rows]
    missing = [c for c in required if c not in fields]
    if missing:
        raise DatasetError(f"the {what} CSV lacks column(s) {missing} (has {fields})", source=path)
    return rows


def read_measured(path: str | PathLike) -> dict[str, float]:
    """Measured pK by ligand name, from a CSV with ``name`` and ``pK`` or ``dG_kcal_mol``."""
    rows = csv_rows(path, ["name"], "measured-values")
    column = "pK" if "pK" in rows[0] else "dG_kcal_mol" if "dG_kcal_mol" in rows[0] else None
    if column is None:
        raise DatasetError(f"the measured-values CSV needs a 'pK' or 'dG_kcal_mol' column (has {list(rows[0])})",
                           source=path)
    measured = {}
    for line, row in enumerate(rows, start=2):
        try:
            value = float(row[column])
        except ValueError:
            raise DatasetError(f"{column} {row[column]!r} is not a number", source=path,
                               record=f"line {line}") from None
        measured[row["name"]] = value if column == "pK" else pk_from_dg(value)
    return measured


@dataclass
class PairRow:
    """One receptor–ligand row of a pairs table (paths already resolved)."""

    receptor: Path
    ligands: str
    ligand: int | str | None = None
    name: str | None = None


def _resolve(value: str, folder: Path) -> Path:
    path = Path(value).expanduser()
    return path if path.is_absolute() else folder / path


def read_pairs(path: str | PathLike) -> list[PairRow]:
    """Rows of a pairs CSV (see the module notes), relative paths resolved against its folder."""
    folder = Path(path).resolve().parent
    pairs = []
    for line, row in enumerate(csv_rows(path, ["receptor", "ligands"], "pairs"), start=2):
        if not row["receptor"] or not row["ligands"]:
            raise DatasetError("empty receptor or ligands", source=path, record=f"line {line}")
        ligands = _resolve(row["ligands"], folder)
        keep_spec = not ligands.exists() and is_in_receptor_spec(row["ligands"])
        which = row.get("ligand") or None
        pairs.append(PairRow(_resolve(row["receptor"], folder), row["ligands"] if keep_spec else str(ligands),
                             int(which) if which and which.lstrip("-").isdigit() else which, row.get("name") or None))
    return pairs


MAX_LABELLED_POINTS = 30
"""Up to this many ligands, each point of the plot carries the ligand's name."""


def plot_predicted_vs_measured(records: Sequence[AffinityPrediction], measured: dict[str, float],
                               path: str | PathLike, title: str = "") -> dict[str, float]:
    """Scatter of predicted vs measured pK with the y = x line; Pearson and Spearman in the title.

    ``title`` (e.g. ``'tnks2 · contact-corpus'``, target and model) heads it; with at most
    :data:`MAX_LABELLED_POINTS` ligands every point is labelled with the ligand's name.

    Returns:
        ``{'n', 'pearson', 'spearman', 'rmse'}`` over the ligands predicted and measured.
    Raises:
        DatasetError: fewer than two ligands are both predicted and measured (matched by name).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from geomol.metrics.scores import pearson, rmse, spearman

    pairs = [(measured[r.name], r.pK, r.pK_std, r.name) for r in records if r.ok and r.name in measured]
    if len(pairs) < 2:
        raise DatasetError(f"only {len(pairs)} predicted ligand(s) have a measured value with the same name: "
                           "nothing to plot", source=path)
    x, y, err, names = (list(v) for v in zip(*pairs))
    stats = {"n": len(x), "pearson": pearson(y, x), "spearman": spearman(y, x), "rmse": rmse(y, x)}
    labelled = len(names) <= MAX_LABELLED_POINTS
    fig, ax = plt.subplots(figsize=(6.4, 6.0) if labelled else (4.8, 4.6), dpi=120)
    has_err = any(math.isfinite(e) for e in err)
    ax.errorbar(x, y, yerr=[e if math.isfinite(e) else 0.0 for e in err] if has_err else None, fmt="o", ms=4,
                alpha=0.8, capsize=2, label="predicted ± ensemble std" if has_err else "predicted")
    low, high = min(x + y) - 0.5, max(x + y) + 0.5
    ax.plot([low, high], [low, high], "k--", lw=1, label="y = x")
    if labelled:
        for xi, yi, name in zip(x, y, names):
            ax.annotate(name, (xi, yi), xytext=(3, 2), textcoords="offset points", fontsize=6, alpha=0.8)
    ax.set(xlim=(low, high), ylim=(low, high), xlabel="measured pK", ylabel="predicted pK", aspect="equal")
    ax.set_title(f"{title + chr(10) if title else ''}Pearson {stats['pearson']:.2f}, Spearman {stats['spearman']:.2f}"
                 f" (n = {stats['n']})", fontsize=9)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return stats
