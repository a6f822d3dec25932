"""Ship a generative trajectory model (EGNOFlow) trained with ``geomol fit``: its card from the ensemble benchmark.

The card says what the model was trained on (the ``geomol simulate`` runs, from their summary JSONs), how
(the training command and budget), and how it rolls out on runs it never saw: the rows of
``benchmarks/rollout_ensembles.py``'s result (JS divergences of bonds, angles and torsions beside the MD's
half-against-half floor and a frozen structure; bonds off their MD means; clashes; simulated ps per CPU second
against GFN2-xTB on the same molecule).

    python scripts/ship_flow_models.py --name egno-flow-aspirin --checkpoint runs/.../best-step=....ckpt \\
        --data md_data/md17/md17_aspirin.json --ensembles benchmarks/results/rollout_ensembles_aspirin.json \\
        --train-command "geomol fit --config egno_flow_molecule --config molecules/aspirin ..." --budget "..."
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import geomol
from geomol.benchmarking.run_record import checkout_relative
from geomol.provenance import user_command

REPO = Path(__file__).resolve().parents[1]
KINDS = ("bond", "angle", "torsion")


def _cells(values: dict) -> str:
    return " / ".join("–" if values[k] is None else f"{values[k]:.3f}" for k in KINDS)


def data_lines(summaries: list[dict]) -> list[str]:
    lines = []
    for s in summaries:
        settings = s["settings"]
        lines.append(f"- {s['molecule']} (`{s['smiles']}`, {s['atoms']} atoms): `{user_command(s['provenance']['command'])}`"
                     f": {s['frames']} frames ({s['simulated_ps']:.1f} ps), GFN2-xTB (tblite {s['engine']['version']}), "
                     f"{settings['temperature']:.0f} K, {settings['timestep']} fs steps, seed {settings['seed']}")
    return lines


def ensemble_lines(record: dict) -> list[str]:
    lines = ["| model | run (never trained on) | JS bond / angle / torsion | MD half vs half | frozen start | "
             "another MD run | largest bond deviation from the MD mean, Å (MD's own) | frames with a bond > 0.3 Å off |"
             " frames with a clash | simulated ps per CPU s | GFN2-xTB ps per CPU s | speed-up |", "|---" * 12 + "|"]
    for row in record["rows"]:
        engine = record.get("engine", {}).get(row["run"])
        speed = row["speed"]["simulated_ps_per_cpu_second"]
        other = row.get("other_ensembles", {}).get("independent MD run")
        rate = (f"{engine['simulated_ps_per_cpu_second']:.4f} | {speed / engine['simulated_ps_per_cpu_second']:,.0f}×"
                if engine else "– | –")
        lines.append(f"| {row['model']} | {row['run']} ({len(row['starts'])} starts × {row['windows']} windows) | "
                     f"{_cells(row['js_divergence'])} | {_cells(row['js_floor_half_against_half'])} | "
                     f"{_cells(row['js_frozen_structure'])} | {_cells(other) if other else '–'} | "
                     f"{row['bond_deviation_from_md_mean_max_A']:.2f} ({row['reference_bond_deviation_max_A']:.2f}) | "
                     f"{100 * row['frames_with_a_bond_off_md_mean']:.1f}% | {100 * row['clash_frame_fraction']:.1f}% | "
                     f"{speed:.1f} | {rate} |")
    return lines


def _sampler(network) -> str:
    """How the model samples a window, in words."""
    if not network.sampling_noise:
        return f"{network.sampling_steps} Euler steps of the flow"
    return f"{network.sampling_steps} steps of the flow's SDE with η = {network.sampling_noise:g}"


def card(args, model, summaries: list[dict], record: dict) -> str:
    protocol = model.protocol
    offsets, interval = protocol.target_offsets, protocol.frame_interval or 0.0
    molecules = sorted({s["molecule"] for s in summaries})
    what = (f"{molecules[0]}'s heavy atoms" if len(molecules) == 1 else
            f"the heavy atoms of any small molecule (trained on {len(molecules)}: {', '.join(molecules)})")
    description = (f"Generative EGNO (EGNOFlow, conditional flow matching) for {what} at 500 K: each window samples "
                   f"the positions at +{offsets[0]} … +{offsets[-1]} frames ({interval * 1e3:g} fs each, up to "
                   f"{offsets[-1] * interval:g} ps) given one frame and the velocity over the last {protocol.velocity_span} "
                   f"frames ({_sampler(model.network)} for each window), so a long rollout "
                   "samples the molecule's ensemble.")
    settings = record["settings"]
    lines = [f"# {args.name}", "", description, "", "## Data (made here; not shipped)", "", *data_lines(summaries), "",
             "## Training", "", f"- `{args.train_command}`" if args.train_command else "",
             f"- {args.budget}" if args.budget else "",
             "- windows of every frame after the first 1 ps (heat-up) of each run: the first 85 % train, the last 15 % "
             "validate; atoms matched to a "
             "user's file by the molecular graph" + ("" if len(molecules) > 1 else " (this molecule only)"), "",
             "## Rollouts on runs it never saw, judged as MD is judged", "",
             f"`{record['meta']['command']}`: {settings['starts']} starts per run, {settings['windows']} windows each "
             f"(seed {settings['seed']}); the pooled frames against the whole run (after its first ps, every 10th "
             "frame). JS: Jensen–Shannon divergence (base 2) of each bond length, angle and torsion (0.02 Å, 2.5°, 10° "
             "bins), the mean per kind; MD half vs half: the run's first half against its second (the sampling floor); "
             "frozen start: one structure that never moves (no motion); another MD run: the training run of the same "
             "molecule against this one.", "", *ensemble_lines(record), "",
             "## Limitations", "", *[f"- {line}" for line in args.limitation], "",
             "## Reproduce", "", "```", *dict.fromkeys(user_command(s["provenance"]["command"]) for s in summaries),  # one line per command
             args.train_command or "", user_command(record["meta"]["command"]),
             f"python scripts/ship_flow_models.py --name {args.name} ...", "```", "",
             "## Use", "", "```bash",
             f"geomol rollout --model {args.name} --topology molecule.xyz --start 3000 --windows 100 --out roll.xyz "
             "--compare", "```", ""]
    return "\n".join(line for line in lines if line is not None)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0], allow_abbrev=False)
    parser.add_argument("--name", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--data", nargs="+", required=True, help="summary JSONs of the training runs")
    parser.add_argument("--ensembles", required=True, help="benchmarks/rollout_ensembles.py result JSON")
    parser.add_argument("--train-command", default="")
    parser.add_argument("--budget", default="")
    parser.add_argument("--limitation", action="append", default=[])
    parser.add_argument("--sampling-steps", type=int, default=None,
                        help="Euler steps per window the shipped model uses (as judged by the ensemble benchmark)")
    parser.add_argument("--sampling-noise", type=float, default=None,
                        help="η of the stochastic sampler the shipped model uses (as judged by the ensemble benchmark)")
    parser.add_argument("--out-dir", default=str(REPO / "models"))
    parser.add_argument("--overwrite", action="store_true")
    args = parser.parse_args(argv)
    model = geomol.load_model(args.checkpoint)
    model.set_sampling(args.sampling_steps, args.sampling_noise)
    record = json.loads(Path(args.ensembles).read_text())
    for setting, option, value in (("sampling_steps", "--sampling-steps", model.network.sampling_steps),
                                   ("sampling_noise", "--sampling-noise", model.network.sampling_noise)):
        judged = record["settings"].get(setting)
        if judged is not None and judged != value:
            sys.exit(f"the ensemble benchmark sampled with {setting} {judged}, the model has {value}: "
                     f"give {option} {judged}")
    summaries = [json.loads(Path(p).read_text()) for p in args.data]
    text = card(args, model, summaries, record)
    metrics = {"evaluation": checkout_relative(args.ensembles),
               **{f"js_{kind}_{row['run']}": row["js_divergence"][kind] for row in record["rows"] for kind in KINDS
                  if row["model"] == args.name}}
    target = model.save(Path(args.out_dir) / args.name, card=text, name=args.name, overwrite=args.overwrite,
                        description=text.splitlines()[2], metrics=metrics)
    print(f"{args.name}: exported to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
