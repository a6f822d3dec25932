"""Tables of the k-shot protocol (:mod:`geomol.evaluation.kshot`): per data set and budget k, every method's mean
Spearman on the rest, paired differences, the ± 's coverage, and the method chosen on validation series.

A target counts once per budget (the mean over its draws), whatever its size; differences are paired per target,
± one standard error over targets. Coverage pools every scored ligand of every draw: the fraction whose measured
pK lies within the method's nominal 68 % interval (mean ± sd).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from geomol.evaluation.kshot import KSHOT_METHODS, LIGAND_ONLY
from geomol.metrics.scores import mean_of

__all__ = ["summarise_kshot", "format_kshot", "choose_methods", "paired", "anchoring_record", "anchoring_text"]


def paired(rows: Sequence[dict], method: str, other: str) -> tuple[float, float, int]:
    """Mean over targets of ``method`` − ``other`` (each a target's mean over draws), its standard error, and the
    number of targets where both are defined."""
    diff = np.array([r["mean"][method] - r["mean"][other] for r in rows
                     if method in r["mean"] and other in r["mean"]
                     and np.isfinite(r["mean"][method] - r["mean"][other])])
    if len(diff) == 0:
        return float("nan"), float("nan"), 0
    se = float(diff.std(ddof=1) / np.sqrt(len(diff))) if len(diff) > 1 else float("nan")
    return float(diff.mean()), se, len(diff)


def _coverage(rows: Sequence[dict], method: str) -> tuple[float, float, int]:
    inside = total = 0
    z2 = []
    for row in rows:
        for draw in row["draws"]:
            if method in draw["inside"]:
                inside += draw["inside"][method]
                total += draw["rest"]
                z2.append(draw["z2"][method])
    return (inside / total if total else float("nan")), mean_of(z2), total


def summarise_kshot(rows: Sequence[dict], groups: dict[str, Sequence[str]], ks: Sequence[int],
                    methods: Sequence[str] = KSHOT_METHODS, versus: str = "residual") -> list[dict]:
    """Per group (a name and its sources) and budget: targets, each method's mean Spearman, ``versus`` − base and
    − the best ligand-only method (± s.e.), and the coverage of every method with a ±."""
    out = []
    for group, sources in groups.items():
        for k in ks:
            chosen = [r for r in rows if r["k"] == k and r["source"] in sources]
            if not chosen:
                continue
            means = {m: mean_of(r["mean"].get(m, np.nan) for r in chosen) for m in methods}
            ligand = [m for m in LIGAND_ONLY if m in methods and np.isfinite(means[m])]
            best_ligand = max(ligand, key=lambda m: means[m]) if ligand else None
            row = {"group": group, "k": k, "n_targets": len(chosen), "spearman": means,
                   "versus": versus, "best_ligand_only": best_ligand}
            row["minus_base"] = paired(chosen, versus, "base")
            row["minus_ligand_only"] = paired(chosen, versus, best_ligand) if best_ligand else (np.nan, np.nan, 0)
            row["coverage_68"] = {m: _coverage(chosen, m) for m in methods
                                  if any(m in d["inside"] for r in chosen for d in r["draws"])}
            out.append(row)
    return out


def _cell(value: float) -> str:
    return "–" if not np.isfinite(value) else f"{value:.3f}"


def format_kshot(summary: Sequence[dict], methods: Sequence[str] = KSHOT_METHODS) -> str:
    """The summary as Markdown tables, one per group."""
    lines = []
    for group in dict.fromkeys(r["group"] for r in summary):
        rows = [r for r in summary if r["group"] == group]
        versus = rows[0]["versus"]
        lines += ["", f"**{group}**", "",
                  "| k | targets | " + " | ".join(methods) + f" | {versus} − base | {versus} − best ligand-only "
                  f"| 68 % coverage ({versus}) |",
                  "|---" * (len(methods) + 5) + "|"]
        for r in rows:
            base, base_se, _ = r["minus_base"]
            lig, lig_se, _ = r["minus_ligand_only"]
            cover = r["coverage_68"].get(versus, (np.nan, np.nan, 0))[0]
            lines.append(f"| {r['k']} | {r['n_targets']} | " + " | ".join(_cell(r["spearman"][m]) for m in methods)
                         + f" | {base:+.3f} ± {base_se:.3f} | "
                         + (f"{lig:+.3f} ± {lig_se:.3f} ({r['best_ligand_only']})" if np.isfinite(lig) else "–")
                         + (f" | {100 * cover:.0f} % |" if np.isfinite(cover) else " | – |"))
    return "\n".join(lines).lstrip("\n")


def choose_methods(rows: Sequence[dict], ks: Sequence[int], candidates: Sequence[str]) -> dict[int, str]:
    """Per budget, the candidate with the best mean Spearman over ``rows`` (validation series); of equals the first
    candidate."""
    chosen = {}
    for k in ks:
        at = [r for r in rows if r["k"] == k]
        scores = {m: mean_of(r["mean"].get(m, np.nan) for r in at) for m in candidates}
        finite = {m: s for m, s in scores.items() if np.isfinite(s)}
        chosen[k] = max(finite, key=lambda m: (finite[m], -candidates.index(m))) if finite else candidates[0]
    return chosen


def anchoring_record(test_rows: Sequence[dict], fitted: dict, chosen: dict[int, str], ks: Sequence[int],
                     about: str) -> dict:
    """What ships in a base model's manifest (``metrics.anchoring``,
    :class:`~geomol.inference.anchored_series.AnchoringSettings`): the settings ``fitted`` on validation series, the
    method ``chosen`` per budget there, and per budget what it gave on every scored test series (its mean Spearman
    on the rest, the base model's, the series, and the residual model's 68 % coverage)."""
    expected = {}
    for k in ks:
        rows = [r for r in test_rows if r["k"] == k]
        if not rows:
            continue
        method = chosen[k]
        expected[str(k)] = {"spearman": mean_of(r["mean"].get(method, np.nan) for r in rows),
                            "base": mean_of(r["mean"]["base"] for r in rows), "targets": len(rows),
                            "coverage": _coverage(rows, "residual")[0]}
    return {"kernel": fitted["kernel"], "interval_scale": fitted.get("interval_scale", {}), "power": fitted["power"],
            "methods": {str(k): m for k, m in chosen.items()}, "expected": expected, "about": about}


def anchoring_text(anchoring: dict) -> str:
    """The model card's section on anchoring (``predict-affinity --anchors``, ``geomol finetune``)."""
    lines = ["## Anchoring on measured ligands of your series", "",
             "`geomol predict-affinity --anchors measured.csv` (and `geomol finetune`) predict every ligand relative to "
             "the measured ligands of its series, by the method the k-shot evaluation chose on validation series for "
             "that many measured ligands (`docs/evaluation.md`, lead optimisation); the ± is then a calibrated 68 % "
             f"interval. On held-out series of proteins this model never saw (`{anchoring['about']}`):", "",
             "| measured ligands | method | series | mean Spearman on the rest | base model | 68 % interval held |",
             "|---|---|---|---|---|---|"]
    for k, figures in anchoring["expected"].items():
        lines.append(f"| {k} | {anchoring['methods'][k]} | {figures['targets']} | {figures['spearman']:.3f} | "
                     f"{figures['base']:.3f} | {100 * figures['coverage']:.0f} % |")
    return "\n".join(lines) + "\n"
