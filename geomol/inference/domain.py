"""The applicability domain of an affinity model: what its training data covered, and the checks against it.

A model returns a number for any graph. Whether that number means anything depends on whether
the complex resembles those the model was trained on. :class:`ApplicabilityDomain` records, in
the model's manifest (key ``"domain"``), what the training complexes looked like, computed when
the model is exported (:func:`domain_from_graphs`):

* ``ligand_elements``: heavy-atom elements of the training ligands;
* ``ligand_heavy_atoms``: [min, max] heavy atoms of the training ligands;
* ``pk_std_median`` and ``pk_std_q99``: median and 99th percentile of the ensemble spread (pK
  standard deviation over the members) on the training complexes; ``pk_std_limit`` =
  :data:`SPREAD_FACTOR` × ``pk_std_q99``: a spread above it is flagged as disagreement far above
  the training distribution;
* ``pk_label_range``: [min, max] of the training labels (pK);
* ``pk_physical_range``: :data:`PHYSICAL_PK_RANGE`; a prediction outside it is never reported as a
  number;
* ``receptor_kinds``: the kinds of the training pockets (:data:`~geomol.data.chemistry.receptor_kind.RECEPTOR_KINDS`:
  protein, RNA, DNA, mixed); a complex whose pocket is of another kind is flagged (the model never saw one).
  Records written before kinds were recorded read as ``("protein",)``: every model exported before then was
  trained on protein pockets only.

A manifest or checkpoint without the record (models exported before it existed, ``geomol fit``
checkpoints) gets :meth:`ApplicabilityDomain.defaults`: drug-like elements, 5–80 heavy atoms, a
spread limit of 1 pK, the physical range; a shipped-model manifest without it also warns at load.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from geomol.data.blocks import BlockGraph, ligand_atom_mask
from geomol.data.chemistry.checks import ERROR, WARNING, Finding
from geomol.data.chemistry.receptor_kind import graph_receptor_kind
from geomol.data.vocab import atom_symbol
from geomol.errors import ModelLoadError

__all__ = ["ApplicabilityDomain", "domain_from_graphs", "ligand_summary", "PHYSICAL_PK_RANGE", "SPREAD_FACTOR"]

PHYSICAL_PK_RANGE = (0.0, 15.0)
"""pK bounds of a real non-covalent binder: K ≤ 1 M (weaker is no binding) and K ≥ 1 fM (tighter than
streptavidin–biotin, the tightest known non-covalent complexes, about 10⁻¹⁴–10⁻¹⁵ M)."""
SPREAD_FACTOR = 2.0
"""The spread limit is this multiple of the 99th percentile of the training spread."""
_DEFAULT_ELEMENTS = ("Br", "C", "Cl", "F", "I", "N", "O", "P", "S")


def ligand_summary(graph: BlockGraph) -> tuple[list[str], int]:
    """(heavy-atom element symbols, heavy-atom count) of the ligand (segment 1) of one graph."""
    symbols = [atom_symbol(int(a)) for a in graph.A[ligand_atom_mask(graph)]]
    heavy = [s for s in symbols if s != "H"]
    return heavy, len(heavy)


@dataclass(frozen=True)
class ApplicabilityDomain:
    """What the training complexes of a model covered (see the module notes for each field)."""

    ligand_elements: tuple[str, ...]
    ligand_heavy_atoms: tuple[int, int]
    pk_std_median: float
    pk_std_q99: float
    pk_std_limit: float
    pk_label_range: tuple[float, float]
    pk_physical_range: tuple[float, float] = PHYSICAL_PK_RANGE
    origin: str = ""
    receptor_kinds: tuple[str, ...] = ("protein",)

    # ------------------------------------------------------------------ (de)serialisation
    @classmethod
    def defaults(cls) -> "ApplicabilityDomain":
        """The domain assumed for a model that records none (see the module notes)."""
        return cls(_DEFAULT_ELEMENTS, (5, 80), math.nan, math.nan, 1.0, (2.0, 12.0),
                   origin="defaults: the model records no applicability domain")

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in data.items()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, source: Any = None, *, warn: bool = False
                  ) -> "ApplicabilityDomain":
        """From a manifest's ``domain`` record; None gives :meth:`defaults` (with a warning if ``warn``)."""
        if not data:
            if warn:
                warnings.warn(f"{source}: the model records no applicability domain (exported before "
                              "models recorded one); using defaults: drug-like elements, 5-80 heavy atoms, spread "
                              "limit 1 pK", UserWarning, stacklevel=3)
            return cls.defaults()
        try:
            low, high = (int(v) for v in data["ligand_heavy_atoms"])
            return cls(tuple(str(e) for e in data["ligand_elements"]), (low, high), float(data["pk_std_median"]),
                       float(data["pk_std_q99"]), float(data["pk_std_limit"]),
                       tuple(float(v) for v in data["pk_label_range"]),
                       tuple(float(v) for v in data.get("pk_physical_range", PHYSICAL_PK_RANGE)),
                       str(data.get("origin", "")), tuple(str(k) for k in data.get("receptor_kinds", ("protein",))))
        except (KeyError, TypeError, ValueError) as exc:
            raise ModelLoadError(f"malformed applicability-domain record ({type(exc).__name__}: {exc})",
                                 source=source) from None

    # ------------------------------------------------------------------ checks
    def ligand_findings(self, elements: Sequence[str], n_heavy: int, source: str = "") -> list[Finding]:
        """Warnings for a ligand with elements or a size the training ligands did not have."""
        found = []
        unseen = sorted(set(elements) - set(self.ligand_elements))
        if unseen:
            found.append(Finding(WARNING, "element_unseen", f"element(s) {', '.join(unseen)} never occur in the "
                                 f"model's training ligands ({', '.join(self.ligand_elements)}): their contribution "
                                 "is untrained", source))
        low, high = self.ligand_heavy_atoms
        if not low <= n_heavy <= high:
            found.append(Finding(WARNING, "size_outside_training", f"{n_heavy} heavy atoms, outside the "
                                 f"{low}–{high} of the model's training ligands", source))
        return found

    def receptor_findings(self, kind: str, source: str = "") -> list[Finding]:
        """A warning for a pocket of a kind (protein, RNA, DNA, mixed) none of the training pockets had."""
        if kind in self.receptor_kinds or kind == "other":  # 'other' (no polymer) is refused by the input checks
            return []
        seen = ", ".join(self.receptor_kinds)
        what = "protein and nucleic acid together" if kind == "mixed" else kind
        return [Finding(WARNING, "receptor_kind_unseen", f"the pocket is {what}; the model was trained on {seen} "
                        "pockets only and never saw one like it: its number is an extrapolation" + _suggestion(kind),
                        source)]

    def prediction_findings(self, pk: float, pk_std: float) -> list[Finding]:
        """An error for a pK outside the physical range; warnings for unusual spread or pK."""
        low, high = self.pk_physical_range
        if not low <= pk <= high:
            return [Finding(ERROR, "pk_unphysical", f"the model returned pK {pk:.3g}, outside the physical range "
                            f"{low:g}–{high:g} (K from 1 M to 1 fM): the input is far outside what the model "
                            "knows; no affinity reported")]
        found = []
        if math.isfinite(pk_std) and pk_std > self.pk_std_limit:
            typical = f"median {self.pk_std_median:.2f}, " if math.isfinite(self.pk_std_median) else ""
            found.append(Finding(WARNING, "ensemble_disagreement", f"the ensemble members disagree (±{pk_std:.2f} pK) "
                                 f"far more than on the training complexes ({typical}limit {self.pk_std_limit:.2f}): "
                                 "the input is probably outside the model's domain"))
        label_low, label_high = self.pk_label_range
        if not label_low <= pk <= label_high:
            found.append(Finding(WARNING, "pk_outside_training", f"pK {pk:.2f} is outside the {label_low:.1f}–"
                                 f"{label_high:.1f} of the training labels"))
        return found


