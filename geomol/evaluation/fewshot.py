"""Few-shot adaptation in the cross-validation: how much k measured ligands of an unseen target help.

Every held-out target (a series with at least ``k + min_rest`` ligands) gets random draws of ``k`` measured
ligands; the fold's model is fine-tuned on them as ``geomol finetune --steps ...`` does
(:mod:`geomol.training.finetune`, a fixed setting; ``geomol finetune`` alone first decides whether to adapt,
:mod:`geomol.evaluation.fewshot_decision`) and scored by Spearman on the target's *other* ligands. On the same remainder
the table also scores the fold's model without fine-tuning, the heavy-atom count (HAC), and a k-shot size fit
(the HAC with the sign of its correlation on the k measured ligands: what k labels give without any model).
Summaries average each target's mean over draws, over the expert-pose targets and over all.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np
import torch

from geomol.metrics.scores import mean_of, spearman
from geomol.metrics.targets import EXPERT_POSE_SOURCES, MIN_TARGET_LIGANDS
from geomol.training.finetune import FinetuneSettings, adapt_member, finetune_model

__all__ = ["METHODS", "draw_scores", "score_draws", "contact_fewshot_scores", "contact_fewshot_rows", "summarise",
           "format_summary", "write_result", "run_and_write"]

METHODS = ("base", "finetuned", "hac", "hac_k_fit")
"""What each draw scores: the fold's model, it fine-tuned on the k ligands, the heavy-atom count, and the
heavy-atom count with the sign it has on the k ligands."""


def draw_scores(y: np.ndarray, hac: np.ndarray, base: np.ndarray,
                finetuned: Callable[[np.ndarray, np.ndarray], np.ndarray], k: int, draws: int,
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


def score_draws(model, graphs: list, heavy_atoms: Sequence[int], k: int, draws: int, rng: np.random.Generator,
                settings: FinetuneSettings) -> dict[str, float]:
    """:func:`draw_scores` for a loaded affinity model (any member kind) on one target's complex ``graphs``."""
    y = np.array([float(g.y) for g in graphs])

    def finetuned(chosen: np.ndarray, rest: np.ndarray) -> np.ndarray:
        tuned, _ = finetune_model(model, [graphs[i] for i in chosen], y[chosen].tolist(),
                                  [graphs[i].name for i in chosen], settings)
        return tuned.predict([graphs[i] for i in rest])[0].numpy()

    return draw_scores(y, np.asarray(heavy_atoms, dtype=float), model.predict(graphs)[0].numpy(), finetuned, k,
                       draws, rng)


def contact_fewshot_scores(model, data, items: np.ndarray, heavy: np.ndarray, k: int, draws: int,
                           rng: np.random.Generator, settings: FinetuneSettings) -> dict[str, float]:
    """:func:`draw_scores` for a calibrated contact scorer on the items ``items`` of
    :class:`~geomol.training.contact_scorer.ContactData` (``heavy``: every item's heavy atoms), fine-tuned as
    ``geomol finetune`` does with a fixed setting (:func:`~geomol.training.finetune.adapt_member`, in double
    precision)."""
    from geomol.training.contact_scorer import predict_contact_scorer

    y = torch.as_tensor(data.label[items])

    def finetuned(chosen: np.ndarray, rest: np.ndarray) -> np.ndarray:
        tuned = adapt_member(model, data.batch(items[chosen], bonds=model.message_steps > 0), y[chosen], settings)
        return predict_contact_scorer(tuned, data, items[rest])

    return draw_scores(data.label[items], heavy[items].astype(float), predict_contact_scorer(model, data, items),
                       finetuned, k, draws, rng)


def contact_fewshot_rows(model, data, test: np.ndarray, heavy: np.ndarray, fold: int, ks: Sequence[int],
                         draws: int) -> list[dict]:
    """Few-shot rows of a fold for a calibrated contact scorer: every expert-pose test target with at least
    ``max(k + 5, MIN_TARGET_LIGANDS)`` ligands, k measured ligands drawn ``draws`` times (seeded by the fold)."""
    settings, rng = FinetuneSettings(), np.random.default_rng(fold)
    rows = []
    for key in sorted(set(data.keys[test].tolist())):
        items = test[data.keys[test] == key]
        source = str(key).split("/", 1)[0]
        if source not in EXPERT_POSE_SOURCES:
            continue
        for k in ks:
            if len(items) >= max(k + 5, MIN_TARGET_LIGANDS):  # targets of the protocol, 5 ligands left to score
                scores = contact_fewshot_scores(model, data, items, heavy, k, draws, rng, settings)
                rows.append({"target": str(key), "source": source, "fold": fold, "n": len(items), "k": k,
                             **{m: round(float(v), 4) for m, v in scores.items()}})
    return rows


def summarise(rows: list[dict], ks: Sequence[int]) -> list[dict]:
    """Per k, the mean of each method over the expert-pose targets and over all, and how often fine-tuning helped."""
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


def write_result(result: dict, path: Path) -> None:
    """Write a result JSON (its folder made if needed) and say where."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {path}")


def run_and_write(run: Callable, build_args: Callable, argv=None) -> dict:
    """A benchmark's ``main``: its arguments parsed by ``build_args(argv)``, ``run(args)``, the result written to
    ``args.output`` (:func:`write_result`) and returned."""
    args = build_args(argv)
    result = run(args)
    write_result(result, args.output)
    return result
