"""How closely a rebuilt affinity model predicts like the shipped one.

Pairs the members of a rebuilt model directory with the shipped model's (member ``i`` with member ``i``, or the
shipped members named by ``--shipped-members``), and compares, on every complex the model's train-affinity config
trains on (its ``data`` section, built from the processed store; e.g. the whole affinity corpus for
``contact-corpus``, PLB + FEP+ for ``get-plb``): each member pair's pK, the ensembles' pK (mean over the paired members), and their weights. Also
the tnks2 example through the user's path (``geomol.predict_affinity``; the shipped side: its paired members). Prints a table and writes JSON with
provenance::

    python -m geomol train-affinity --config models/contact-corpus.yaml --out runs/contact-corpus
    OMP_NUM_THREADS=1 python benchmarks/rebuild_agreement.py --model contact-corpus --rebuilt runs/contact-corpus \\
        --config models/contact-corpus.yaml --out benchmarks/results/rebuild_agreement_contact-corpus.json
    python scripts/train_default_affinity.py rebuild --seeds 0 --out-dir runs/get-plb --model-dir runs/get-plb/model
    OMP_NUM_THREADS=1 python benchmarks/rebuild_agreement.py --model get-plb --rebuilt runs/get-plb/model \\
        --config configs/get_affinity_default.yaml --out benchmarks/results/rebuild_agreement_get-plb.json
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from geomol.api import load_model, predict_affinity
from geomol.metrics.scores import spearman
from geomol.inference.affinity_model import AffinityModel
from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
EXAMPLE = (REPO / "data" / "example" / "tnks2_protein.pdb", REPO / "data" / "example" / "tnks2_ligands.sdf")


def member_predictions(members, graphs, batch: int) -> np.ndarray:
    """pK [M, N] of each member on each complex, through the member contract (``inputs`` → ``forward``)."""
    rows = []
    with torch.inference_mode():
        for start in range(0, len(graphs), batch):
            chunk = graphs[start:start + batch]
            inputs = members[0].inputs(chunk)  # members of one model share their configuration
            rows.append(torch.stack([member(inputs) for member in members]).double().numpy())
    return np.concatenate(rows, axis=1)


def agreement(shipped: np.ndarray, rebuilt: np.ndarray) -> dict:
    """|ΔpK| quantiles and the rank correlation between two prediction vectors [N]."""
    diff = np.abs(shipped - rebuilt)
    return {"max_abs_pk": float(diff.max()), "mean_abs_pk": float(diff.mean()),
            "p99_abs_pk": float(np.quantile(diff, 0.99)), "spearman": float(spearman(shipped, rebuilt))}


def weight_difference(a: torch.nn.Module, b: torch.nn.Module) -> dict:
    pairs = list(zip(a.state_dict().values(), b.state_dict().values()))
    return {"bit_identical": all(torch.equal(x, y) for x, y in pairs),
            "max_abs_weight_difference": max(float((x.double() - y.double()).abs().max()) for x, y in pairs)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="the shipped model (name or directory)")
    parser.add_argument("--rebuilt", required=True, help="the rebuilt model's directory")
    parser.add_argument("--shipped-members", type=int, nargs="+", default=None,
                        help="the shipped members the rebuilt ones pair with (default: 0, 1, ... in order)")
    parser.add_argument("--config", required=True, help="the model's train-affinity config (its complexes are compared)")
    parser.add_argument("--every", type=int, default=1, help="compare on every k-th complex (default all)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--out", default=None, help="JSON to write")
    args = parser.parse_args(argv)

    from geomol.data.datasets.sources import affinity_source
    from geomol.training.ensemble_config import read_ensemble_config

    torch.set_num_threads(1)
    start = time.time()
    shipped, rebuilt = load_model(args.model), load_model(args.rebuilt)
    paired = args.shipped_members or list(range(len(rebuilt.members)))
    if len(paired) != len(rebuilt.members):
        parser.error(f"{len(rebuilt.members)} rebuilt members, {len(paired)} shipped members named")
    shipped_members = [shipped.members[i] for i in paired]
    config = read_ensemble_config(args.config)
    dataset = affinity_source(config.data, config.recipe, source=config.source).make_dataset(0)
    graphs = [dataset[i] for i in range(0, len(dataset), args.every)]
    ours, theirs = member_predictions(shipped_members, graphs, args.batch), member_predictions(rebuilt.members,
                                                                                               graphs, args.batch)
    paired_model = AffinityModel(shipped_members, shipped.arguments, shipped.recipe, domain=shipped.domain)
    example = {name: [round(float(r.pK), 4) for r in predict_affinity(*EXAMPLE, model=model)]
               for name, model in (("shipped", paired_model), ("rebuilt", rebuilt))}
    result = {
        "model": args.model, "rebuilt": args.rebuilt, "shipped_members": paired, "complexes": len(graphs),
        "config": args.config,
        "members": [{"shipped_member": i, **agreement(ours[k], theirs[k]),
                     **weight_difference(shipped.members[i], rebuilt.members[k]),
                     "shipped_origin": (shipped.origins or [None] * (i + 1))[i],
                     "rebuilt_origin": (rebuilt.origins or [None] * (k + 1))[k]}
                    for k, i in enumerate(paired)],
        "ensemble": agreement(ours.mean(0), theirs.mean(0)),
        "example": {**example, **agreement(np.array(example["shipped"]), np.array(example["rebuilt"]))},
        "seconds": round(time.time() - start, 1), "provenance": provenance(),
    }
    print(f"{args.model} vs {args.rebuilt}: {len(graphs)} complexes, members {paired}")
    print(f"{'':>10} {'max |ΔpK|':>10} {'mean |ΔpK|':>11} {'p99 |ΔpK|':>10} {'Spearman':>9} {'max |Δw|':>9}")
    for row in result["members"]:
        print(f"{'member ' + str(row['shipped_member']):>10} {row['max_abs_pk']:10.4f} {row['mean_abs_pk']:11.4f} "
              f"{row['p99_abs_pk']:10.4f} {row['spearman']:9.4f} {row['max_abs_weight_difference']:9.2e}")
    for name in ("ensemble", "example"):
        row = result[name]
        print(f"{name:>10} {row['max_abs_pk']:10.4f} {row['mean_abs_pk']:11.4f} {row['p99_abs_pk']:10.4f} "
              f"{row['spearman']:9.4f}")
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
