"""The common core of a reference ligand and an analogue: rdFMCS, seeded by RASCAL.

:func:`find_mcs` is RDKit's ``rdFMCS`` with ring-aware matching (ring bonds only match ring bonds,
only complete rings) and bond orders compared. On its own it can spend its whole timeout on an
analogue of 30–40 heavy atoms and return a far smaller core than the true one. :func:`rascal_seed`
finds a common substructure with RDKit's RASCAL maximum common edge subgraph
(``rdRascalMCES``, milliseconds for a congeneric pair) and turns it into a seed rdFMCS accepts, so
that rdFMCS only has to grow it.
"""
from __future__ import annotations

from typing import Iterable

from rdkit import Chem
from rdkit.Chem import rdFMCS, rdRascalMCES

from geomol.data.io._source import rdkit_messages

__all__ = ["find_mcs", "rascal_seed"]


def rascal_seed(reference: Chem.Mol, ligand: Chem.Mol, timeout: int) -> str:
    """SMARTS of the RASCAL common edge subgraph of two heavy-atom molecules, as an rdFMCS seed ('' for none).

    Args:
        reference, ligand: RDKit molecules without hydrogens.
        timeout: seconds allowed to RASCAL (whole seconds, at least 1).
    """
    options = rdRascalMCES.RascalOptions()
    options.similarityThreshold = 0.0  # a seed is wanted even for a distant analogue
    options.singleLargestFrag = True
    options.ringMatchesRingOnly = True
    options.completeSmallestRings = True
    options.timeout = timeout
    with rdkit_messages():
        found = rdRascalMCES.FindMCES(reference, ligand, options)
    if not found or found[0].timedOut:
        return ""
    kept = _with_complete_rings(reference, ligand, dict(found[0].atomMatches()))
    atoms = _largest_connected(reference, kept)
    return Chem.MolFragmentToSmarts(reference, atomsToUse=atoms, isomericSmarts=False) if atoms else ""


def find_mcs(reference: Chem.Mol, ligand: Chem.Mol, atoms: rdFMCS.AtomCompare, seed: str,
             timeout: int) -> rdFMCS.MCSResult:
    """rdFMCS of two heavy-atom molecules, grown from ``seed`` (SMARTS, '' for none).

    RDKit ignores a seed its own atom and bond rules do not accept, and then searches from
    scratch; :func:`rascal_seed` trims its seeds so that this is rare.
    """
    with rdkit_messages():
        return rdFMCS.FindMCS([reference, ligand], timeout=timeout, atomCompare=atoms,
                              bondCompare=rdFMCS.BondCompare.CompareOrder, ringMatchesRingOnly=True,
                              completeRingsOnly=True, seedSmarts=seed)


def _with_complete_rings(reference: Chem.Mol, ligand: Chem.Mol, pairs: dict[int, int]) -> dict[int, int]:
    """The matched (reference atom → ligand atom) pairs whose ring atoms lie in a fully matched ring.

    RASCAL can match a lone atom of a ring (where a ring replaced a chain); rdFMCS, which keeps only
    complete rings, refuses a seed holding one, so such atoms are dropped until none is left.
    """
    def in_complete_ring(mol: Chem.Mol, atom: int, matched) -> bool:
        rings = [ring for ring in mol.GetRingInfo().AtomRings() if atom in ring]
        return not rings or any(all(a in matched for a in ring) for ring in rings)

    pairs = dict(pairs)
    while True:
        matched_ligand = set(pairs.values())
        partial = [r for r, l in pairs.items()
                   if not (in_complete_ring(reference, r, pairs) and in_complete_ring(ligand, l, matched_ligand))]
        if not partial:
            return pairs
        for r in partial:
            del pairs[r]


def _largest_connected(mol: Chem.Mol, atoms: Iterable[int]) -> list[int]:
    """The largest bonded component of ``atoms`` in ``mol`` (sorted atom indices)."""
    remaining, best = set(atoms), set()
    while remaining:
        component, stack = set(), [remaining.pop()]
        while stack:
            atom = stack.pop()
            component.add(atom)
            for neighbour in mol.GetAtomWithIdx(atom).GetNeighbors():
                if neighbour.GetIdx() in remaining:
                    remaining.discard(neighbour.GetIdx())
                    stack.append(neighbour.GetIdx())
        best = max(best, component, key=len)
    return sorted(best)
