"""``geomol finetune``: adapt an affinity model to your target from a handful of measured ligands.

Example::

    geomol finetune --receptor protein.pdb --ligands ligands.sdf --measured measured.csv --out my-model
    geomol predict-affinity --model my-model --receptor protein.pdb --ligands new_ligands.sdf

The ligands named in the measured-values CSV (columns ``name`` and ``pK`` or ``dG_kcal_mol``, as
for ``predict-affinity --measured``) are used; each member's last layers are fitted to them with the rest
frozen and their weights pulled towards the base model's (see ``docs/predict.md``). By default they take
10 Adam steps, more where an estimate from those ligands (leave-pair-out within them) favours a longer fit;
the estimate is printed and recorded. The output is a model directory (manifest, members, README.md card
recording the fine-tuning).
"""
from __future__ import annotations

import argparse

from geomol.api import finetune_affinity
from geomol.errors import ConfigError
from geomol.training.finetune import FinetuneSettings
from geomol.inference.tables import read_measured

_DEFAULTS = FinetuneSettings()


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", nargs="+", default=["default"], metavar="NAME|PATH",
                        help="base affinity model: shipped name, model directory or GET .ckpt file(s) "
                             "(default: the default model, contact-corpus)")
    parser.add_argument("--receptor", required=True, help="the target's receptor (PDB/mmCIF)")
    parser.add_argument("--ligands", nargs="+", required=True, help="posed ligands (SDF/MOL2 files)")
    parser.add_argument("--receptor-chains", nargs="+", metavar="CHAIN", help="use only these receptor chains")
    parser.add_argument("--measured", required=True, metavar="CSV",
                        help="measured values: columns name and pK or dG_kcal_mol (at least 2 matching ligands)")
    parser.add_argument("--out", required=True, metavar="DIR", help="model directory to write")
    parser.add_argument("--name", default="", help="the new model's name (default <base>-finetuned)")
    own = (" (your own setting, used whatever the within-set estimate; none of --steps, --lr, --anchor: 10 steps, "
           "more where the measured ligands' estimate favours it)")
    parser.add_argument("--steps", type=int, default=None, help=f"Adam steps{own}")
    parser.add_argument("--lr", type=float, default=None, help=f"learning rate (unset: {_DEFAULTS.lr:g}){own}")
    parser.add_argument("--anchor", type=float, default=None,
                        help=f"pull towards the base weights (unset: {_DEFAULTS.anchor:g}){own}")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing --out directory")
    parser.add_argument("--method", choices=("auto", "finetuned", "residual", "anchored", "base"), default="auto",
                        help="how the measured ligands are used: auto (default) takes the base model's choice for "
                             "that many measured ligands in its k-shot evaluation (docs/predict.md); finetuned moves "
                             "the weights; residual and anchored keep them and anchor every prediction on the "
                             "measured ligands")


def run(args: argparse.Namespace) -> int:
    from geomol.terminal import console as plain_console

    model = args.model[0] if len(args.model) == 1 else args.model
    if len(args.model) > 1 and not all(m.endswith(".ckpt") for m in args.model):
        raise ConfigError("several --model values must all be .ckpt files (an ensemble)")
    tuned = finetune_affinity(args.receptor, args.ligands, read_measured(args.measured), model, out=args.out,
                              name=args.name, steps=args.steps, lr=args.lr, anchor=args.anchor,
                              receptor_chains=args.receptor_chains, overwrite=args.overwrite, method=args.method)
    fit = tuned.metrics["finetune"]
    console = plain_console()
    if "method" in fit:  # anchored, the weights unchanged
        console.print(f"anchored {fit['base_model']} on {fit['ligands']} measured ligands by '{fit['method']}': each "
                      f"predicted from the others, Spearman {fit['spearman_left_out']} (base model "
                      f"{fit['spearman_base']}), RMSE {fit['rmse_left_out']} pK (base model {fit['rmse_base']}); "
                      f"wrote {args.out}", highlight=False)
        if fit["expected"]:
            console.print(f"expected accuracy: {fit['expected']}", highlight=False)
        return 0
    console.print(f"fine-tuned {fit['base_model']} on {fit['ligands']} measured ligands: RMSE "
                  f"{fit['rmse_before']} → {fit['rmse_after']} pK, Spearman {fit['spearman_before']} → "
                  f"{fit['spearman_after']} (on those ligands, a fit, not a test); wrote {args.out}")
    console.print(f"decision: {fit['decision']['message']}", highlight=False)
    return 0
