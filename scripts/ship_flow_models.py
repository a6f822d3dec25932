"""Ship a generative trajectory model (EGNOFlow) trained with ``geomol fit``: its card from the ensemble benchmark.

The card says what the model was trained on (the ``geomol simulate`` runs, from their summary JSONs), how
(the training command and budget), and how it rolls out on runs it never saw: the rows of
``benchmarks/rollout_ensembles.py``'s result (JS divergences of bonds, angles and torsions beside the MD's
half-against-half floor and a frozen structure; bonds off their MD means; clashes; simulated ps per CPU second
against GFN2-xTB on the same molecule; :mod:`geomol.evaluation.flow_cards`). Several result files (``--ensembles
A.json B.json``) give a table each; for a model of many molecules the card then counts the molecules outside its
training set that it samples within the bar of ``flow_cards.ZERO_SHOT_LINES``.

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
from geomol.evaluation.flow_cards import KINDS, card

REPO = Path(__file__).resolve().parents[1]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.strip().splitlines()[0], allow_abbrev=False)
    parser.add_argument("--name", required=True)
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--data", nargs="+", required=True, help="summary JSONs of the training runs")
    parser.add_argument("--ensembles", nargs="+", required=True,
                        help="benchmarks/rollout_ensembles.py result JSONs (the first is the card's main table)")
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
    records = [json.loads(Path(p).read_text()) for p in args.ensembles]
    for path, record in zip(args.ensembles, records):
        for setting, option, value in (("sampling_steps", "--sampling-steps", model.network.sampling_steps),
                                       ("sampling_noise", "--sampling-noise", model.network.sampling_noise)):
            judged = record["settings"].get(setting)
            if judged is not None and judged != value:
                sys.exit(f"{path}: the ensemble benchmark sampled with {setting} {judged}, the model has {value}: "
                         f"give {option} {judged}")
    summaries = [json.loads(Path(p).read_text()) for p in args.data]
    text = card(args.name, model, summaries, records, args.train_command, args.budget, args.limitation)
    metrics = {"evaluation": checkout_relative(args.ensembles[0]),
               **({"more_evaluations": [checkout_relative(p) for p in args.ensembles[1:]]} if records[1:] else {}),
               **{f"js_{kind}_{row['run']}": row["js_divergence"][kind] for record in reversed(records)
                  for row in record["rows"] for kind in KINDS if row["model"] == args.name}}
    target = model.save(Path(args.out_dir) / args.name, card=text, name=args.name, overwrite=args.overwrite,
                        description=text.splitlines()[2], metrics=metrics)
    print(f"{args.name}: exported to {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
