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
* baselines a model must beat, on the same frames: ``rmsd_no_motion_A`` (the start frame kept) and
  ``rmsd_linear_A`` (linear extrapolation x(start) + (f − start)·v of the start state, v in Å per frame).
* ``chemistry``: the reference's own bond-length and angle errors, broken bonds and clashes against
  the start frame (:mod:`geomol.inference.dynamics.rollout_chemistry`): how much real dynamics moves the bonds.

Frames are compared as they are predicted; only running sums per atom are kept.
"""
from __future__ import annotations

import json
import os
import warnings
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.errors import ConfigError, TrajectoryError
from geomol.inference.dynamics.rollout_chemistry import ChemistryTracker

__all__ = ["ReferenceComparison", "plot_rollout", "write_summary"]


def _rmsd(a: np.ndarray, b: np.ndarray) -> float:
    """RMSD (Å, no alignment) of two [N, 3] frames."""
    return float(np.sqrt(np.mean(np.sum((a - b) ** 2, axis=-1))))


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
        velocity, start: [N, 3] start velocity (Å per frame) and the start frame number: also the RMSD
            of linear extrapolation still + (frame − start)·velocity (needs ``still``).
        graph: the selection's bonds: also the chemistry of the reference frames against ``still``.
    """

    def __init__(self, universe, atoms, source: str, n_atoms: int, last_frame: int, superpose: bool = False,
                 still: np.ndarray | None = None, velocity: np.ndarray | None = None, start: int = 0,
                 graph: CovalentGraph | None = None):
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
        self.velocity = None if velocity is None or still is None else np.asarray(velocity, dtype=np.float64)
        self.start = int(start)
        self.chemistry = None if graph is None or still is None else ChemistryTracker(graph, self.still, start)
        self.rmsd_still: list[float] = []
        self.rmsd_linear: list[float] = []
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
            self.rmsd_still.append(_rmsd(self.still, reference))
        if self.velocity is not None:
            self.rmsd_linear.append(_rmsd(self.still + (frame - self.start) * self.velocity, reference))
        if self.chemistry is not None:
            self.chemistry.add(frame, reference)
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
        if self.velocity is not None:
            out.update(rmsd_linear_A=self.rmsd_linear, mean_rmsd_linear_A=mean(self.rmsd_linear))
        if self.chemistry is not None:
            out["chemistry"] = self.chemistry.results()
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


def _times(record: Mapping[str, Any], frames) -> np.ndarray:
    """Times (ps) of trajectory frame numbers ``frames``."""
    inputs = record["inputs"]
    return inputs["start_time_ps"] + (np.asarray(frames) - inputs["start_frame"]) * inputs["frame_interval_ps"]


def _per_frame(chemistry: Mapping[str, Any], key: str) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in chemistry["per_frame"][key]], dtype=np.float64)


def _plot_chemistry(record: Mapping[str, Any], bonds_axis, angles_axis) -> None:
    """Bond-length error (median, max; the broken-bond threshold) and angle error over time, with the
    reference trajectory's own errors dashed and the clashes per frame."""
    curves = [("rollout", record["chemistry"], "-")]
    if record.get("reference", {}).get("chemistry"):
        curves.append(("reference MD", record["reference"]["chemistry"], "--"))
    for label, chemistry, style in curves:
        times = _times(record, chemistry["frames"])
        for key, axis, what in (("bond_error", bonds_axis, "Å"), ("angle_error", angles_axis, "deg")):
            for stat, colour in (("median", "tab:blue"), ("max", "tab:red")):
                axis.plot(times, _per_frame(chemistry, f"{key}_{stat}_{what.replace('Å', 'A')}"), linestyle=style,
                          color=colour, marker="." if style == "-" else None, label=f"{label}: {stat}")
    chemistry = record["chemistry"]
    bonds_axis.axhline(chemistry["broken_bond_threshold_A"], color="grey", linestyle=":", label="broken (0.3 Å)")
    bonds_axis.set(xlabel="time (ps)", ylabel="|d − d(start)| (Å)", yscale="log",
                   title=f"bond-length error ({chemistry['num_bonds']} bonds, {chemistry['bond_source']}); "
                         f"broken in {_percent(chemistry['broken_bond_fraction'])} of frames")
    angles_axis.set(xlabel="time (ps)", ylabel="|θ − θ(start)| (degrees)",
                    title=f"angle error; clash (< {chemistry['clash_distance_A']:g} Å) in "
                          f"{_percent(chemistry['clash_fraction'])} of frames")
    clashes = angles_axis.twinx()
    clashes.step(_times(record, chemistry["frames"]), chemistry["per_frame"]["clashes"], where="mid", color="black",
                 alpha=0.5, label="clashing pairs (rollout)")
    clashes.set_ylabel("clashing heavy-atom pairs")
    for axis in (bonds_axis, angles_axis):
        axis.legend(fontsize=7)
    clashes.legend(fontsize=7, loc="lower right")


def _percent(fraction) -> str:
    return "n/a" if fraction is None else f"{100 * fraction:.0f}%"


def plot_rollout(record: Mapping[str, Any], path: str | os.PathLike) -> Path:
    """PNG of a rollout compared with its reference: RMSD over time with the no-motion and linear baselines,
    the error of each atom, and the chemistry over time (bond-length and angle errors, clashes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    reference = record["reference"]
    frames = np.asarray(reference["frames"])
    inputs = record["inputs"]
    times = _times(record, frames)
    fig, ((left, right), (bonds, angles)) = plt.subplots(2, 2, figsize=(12, 8))
    left.plot(times, reference["rmsd_A"], marker=".", label="no alignment")
    if "rmsd_superposed_A" in reference:
        left.plot(times, reference["rmsd_superposed_A"], marker=".", linestyle="--", label="after superposition")
    if "rmsd_no_motion_A" in reference:  # the baselines: the start frame kept for ever, or moved on at v
        left.plot(times, reference["rmsd_no_motion_A"], color="grey", linestyle=":", label="no motion (start frame)")
    if "rmsd_linear_A" in reference:
        left.plot(times, reference["rmsd_linear_A"], color="grey", linestyle="-.", label="linear extrapolation")
    left.set(xlabel="time (ps)", ylabel="RMSD to reference (Å)", title="RMSD over the rollout")
    left.legend()
    atoms = np.arange(len(reference["per_atom_mean_error_A"]))
    right.plot(atoms, reference["per_atom_final_error_A"], linewidth=0.8, alpha=0.6,
               label=f"last frame ({frames[-1]})")
    right.plot(atoms, reference["per_atom_mean_error_A"], linewidth=1.2, label="mean over frames")
    right.set(xlabel=f"atom ({inputs['selection']}, topology order)", ylabel="error ‖x̂ − x‖ (Å)",
              title="per-atom error")
    right.legend()
    if record.get("chemistry"):
        _plot_chemistry(record, bonds, angles)
    restoring = " with bond restoring" if record.get("bond_restoring") else ""
    fig.suptitle(f"{record.get('model') or record['architecture']}: rollout from frame {inputs['start_frame']}, "
                 f"{record['windows']} window(s){restoring}")
    return save_figure(fig, path)


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Lay out, write (folders made, matplotlib's layout warnings silenced) and close a figure; returns the path."""
    import matplotlib.pyplot as plt

    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
