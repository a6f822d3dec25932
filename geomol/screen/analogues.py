"""Libraries of analogues of a congeneric series, enumerated by R-group swaps (for tests and benchmarks).

A screen's benchmark and tests need libraries of 10²–10⁵ ligands that share a core with a reference
pose, like a medicinal chemist's enumerated library. :func:`enumerate_analogues` makes them from a
series' SMILES: each aromatic C–H of a parent is a site; every choice of 1..``max_sites`` sites of a
parent, decorated with every combination of :data:`R_GROUPS`, gives one analogue. Analogues come in
a fixed order (one site before two; parents, sites and groups in order), each canonical SMILES
once, so the same series always gives the same library.
"""
from __future__ import annotations

import gzip
import itertools
from os import PathLike
from pathlib import Path
from typing import Iterable, Iterator, Sequence

from rdkit import Chem

from geomol.data.io._source import rdkit_messages
from geomol.errors import ConfigError

__all__ = ["R_GROUPS", "enumerate_analogues", "write_smiles_library"]

R_GROUPS = ("F", "Cl", "Br", "C", "CC", "OC", "N", "O", "C#N", "C(F)(F)F", "OC(F)(F)F", "C(N)=O", "NC(C)=O",
            "S(C)(=O)=O", "C1CC1", "CO", "N(C)C", "c1ccccc1", "c1ccncc1", "N1CCOCC1")
"""Substituents, written from their attachment atom (the bond to the parent's aromatic carbon)."""


def _sites(parent: Chem.Mol) -> list[int]:
    return [a.GetIdx() for a in parent.GetAtoms() if a.GetIsAromatic() and a.GetSymbol() == "C" and a.GetTotalNumHs()]


def _decorated(parent: Chem.Mol, sites: Sequence[int], groups: Sequence[str]) -> str | None:
    """Canonical SMILES of ``parent`` with ``groups[k]`` on aromatic carbon ``sites[k]``, or None if RDKit refuses."""
    editable = Chem.RWMol(parent)
    for number, site in enumerate(sites, start=1):
        dummy = editable.AddAtom(Chem.Atom(0))
        editable.GetAtomWithIdx(dummy).SetAtomMapNum(number)
        editable.AddBond(site, dummy, Chem.BondType.SINGLE)
    pieces = editable.GetMol()
    for number, group in enumerate(groups, start=1):
        pieces = Chem.CombineMols(pieces, Chem.MolFromSmiles(f"[*:{number}]{group}"))
    try:
        with rdkit_messages():
            product = Chem.molzip(pieces)
            Chem.SanitizeMol(product)
    except Exception:  # noqa: BLE001 - RDKit raises plain errors for a valence it cannot accept: skip that one
        return None
    return Chem.MolToSmiles(product)


def enumerate_analogues(parents: Iterable[str], max_sites: int = 2, groups: Sequence[str] = R_GROUPS,
                        limit: int | None = None) -> Iterator[str]:
    """Canonical SMILES of R-group analogues of the ``parents`` (SMILES), in a fixed order, each once.

    Args:
        parents: the series (SMILES; hydrogens may be explicit).
        max_sites: most aromatic C–H positions substituted at once.
        groups: substituents (SMILES from the attachment atom).
        limit: stop after this many analogues.

    Raises:
        ConfigError: a parent SMILES RDKit cannot read, or max_sites < 1.
    """
    if max_sites < 1:
        raise ConfigError(f"max_sites must be ≥ 1, got {max_sites}")
    molecules = []
    for smiles in parents:
        with rdkit_messages():
            mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            raise ConfigError(f"cannot read the parent SMILES {smiles!r}")
        molecules.append(Chem.RemoveHs(mol))
    seen: set[str] = set()
    count = 0
    for k in range(1, max_sites + 1):
        for parent in molecules:
            for sites in itertools.combinations(_sites(parent), k):
                for chosen in itertools.product(groups, repeat=k):
                    smiles = _decorated(parent, sites, chosen)
                    if smiles is None or smiles in seen:
                        continue
                    seen.add(smiles)
                    yield smiles
                    count += 1
                    if limit is not None and count >= limit:
                        return


def write_smiles_library(path: str | PathLike, smiles: Iterable[str], prefix: str = "analogue") -> int:
    """Write ``smiles`` as a ``.smi`` library (gzip when the name ends in ``.gz``), named ``<prefix>-<n>``; returns the count."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    count = 0
    with opener(path, "wt", encoding="utf-8") as handle:
        for count, text in enumerate(smiles, start=1):
            handle.write(f"{text} {prefix}-{count}\n")
    return count
