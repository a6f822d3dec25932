"""Protein trajectory models rolled out for many windows: do they stay proteins and sample the backbone's ensemble?

For each model (``--model``) :func:`geomol.evaluation.protein_ensembles.judge_protein` rolls it out ``--windows``
windows from ``--starts`` start frames of an independent MD run it never trained on (``--topology``,
``--trajectory``) and compares the pooled frames with that run: Jensen–Shannon divergences (base 2) of the
selection's bond lengths, angles and torsions beside the run's half-against-half floor and a frozen start, the
backbone dihedral (Ramachandran φ/ψ) distributions, the largest deviation of a bond from its MD mean, clashes, and
whether (and after how many windows) the rollout diverged. Speed is simulated ps per CPU second, all starts batched.

    python benchmarks/protein_ensembles.py --model egno-fkbp12 --topology md_data/fkbp12_4fs/seed2/topology.pqr \\
        --trajectory md_data/fkbp12_4fs/seed2/trajectory.dcd --windows 1000 --restore-bonds --name fkbp12

``--restore-bonds`` adds each model with the bond-restoring projection (``geomol rollout --restore-bonds``): its
bonds are kept by construction, so its row tests the rest (angles, torsions, Ramachandran, clashes, blow-up).

Prints a table and writes ``benchmarks/results/protein_ensembles_<name>.json`` (with the run's provenance).
"""
from __future__ import annotations

import argparse
from pathlib import Path

from geomol.benchmarking.run_record import labelled, run_metadata, write_result

RESULTS = Path(__file__).resolve().parent / "results"
KINDS = ("bond", "angle", "torsion")


def _cells(values: dict, keys=KINDS) -> str:
    return " / ".join("–" if values.get(k) is None else f"{values[k]:.3f}" for k in keys)


def _row(label: str, record: dict) -> str:
    speed = record["simulated_ps_per_start"] * len(record["starts"]) / max(record["cpu_seconds"], 1e-9)
    return (f"| {label} | {len(record['starts'])} × {record['windows']} | {_cells(record['js_divergence'])} | "
            f"{_cells(record['js_floor_half_against_half'])} | {_cells(record['js_frozen_structure'])} | "
            f"{_cells(record['ramachandran'], ('phi', 'psi'))} | {record['bond_deviation_from_md_mean_max_A']:.2f} "
            f"({record['reference_bond_deviation_max_A']:.2f}) | {100 * record['frames_with_a_bond_off_md_mean']:.1f}% | "
            f"{100 * record['clash_frame_fraction']:.1f}% | {'yes' if record['diverged'] else 'no'} | {speed:.1f} |")


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], allow_abbrev=False)
    parser.add_argument("--model", action="append", required=True, help="[LABEL=]model name or checkpoint")
    parser.add_argument("--topology", required=True)
    parser.add_argument("--trajectory", required=True)
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--windows", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep-every", type=int, default=1, help="keep every k-th predicted frame (memory)")
    parser.add_argument("--restore-bonds", action="store_true",
                        help="also each model with the bond-restoring projection (a row '<model> + bond restoring')")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--name", required=True, help="result name: benchmarks/results/protein_ensembles_<name>.json")
    args = parser.parse_args(argv)

    import torch

    import geomol
    from geomol.evaluation.protein_ensembles import judge_protein

    torch.set_num_threads(args.threads)
    meta = run_metadata(args.threads)
    models = labelled(args.model)
    lines = ["| model | starts × windows (done) | JS bond / angle / torsion | MD half vs half | frozen start | "
             "Ramachandran JS φ / ψ | largest bond deviation from MD mean, Å (MD's own) | frames with a bond > 0.3 Å "
             "off | frames with a clash | diverged | simulated ps per CPU s |", "|---" * 11 + "|"]
    rows = []
    variants = [(label, reference, False) for label, reference in models.items()]
    if args.restore_bonds:
        variants += [(f"{label} + bond restoring", reference, True) for label, reference in models.items()]
    for label, reference, restore in variants:
        record = judge_protein(geomol.load_model(reference), args.topology, args.trajectory, starts=args.starts,
                               windows=args.windows, seed=args.seed, keep_every=args.keep_every, restore_bonds=restore)
        rows.append({**record, "model": label})
        lines.append(_row(label, record))
        print(lines[-1], flush=True)
    print("\n".join(lines))
    settings = {k: v for k, v in vars(args).items() if k != "model"}
    write_result(RESULTS / f"protein_ensembles_{args.name}.json", meta, rows, settings=settings, models=models)
    return {"rows": rows, "settings": settings}


if __name__ == "__main__":
    main()
