"""Few-shot adaptation in the corpus cross-validation: how much k measured ligands of an unseen target help.

For every fold of a GET variant's cross-validation (``benchmarks/affinity_corpus_get.py`` wrote
``CV_DIR/fold{k}_checkpoint/best.ckpt``, chosen on that fold's validation slice), every test target (a
series with at least ``k + --min-rest`` ligands) gets ``--draws`` random draws of ``k`` measured ligands.
The fold's model is fine-tuned on them exactly as ``geomol finetune`` does (:func:`geomol.inference.finetune.
finetune_model`: encoder frozen, read-out weights and offset fitted with an L2 pull to the base weights) and
scored by Spearman on the target's *other* ligands. On the same remainder the table also scores the fold's
model without fine-tuning, the heavy-atom count (HAC), and a k-shot size fit (the HAC with the sign of its
correlation on the k measured ligands: what k labels give without any model).

Prints mean Spearman over targets (each target: the mean over its draws), expert-pose targets (EP) and all;
writes JSON with per-target rows, the settings and ``geomol.provenance()``. Usage::

    OMP_NUM_THREADS=1 python benchmarks/affinity_fewshot.py --cv-dir runs/corpus_cv/base --variant base \\
        --k 3 5 10 --draws 5 --output benchmarks/results/affinity_fewshot.json
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from affinity_corpus_get import build_args as fold_args  # noqa: E402
from affinity_corpus_get import fold_overrides, RECIPE  # noqa: E402
from affinity_cv import VARIANTS, heavy_atoms  # noqa: E402
from geomol.evaluation.metrics import mean_of, spearman  # noqa: E402
from geomol.provenance import provenance  # noqa: E402
from geomol.evaluation.targets import EXPERT_POSE_SOURCES, MIN_TARGET_LIGANDS  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
METHODS = ("base", "finetuned", "hac", "hac_k_fit")


def fold_targets(args, fold: int) -> dict[str, list]:
    """The fold's test graphs grouped by series (targets with at least ``MIN_TARGET_LIGANDS`` ligands)."""
    from geomol.tasks.cli import build_from_config

    argv = ["--fold", str(fold), "--folds", str(args.n_folds), "--variant", args.variant, "--out-dir", str(args.cv_dir),
            "--valid-fraction", str(args.valid_fraction)]
    argv += (["--cache-dir", args.cache_dir] if args.cache_dir else []) + (["--series", *args.series] if args.series
                                                                           else [])
    overrides = fold_overrides(fold_args(argv), VARIANTS[args.variant])
    overrides["trainer"] = {"logger": False, "callbacks": [], "enable_progress_bar": False}
    cli = build_from_config(RECIPE, overrides)
    cli.datamodule.setup("test")
    targets: dict[str, list] = {}
    for graph in cli.datamodule.splits["test"]:
        targets.setdefault(graph.series, []).append(graph)
    return {key: graphs for key, graphs in targets.items() if len(graphs) >= MIN_TARGET_LIGANDS}


def score_draws(model, graphs: list, k: int, draws: int, rng: np.random.Generator, settings) -> dict[str, float]:
    """Mean Spearman over ``draws`` draws of k measured ligands, on the target's other ligands, per method."""
    from geomol.inference.finetune import finetune_model

    y = np.array([float(g.y) for g in graphs])

    def finetuned(chosen: np.ndarray, rest: np.ndarray) -> np.ndarray:
        tuned, _ = finetune_model(model, [graphs[i] for i in chosen], y[chosen].tolist(),
                                  [graphs[i].name for i in chosen], settings)
        return tuned.predict([graphs[i] for i in rest])[0].numpy()

    return draw_scores(y, np.array([heavy_atoms(g) for g in graphs], dtype=float), model.predict(graphs)[0].numpy(),
                       finetuned, k, draws, rng)


def draw_scores(y: np.ndarray, hac: np.ndarray, base: np.ndarray, finetuned, k: int, draws: int,
                rng: np.random.Generator) -> dict[str, float]:
    """Mean Spearman over ``draws`` draws of k measured ligands of one target, on its other ligands, per method.

    Args:
        y, hac, base: ``(n,)`` measured pK, heavy-atom counts and the model's predictions of the target's ligands.
        finetuned: ``finetuned(chosen, rest)`` -> ``(len(rest),)`` predictions of a model fitted on ``chosen``.
    """
    scores = {m: [] for m in METHODS}
    for _ in range(draws):
        chosen = rng.choice(len(y), size=k, replace=False)
        rest = np.setdiff1d(np.arange(len(y)), chosen)
        sign = np.sign(spearman(hac[chosen], y[chosen])) if np.ptp(hac[chosen]) > 0 else 1.0
        sign = 1.0 if np.isnan(sign) or sign == 0 else sign
        for method, pred in (("base", base[rest]), ("finetuned", finetuned(chosen, rest)), ("hac", hac[rest]),
                             ("hac_k_fit", sign * hac[rest])):
            scores[method].append(spearman(pred, y[rest]))
    return {m: mean_of(v) for m, v in scores.items()}