def _suggestion(kind: str) -> str:
    """Which shipped model knows pockets of ``kind``, in words ('' when none does)."""
    from geomol.inference.model_choice import models_for_kind

    names = models_for_kind(kind)
    return f" (use --model {names[0]}, trained on {kind} pockets)" if names else ""


def domain_from_graphs(model, graphs: Sequence[BlockGraph], *, spread_every: int = 1, batch_size: int = 32,
                       origin: str = "") -> ApplicabilityDomain:
    """The applicability domain of ``model`` measured on its training complexes (labels in ``graph.y``).

    Args:
        model: an :class:`~geomol.inference.affinity_model.AffinityModel` (its spread is measured).
        graphs: the training complexes, labelled (pK).
        spread_every: measure the ensemble spread on every k-th complex only (prediction is the
            costly part; elements, sizes and labels always use all).
        origin: a description of the data, recorded with the thresholds.
    """
    sample = list(graphs[::spread_every])
    spreads = []
    for start in range(0, len(sample), batch_size):
        spreads += model.predict(sample[start:start + batch_size])[1].tolist()
    elements, sizes = set(), []
    for graph in graphs:
        heavy, count = ligand_summary(graph)
        elements.update(heavy)
        sizes.append(count)
    kinds = tuple(sorted({graph_receptor_kind(graph) for graph in graphs} - {"other"}))
    labels = np.array([float(g.y) for g in graphs])
    labels = labels[np.isfinite(labels)]
    spreads = np.array(spreads)
    median, q99 = (float(np.quantile(spreads, q)) for q in (0.5, 0.99)) if np.isfinite(spreads).all() \
        else (math.nan, math.nan)
    limit = SPREAD_FACTOR * q99 if math.isfinite(q99) else ApplicabilityDomain.defaults().pk_std_limit
    return ApplicabilityDomain(tuple(sorted(elements)), (min(sizes), max(sizes)), round(median, 4), round(q99, 4),
                               round(limit, 4), (round(float(labels.min()), 3), round(float(labels.max()), 3)),
                               PHYSICAL_PK_RANGE, origin or f"{len(graphs)} training complexes (spread measured on "
                                                                f"{len(sample)})", kinds)
