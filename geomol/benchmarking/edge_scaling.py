"""How linear a model's cost is in the size of one input: CPU time per block edge and per atom pair.

The GET speed benchmark (``benchmarks/get_speed.py``) times fwd+bwd on single complexes of growing size (pockets
cut at growing radii, the whole protein, synthetic block counts). If the cost is linear in the block edges (the
issue's unit) each case's µs per edge stays near the median; per atom pair (the attention's unit) likewise.
Rows are that benchmark's result rows: ``case``, ``ours_cpu_seconds``, ``edges`` and, where measured, ``pairs``.
"""
from __future__ import annotations

import statistics

__all__ = ["edge_scaling", "edge_scaling_line"]


def _per_unit(rows: list[dict], unit: str) -> dict[str, float]:
    """CPU µs of geomol's fwd+bwd per ``unit`` ("edges" or "pairs") of each single-complex case."""
    return {r["case"]: 1e6 * r["ours_cpu_seconds"] / r[unit] for r in rows
            if r["case"].startswith(("cutoff_", "blocks_")) and r.get("ours_cpu_seconds") and r.get(unit)}


def _spread(values: dict[str, float], unit: str) -> dict:
    """Each case's µs per ``unit``, their median, each case's deviation from it (%) and the largest one."""
    median = statistics.median(values.values())
    deviation = {case: round(100 * (v / median - 1), 1) for case, v in values.items()}
    return {f"us_per_{unit}": {case: round(v, 2) for case, v in values.items()},
            f"median_us_per_{unit}": round(median, 2), f"{unit}_deviation_from_median_percent": deviation,
            f"{unit}_max_abs_deviation_percent": max(abs(d) for d in deviation.values())}


def edge_scaling(rows: list[dict]) -> dict | None:
    """How linear geomol's fwd+bwd cost is in the size of one complex, over the single-complex cases (pockets,
    whole protein, synthetic block counts): CPU µs per block edge (the issue's unit: each case within ±20 % of
    the median) and per atom pair (the attention's unit: a block edge of a small pocket, cut at its surface,
    carries fewer atom pairs), each case's deviation from the median in percent, and the atom pairs per edge.
    None with fewer than two cases."""
    per_edge = _per_unit(rows, "edges")
    if len(per_edge) < 2:
        return None
    summary = _spread(per_edge, "edge")
    per_pair = _per_unit(rows, "pairs")
    if len(per_pair) >= 2:
        summary.update(_spread(per_pair, "pair"))
        summary["pairs_per_edge"] = {r["case"]: round(r["pairs"] / r["edges"], 2) for r in rows
                                     if r["case"] in per_pair}
    return summary


def edge_scaling_line(scaling: dict | None) -> str:
    """One printed line per unit (edge, pair) of an :func:`edge_scaling` summary: median, range and the largest
    deviation from the median."""
    if scaling is None:
        return "µs/edge: fewer than two single-complex cases"
    lines = []
    for unit in ("edge", "pair"):
        if f"us_per_{unit}" in scaling:
            values = scaling[f"us_per_{unit}"].values()
            lines.append(f"µs/{unit} over the single-complex cases: median {scaling[f'median_us_per_{unit}']:.2f}, "
                         f"{min(values):.2f}–{max(values):.2f}, every case within "
                         f"±{scaling[f'{unit}_max_abs_deviation_percent']:.1f} % of the median")
    return "\n".join(lines)
