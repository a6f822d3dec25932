"""Pieces of the cards of EGNO models trained on MD data (``scripts/ship_md_models.py``), from recorded results.

The side-by-side table with the official code over seeds and epochs (:func:`side_by_side_lines`, records of
``benchmarks/egno_accuracy.py``: ``{"seed", "table": [{"epoch", "geomol_test_s2s", "geomol_test_s2t",
"official_test_s2s"}]}``) and whether the gap between the two sides is within their seed noise
(:func:`seed_noise_lines`); the test section from a rollout evaluation table (:func:`evaluation_lines`), the bond
verdict of each model row (:func:`chemistry_verdict`) and the protein model's aim against the baselines
(:func:`protein_aim_line`). MSE in Å², bond errors in Å.
"""
from __future__ import annotations

import numpy as np

__all__ = ["side_by_side_lines", "seed_noise", "gap_and_spread", "seed_noise_lines", "evaluation_lines",
           "relative_change", "chemistry_verdict", "protein_aim_line"]


def side_by_side_lines(records: list[dict]) -> list[str]:
    """Markdown table: test S2S (and geomol's S2T) at the best validation epoch so far, per seed and side."""
    if not records:
        return []
    records = sorted(records, key=lambda r: r["seed"])
    epochs = sorted({row["epoch"] for r in records for row in r["table"]})
    head = "| epoch ≤ | " + " | ".join(f"geomol seed {r['seed']} S2S (S2T)" for r in records) + " | " + \
        " | ".join(f"official seed {r['seed']} S2S" for r in records) + " |"
    lines = ["## Side by side with the official code", "",
             "Test MSE (Å², heavy atoms) at the best validation epoch so far, as the official script selects; both "
             "sides train the same model (temporal convolutions on) with the same seeds, epochs and data "
             "(`benchmarks/egno_accuracy.py --dataset md17`). The official script reports S2S only.", "",
             head, "|---|" + "---|" * (2 * len(records))]
    for epoch in epochs:
        cells_g, cells_o = [], []
        for record in records:
            row = next((r for r in record["table"] if r["epoch"] == epoch), {})
            s2s, s2t, off = row.get("geomol_test_s2s"), row.get("geomol_test_s2t"), row.get("official_test_s2s")
            cells_g.append("—" if s2s is None else f"{s2s:.4f} ({s2t:.4f})")
            cells_o.append("—" if off is None else f"{off:.4f}")
        lines.append(f"| {epoch} | " + " | ".join(cells_g) + " | " + " | ".join(cells_o) + " |")
    return lines + ["", *seed_noise_lines(records), ""]


def seed_noise(records: list[dict]) -> dict | None:
    """geomol's and the official seeds' test S2S at the last epoch both sides reached, and whether they overlap.

    Returns None without a common epoch, else ``{"epoch", "geomol", "official"}`` (the seeds' values) and, with two
    seeds or more on each side, ``"gap"`` (between the means), ``"spread"`` (the larger range of one side's seeds)
    and ``"within_noise"`` (gap ≤ spread).
    """
    def values(epoch: int, side: str) -> list[float]:
        rows = (next((r for r in record["table"] if r["epoch"] == epoch), {}) for record in records)
        return [row[f"{side}_test_s2s"] for row in rows if row.get(f"{side}_test_s2s") is not None]

    common = [e for e in sorted({row["epoch"] for r in records for row in r["table"]})
              if values(e, "geomol") and values(e, "official")]
    if not common:
        return None
    last = common[-1]
    g, o = values(last, "geomol"), values(last, "official")
    return {"epoch": last, "geomol": g, "official": o, **gap_and_spread(g, o)}


def gap_and_spread(first: list[float], second: list[float]) -> dict:
    """Two trainings' per-seed figures compared: ``"gap"`` (between the means) and, with two seeds or more on each
    side, ``"spread"`` (the larger range of one side's seeds) and ``"within_noise"`` (gap ≤ spread)."""
    out = {"gap": abs(float(np.mean(first)) - float(np.mean(second)))}
    if min(len(first), len(second)) >= 2:
        out["spread"] = float(max(np.ptp(first), np.ptp(second)))
        out["within_noise"] = out["gap"] <= out["spread"]
    return out


