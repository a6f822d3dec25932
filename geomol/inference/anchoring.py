"""Predictions anchored on measured ligands of the same series (lead optimisation with k measured analogues).

A chemist who has measured k ligands of a series asks how the others rank. The base model predicts every ligand
(``base``, pK); the measured ligands, the **anchors**, say how it errs on this target. Two ways of using them:

* **residual** (:func:`residual_predictions`): a Gaussian process on the base model's residuals. Each ligand's pK is

      pK(x) = base(x) + c + b · (base(x) − m) + g(x) + ε

  with ``c`` the series' offset from the base model's level (prior sd ``level``), ``b`` a correction of the base
  model's slope on this target (prior sd ``slope``; ``m`` the anchors' mean base pK), ``g`` a residual shared by
  similar ligands (a Gaussian process with the MinMax kernel, Tanimoto on counts, of the ligands' Morgan count
  fingerprints; prior sd ``similarity``) and ``ε`` what no term explains, measurement error included (sd
  ``noise``). The posterior mean is the prediction; its sd, noise included, is the ± of a *measured* value,
  so a nominal 68 % interval (mean ± sd) should hold 68 % of measurements. Without anchors it is the base model
  with the prior sd (its error on a new target's absolute pK). An optional
  :class:`~geomol.inference.interval_scale.IntervalScale` multiplies the sd by a factor per number of anchors,
  calibrated on validation series (the mean is unchanged).
* **anchored** (:func:`anchored_average`): the base model's pairwise differences, pK(q) = y_a + base(q) − base(a),
  averaged over the anchors a with weights similarity(q, a)^power + 1e-3 (the PBCNet-style relative prediction:
  an analogue is predicted from the measured ligands most like it). ``power`` 0 only shifts the base model
  to the anchors' level.

Either way a query that is itself an anchor (same name) is predicted from the *other* anchors: no measured ligand
is scored with its own measurement. The hyperparameters of both are chosen on validation series of the corpus
cross-validation (:mod:`geomol.evaluation.kshot`) and ship in the model's manifest (``metrics.anchoring``).
:func:`next_best` ranks candidates by expected pK or an upper confidence bound.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Mapping, Sequence

import numpy as np

from geomol.errors import ConfigError
from geomol.inference.interval_scale import IntervalScale

__all__ = ["AnchorKernel", "Anchors", "minmax_similarity", "residual_predictions", "anchored_average",
           "next_best", "SELECTIONS"]

SELECTIONS = ("mean", "ucb")
"""How :func:`next_best` ranks candidates: by expected pK, or by expected pK + ``beta`` × its sd."""


@dataclass(frozen=True)
class AnchorKernel:
    """The residual model's prior, in pK (see the module notes).

    Attributes:
        level: prior sd of the series' offset from the base model's level.
        slope: prior sd of the correction to the base model's slope on the series (dimensionless).
        similarity: prior sd of the residual that similar ligands share (MinMax kernel on Morgan counts).
        noise: sd of what no term explains, measurement error included.
    """

    level: float = 1.0
    slope: float = 0.3
    similarity: float = 0.5
    noise: float = 0.5

    def __post_init__(self):
        values = (self.level, self.slope, self.similarity, self.noise)
        if not all(math.isfinite(v) and v >= 0 for v in values) or self.noise <= 0:
            raise ConfigError(f"anchor kernel sds must be finite and >= 0 (noise > 0), got {self}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, record: Mapping) -> "AnchorKernel":
        unknown = set(record) - set(cls.__dataclass_fields__)
        if unknown:
            raise ConfigError(f"unknown anchor kernel field(s) {sorted(unknown)}")
        return cls(**{k: float(v) for k, v in record.items()})

    def covariance(self, base_a: np.ndarray, fp_a: np.ndarray, base_b: np.ndarray, fp_b: np.ndarray,
                   centre: float) -> np.ndarray:
        """``(n, m)`` prior covariance of the residual pK(x) − base(x) between two sets of ligands (no noise)."""
        shifted_a, shifted_b = base_a - centre, base_b - centre
        return (self.level ** 2 + self.slope ** 2 * np.outer(shifted_a, shifted_b)
                + self.similarity ** 2 * minmax_similarity(fp_a, fp_b))

    def variance(self, base: np.ndarray, centre: float | None = None) -> np.ndarray:
        """``(n,)`` the diagonal of :meth:`covariance` of ligands with base pK ``base`` (no noise): a ligand's MinMax
        similarity to itself is 1, so no fingerprint is needed. ``centre`` None (no anchors): no slope term."""
        slope = 0.0 if centre is None else self.slope ** 2 * (base - centre) ** 2
        return self.level ** 2 + slope + self.similarity ** 2 * np.ones(len(base))


@dataclass
class Anchors:
    """The measured ligands of one series.

    Attributes:
        names: ``k`` ligand names (a query of the same name is predicted without it).
        base: ``(k,)`` the base model's pK of each.
        fingerprints: ``(k, F)`` non-negative Morgan counts.
        measured: ``(k,)`` measured pK.
    """

    names: list[str]
    base: np.ndarray
    fingerprints: np.ndarray
    measured: np.ndarray

    def __post_init__(self):
        self.base = np.asarray(self.base, dtype=np.float64).reshape(-1)
        self.measured = np.asarray(self.measured, dtype=np.float64).reshape(-1)
        self.fingerprints = _counts(self.fingerprints, len(self.base))
        self.names = [str(n) for n in self.names]
        if not len(self.names) == len(self.base) == len(self.measured):
            raise ConfigError(f"anchors: {len(self.names)} names, {len(self.base)} base pK, "
                              f"{len(self.measured)} measured pK")
        if not (np.isfinite(self.base).all() and np.isfinite(self.measured).all()):
            raise ConfigError("anchors need finite base and measured pK")
        if len(set(self.names)) != len(self.names):
            raise ConfigError("anchor names must be unique")

    def __len__(self) -> int:
        return len(self.names)

    def without(self, index: int) -> "Anchors":
        keep = np.arange(len(self)) != index
        return Anchors([n for n, k in zip(self.names, keep) if k], self.base[keep], self.fingerprints[keep],
                       self.measured[keep])


def _counts(fingerprints, n: int) -> np.ndarray:
    """``(n, F)`` float64 count fingerprints, checked."""
    fingerprints = np.asarray(fingerprints, dtype=np.float64)
    if fingerprints.ndim != 2 or len(fingerprints) != n:
        raise ConfigError(f"fingerprints must be an (n, F) array for {n} ligands, got shape {fingerprints.shape}")
    if not (np.isfinite(fingerprints).all() and (fingerprints >= 0).all()):
        raise ConfigError("fingerprints must be finite non-negative counts")
    return fingerprints


def minmax_similarity(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``(n, m)`` MinMax (Tanimoto on counts) similarity Σ min(a, b) / Σ max(a, b) of non-negative count vectors
    ``a`` ``(n, F)`` and ``b`` ``(m, F)``; 1 between two empty vectors. A positive semi-definite kernel."""
    from scipy.spatial.distance import cdist

    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    # Σ min = (Σa + Σb − Σ|a − b|) / 2 and Σ max = (Σa + Σb + Σ|a − b|) / 2: no (n, m, F) intermediate
    total = a.sum(1)[:, None] + b.sum(1)[None, :]
    apart = cdist(a, b, "cityblock") if len(a) and len(b) else np.zeros((len(a), len(b)))
    high = total + apart
    return np.where(high > 0, (total - apart) / np.where(high > 0, high, 1.0), 1.0)


