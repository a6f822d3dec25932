"""Roll a trained Mocap EGNO out over whole test trials of CMU "Run" and measure how the error grows.

Each rollout starts from a true pose and its per-frame velocity (x[t+1] − x[t]) at a start frame of
the benchmark's test split (trials 3, 7, 8) and continues window after window (+30 frames per
window, the next one seeded with the last predicted pose and the last predicted per-frame
difference) until the trial ends. Printed and written: the MSE against the recording at every window
end; the MSE at +30 frames is the benchmark's S2S number. ``--save`` keeps one predicted motion
(predicted and true joint positions) as an .npz for plotting or animation.

Usage::

    python scripts/rollout_mocap.py                                   # models/egno-mocap-run
    python scripts/rollout_mocap.py --model runs/egno_mocap_run/version_0/checkpoints/last.ckpt \\
        --starts-per-trial 20 --out mocap_rollout.json --plot mocap_rollout.png --save motion.npz
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import geomol
from geomol.data.datasets.trajectories.mocap import MocapDataset
from geomol.data.paths import shared_data_dir
from geomol.inference.dynamics.rollout_error import report, score_rollouts

SHARED = shared_data_dir()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.strip().splitlines()[0])
    parser.add_argument("--model", default="egno-mocap-run", help="shipped model name, directory or checkpoint")
    parser.add_argument("--data", help="cmu_subject09_run.npz (default ../shared/data/mocap_run/...)")
    parser.add_argument("--starts-per-trial", type=int, default=10, help="test start frames per trial (default 10)")
    parser.add_argument("--out", help="JSON file for the MSE per offset")
    parser.add_argument("--plot", help="PNG of the MSE against the offset")
    parser.add_argument("--save", help=".npz with the first rollout: predicted and true joint positions")
    args = parser.parse_args(argv)

    model = geomol.load_model(args.model)
    path = args.data or SHARED / "mocap_run" / "cmu_subject09_run.npz"
    data = MocapDataset("test", path, num_timesteps=model.protocol.num_timesteps,
                        delta=model.protocol.window_frames)
    trials = sorted({int(t) for t, _ in data.samples})
    starts = [(t, int(s)) for t in trials for s in sorted(data.samples[data.samples[:, 0] == t][:, 1])
              [:args.starts_per_trial]]
    window = model.protocol.window_frames
    windows = max((len(data.positions[t]) - 1 - s) // window for t, s in starts)
    states = [(data.positions[t][s], data.velocities[t][s], data.positions[t][s:], None) for t, s in starts]
    result = score_rollouts(model, states, windows)
    report(result, model, f"Mocap Run rollout, {len(starts)} starts in test trials {trials}", args.out,
           args.plot, unit="length")
    if args.save:
        (trial, start), (x, v, truth, _) = starts[0], states[0]
        reach = (len(truth) - 1) // window
        rollout = geomol.rollout_arrays(model, x, v, windows=max(reach, 1))
        keep = rollout.frame_offsets < len(truth)
        np.savez(args.save, offsets=rollout.frame_offsets[keep], predicted=rollout.positions[keep],
                 true=truth[rollout.frame_offsets[keep]], trial=trial, start=start)
        print(f"written {args.save} (trial {trial}, start frame {start})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