def seed_noise_lines(records: list[dict]) -> list[str]:
    """:func:`seed_noise` in words."""
    noise = seed_noise(records)
    if noise is None:
        return []
    g, o, last = np.array(noise["geomol"]), np.array(noise["official"]), noise["epoch"]
    if "spread" not in noise:
        return [f"After {last + 1} epochs: geomol {g.mean():.4f}, official {o.mean():.4f}, a gap of "
                f"{noise['gap']:.4f}; with one seed on a side there is no seed noise to compare it with."]
    verdict = "within" if noise["within_noise"] else "outside"
    return [f"After {last + 1} epochs: geomol {g.mean():.4f} (seeds {', '.join(f'{v:.4f}' for v in g)}), official "
            f"{o.mean():.4f} (seeds {', '.join(f'{v:.4f}' for v in o)}); the gap between the means, {noise['gap']:.4f}, is "
            f"{verdict} the larger spread between one side's seeds ({noise['spread']:.4f})."]


def evaluation_lines(table, horizon_text: str) -> list[str]:
    """The card's test section: the table of :func:`geomol.evaluate_rollouts` (a
    :class:`~geomol.inference.dynamics.rollout_evaluation.RolloutTable`: the model, the baselines and the reference MD on the
    same windows), the model's S2S against the best baseline and each one, a :func:`chemistry_verdict` per model
    row and how far the reference MD itself moves its bonds. ``horizon_text``: the predicted frames, in words."""
    rows = {row.name: row for row in table.rows}
    model = next(r for r in table.rows if r.kind == "model")
    baselines = [r for r in table.rows if r.kind in ("baseline",) or r.name.startswith("EGNN")]
    best = min((r for r in baselines if r.s2s_mse is not None), key=lambda r: r.s2s_mse)
    lines = ["## Test: the model, the baselines and the reference MD on the same windows", "",
             f"{len(table.starts)} windows; predicted frames {horizon_text}; {table.bonds}. S2S: the last predicted "
             "frame, S2T: the mean over the predicted frames (MSE over atoms and xyz). Chemistry over all predicted "
             "frames, against each window's start frame: a bond is broken when it is more than 0.3 Å off, a clash is "
             "two non-bonded heavy atoms closer than 2 Å (`geomol.evaluate_rollouts`).", "",
             table.to_markdown(), "",
             f"S2S of {model.name}: {model.s2s_mse:.4f} Å² against {best.s2s_mse:.4f} for the best baseline "
             f"({best.name}): {relative_change(model.s2s_mse, best.s2s_mse)}; against "
             + ", ".join(f"{r.name}: {relative_change(model.s2s_mse, r.s2s_mse)}" for r in baselines
                         if r.s2s_mse is not None) + "."]
    lines += ["", *(f"- {chemistry_verdict(row)}" for row in table.rows if row.kind.startswith("model")), ""]
    reference = rows.get("reference MD")
    if reference is not None:
        lines.append(f"The reference MD itself moves its bonds by a median {reference.chemistry['bond_error_median_A']:.3f} Å "
                     "from the start frame: that much bond-length error is thermal motion, not a model's fault.")
    return lines + [""]


def relative_change(value: float, baseline: float) -> str:
    """``value`` against ``baseline`` in words: "33.3 % lower" or "0.3 % higher"."""
    gain = 100 * (1 - value / baseline)
    return f"{abs(gain):.1f} % {'lower' if gain >= 0 else 'higher'}"


def chemistry_verdict(row) -> str:
    """One line: the row's bonds against the issue's aim (median bond error ≤ 0.05 Å, no broken bond)."""
    median, broken = row.chemistry["bond_error_median_A"], row.chemistry["broken_bond_fraction"]
    met = median <= 0.05 and broken == 0
    return (f"{row.name}: median bond-length error {median:.3f} Å, a bond broken (> 0.3 Å off) in {100 * broken:.0f} % "
            f"of the predicted frames: {'meets' if met else 'does not meet'} the aim of ≤ 0.05 Å and no broken bond "
            "over the trained horizon.")


def protein_aim_line(table) -> str:
    """The issue's protein aim (≥ 20 % lower S2S than no motion and than linear extrapolation), met or not."""
    rows = {row.name: row for row in table.rows}
    model = next(r for r in table.rows if r.kind == "model")
    names = ("no motion (last frame)", "linear extrapolation")
    met = all(model.s2s_mse <= 0.8 * rows[name].s2s_mse for name in names)
    return (f"S2S {relative_change(model.s2s_mse, rows[names[0]].s2s_mse)} than no motion and "
            f"{relative_change(model.s2s_mse, rows[names[1]].s2s_mse)} than linear extrapolation on the independent run: "
            f"{'meets' if met else 'does not meet'} the aim of ≥ 20 % below both")
