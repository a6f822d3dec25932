"""A picture of a molecule rollout against its reference MD: are the bonds kept, are the distributions right?

Four panels: the largest bond deviation from the MD mean in each predicted frame over time (with the 0.3 Å line
and the MD's own largest deviation), the JS divergence per kind (rollout, MD half against half, frozen start), the
bond lengths' deviations from their MD means pooled over bonds (rollout against MD), and the distribution of the
torsion the rollout gets most wrong.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from geomol.data.chemistry.conformations import BIN_WIDTHS, KINDS, histogram_divergence
from geomol.inference.dynamics.rollout_report import save_figure

__all__ = ["plot_ensemble"]


def _worst_torsion(comparison, frames: np.ndarray) -> int | None:
    torsions = comparison.coordinates.values(frames)["torsion"]
    if not torsions.shape[1]:
        return None
    reference = comparison.coordinates.values(comparison.reference)["torsion"]
    divergences = [histogram_divergence(torsions[:, c], reference[:, c], BIN_WIDTHS["torsion"], periodic=True)
                   for c in range(torsions.shape[1])]
    return int(np.argmax(divergences))


def _deviation_histograms(axis, reference: np.ndarray, rollout: np.ndarray, width: float) -> None:
    """Every coordinate of one kind ([F, C] bonds in Å or angles in degrees) minus its mean over the reference MD,
    pooled: the reference's and the rollout's histograms over ±20 bins of ``width`` (half-bins), outliers clipped
    to the edges."""
    mean = reference.mean(axis=0)
    edges = np.arange(-20 * width, 20 * width + 1e-9, width / 2)
    axis.hist((reference - mean).ravel(), bins=edges, density=True, alpha=0.5, label="reference MD")
    axis.hist(np.clip((rollout - mean).ravel(), edges[0], edges[-1]), bins=edges, density=True, alpha=0.5,
              label="rollout")
    axis.legend(fontsize=8)


def plot_ensemble(record: Mapping[str, Any], comparison, frames: np.ndarray, path: str | os.PathLike) -> Path:
    """Write the PNG (module docstring) for a rollout's record, its comparison and its predicted frames [F, N, 3]."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ensemble = record["ensemble"]
    fig, ((over_time, bars), (bonds, torsion)) = plt.subplots(2, 2, figsize=(12, 8))
    times = np.asarray(record["times_ps"][1:] if record["output"]["include_start"] else record["times_ps"])
    deviation = ensemble["bond_deviation_per_frame_max_A"]
    over_time.plot(times[:len(deviation)], deviation, linewidth=0.8, label="rollout")
    over_time.axhline(ensemble["threshold_A"], color="red", linestyle=":", label="0.3 Å")
    over_time.axhline(ensemble["reference_bond_deviation_max_A"], color="grey", linestyle="--", label="MD's largest")
    over_time.set(xlabel="time (ps)", ylabel="largest |d − d̄(MD)| (Å)", title="bonds against their MD means")
    over_time.legend(fontsize=8)
    width, positions = 0.27, np.arange(len(KINDS))
    for offset, (key, label) in enumerate((("js_divergence", "rollout"), ("js_floor_half_against_half", "MD half vs half"),
                                           ("js_frozen_structure", "frozen start"))):
        values = [np.nan if ensemble[key][k] is None else ensemble[key][k] for k in KINDS]
        bars.bar(positions + (offset - 1) * width, values, width, label=label)
    bars.set(xticks=positions, xticklabels=KINDS, ylabel="JS divergence (base 2)", ylim=(0, 1),
             title=f"distributions: {ensemble['verdict']}")
    bars.legend(fontsize=8)
    _deviation_histograms(bonds, comparison.coordinates.values(comparison.reference)["bond"],
                          comparison.coordinates.values(frames)["bond"], width=BIN_WIDTHS["bond"])
    bonds.set(xlabel="d − d̄(MD) (Å), all bonds", ylabel="density", title="bond lengths")
    worst = _worst_torsion(comparison, frames)
    if worst is not None:
        quad = comparison.coordinates.torsions[worst]
        edges = np.arange(-180, 181, BIN_WIDTHS["torsion"])
        torsion.hist(comparison.coordinates.values(comparison.reference)["torsion"][:, worst], bins=edges, density=True,
                     alpha=0.5, label="reference MD")
        torsion.hist(comparison.coordinates.values(frames)["torsion"][:, worst], bins=edges, density=True, alpha=0.5,
                     label="rollout")
        torsion.set(xlabel="degrees", title=f"the torsion {'-'.join(map(str, quad.tolist()))} (largest JS)")
        torsion.legend(fontsize=8)
    else:  # no torsion between heavy atoms (ethanol): the angles, as the bonds
        _deviation_histograms(torsion, comparison.coordinates.values(comparison.reference)["angle"],
                              comparison.coordinates.values(frames)["angle"], width=BIN_WIDTHS["angle"])
        torsion.set(xlabel="θ − θ̄(MD) (degrees), all angles", ylabel="density", title="angles")
    fig.suptitle(f"{record.get('model') or record['architecture']}: {record['windows']} window(s) from frame "
                 f"{record['inputs']['start_frame']} of {record['inputs']['file']}")
    return save_figure(fig, path, dpi=110)
