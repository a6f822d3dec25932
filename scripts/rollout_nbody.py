"""Roll a trained N-body EGNO out far beyond its training horizon and measure how the error grows.

Fresh charged-particle systems are simulated with the reference physics (``geomol.data.datasets.trajectories.nbody``)
for longer than the benchmark's 5000 steps, from a seed the training data never used; the model is
started from the true state (positions and simulator velocity) at saved frame ``--start`` (the
benchmark's input frame is 30) and rolled out window after window (+10 saved frames, i.e. 1.0 time
units, per window). Printed and written: the MSE against the simulation at every window end; the
MSE at +10 frames from frame 30 is the benchmark's S2S number.

Usage::

    python scripts/rollout_nbody.py                                  # models/egno-nbody, 100 systems
    python scripts/rollout_nbody.py --model runs/egno_nbody/version_0/checkpoints/last.ckpt \\
        --systems 200 --steps 20000 --out nbody_rollout.json --plot nbody_rollout.png
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import geomol
from geomol.data.datasets.trajectories.nbody import ChargedParticles, draw_initial_states, simulate
from geomol.inference.dynamics.rollout_error import report, score_rollouts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.strip().splitlines()[0])
    parser.add_argument("--model", default="egno-nbody", help="shipped model name, directory or checkpoint")
    parser.add_argument("--systems", type=int, default=100, help="simulations to roll out (default 100)")
    parser.add_argument("--steps", type=int, default=10000, help="integration steps (default 10000: 99 saved frames)")
    parser.add_argument("--start", type=int, default=30, help="saved frame the rollouts start from (default 30)")
    parser.add_argument("--seed", type=int, default=2024, help="simulation seed (the benchmark data used 43)")
    parser.add_argument("--out", help="JSON file for the MSE per offset")
    parser.add_argument("--plot", help="PNG of the MSE against the offset")
    args = parser.parse_args(argv)

    model = geomol.load_model(args.model)
    system = ChargedParticles(num_steps=args.steps)
    charges, loc, vel = draw_initial_states(args.systems, np.random.RandomState(args.seed), system)
    positions, velocities = simulate(charges, loc, vel, system)  # [S, T, n, 3] float64
    remaining = positions.shape[1] - 1 - args.start
    if remaining < model.protocol.window_frames:
        raise SystemExit(f"only {remaining} saved frames after frame {args.start}: raise --steps")
    windows = remaining // model.protocol.window_frames
    starts = ((positions[s, args.start], velocities[s, args.start], positions[s, args.start:], charges[s])
              for s in range(args.systems))
    result = score_rollouts(model, starts, windows)
    title = (f"N-body rollout from frame {args.start}, {args.systems} systems, {windows} windows "
             f"({system.sample_every * system.dt:g} time units per frame)")
    report(result, model, title, args.out, args.plot, unit="length")
    return 0


if __name__ == "__main__":
    sys.exit(main())
