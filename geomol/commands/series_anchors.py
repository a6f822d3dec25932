"""``predict-affinity --anchors``: the series' measured ligands as anchors, and the ligands to make next (``--next``).

The measured ligands' poses come from ``--ligands`` (or ``--anchor-ligands``); the model is anchored on them
(:mod:`geomol.inference.anchor_ligands`) by the method its k-shot evaluation chose for that many, which is said in
one line with the accuracy it gave on held-out series (``docs/predict.md``).
"""
from __future__ import annotations

import argparse

from geomol.api import ligand_inputs, posed_inputs
from geomol.inference.anchor_ligands import anchor_on_ligands
from geomol.inference.anchoring import next_best
from geomol.inference.tables import read_measured

__all__ = ["anchored_for_args", "print_next_best"]


def anchored_for_args(args: argparse.Namespace, model, plan, console):
    """The model anchored on the measured ligands of ``--anchors`` (their poses among the planned ligands or in
    ``--anchor-ligands``), and a line saying how; the model as it is without usable anchors."""
    measured = read_measured(args.anchors)
    receptor, inputs = plan[0]
    extra = []
    if args.anchor_ligands:
        extra = (posed_inputs(receptor, args.anchor_ligands, args.reference, receptor_chains=args.receptor_chains,
                              smiles_column=args.smiles_column)[0] if args.reference
                 else ligand_inputs(args.anchor_ligands, smiles=args.smiles))
    named = {item.name: item for item in [*extra, *inputs] if item.name in measured}  # --ligands' poses first
    anchored = anchor_on_ligands(model, receptor, list(named.values()), measured,
                                 receptor_chains=args.receptor_chains)
    series = anchored.anchors
    if not series.moves_predictions:
        console.print(f"no measured ligand of {args.anchors} could be used as an anchor: the predictions are the "
                      f"base model's" if not len(series.anchors) else
                      f"with {len(series.anchors)} measured ligand(s) the method chosen in the k-shot evaluation is "
                      f"the base model as it is ({series.method})", markup=False, highlight=False)
        return anchored
    words = {"residual": "a Gaussian process on the base model's residuals, the base model as its mean",
             "anchored": "the base model's differences to each measured ligand, averaged, nearer analogues weighing "
                         "more"}[series.method]
    expected = series.settings.expectation(len(series.anchors))
    console.print(f"anchored on {len(series.anchors)} measured ligand(s) of {args.anchors} by '{series.method}' "
                  f"({words}); ± is its 68 % interval for a measured pK; a measured ligand is predicted from the "
                  f"others" + (f". Expected accuracy: {expected}" if expected else ""), markup=False, highlight=False)
    return anchored


def print_next_best(records, count: int, by: str, console) -> None:
    """Print the ``count`` unmeasured ligands to make or test next, ranked ``by`` ``'ucb'`` or ``'mean'``."""
    candidates = [r for r in records if r.ok and "measured_pK" not in r.extra]
    if not candidates:
        console.print("--next: no unmeasured ligand was predicted", markup=False)
        return
    order = next_best([r.pK for r in candidates], [r.pK_std for r in candidates], by=by)
    how = "upper confidence bound, pK + 1 sd" if by == "ucb" else "expected pK"
    console.print(f"next best to make or test (by {how}):", markup=False)
    for rank, i in enumerate(order[:count], start=1):
        r = candidates[i]
        console.print(f"  {rank}. {r.name}  pK {r.pK:.2f} ± {r.pK_std:.2f}", markup=False, highlight=False)