def run(args) -> dict:
    import geomol
    from geomol.inference.finetune import FinetuneSettings

    torch.set_num_threads(1)
    settings = FinetuneSettings(steps=args.steps, lr=args.lr, anchor=args.anchor)
    rng = np.random.default_rng(args.seed)
    rows, clock = [], time.process_time()
    for fold in args.folds:
        model = geomol.load_model(str(args.cv_dir / f"fold{fold}_checkpoint" / "best.ckpt"))
        targets = fold_targets(args, fold)
        keys = sorted(targets)
        if args.max_targets is not None:
            expert = [t for t in keys if targets[t][0].source in EXPERT_POSE_SOURCES]
            others = [t for t in keys if t not in set(expert)]
            rng.shuffle(others)
            keys = expert + others[:max(0, args.max_targets - len(expert))]
        for key in keys:
            graphs = targets[key]
            for k in args.k:
                if len(graphs) < k + args.min_rest:
                    continue
                scores = score_draws(model, graphs, k, args.draws, rng, settings)
                rows.append({"target": key, "source": graphs[0].source, "fold": fold, "n": len(graphs), "k": k,
                             **{m: round(float(v), 4) for m, v in scores.items()}})
        print(f"fold {fold}: {len(keys)} targets scored", flush=True)
    summary = summarise(rows, args.k)
    print(format_summary(summary))
    return {"description": "few-shot fine-tuning on k measured ligands of each held-out target; Spearman on the "
                           "target's other ligands, mean over draws, then over targets",
            "cv_dir": str(args.cv_dir), "variant": args.variant, "k": args.k, "draws": args.draws,
            "min_rest": args.min_rest, "settings": vars(settings), "cpu_seconds": time.process_time() - clock,
            "summary": summary, "rows": rows, "provenance": provenance()}


def summarise(rows: list[dict], ks) -> list[dict]:
    out = []
    for k in ks:
        for group, keep in (("expert_pose", lambda r: r["source"] in EXPERT_POSE_SOURCES), ("all", lambda r: True)):
            chosen = [r for r in rows if r["k"] == k and keep(r)]
            better = [r["finetuned"] > r["base"] for r in chosen if not np.isnan(r["finetuned"] + r["base"])]
            out.append({"k": k, "targets": group, "n_targets": len(chosen),
                        **{m: mean_of(r[m] for r in chosen) for m in METHODS},
                        "finetuned_beats_base_fraction": float(np.mean(better)) if better else float("nan")})
    return out


def format_summary(summary: list[dict]) -> str:
    lines = [f"{'k':>3} {'targets':<12}{'n':>5}" + "".join(f"{m:>11}" for m in METHODS) + f"{'ft>base':>9}"]
    for row in summary:
        lines.append(f"{row['k']:>3} {row['targets']:<12}{row['n_targets']:>5}"
                     + "".join(f"{row[m]:>11.3f}" for m in METHODS) + f"{row['finetuned_beats_base_fraction']:>9.2f}")
    return "\n".join(lines)


def build_args(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cv-dir", type=Path, required=True, help="output folder of affinity_corpus_get.py")
    parser.add_argument("--variant", choices=sorted(VARIANTS), default="base", help="the variant trained there")
    parser.add_argument("--folds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="which folds to score")
    parser.add_argument("--n-folds", type=int, default=5, help="folds of the cross-validation that trained them")
    parser.add_argument("--valid-fraction", type=float, default=0.1, help="as in that cross-validation")
    parser.add_argument("--series", nargs="+", default=None, help="as in that cross-validation (a slice)")
    parser.add_argument("--k", type=int, nargs="+", default=[3, 5, 10])
    parser.add_argument("--draws", type=int, default=5)
    parser.add_argument("--min-rest", type=int, default=5, help="ligands left to score after drawing k")
    parser.add_argument("--max-targets", type=int, default=None,
                        help="per fold: every expert-pose target and a random sample of others up to this many")
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--anchor", type=float, default=1.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--cache-dir", default=None)
    parser.add_argument("--output", type=Path, default=REPO / "benchmarks" / "results" / "affinity_fewshot.json")
    return parser.parse_args(argv)


def save_result(result: dict, path: Path) -> None:
    """Write a result JSON (its folder made if needed) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


def main(argv=None) -> dict:
    args = build_args(argv)
    result = run(args)
    save_result(result, args.output)
    return result


if __name__ == "__main__":
    sys.exit(main() and 0)
