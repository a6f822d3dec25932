"""Small-molecule trajectory models judged as MD is judged: do long rollouts stay molecules and sample the ensemble?

For each model and each run it never trained on (``--run NAME=FILE``: an independent seed of its molecule, or a
molecule it never saw), :func:`geomol.evaluation.molecule_ensembles.judge_model` rolls it out ``--windows`` windows
from ``--starts`` start frames and compares the pooled frames with the run: Jensen–Shannon divergences (base 2) of
the heavy atoms' bond lengths, angles and torsions, beside the run's first half against its second half (the floor)
and a frozen start structure (no motion); the largest deviation of a bond from its MD mean and the frames with one
more than 0.3 Å off; frames with a clash. Speed is simulated ps per CPU second of the rollouts (all starts batched)
against GFN2-xTB through ``geomol simulate``'s integrator on the same molecule, measured in the same process
(``--engine-steps``). Where the training run of the molecule is given (``--train NAME=FILE``), the JS of that
independent MD run against the test run is shown too: what two MD runs of 20 ps disagree by.

    python benchmarks/rollout_ensembles.py --model egno-md17-aspirin --run aspirin=md_data/md17_seed2/md17_aspirin.npz \\
        --train aspirin=md_data/md17/md17_aspirin.npz --name aspirin

Prints a table and writes ``benchmarks/results/rollout_ensembles_<name>.json`` (with the run's provenance).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.benchmarking.run_record import labelled, run_metadata, write_result

RESULTS = Path(__file__).resolve().parent / "results"


def _row(model: str, run: str, record: dict, engine: dict | None) -> str:
    js, floor, frozen = record["js_divergence"], record["js_floor_half_against_half"], record["js_frozen_structure"]
    kinds = ("bond", "angle", "torsion")
    cell = lambda d: " / ".join("–" if d[k] is None else f"{d[k]:.3f}" for k in kinds)  # noqa: E731
    speed = record["speed"]["simulated_ps_per_cpu_second"]
    ratio = f"{speed / engine['simulated_ps_per_cpu_second']:,.0f}×" if engine else "–"
    other = "; ".join(f"{k}: {cell(v)}" for k, v in record.get("other_ensembles", {}).items()) or "–"
    return (f"| {model} | {run} | {cell(js)} | {cell(floor)} | {cell(frozen)} | {other} | "
            f"{record['bond_deviation_from_md_mean_max_A']:.2f} ({record['reference_bond_deviation_max_A']:.2f}) | "
            f"{100 * record['frames_with_a_bond_off_md_mean']:.1f}% | {100 * record['clash_frame_fraction']:.1f}% | "
            f"{speed:.2f} | {ratio} |")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--model", action="append", required=True, help="[LABEL=]model name or checkpoint")
    parser.add_argument("--run", action="append", required=True, help="NAME=FILE: a run the models never trained on")
    parser.add_argument("--train", action="append", default=[], help="NAME=FILE: the training run of NAME's molecule")
    parser.add_argument("--starts", type=int, default=5)
    parser.add_argument("--windows", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--sampling-steps", type=int, default=None,
                        help="Euler steps per window of the generative models (default: each model's own)")
    parser.add_argument("--sampling-noise", type=float, default=None,
                        help="η of the generative models' stochastic sampler (default: each model's own; 0: the ODE)")
    parser.add_argument("--skip-frames", type=int, default=2000)
    parser.add_argument("--engine-steps", type=int, default=200, help="GFN2-xTB steps timed per molecule (0: none)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", required=True, help="result name: benchmarks/results/rollout_ensembles_<name>.json")
    args = parser.parse_args(argv)

    import numpy as np
    import torch

    import geomol
    from geomol.evaluation.molecule_ensembles import engine_speed, judge_model
    from geomol.inference.dynamics.molecule_inputs import MoleculeInput

    torch.set_num_threads(args.threads)
    meta = run_metadata(args.threads)
    record = {"settings": {k: v for k, v in vars(args).items() if k not in ("model", "run", "train")},
              "models": labelled(args.model), "runs": labelled(args.run, lambda path: Path(path).stem), "rows": [], "engine": {}}
    trains = labelled(args.train, lambda path: Path(path).stem)
    lines = ["| model | run | JS bond / angle / torsion | MD half vs half | frozen start | other MD | "
             "largest bond deviation from MD mean, Å (MD's own) | frames with a bond > 0.3 Å off | frames with a "
             "clash | simulated ps per CPU s | vs GFN2-xTB |", "|---" * 11 + "|"]
    for run_name, run_file in record["runs"].items():
        engine = None
        if args.engine_steps:
            smiles = str(np.load(run_file)["smiles"]) if run_file.endswith(".npz") else run_name
            engine = record["engine"][run_name] = engine_speed(smiles, steps=args.engine_steps)
        for label, reference in record["models"].items():
            model = geomol.load_model(reference)
            if model.generative:
                model.set_sampling(args.sampling_steps, args.sampling_noise)
            extra = {}
            if run_name in trains:
                inputs = MoleculeInput.open(model.protocol, run_file)
                other = MoleculeInput.open(model.protocol, trains[run_name])
                extra["independent MD run"] = inputs.to_file_order(other.positions[args.skip_frames::10])
            row = judge_model(model, run_file, starts=args.starts, windows=args.windows, seed=args.seed,
                              skip_frames=args.skip_frames, extra_references=extra)
            record["rows"].append({**row, "model": label, "run": run_name})
            lines.append(_row(label, run_name, row, engine))
            print(lines[-1], flush=True)
    print("\n".join(lines))
    rows = record.pop("rows")
    write_result(RESULTS / f"rollout_ensembles_{args.name}.json", meta, rows, **record)
    return {"rows": rows, **record}


if __name__ == "__main__":
    main()
