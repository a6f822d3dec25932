"""A model's predictions for one series anchored on its measured ligands (``predict-affinity --anchors``, ``finetune``).

:class:`AnchoringSettings` is what the k-shot protocol chose on validation series for a base model and measured on
held-out ones (``metrics.anchoring`` of its manifest, written by ``benchmarks/affinity_kshot.py``): the residual
model's prior, the anchored average's exponent, the method to use per number of measured ligands, and per budget
the accuracy to expect. :class:`AnchoredSeries` holds a series' anchors (names, measured pK, the base model's pK
and Morgan counts) with those settings; an :class:`~geomol.inference.affinity_model.AffinityModel` carrying one
(``model.anchors``, kept in its manifest) predicts every ligand relative to the anchors
(:mod:`geomol.inference.anchoring`): ``pK`` becomes the anchored prediction, ``pK_std`` the residual model's
calibrated sd, and ``extra`` gains ``base_pK`` (and ``measured_pK`` for an anchor, which is predicted from the
*other* anchors).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from geomol.errors import ConfigError
from geomol.inference.anchoring import AnchorKernel, Anchors, anchored_average, residual_predictions
from geomol.inference.interval_scale import IntervalScale
from geomol.units import dg_from_pk

__all__ = ["ANCHOR_METHODS", "ANCHOR_COLUMNS", "AnchoringSettings", "AnchoredSeries", "graph_fingerprint"]

ANCHOR_METHODS = ("base", "finetuned", "anchored", "residual")
"""What a model's anchoring settings may choose per budget (``finetuned``: ``geomol finetune``'s weights)."""


ANCHOR_COLUMNS = ("base_pK", "measured_pK")
"""The result columns anchoring adds: the base model's pK, and an anchor's measured pK."""


def graph_fingerprint(graph) -> np.ndarray:
    """``(F,)`` the Morgan counts a complex graph carries of its ligand (``ligand_morgan``).

    Raises:
        ConfigError: the graph carries none (a ligand without chemistry), naming it.
    """
    counts = getattr(graph, "ligand_morgan", None)
    if counts is None:
        raise ConfigError("this complex carries no ligand fingerprint: anchoring needs ligands with their chemistry "
                          "(SDF, MOL2 or SMILES)", source=getattr(graph, "name", None))
    return np.asarray(counts, dtype=np.float64).reshape(-1)


@dataclass(frozen=True)
class AnchoringSettings:
    """How a base model is anchored on k measured ligands, and what that was measured to give.

    Attributes:
        kernel: the residual model's prior; power: the anchored average's exponent.
        interval: the residual model's sd factor per number of measured ligands (calibrated on validation series).
        methods: per budget k (measured ligands), the method chosen on validation series (:data:`ANCHOR_METHODS`).
        expected: per budget, held-out figures: mean per-series Spearman of the method and of the base model on
            the rest (``spearman``, ``base``), series (``targets``), and the 68 % interval's coverage (``coverage``).
        about: where they come from (the benchmark command), for messages.
    """

    kernel: AnchorKernel
    power: float = 2.0
    methods: Mapping[int, str] = field(default_factory=lambda: {0: "base", 3: "residual"})
    expected: Mapping[int, Mapping[str, float]] = field(default_factory=dict)
    about: str = ""
    interval: IntervalScale = field(default_factory=IntervalScale)

    def __post_init__(self):
        unknown = set(self.methods.values()) - set(ANCHOR_METHODS)
        if unknown or not self.methods:
            raise ConfigError(f"anchoring methods are among {ANCHOR_METHODS}, got {dict(self.methods)}")

    def budget(self, k: int) -> int:
        """The budget whose choice and figures apply to k measured ligands: the largest budget ≤ k (k ≥ 1: the
        smallest positive budget at least)."""
        budgets = sorted(self.methods)
        positive = [b for b in budgets if b > 0]
        if k >= 1 and positive:
            return max([b for b in positive if b <= k] or [positive[0]])
        return max([b for b in budgets if b <= k] or [budgets[0]])

    def method(self, k: int) -> str:
        return self.methods[self.budget(k)]

    def expectation(self, k: int) -> str:
        """What accuracy to expect with k measured ligands, in words (empty when not measured)."""
        budget = self.budget(k)
        figures = self.expected.get(budget)
        if not figures:
            return ""
        text = (f"on held-out series with {budget} measured ligands ({int(figures.get('targets', 0))} series of proteins "
                f"the model never saw) this gave a mean Spearman of {figures['spearman']:.2f} on the other ligands "
                f"(the base model alone {figures['base']:.2f})")
        if "coverage" in figures and math.isfinite(figures["coverage"]):
            text += f"; the ± (68 % interval) held {100 * figures['coverage']:.0f} % of their measured pK"
        return text

    def to_dict(self) -> dict:
        return {"kernel": self.kernel.to_dict(), "power": self.power,
                "methods": {str(k): m for k, m in sorted(self.methods.items())},
                "expected": {str(k): dict(v) for k, v in sorted(self.expected.items())}, "about": self.about,
                "interval_scale": self.interval.to_dict()}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any], source=None) -> "AnchoringSettings":
        try:
            return cls(AnchorKernel.from_dict(record["kernel"]), float(record.get("power", 2.0)),
                       {int(k): str(m) for k, m in record["methods"].items()},
                       {int(k): {n: float(v) for n, v in figures.items()}
                        for k, figures in record.get("expected", {}).items()}, str(record.get("about", "")),
                       IntervalScale.from_dict(record.get("interval_scale")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"unreadable anchoring settings ({exc})", source=source) from None

    @classmethod
    def of_model(cls, model) -> "AnchoringSettings":
        """The settings in a model's metrics (``metrics.anchoring``, or its base model's after fine-tuning).

        Raises:
            ConfigError: the model has none (it was not measured in the k-shot protocol).
        """
        metrics = model.metrics
        record = metrics.get("anchoring") or metrics.get("base_model_metrics", {}).get("anchoring")
        if not record:
            raise ConfigError(f"{model.name or 'this model'} has no anchoring settings (manifest metrics.anchoring): "
                              "anchoring on measured ligands needs a base model measured in the k-shot protocol, "
                              "such as the default model (benchmarks/affinity_kshot.py)")
        return cls.from_dict(record, model.name)


def _sparse(counts: np.ndarray) -> dict[str, int]:
    return {str(int(i)): int(counts[i]) for i in np.flatnonzero(counts)}


@dataclass
class AnchoredSeries:
    """A series' measured ligands and how predictions are anchored on them (see the module notes).

    Attributes:
        settings: the base model's :class:`AnchoringSettings`.
        anchors: the measured ligands (:class:`~geomol.inference.anchoring.Anchors`).
        method: the method used (by default the settings' choice for ``len(anchors)``).
    """

    settings: AnchoringSettings
    anchors: Anchors
    method: str = ""

    def __post_init__(self):
        self.method = self.method or self.settings.method(len(self.anchors))
        if self.method not in ANCHOR_METHODS:
            raise ConfigError(f"anchoring method is one of {ANCHOR_METHODS}, not {self.method!r}")

    @property
    def moves_predictions(self) -> bool:
        """Whether predictions change (the ``base`` and ``finetuned`` methods leave them to the weights)."""
        return self.method in ("residual", "anchored") and len(self.anchors) > 0

    def predict(self, base: Sequence[float], fingerprints: np.ndarray, names: Sequence[str]
                ) -> tuple[np.ndarray, np.ndarray]:
        """(pK, sd) of ligands with base pK ``base`` and Morgan counts ``fingerprints`` ``(n, F)``; a ligand named as
        an anchor is predicted from the others. The sd is the residual model's (calibrated) for every method."""
        mean, sd = residual_predictions(self.settings.kernel, self.anchors, base, fingerprints, names,
                                        interval=self.settings.interval)
        if self.method == "anchored":
            mean = anchored_average(self.anchors, base, fingerprints, self.settings.power, names)
        elif self.method in ("base", "finetuned"):
            mean = np.asarray(base, dtype=np.float64)
        return mean, sd

    def apply(self, record, graph) -> None:
        """Anchor one predicted record (an :class:`~geomol.inference.affinity.AffinityPrediction` whose complex is
        ``graph``) in place; records without a pK are left as they are."""
        if not self.moves_predictions or not record.ok or not math.isfinite(record.pK):
            return
        (mean,), (sd,) = self.predict([record.pK], graph_fingerprint(graph)[None, :], [record.name])
        record.extra["base_pK"] = record.pK
        if record.name in self.anchors.names:
            record.extra["measured_pK"] = float(self.anchors.measured[self.anchors.names.index(record.name)])
        record.pK, record.pK_std = float(mean), float(sd)
        record.dG_kcal_mol, record.Kd_M = dg_from_pk(record.pK), 10.0 ** -record.pK

    def to_dict(self) -> dict:
        a = self.anchors
        return {"method": self.method, "settings": self.settings.to_dict(),
                "anchors": [{"name": n, "measured_pK": float(y), "base_pK": float(b), "morgan": _sparse(f)}
                            for n, y, b, f in zip(a.names, a.measured, a.base, a.fingerprints)],
                "fingerprint_length": int(a.fingerprints.shape[1])}

    @classmethod
    def from_dict(cls, record: Mapping[str, Any], source=None) -> "AnchoredSeries":
        try:
            rows = list(record["anchors"])
            fingerprints = np.zeros((len(rows), int(record["fingerprint_length"])))
            for row, entry in zip(fingerprints, rows):
                for bit, count in entry["morgan"].items():
                    row[int(bit)] = float(count)
            anchors = Anchors([e["name"] for e in rows], [e["base_pK"] for e in rows], fingerprints,
                              [e["measured_pK"] for e in rows])
            return cls(AnchoringSettings.from_dict(record["settings"], source), anchors, str(record["method"]))
        except (KeyError, TypeError, ValueError, IndexError) as exc:
            raise ConfigError(f"unreadable anchors ({exc})", source=source) from None
