"""The residual model's ± calibrated per number of measured ligands.

A single factor on the prior's sds (:func:`~geomol.evaluation.anchor_fit.tune_kernel`) makes the nominal 68 %
interval hold 68 % of validation series' held-out values on average over budgets, but not at each budget: the
prior's fitted sds describe whole series, and with no anchor (the absolute pK of a new target) or many (the
similarity and slope terms learnt from the series itself) the posterior sd is off by a budget-dependent factor.
:class:`IntervalScale` holds one more factor per budget k, each the 68th percentile of the validation series'
|measured − mean| / sd at that budget, chosen on validation series of the corpus cross-validation like every other
setting (:func:`~geomol.evaluation.anchor_fit.calibrate_intervals`). Scaling the sd leaves the posterior mean, and so
every ranking, unchanged.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping

import numpy as np

from geomol.errors import ConfigError

__all__ = ["IntervalScale"]


@dataclass(frozen=True)
class IntervalScale:
    """Multipliers of the residual model's sd by number of measured ligands.

    Attributes:
        factors: per budget k (measured ligands, ≥ 0) the factor (> 0) its sd is multiplied by; between budgets the
            factor is interpolated linearly in k, beyond them the nearest budget's. Empty: 1 everywhere.
    """

    factors: Mapping[int, float] = field(default_factory=dict)

    def __post_init__(self):
        checked = {}
        for k, value in dict(self.factors).items():
            if int(k) != k or int(k) < 0 or not (math.isfinite(float(value)) and float(value) > 0):
                raise ConfigError(f"interval scale factors need budgets k >= 0 and finite factors > 0, got {k}: {value}")
            checked[int(k)] = float(value)
        object.__setattr__(self, "factors", dict(sorted(checked.items())))

    def factor(self, k: int) -> float:
        """The factor for ``k`` measured ligands (see the attributes)."""
        if not self.factors:
            return 1.0
        budgets = np.array(list(self.factors), dtype=np.float64)
        return float(np.interp(float(k), budgets, np.array(list(self.factors.values()))))

    def to_dict(self) -> dict[str, float]:
        return {str(k): v for k, v in self.factors.items()}

    @classmethod
    def from_dict(cls, record: Mapping | None) -> "IntervalScale":
        """From :meth:`to_dict`'s record (None: no scaling)."""
        try:
            return cls({int(k): float(v) for k, v in (record or {}).items()})
        except (TypeError, ValueError, AttributeError) as exc:
            raise ConfigError(f"unreadable interval scale {record!r} ({exc})") from None
