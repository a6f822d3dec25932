"""Comparing a rollout with a reference trajectory: per-frame RMSD, per-atom error, JSON summary, plot.

Each predicted frame f (trajectory frame number: start + offset) is compared with frame f of the
reference trajectory, which must therefore share the input's frame numbering (the input
trajectory itself, or another run saved at the same interval from the same start).

* ``rmsd_A``: RMSD without any alignment, sqrt(mean_i ‖x̂_i − x_i‖²) in Å. EGNO predicts absolute
  positions in the input's frame, so drift and rotation of the whole molecule count as error.
* ``rmsd_superposed_A`` (with ``superpose``): RMSD after optimal translation and rotation of the
  prediction onto the reference (Kabsch, MDAnalysis ``rms.rmsd``): internal structure only.
* ``per_atom_mean_error_A`` / ``per_atom_final_error_A``: ‖x̂_i − x_i‖ per atom, averaged over the
  predicted frames / at the last one (no alignment).

Frames are compared as they are predicted; only running sums per atom are kept.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from geomol.errors import ConfigError, TrajectoryError

__all__ = ["ReferenceComparison", "plot_rollout", "write_summary"]


class ReferenceComparison:
    """Running comparison of predicted frames with a reference trajectory.

    Args:
        universe, atoms: the reference (MDAnalysis Universe and the rollout's selection in it).
        source: the reference file, for messages.
        n_atoms: atoms of the rollout, which the selection must match.
        last_frame: the last frame number the rollout will write (checked before rolling out).
        superpose: also compute the RMSD after optimal superposition.
        still: [N, 3] start positions (Å): also the RMSD of a "no motion" prediction that keeps them,
            the baseline a model must beat.
    """

    def __init__(self, universe, atoms, source: str, n_atoms: int, last_frame: int, superpose: bool = False,
                 still: np.ndarray | None = None):
        self.universe, self.atoms, self.source = universe, atoms, str(source)
        if len(atoms) != n_atoms:
            raise ConfigError(f"the selection has {len(atoms)} atoms in the reference but {n_atoms} in the input",
                              source=self.source)
        n_frames = len(self.universe.trajectory)
        if last_frame >= n_frames:
            raise TrajectoryError(f"the reference has {n_frames} frames but the rollout reaches frame {last_frame}; "
                                  f"roll out fewer frames or give a longer reference", source=self.source)
        self.superpose = superpose
        self.still = None if still is None else np.asarray(still, dtype=np.float64)
        self.rmsd_still: list[float] = []
        self.frames: list[int] = []
        self.rmsd: list[float] = []
        self.rmsd_superposed: list[float] = []
        self.error_sum = np.zeros(n_atoms)
        self.final_error = np.zeros(n_atoms)

    def add(self, frame: int, positions: np.ndarray) -> float:
        """Compare predicted ``positions`` [N, 3] (Å) with reference frame ``frame``; returns the RMSD."""
        self.universe.trajectory[frame]
        reference = self.atoms.positions.astype(np.float64)
        error = np.linalg.norm(positions.astype(np.float64) - reference, axis=-1)
        self.frames.append(int(frame))
        self.rmsd.append(float(np.sqrt(np.mean(error ** 2))))
        if self.superpose:
            from MDAnalysis.analysis.rms import rmsd

            self.rmsd_superposed.append(float(rmsd(positions, reference, center=True, superposition=True)))
        if self.still is not None:
            self.rmsd_still.append(float(np.sqrt(np.mean(np.sum((self.still - reference) ** 2, axis=-1)))))
        self.error_sum += error
        self.final_error = error
        return self.rmsd[-1]

    def results(self) -> dict[str, Any]:
        """JSON-ready record: frames, RMSD per frame, mean and final RMSD (None if no frame), per-atom errors."""
        def mean(values):
            return float(np.mean(values)) if values else None

        out = {"file": self.source, "alignment": "none", "frames": self.frames, "rmsd_A": self.rmsd,
               "mean_rmsd_A": mean(self.rmsd), "final_rmsd_A": self.rmsd[-1] if self.rmsd else None,
               "per_atom_mean_error_A": (self.error_sum / max(len(self.rmsd), 1)).tolist(),
               "per_atom_final_error_A": self.final_error.tolist()}
        if self.still is not None:
            out.update(rmsd_no_motion_A=self.rmsd_still, mean_rmsd_no_motion_A=mean(self.rmsd_still))
        if self.superpose:
            out.update(rmsd_superposed_A=self.rmsd_superposed, mean_rmsd_superposed_A=mean(self.rmsd_superposed),
                       final_rmsd_superposed_A=self.rmsd_superposed[-1] if self.rmsd_superposed else None)
        return out


def write_summary(record: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """Write the rollout record as indented JSON (atomically); returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    tmp.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def plot_rollout(record: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """PNG of a rollout compared with its reference: RMSD over time, and the error of each atom."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reference = record["reference"]
    frames = np.asarray(reference["frames"])
    inputs = record["inputs"]
    times = inputs["start_time_ps"] + (frames - inputs["start_frame"]) * inputs["frame_interval_ps"]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4))
    left.plot(times, reference["rmsd_A"], marker=".", label="no alignment")
    if "rmsd_superposed_A" in reference:
        left.plot(times, reference["rmsd_superposed_A"], marker=".", linestyle="--", label="after superposition")
    if "rmsd_no_motion_A" in reference:  # the baseline: the start frame kept for ever
        left.plot(times, reference["rmsd_no_motion_A"], color="grey", linestyle=":", label="no motion (start frame)")
    left.set(xlabel="time (ps)", ylabel="RMSD to reference (Å)", title="RMSD over the rollout")
    left.legend()
    atoms = np.arange(len(reference["per_atom_mean_error_A"]))
    right.plot(atoms, reference["per_atom_final_error_A"], linewidth=0.8, alpha=0.6,
               label=f"last frame ({frames[-1]})")
    right.plot(atoms, reference["per_atom_mean_error_A"], linewidth=1.2, label="mean over frames")
    right.set(xlabel=f"atom ({inputs['selection']}, topology order)", ylabel="error ‖x̂ − x‖ (Å)",
              title="per-atom error")
    right.legend()
    fig.suptitle(f"{record.get('model') or record['architecture']}: rollout from frame {inputs['start_frame']}, "
                 f"{record['windows']} window(s)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
