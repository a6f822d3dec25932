"""Binding-affinity labels: measured Kd / Ki / IC50, pIC50 and ΔG, all converted to pK.

Units are converted by :mod:`geomol.units` (pK = −log10(K / M) for a concentration K — Kd, Ki, IC50,
EC50 — and pK = −ΔG / (R T ln 10) at 298.15 K for a free energy). IC50 values are used as they are
(no Cheng–Prusoff correction): the benchmarks that report them do the same.

Two label sources are parsed here:

* the protein-ligand-benchmark ``ligands.yml`` measurement blocks (:func:`plb_measurement_pk`);
* the PDBbind ``INDEX_*`` files (:func:`parse_pdbbind_index`), with ``Kd=0.4mM``-style tokens
  and the qualifiers ``=``, ``<``, ``>``, ``<=``, ``>=``, ``~``.
"""
from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from os import PathLike
from typing import Any, Mapping

from geomol.errors import DatasetError
from geomol.units import pk_from_concentration, pk_from_dg

__all__ = [
    "Measurement",
    "plb_affinities",
    "plb_measurement_pk",
    "PDBbindEntry",
    "parse_pdbbind_affinity",
    "parse_pdbbind_index",
]

_CONCENTRATION_KINDS = {"ic50", "ki", "kd", "ec50"}
_P_KINDS = {"pic50", "pki", "pkd", "pec50", "pk"}
_DG_KINDS = {"dg"}


@dataclass(frozen=True)
class Measurement:
    """One affinity measurement converted to pK.

    Attributes:
        kind: ``'ki'``, ``'kd'``, ``'ic50'``, ``'ec50'``, ``'pic50'``, ``'dg'`` ...
        value: the number as written in the source.
        unit: its unit as written (``'nM'``, ``'kilojoules / mole'``, ``''``).
        pk: -log10(K / M).
        qualifier: ``'='`` or one of ``'<' '>' '<=' '>=' '~'`` (PDBbind).
    """

    kind: str
    value: float
    unit: str
    pk: float
    qualifier: str = "="


# ---------------------------------------------------------------------------------- PLB
def _plb_entry(entry: Mapping[str, Any], source: str | None) -> Measurement | None:
    """One ``{type, value, unit}`` block as a Measurement; ``None`` if it is not an affinity (ΔH, TΔS)."""
    kind = str(entry.get("type", "")).strip().lower()
    if kind not in _CONCENTRATION_KINDS | _P_KINDS | _DG_KINDS:
        return None
    unit = "" if entry.get("unit") is None else str(entry["unit"]).strip()
    try:
        value = float(entry["value"])
    except (KeyError, TypeError, ValueError):
        raise DatasetError(f"measurement {kind!r} has no numeric value: {entry.get('value')!r}", source) from None
    if kind in _CONCENTRATION_KINDS:
        pk = pk_from_concentration(value, unit, source=source)
    elif kind in _P_KINDS:
        if unit not in ("", "1", "dimensionless"):
            raise DatasetError(f"{kind} should be unitless, got unit {unit!r}", source)
        pk = value
    else:
        pk = pk_from_dg(value, unit, source=source)
    return Measurement(kind, value, unit, pk)


def plb_affinities(measurement: Mapping[str, Any], *, source: str | None = None) -> list[Measurement]:
    """Every affinity in a protein-ligand-benchmark ``measurement`` block, primary first.

    The primary ``{type, value, unit}`` and each entry of ``additional`` are converted; entries
    that are not affinities (``dh``, ``tds``) are ignored.
    """
    found = [_plb_entry(measurement, source)]
    found += [_plb_entry(extra, source) for extra in measurement.get("additional") or ()]
    return [m for m in found if m is not None]


def plb_measurement_pk(measurement: Mapping[str, Any], *, source: str | None = None) -> Measurement:
    """The label of a protein-ligand-benchmark ligand: its primary affinity, as pK.

    The primary measurement is used when it is an affinity; otherwise the first affinity among
    ``additional`` (e.g. a ``dg`` entry in kJ/mol).

    Raises:
        DatasetError: no affinity at all, an unknown unit or a non-positive concentration.
    """
    affinities = plb_affinities(measurement, source=source)
    if not affinities:
        raise DatasetError(f"no affinity measurement (types: {measurement.get('type')!r})", source)
    return affinities[0]


