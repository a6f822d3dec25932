"""Choosing the anchored methods' settings on validation series (never on the targets they are judged on).

The residual model's prior (:class:`~geomol.inference.anchoring.AnchorKernel`: the sds of a series' offset, of the
slope correction, of the residual similar ligands share, and of the noise) is fitted by maximising the summed log
marginal likelihood of whole validation series under it (:func:`fit_kernel`, empirical Bayes: the sds that make
the validation series' residuals most probable); then the similarity and slope sds are rescaled by the factors of a
small grid that rank the validation series best with k measured ligands, and every sd by one factor that makes the
nominal 68 % interval hold 68 % of the validation series' held-out values (:func:`tune_kernel`), so that its ± means
what it says on new series; then one more factor per budget k, so that it does at each budget (with none the prior
sd describes a new target's absolute error, with many the series' own terms: the error of the posterior sd depends
on k) (:func:`calibrate_intervals`). The ligand-only Gaussian process's prior is fitted by the likelihood alone with a
constant mean (the series' mean pK, no slope term). The anchored average's similarity exponent is the one of a grid
with the best mean k-shot Spearman on the validation series (:func:`choose_power`).
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from geomol.evaluation.kshot import KShotSettings, SeriesData, eligible, method_predictions, series_rows
from geomol.inference.anchoring import AnchorKernel, minmax_similarity
from geomol.inference.interval_scale import IntervalScale
from geomol.metrics.scores import mean_of

__all__ = ["series_log_likelihood", "fit_kernel", "tune_kernel", "standardised_errors", "calibrate_intervals",
           "choose_power", "fit_settings"]

_FIELDS = ("level", "slope", "similarity", "noise")
NOMINAL = 0.6827
"""The coverage the ± is calibrated to: P(|z| ≤ 1) of a normal distribution."""


def series_log_likelihood(kernel: AnchorKernel, residual: np.ndarray, shifted_base: np.ndarray,
                          similarity: np.ndarray) -> float:
    """Log marginal likelihood of one series' residuals (measured − mean function, ``(n,)``) under ``kernel``;
    ``shifted_base``: ``(n,)`` base pK minus its centre; ``similarity``: ``(n, n)`` MinMax similarities."""
    cov = (kernel.level ** 2 + kernel.slope ** 2 * np.outer(shifted_base, shifted_base)
           + kernel.similarity ** 2 * similarity)
    cov[np.diag_indices_from(cov)] += kernel.noise ** 2
    factor = np.linalg.cholesky(cov)
    alpha = np.linalg.solve(factor, residual)
    return float(-0.5 * alpha @ alpha - np.log(np.diag(factor)).sum() - 0.5 * len(residual) * math.log(2 * math.pi))


def _prepared(series: Sequence[SeriesData], constant_mean: bool) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    out = []
    for s in series:
        mean = np.full(len(s), s.measured.mean()) if constant_mean else s.base
        out.append((s.measured - mean, mean - mean.mean(), minmax_similarity(s.fingerprints, s.fingerprints)))
    return out


def fit_kernel(series: Sequence[SeriesData], *, constant_mean: bool = False,
               start: AnchorKernel = AnchorKernel()) -> AnchorKernel:
    """The prior maximising the summed log marginal likelihood of ``series`` (whole series; see the module notes).
    With ``constant_mean`` the mean function is each series' mean pK and the slope is fixed at 0 (the ligand-only
    Gaussian process)."""
    from scipy.optimize import minimize

    prepared = _prepared(series, constant_mean)
    free = [f for f in _FIELDS if not (constant_mean and f == "slope")]

    def kernel_of(log_sds: np.ndarray) -> AnchorKernel:
        values = dict(zip(free, np.exp(np.clip(log_sds, -7.0, 3.0))))
        return AnchorKernel(**{f: float(values.get(f, 0.0)) for f in _FIELDS})

    def loss(log_sds: np.ndarray) -> float:
        kernel = kernel_of(log_sds)
        return -sum(series_log_likelihood(kernel, *p) for p in prepared) / max(1, sum(len(p[0]) for p in prepared))

    x0 = np.log([max(getattr(start, f), 1e-2) for f in free])
    result = minimize(loss, x0, method="Nelder-Mead", options={"xatol": 1e-3, "fatol": 1e-6, "maxiter": 2000})
    return kernel_of(result.x)


def choose_power(series: Sequence[SeriesData], settings: KShotSettings, grid: Sequence[float], ks: Sequence[int],
                 draws: int, seed: int = 0) -> tuple[float, dict[float, float]]:
    """The anchored average's exponent of ``grid`` with the best mean Spearman on the rest over ``series``
    (validation series) and budgets ``ks`` (each budget's mean over series, then over budgets); and every
    exponent's score. The same draws for every exponent."""
    scores = {}
    for power in grid:
        chosen = KShotSettings(settings.kernel, settings.ligand_kernel, power, settings.forest_trees, settings.seed)
        rows = _validation_rows(series, chosen, "anchored", ks, draws, seed)
        scores[power] = mean_of(mean_of(r["mean"]["anchored"] for r in rows if r["k"] == k) for k in ks)
    return max(scores, key=lambda p: (scores[p], -p)), scores


def _validation_rows(series: Sequence[SeriesData], settings: KShotSettings, method: str, ks: Sequence[int],
                     draws: int, seed: int) -> list[dict]:
    """``method``'s k-shot rows on ``series``, the same draws for any settings."""
    return [row for number, s in enumerate(series)
            for row in series_rows(s, ks, draws, np.random.default_rng([seed, number]), settings, (method,))]


def _scaled(kernel: AnchorKernel, similarity: float = 1.0, slope: float = 1.0, every: float = 1.0) -> AnchorKernel:
    return AnchorKernel(level=every * kernel.level, slope=every * slope * kernel.slope,
                        similarity=every * similarity * kernel.similarity, noise=every * kernel.noise)


def tune_kernel(series: Sequence[SeriesData], kernel: AnchorKernel, ks: Sequence[int], draws: int, seed: int,
                similarity: Sequence[float] = (0.5, 1.0, 2.0), slope: Sequence[float] = (1.0, 3.0)
                ) -> tuple[AnchorKernel, dict[str, float]]:
    """The maximum-likelihood prior with its similarity and slope sds multiplied by the pair of ``similarity`` ×
    ``slope`` whose residual model ranks the validation ``series`` best at budgets ``ks`` (mean Spearman on the rest,
    per budget then over budgets; of equals the likelihood's own, 1 × 1), then every sd multiplied by one factor
    so that the nominal 68 % interval holds 68 % of the validation series' held-out values (the mean is unchanged
    by a common factor; only the ± is calibrated). Returns it and every pair's score."""
    scores = {}
    for a in similarity:
        for b in slope:
            rows = _validation_rows(series, KShotSettings(_scaled(kernel, a, b)), "residual", ks, draws, seed)
            scores[(a, b)] = mean_of(mean_of(r["mean"]["residual"] for r in rows if r["k"] == k) for k in ks)
    best = max(scores, key=lambda ab: (round(scores[ab], 4), ab == (1.0, 1.0)))
    tuned = _scaled(kernel, *best)
    z = [e for errors in standardised_errors(series, KShotSettings(tuned), ks, draws, seed).values() for e in errors]
    factor = float(np.quantile(z, NOMINAL)) if z else 1.0
    return _scaled(tuned, every=factor), {f"{a:g}x{b:g}": v for (a, b), v in scores.items()} | {"sd_factor": factor}


def standardised_errors(series: Sequence[SeriesData], settings: KShotSettings, ks: Sequence[int], draws: int,
                        seed: int) -> dict[int, list[float]]:
    """Per budget k, the residual model's |measured − mean| / sd of every held-out ligand of ``series`` over
    ``draws`` random draws of k measured ligands (one draw of none for k = 0); the same draws for any settings."""
    out: dict[int, list[float]] = {k: [] for k in ks}
    for number, s in enumerate(series):
        rng = np.random.default_rng([seed, number])
        for k in ks:
            if eligible(len(s), k):
                for _ in range(draws if k else 1):
                    chosen = np.sort(rng.choice(len(s), size=k, replace=False))
                    rest = np.setdiff1d(np.arange(len(s)), chosen)
                    mean, sd = method_predictions(s, chosen, rest, settings, ("residual",))["residual"]
                    out[k].extend((np.abs(s.measured[rest] - mean) / sd).tolist())
    return out


def calibrate_intervals(series: Sequence[SeriesData], kernel: AnchorKernel, ks: Sequence[int], draws: int,
                        seed: int = 0) -> IntervalScale:
    """The residual model's sd factor per budget of ``ks`` (:class:`~geomol.inference.interval_scale.IntervalScale`):
    at each budget, the factor that makes the nominal 68 % interval hold 68 % of the validation ``series``' held-out
    values (the :data:`NOMINAL` quantile of |measured − mean| / sd under ``kernel``); a budget no series takes part
    in is left out (its neighbours' factors apply)."""
    errors = standardised_errors(series, KShotSettings(kernel), ks, draws, seed)
    return IntervalScale({k: float(np.quantile(z, NOMINAL)) for k, z in errors.items() if z})


def fit_settings(series: Sequence[SeriesData], *, power_grid: Sequence[float] = (0.0, 1.0, 2.0, 4.0, 8.0, 16.0),
                 ks: Sequence[int] = (3, 5, 10), draws: int = 2, seed: int = 0,
                 calibration_ks: Sequence[int] = (0, 3, 5, 10, 20)) -> tuple[KShotSettings, dict]:
    """Every method's settings fitted on the validation ``series`` (see the module notes), and what was tried;
    the residual model's ± is calibrated per budget of ``calibration_ks`` (:func:`calibrate_intervals`)."""
    likelihood = fit_kernel(series)
    kernel, tuning = tune_kernel(series, likelihood, ks, draws, seed)
    interval = calibrate_intervals(series, kernel, calibration_ks, draws, seed)
    ligand_kernel = fit_kernel(series, constant_mean=True)
    power, scores = choose_power(series, KShotSettings(kernel, ligand_kernel), power_grid, ks, draws, seed)
    return KShotSettings(kernel, ligand_kernel, power, interval=interval), {
        "kernel": kernel.to_dict(), "likelihood_kernel": likelihood.to_dict(), "kernel_tuning": tuning,
        "interval_scale": interval.to_dict(), "ligand_kernel": ligand_kernel.to_dict(),
        "power_scores": {str(p): s for p, s in scores.items()}, "series": len(series)}
