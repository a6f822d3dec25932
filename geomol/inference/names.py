"""One name per ligand in every output: later ligands that repeat an earlier name are renamed ``'name (2)'``.

Names come from molecule titles, SMILES lists and file names, and nothing stops two records from
sharing one (the same file given twice, a series listing a compound once per protonation state, docking
output of one ligand in several runs). Results are matched by name (measured values, plots, the poses
written), so each repeat is renamed — ``lig_7``, ``lig_7 (2)``, ``lig_7 (3)`` — with a warning on the
ligand's row and one :class:`DuplicateNameWarning` for the run.
"""
from __future__ import annotations

import warnings
from collections import Counter
from typing import Sequence

from geomol.data.chemistry.checks import WARNING, Finding

__all__ = ["DuplicateNameWarning", "DUPLICATE_NAME", "unique_names", "duplicate_finding", "warn_duplicates"]

DUPLICATE_NAME = "duplicate_name"


class DuplicateNameWarning(UserWarning):
    """Several ligands of one run had the same name; the later ones were renamed."""


def unique_names(names: Sequence[str]) -> tuple[list[str], dict[int, str]]:
    """``names`` with every repeat of an earlier name renamed ``'name (k)'`` (k = its occurrence, never colliding
    with another name), and ``{index: original name}`` of those renamed."""
    taken, seen = set(names), Counter()
    unique, renamed = [], {}
    for index, name in enumerate(names):
        seen[name] += 1
        if seen[name] == 1:
            unique.append(name)
            continue
        k = seen[name]
        while f"{name} ({k})" in taken:
            k += 1
        taken.add(f"{name} ({k})")
        unique.append(f"{name} ({k})")
        renamed[index] = name
    return unique, renamed


def duplicate_finding(original: str, new: str, count: int, source: str = "") -> Finding:
    """The warning on the row of a ligand renamed from ``original`` (a name ``count`` ligands share) to ``new``."""
    return Finding(WARNING, DUPLICATE_NAME, f"{count} ligands are named {original!r}: this one is reported as "
                   f"{new!r}", source)


def warn_duplicates(names: Sequence[str], unique: Sequence[str], renamed: dict[int, str]) -> None:
    """One :class:`DuplicateNameWarning` for the run, naming the shared names and what the repeats became."""
    if not renamed:
        return
    counts = Counter(names)
    shared = [name for name in dict.fromkeys(renamed.values())]
    examples = ", ".join(f"{name!r} ×{counts[name]}" for name in shared[:3]) + (", ..." if len(shared) > 3 else "")
    first = min(renamed)
    warnings.warn(f"{len(shared)} ligand name(s) occur more than once ({examples}): the repeats are renamed "
                  f"({renamed[first]!r} → {unique[first]!r}, ...) so that every result row has its own name",
                  DuplicateNameWarning, stacklevel=3)
