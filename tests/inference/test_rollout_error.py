"""geomol.inference.dynamics.rollout_error (``scripts/rollout_nbody.py``, ``scripts/rollout_mocap.py``): the error per offset
of many rollouts against their truth, counted over the rollouts that reach each offset, and its report."""
from __future__ import annotations

import json

import numpy as np
import pytest

import geomol
from geomol.data.datasets.trajectories.nbody import draw_initial_states
from geomol.inference.dynamics.rollout import rollout_arrays
from geomol.inference.dynamics.rollout_error import report, score_rollouts


@pytest.fixture(scope="module")
def nbody():
    """The shipped N-body EGNO and two charged-particle states: positions and simulator velocities [2, N, 3],
    charges [2, N]."""
    model = geomol.load_model("egno-nbody")
    charges, loc, vel = draw_initial_states(2, np.random.RandomState(7))
    return model, loc.transpose(0, 2, 1), vel.transpose(0, 2, 1), charges


def test_error_per_offset_is_the_mean_over_the_rollouts_that_reach_it(nbody, tmp_path, capsys):
    model, loc, vel, charges = nbody
    window = model.protocol.window_frames
    exact = [rollout_arrays(model, loc[i], vel[i], windows=2, charges=charges[i], include_start=False)
             for i in range(2)]
    # truth [T, N, 3] from the start frame on: the model's own rollout, shifted by 0.1 (system 0) and 0.2 (system
    # 1) in every coordinate; system 1's truth ends after the first window
    truths = []
    for i, shift in enumerate((0.1, 0.2)):
        truth = np.zeros((2 * window + 1, loc.shape[1], 3))
        truth[exact[i].frame_offsets] = exact[i].positions + shift
        truths.append(truth[: window + 1] if i == 1 else truth)
    result = score_rollouts(model, [(loc[i], vel[i], truths[i], charges[i]) for i in range(2)], windows=2)
    offsets = list(exact[0].frame_offsets)
    assert result["offsets"] == offsets
    first = [o for o in offsets if o <= window]
    assert result["rollouts"] == [2 if o in first else 1 for o in offsets]
    expected = [(0.1 ** 2 + 0.2 ** 2) / 2 if o in first else 0.1 ** 2 for o in offsets]
    np.testing.assert_allclose(result["mse"], expected, rtol=1e-6)

    out, plot = tmp_path / "error.json", tmp_path / "error.png"
    report(result, model, "two systems", str(out), str(plot), unit="length")
    written = json.loads(out.read_text())
    assert written["title"] == "two systems" and written["mse"] == result["mse"] and plot.stat().st_size > 0
    printed = capsys.readouterr().out.splitlines()
    assert [int(line.split()[0]) for line in printed[2:4]] == [window, 2 * window]  # window ends only
