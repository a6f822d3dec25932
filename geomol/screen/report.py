"""The end of a screen: a summary table for the terminal and a plot (score distribution, top hits in 2D)."""
from __future__ import annotations

import io
import math
from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from geomol.screen.merge import PK_BINS

__all__ = ["summary_table", "top_table", "plot_screen", "SHOWN_HITS"]

SHOWN_HITS = 20
"""Ranked hits printed in the terminal and drawn in the plot (the same rows); ``top.csv`` has all ``--top``."""


def summary_table(summary: dict[str, Any]) -> Table:
    """Counts, failures by reason, speed and memory of a finished screen (``summary.json``'s content)."""
    table = Table(title="screen summary", title_justify="left", show_header=False)
    table.add_column("what")
    table.add_column("value", justify="right")
    counts = summary["counts"]
    table.add_row("ligands in", str(counts["ligands"]))
    table.add_row("scored", str(counts["scored"]) + (f" ({counts['docked']} docked)" if counts["docked"] else ""))
    table.add_row("failed", str(counts["failed"]))
    for reason, count in sorted(summary["failure_reasons"].items(), key=lambda x: -x[1]):
        table.add_row(f"  {reason}", str(count))
    run = summary["run"]
    table.add_row("shards (skipped: done before)", f"{run['shards']} ({run['shards_skipped']})")
    table.add_row("wall time", f"{run['wall_seconds']:.1f} s")
    table.add_row("rate (this run)", f"{run['ligands_per_second']:.2f} ligands/s on {run['worker_threads']} "
                  f"worker thread(s)")
    table.add_row("peak worker memory", f"{run['peak_worker_rss_mb']:.0f} MB")
    return table


def _number(value, digits: int = 2) -> str:
    return "" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.{digits}f}"


def _top_title(shown: int, written: int) -> str:
    return f"top {shown} by predicted pK" + (f" (of the {written} in top.csv)" if written > shown else "")


def top_table(rows: list[dict], written: int | None = None) -> Table:
    """The ranked hits ``rows`` (``written``: how many ``top.csv`` holds, said in the title when more)."""
    table = Table(title=_top_title(len(rows), written or len(rows)), title_justify="left")
    for column, justify in (("rank", "right"), ("name", "left"), ("pK", "right"), ("± std", "right"),
                            ("pose", "left"), ("core RMSD Å", "right"), ("SMILES", "left")):
        table.add_column(column, justify=justify, overflow="fold")
    for row in rows:
        table.add_row(str(row["rank"]), row["name"], _number(row["pK"]), _number(row["pK_std"]), row["pose_method"],
                      _number(row["core_rmsd"]), row["smiles"])
    return table


def _depiction(smiles: str, size: int = 300) -> np.ndarray | None:
    """A 2D depiction of ``smiles`` as an RGB(A) image array, or None when RDKit cannot draw it."""
    import matplotlib.image as mpimg
    from rdkit import Chem
    from rdkit.Chem.Draw import rdMolDraw2D

    mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return None
    drawer = rdMolDraw2D.MolDraw2DCairo(size, size)
    rdMolDraw2D.PrepareAndDrawMolecule(drawer, mol)
    drawer.FinishDrawing()
    return mpimg.imread(io.BytesIO(drawer.GetDrawingText()), format="png")


def plot_screen(path: str | Path, histogram: np.ndarray, top: list[dict], title: str, written: int | None = None
                ) -> None:
    """PNG: the distribution of predicted pK over the scored ligands, and the ranked hits ``top`` with their 2D
    depictions (``written``: how many ``top.csv`` holds, said in the title when more)."""
    hits = len(top)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    columns = 4
    rows = math.ceil(min(hits, len(top)) / columns)
    figure = plt.figure(figsize=(12, 3.6 + 3.0 * rows))
    grid = figure.add_gridspec(1 + rows, columns, height_ratios=[1.2] + [1.0] * rows)
    axis = figure.add_subplot(grid[0, :])
    centres = (PK_BINS[:-1] + PK_BINS[1:]) / 2
    used = np.flatnonzero(histogram)
    if used.size:
        lo, hi = used[0], used[-1] + 1
        axis.bar(centres[lo:hi], histogram[lo:hi], width=PK_BINS[1] - PK_BINS[0], color="#4477aa")
    axis.set_xlabel("predicted pK")
    axis.set_ylabel("ligands")
    axis.set_title(f"{title}: {int(histogram.sum())} scored ligands; below, the {_top_title(hits, written or hits)}")
    for k, row in enumerate(top[:hits]):
        ax = figure.add_subplot(grid[1 + k // columns, k % columns])
        image = _depiction(row["smiles"])
        if image is not None:
            ax.imshow(image)
        ax.set_axis_off()
        ax.set_title(f"#{row['rank']} {row['name'][:24]}\npK {row['pK']:.2f}", fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