# ---------------------------------------------------------------------------------- PDBbind
@dataclass(frozen=True)
class PDBbindEntry:
    """One line of a PDBbind ``INDEX_*`` file.

    Attributes:
        pdb_id: lower-case 4-character code.
        resolution: Å, ``None`` for NMR structures.
        year: release year.
        pk_listed: the -logKd/Ki column as printed (2 decimals).
        measurement: the affinity token parsed (kind ``'kd'``/``'ki'``/``'ic50'``, qualifier, pK).
        ligand: the ligand name in parentheses at the end of the line (``'3.2-mer'``), or ``''``.
    """

    pdb_id: str
    resolution: float | None
    year: int | None
    pk_listed: float | None
    measurement: Measurement
    ligand: str = ""


_AFFINITY_TOKEN = re.compile(
    r"^(?P<kind>Kd|Ki|IC50|EC50)(?P<qual><=|>=|=|<|>|~)(?P<value>[0-9.]+(?:[eE][-+]?\d+)?)(?P<unit>[fpnuµμm]?M)$",
    re.IGNORECASE,
)
_QUALIFIER_MODES = ("keep", "drop", "drop_inequalities")


def parse_pdbbind_affinity(token: str, *, source: str | None = None) -> Measurement:
    """Parse ``'Kd=0.4mM'``, ``'Ki<1nM'``, ``'IC50~5uM'`` into a :class:`Measurement`.

    For an inequality the pK is that of the bound (``Ki<1nM`` → pK 9.0, a lower bound on pK).
    """
    match = _AFFINITY_TOKEN.match(token.strip().replace(" ", ""))
    if match is None:
        raise DatasetError(f"cannot parse affinity {token!r} (expected e.g. Kd=0.4mM)", source)
    value, unit = float(match["value"]), match["unit"]
    return Measurement(match["kind"].lower(), value, unit, pk_from_concentration(value, unit, source=source),
                       match["qual"])


def _keep_qualifier(qualifier: str, mode: str) -> bool:
    if mode == "keep":
        return True
    if mode == "drop":
        return qualifier == "="
    return qualifier in ("=", "~")


def _parse_index_line(line: str, source: str) -> PDBbindEntry:
    data, _, comment = line.partition("//")
    fields = data.split()
    if len(fields) < 5:
        raise DatasetError(f"expected 'code resolution year pK affinity', got {line.strip()!r}", source)
    code, resolution, year, pk_listed, token = fields[:5]
    ligand = re.search(r"\(([^()]*)\)\s*$", comment.strip())

    def number(text: str, kind):
        try:
            return kind(text)
        except ValueError:
            return None

    return PDBbindEntry(
        pdb_id=code.lower(),
        resolution=number(resolution, float),
        year=number(year, int),
        pk_listed=number(pk_listed, float),
        measurement=parse_pdbbind_affinity(token, source=source),
        ligand=ligand.group(1) if ligand else "",
    )


def parse_pdbbind_index(path: str | PathLike, *, qualifiers: str = "keep", strict: bool = True
                        ) -> dict[str, PDBbindEntry]:
    """Read a PDBbind ``INDEX_general_PL_data.*`` / ``INDEX_refined_data.*`` file.

    Args:
        path: the index file. Lines starting with ``#`` are comments.
        qualifiers: ``'keep'`` every entry; ``'drop'`` every entry whose qualifier is not ``=``;
            ``'drop_inequalities'`` drops ``< > <= >=`` but keeps approximate ``~`` values.
        strict: raise on a malformed line; with ``False`` such lines are skipped with a warning
            that counts them.

    Returns:
        ``{pdb_id: PDBbindEntry}`` in file order.

    Raises:
        DatasetError: missing file, malformed line (``strict``), unknown unit, or a repeated code.
    """
    if qualifiers not in _QUALIFIER_MODES:
        raise DatasetError(f"qualifiers must be one of {_QUALIFIER_MODES}, got {qualifiers!r}", path)
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as exc:
        raise DatasetError(f"cannot read PDBbind index: {exc.strerror}", path) from None
    entries: dict[str, PDBbindEntry] = {}
    bad = 0
    for number, line in enumerate(lines, start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            entry = _parse_index_line(line, f"{path}:{number}")
        except DatasetError:
            if strict:
                raise
            bad += 1
            continue
        if entry.pdb_id in entries:
            raise DatasetError(f"PDB code {entry.pdb_id} listed twice", path, number)
        if _keep_qualifier(entry.measurement.qualifier, qualifiers):
            entries[entry.pdb_id] = entry
    if bad:
        warnings.warn(f"{path}: skipped {bad} malformed line(s)", stacklevel=2)
    return entries