def _queries(anchors: Anchors, names: Sequence[str] | None, n: int) -> np.ndarray:
    """The anchor index of every query that is an anchor (by name), else -1."""
    if names is None:
        return np.full(n, -1)
    if len(names) != n:
        raise ConfigError(f"{len(names)} query names for {n} queries")
    position = {name: i for i, name in enumerate(anchors.names)}
    return np.array([position.get(str(name), -1) for name in names])


def _grouped(anchors: Anchors, names, base, fingerprints, predict) -> tuple[np.ndarray, np.ndarray]:
    """Run ``predict(anchors, idx)`` once per distinct anchor left out (queries named as an anchor are predicted
    without it), filling the (mean, sd) of every query."""
    base = np.asarray(base, dtype=np.float64).reshape(-1)
    fingerprints = _counts(fingerprints, len(base))
    own = _queries(anchors, names, len(base))
    mean, sd = np.empty(len(base)), np.empty(len(base))
    for left_out in np.unique(own):
        idx = np.flatnonzero(own == left_out)
        used = anchors if left_out < 0 else anchors.without(int(left_out))
        mean[idx], sd[idx] = predict(used, base[idx], fingerprints[idx])
    return mean, sd


def residual_predictions(kernel: AnchorKernel, anchors: Anchors, base: np.ndarray, fingerprints: np.ndarray,
                         names: Sequence[str] | None = None, interval: IntervalScale | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The residual model's (mean pK, sd of a measurement) of every query (see the module notes).

    Args:
        kernel: the prior; anchors: the series' measured ligands (may be empty: the base model and the prior sd).
        base: ``(n,)`` the base model's pK of the queries; fingerprints: ``(n, F)`` their Morgan counts.
        names: the queries' names; a query named as an anchor is predicted from the other anchors.
        interval: the sd's factor per number of anchors used (None: 1).
    """
    interval = interval or IntervalScale()

    def predict(used: Anchors, base_q: np.ndarray, fp_q: np.ndarray):
        mean, sd = _residual_posterior(kernel, used, base_q, fp_q)
        return mean, sd * interval.factor(len(used))

    return _grouped(anchors, names, base, fingerprints, predict)


def _residual_posterior(kernel: AnchorKernel, used: Anchors, base_q: np.ndarray, fp_q: np.ndarray
                        ) -> tuple[np.ndarray, np.ndarray]:
    """The Gaussian process's (posterior mean pK, sd of a measurement) of queries ``(q,)``, ``(q, F)`` given ``used``."""
    if len(used) == 0:
        return base_q.copy(), np.sqrt(kernel.variance(base_q) + kernel.noise ** 2)
    centre = float(used.base.mean())
    k_aa = kernel.covariance(used.base, used.fingerprints, used.base, used.fingerprints, centre)
    k_aa[np.diag_indices_from(k_aa)] += kernel.noise ** 2
    k_qa = kernel.covariance(base_q, fp_q, used.base, used.fingerprints, centre)
    factor = np.linalg.cholesky(k_aa)
    solve = lambda rhs: np.linalg.solve(factor.T, np.linalg.solve(factor, rhs))  # noqa: E731
    weights = solve(used.measured - used.base)
    explained = np.einsum("qa,qa->q", k_qa, solve(k_qa.T).T)
    prior = kernel.variance(base_q, centre)
    return base_q + k_qa @ weights, np.sqrt(np.maximum(prior - explained, 0.0) + kernel.noise ** 2)


def anchored_average(anchors: Anchors, base: np.ndarray, fingerprints: np.ndarray, power: float = 1.0,
                     names: Sequence[str] | None = None) -> np.ndarray:
    """``(n,)`` relative predictions of the queries from the anchors (see the module notes): the mean over anchors a
    of y_a + base(q) − base(a), weighted by similarity(q, a)^power + 1e-3; the base model itself without anchors."""

    def predict(used: Anchors, base_q: np.ndarray, fp_q: np.ndarray):
        if len(used) == 0:
            return base_q.copy(), np.full(len(base_q), np.nan)
        weights = minmax_similarity(fp_q, used.fingerprints) ** power + 1e-3
        shifted = (used.measured - used.base)[None, :] + base_q[:, None]
        return (weights * shifted).sum(1) / weights.sum(1), np.full(len(base_q), np.nan)

    return _grouped(anchors, names, base, fingerprints, predict)[0]


def next_best(mean: Sequence[float], sd: Sequence[float], by: str = "ucb", beta: float = 1.0,
              exclude: Sequence[bool] | None = None) -> np.ndarray:
    """Candidate indices, best first, by expected pK (``by='mean'``) or by the upper confidence bound mean +
    ``beta`` × sd (``'ucb'``: favours what is uncertain as well as what is good). ``exclude`` (e.g. the ligands
    already measured) and non-finite predictions are left out."""
    if by not in SELECTIONS:
        raise ConfigError(f"selection is one of {SELECTIONS}, not {by!r}")
    mean, sd = np.asarray(mean, dtype=np.float64), np.asarray(sd, dtype=np.float64)
    score = mean + (beta * np.nan_to_num(sd) if by == "ucb" else 0.0)
    keep = np.isfinite(score) & ~(np.zeros(len(mean), bool) if exclude is None else np.asarray(exclude, bool))
    order = np.argsort(-score, kind="stable")
    return order[keep[order]]
