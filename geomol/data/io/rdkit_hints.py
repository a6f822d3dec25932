"""What to tell a user when RDKit cannot use a molecule file: the cause in words, and what to do.

* MOL2 files written with force-field atom types (GAFF/GAFF2 ``ca``, ``c3``, ``hn``; Amber
  ``CT``, ``HC``) instead of Tripos/SYBYL types (``C.ar``, ``C.3``, ``H``): RDKit reads the element
  from the type and fails with "Element 'ca' not found" — or, worse, reads ``CA`` as calcium.
  :func:`mol2_atom_type_problem` finds them before RDKit parses the record.
* Sanitisation failures (valence, kekulisation, aromaticity): :func:`sanitisation_hint` adds
  what usually causes them.
"""
from __future__ import annotations

from geomol.data.vocab import ELEMENTS

__all__ = ["mol2_atom_type_problem", "sanitisation_hint"]

_SYBYL_SPECIAL = {"Du", "LP", "Lp", "Any", "Hal", "Het", "Hev"}
_ELEMENTS = set(ELEMENTS)
_ATOM_SECTION = "@<TRIPOS>ATOM"


def _is_sybyl_type(atom_type: str) -> bool:
    """True for SYBYL types: an element symbol in its own case (``Cl``), optionally ``.suffix`` (``N.ar``)."""
    return atom_type.split(".", 1)[0] in _ELEMENTS | _SYBYL_SPECIAL


def _atom_lines(record: str) -> list[list[str]]:
    lines = record.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip().upper() == _ATOM_SECTION), None)
    if start is None:
        return []
    atoms = []
    for line in lines[start + 1:]:
        if line.startswith("@<TRIPOS>"):
            break
        fields = line.split()
        if len(fields) >= 6:
            atoms.append(fields)
    return atoms


def mol2_atom_type_problem(record: str) -> str | None:
    """Why the atom types of one MOL2 record are not Tripos/SYBYL types (None when they are)."""
    atoms = _atom_lines(record)
    bad = [(fields[0], fields[1], fields[5]) for fields in atoms if not _is_sybyl_type(fields[5])]
    if not bad:
        return None
    number, name, atom_type = bad[0]
    gaff = any(t[:1].islower() for _, _, t in bad)
    kind = "GAFF/Amber force-field atom types" if gaff else "force-field (e.g. Amber) atom types"
    return (f"{len(bad)} of {len(atoms)} atoms have {kind}, not Tripos/SYBYL types (e.g. atom {number} {name!r} "
            f"has type {atom_type!r}); geomol reads elements from SYBYL types such as C.ar, C.3, N.am, H, so these "
            "are not supported. Write the molecule as SDF, or as MOL2 with SYBYL types (e.g. antechamber -fi mol2 "
            "-fo mol2 -at sybyl, or re-export from the program that wrote it)")


_HINTS = (
    ("valence", "usually a missing formal charge (e.g. a 4-bonded N without +1) or a wrong bond order; fix the "
                "charges or bond orders, or write the molecule as SDF with explicit charges"),
    ("kekulize", "an aromatic ring whose bonds cannot be assigned single/double: write it with explicit "
                 "(Kekulé) bonds and the ring N-H hydrogens present"),
    ("aromatic", "atoms flagged aromatic outside a ring or in a ring RDKit does not accept as aromatic: write "
                 "explicit single/double bonds"),
)


def sanitisation_hint(reason: str) -> str:
    """RDKit's sanitisation ``reason`` followed by its usual cause and remedy (when one is known)."""
    lowered = reason.lower()
    hint = next((text for key, text in _HINTS if key in lowered), None)
    return f"{reason} — {hint}" if hint else reason
