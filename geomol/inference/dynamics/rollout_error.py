"""How a trajectory model's error grows along long rollouts: roll out from many known states, score against the truth.

The error of a rollout at offset o (frames after its start) is the MSE over nodes and xyz between
the predicted and the true positions, averaged over all rollouts that reach o; the same number the
benchmarks report (S2S MSE) when o = o_P and the start is a benchmark input frame. ``scripts/rollout_nbody.py``
and ``scripts/rollout_mocap.py`` are its command lines.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

import numpy as np

from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.dynamics.rollout import rollout_arrays

__all__ = ["score_rollouts", "report"]


def score_rollouts(model: DynamicsModel, starts: Iterable[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray | None]],
                   windows: int) -> dict:
    """Roll out from each (x, v, truth [T, N, 3] from the start frame on, charges) and average the MSE per offset.

    Returns a JSON-ready dict: ``offsets``, ``mse`` (mean over rollouts), ``rollouts`` (how many reached each offset).
    """
    totals: dict[int, list[float]] = {}
    for x, v, truth, charges in starts:
        rollout = rollout_arrays(model, x, v, windows=windows, charges=charges, include_start=False)
        for offset, positions in zip(rollout.frame_offsets, rollout.positions):
            if offset < len(truth):
                totals.setdefault(int(offset), []).append(float(np.mean((positions - truth[offset]) ** 2)))
    offsets = sorted(totals)
    return {"offsets": offsets, "mse": [float(np.mean(totals[o])) for o in offsets],
            "rollouts": [len(totals[o]) for o in offsets]}


def report(result: dict, model: DynamicsModel, title: str, out: str | None, plot: str | None, unit: str) -> None:
    """Print the error per window end; write the JSON and a plot of MSE against the offset."""
    window = model.protocol.window_frames
    print(f"{title}: MSE ({unit}²) of {model!r}")
    print(f"{'offset':>8} {'MSE':>12} {'rollouts':>9}")
    for offset, mse, count in zip(result["offsets"], result["mse"], result["rollouts"]):
        if offset % window == 0:
            print(f"{offset:>8} {mse:>12.5g} {count:>9}")
    if out:
        Path(out).write_text(json.dumps({"title": title, "model": model.name, **result}, indent=1) + "\n")
        print(f"written {out}")
    if plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        ax.semilogy(result["offsets"], result["mse"], marker=".")
        for end in range(window, max(result["offsets"]) + 1, window):
            ax.axvline(end, color="grey", linewidth=0.5)
        ax.set(xlabel="frames after the start (grey: window ends)", ylabel=f"MSE ({unit}²)", title=title)
        fig.tight_layout()
        fig.savefig(plot, dpi=120)
        print(f"written {plot}")
