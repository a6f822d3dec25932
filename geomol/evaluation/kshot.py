"""The k-shot protocol: how well every method ranks a series' other ligands once k of them are measured.

For a series of an unseen protein (a test target of the corpus cross-validation: the base model never saw its
protein cluster), k of its ligands are drawn at random (``draws`` times; k = 0 is one "draw" of none) and every
method predicts the rest from the base model's out-of-fold predictions and the k measurements:

* ``base``: the base model as it is (k plays no part);
* ``finetuned``: the base model fine-tuned on the k as ``geomol finetune`` does (:mod:`geomol.training.finetune`);
* ``anchored``: the base model's pairwise differences averaged over the k anchors, nearer analogues weighing more
  (:func:`~geomol.inference.anchoring.anchored_average`);
* ``residual``: a Gaussian process on the base model's residuals with the base model as prior mean
  (:func:`~geomol.inference.anchoring.residual_predictions`), with a calibrated ± ;
* ligand-only models trained on the k alone, a chemist's spreadsheet model: ``ligand_gp`` (the same Gaussian
  process on Morgan counts with a constant mean), ``ligand_rf`` (a random forest on Morgan counts and
  descriptors) and ``hac_k_fit`` (the heavy-atom count with the sign of its correlation on the k).

Each draw records every method's Spearman on the rest and, for methods with a ±, how many of the rest fall
within the nominal 68 % interval. A series' duplicates (one compound in alternative protonation or tautomer poses,
sharing one measurement) are kept once, so that no measured compound reappears among the rest.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

import numpy as np

from geomol.errors import ConfigError
from geomol.inference.anchoring import AnchorKernel, Anchors, anchored_average, residual_predictions
from geomol.inference.interval_scale import IntervalScale
from geomol.metrics.scores import mean_of, spearman

__all__ = ["KSHOT_METHODS", "LIGAND_ONLY", "SeriesData", "KShotSettings", "distinct_compounds", "method_predictions",
           "draw_record", "series_rows", "eligible"]

KSHOT_METHODS = ("base", "finetuned", "anchored", "residual", "ligand_gp", "ligand_rf", "hac_k_fit")
"""Every method of the protocol, in table order (see the module notes)."""

LIGAND_ONLY = ("ligand_gp", "ligand_rf", "hac_k_fit")
"""The methods that never look at the protein (trained on the k measured ligands alone)."""

HEAVY_ATOMS = 0
"""Column of the heavy-atom count in :attr:`SeriesData.descriptors`
(:data:`~geomol.data.chemistry.ligand_features.DESCRIPTOR_NAMES` order)."""


@dataclass
class SeriesData:
    """One series (target) of the protocol.

    Attributes:
        target: the series key (``'<source>/<series>'``); source: its data set; fold: its test fold.
        names: ``n`` ligand names; measured: ``(n,)`` pK; base: ``(n,)`` the base model's out-of-fold pK.
        fingerprints: ``(n, F)`` Morgan counts; descriptors: ``(n, D)`` ligand descriptors (heavy atoms first).
        finetune: ``finetune(chosen, rest)`` -> ``(len(rest),)`` pK of the base model fine-tuned on ``chosen``
            (positions in this series); None: the method is not scored.
    """

    target: str
    source: str
    fold: int
    names: list[str]
    measured: np.ndarray
    base: np.ndarray
    fingerprints: np.ndarray
    descriptors: np.ndarray
    finetune: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None

    def __len__(self) -> int:
        return len(self.names)

    def anchors(self, chosen: np.ndarray) -> Anchors:
        return Anchors([self.names[i] for i in chosen], self.base[chosen], self.fingerprints[chosen],
                       self.measured[chosen])


@dataclass(frozen=True)
class KShotSettings:
    """The methods' settings, chosen on validation series (:mod:`geomol.evaluation.anchor_fit`), never on test.

    Attributes:
        kernel: the residual model's prior; ligand_kernel: the ligand-only Gaussian process's (its slope unused).
        power: the anchored average's similarity exponent.
        forest_trees: trees of the ligand-only random forest.
        seed: the forest's seed.
        interval: the residual model's sd factor per number of measured ligands (None: 1).
    """

    kernel: AnchorKernel = field(default_factory=AnchorKernel)
    ligand_kernel: AnchorKernel = field(default_factory=lambda: AnchorKernel(level=1.0, slope=0.0))
    power: float = 2.0
    forest_trees: int = 50
    seed: int = 0
    interval: IntervalScale | None = None


def distinct_compounds(names: Sequence[str], smiles: Sequence[str]) -> np.ndarray:
    """Positions of the first pose of every distinct compound of a series: poses of one compound (same canonical
    SMILES, or names that differ only after a comma, as FEP+'s ``lig 2`` and ``lig 2, deprot``) count once."""
    seen, keep = set(), []
    for i, (name, smi) in enumerate(zip(names, smiles)):
        keys = {("name", str(name).split(",")[0].strip())} | ({("smiles", smi)} if smi else set())
        if not keys & seen:
            keep.append(i)
        seen |= keys
    return np.asarray(keep, dtype=np.int64)


def _forest(series: SeriesData, chosen: np.ndarray, rest: np.ndarray, settings: KShotSettings) -> np.ndarray:
    from sklearn.ensemble import RandomForestRegressor

    features = np.concatenate([np.log1p(series.fingerprints), series.descriptors], axis=1)
    forest = RandomForestRegressor(n_estimators=settings.forest_trees, min_samples_leaf=1, n_jobs=1,
                                   random_state=settings.seed)
    forest.fit(features[chosen], series.measured[chosen])
    return forest.predict(features[rest])


def _hac_k_fit(series: SeriesData, chosen: np.ndarray, rest: np.ndarray) -> np.ndarray:
    hac = series.descriptors[:, HEAVY_ATOMS]
    sign = np.sign(spearman(hac[chosen], series.measured[chosen])) if np.ptp(hac[chosen]) > 0 else 1.0
    return (1.0 if not np.isfinite(sign) or sign == 0 else sign) * hac[rest]


def method_predictions(series: SeriesData, chosen: np.ndarray, rest: np.ndarray, settings: KShotSettings,
                       methods: Sequence[str] = KSHOT_METHODS) -> dict[str, tuple[np.ndarray, np.ndarray | None]]:
    """Every method's (pK of ``rest``, its sd or None) given the measured ligands ``chosen`` (positions in the
    series); a method that needs more measured ligands than there are (fine-tuning: 2, ligand-only: 2) or is not
    available for the series is left out."""
    unknown = set(methods) - set(KSHOT_METHODS)
    if unknown:
        raise ConfigError(f"unknown k-shot method(s) {sorted(unknown)}; known: {KSHOT_METHODS}")
    anchors = series.anchors(chosen)
    base, fps = series.base[rest], series.fingerprints[rest]
    out = {}
    for method in methods:
        if method == "base":
            out[method] = (base, None)
        elif method == "residual":
            out[method] = residual_predictions(settings.kernel, anchors, base, fps, interval=settings.interval)
        elif method == "anchored" and len(chosen):
            out[method] = (anchored_average(anchors, base, fps, settings.power), None)
        elif len(chosen) < 2:
            continue
        elif method == "finetuned" and series.finetune is not None:
            out[method] = (series.finetune(chosen, rest), None)
        elif method == "ligand_gp":
            level = float(series.measured[chosen].mean())
            constant = Anchors(anchors.names, np.full(len(chosen), level), anchors.fingerprints, anchors.measured)
            out[method] = residual_predictions(settings.ligand_kernel, constant, np.full(len(rest), level), fps)
        elif method == "ligand_rf":
            out[method] = (_forest(series, chosen, rest, settings), None)
        elif method == "hac_k_fit":
            out[method] = (_hac_k_fit(series, chosen, rest), None)
    return out


def draw_record(series: SeriesData, chosen: np.ndarray, settings: KShotSettings,
                methods: Sequence[str] = KSHOT_METHODS) -> dict:
    """One draw: per method its Spearman on the rest, and for methods with a ± the rest's count within mean ± sd
    (``inside``) and their mean squared standardised error (``z2``: 1 when the sd is right on average)."""
    rest = np.setdiff1d(np.arange(len(series)), chosen)
    y = series.measured[rest]
    record = {"chosen": [int(i) for i in chosen], "spearman": {}, "inside": {}, "z2": {}}
    for method, (pred, sd) in method_predictions(series, chosen, rest, settings, methods).items():
        record["spearman"][method] = spearman(pred, y)
        if sd is not None:
            z = (y - pred) / sd
            record["inside"][method] = int((np.abs(z) <= 1.0).sum())
            record["z2"][method] = float(np.mean(z ** 2))
    record["rest"] = len(rest)
    return record


def eligible(n: int, k: int, min_rest: int = 5, min_ligands: int = 10) -> bool:
    """Whether a series of ``n`` distinct compounds takes part at budget ``k``: ``min_rest`` left to score after
    drawing k, and at least ``min_ligands`` in all (the protocol's targets)."""
    return n >= max(k + min_rest, min_ligands)


def series_rows(series: SeriesData, ks: Sequence[int], draws: int, rng: np.random.Generator,
                settings: KShotSettings, methods: Sequence[str] = KSHOT_METHODS, min_rest: int = 5) -> list[dict]:
    """One row per budget k the series takes part in (:func:`eligible`): ``draws`` random draws of k measured
    ligands (one draw of none for k = 0), each a :func:`draw_record`; the row's ``mean`` is each method's mean
    Spearman over the draws."""
    rows = []
    for k in ks:
        if not eligible(len(series), k, min_rest):
            continue
        records = [draw_record(series, np.sort(rng.choice(len(series), size=k, replace=False)), settings, methods)
                   for _ in range(draws if k else 1)]
        names = sorted({m for r in records for m in r["spearman"]}, key=KSHOT_METHODS.index)
        rows.append({"target": series.target, "source": series.source, "fold": series.fold, "n": len(series),
                     "k": k, "mean": {m: mean_of(r["spearman"].get(m, np.nan) for r in records) for m in names},
                     "draws": records})
    return rows
