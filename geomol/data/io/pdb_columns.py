"""A fixed-column reader for clean PDB coordinate records, the fast path of :func:`~geomol.data.io.read_structure`.

Prepared receptor files (the inputs of docking, FEP and affinity models) are clean: every atom has
its element column, there are no alternative locations, and no residue or atom is defined twice (alternative locations apart).
For such records Biopython's object tree (an object per atom, residue and chain, with parent links)
is most of the cost of reading a protein, and none of its rules for messy files is needed. This
module reads the columns directly into a :class:`~geomol.data.io.structure.Structure` with NumPy,
giving exactly what the Biopython path gives for the same records:

* an atom in alternative locations is the location of highest occupancy (the first on a tie);

* residues are the runs of consecutive records with one chain, residue number, insertion code,
  residue name and record type (ATOM/HETATM); a chain that comes back later in the file (its
  ligand and ions after the other chains, typically) is one chain, so residues are ordered by chain
  (chains in order of first appearance) and then by file order, as Biopython orders them;
* atom names are stripped unless they hold an inner space (then kept whole, as Biopython does);
* coordinates are rounded to float32, as Biopython stores them, and returned as float64.

:func:`read_clean_records` returns None for anything else (a blank element column, a residue
or an atom defined twice other than as clean alternative locations, a column that does not parse, non-ASCII text),
and the caller reads those records with Biopython, whose warnings and errors then describe the
problem exactly as before.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from geomol.data.io.structure import Structure

__all__ = ["read_clean_records"]

_WIDTH = 80


def _columns(records: Sequence[str]) -> np.ndarray | None:
    """[n, 80] bytes of the records, padded or cut to 80 columns; None for non-ASCII text."""
    try:
        text = "".join(f"{line:<{_WIDTH}.{_WIDTH}}" for line in records).encode("ascii")
    except UnicodeEncodeError:
        return None
    return np.frombuffer(text, dtype="S1").reshape(len(records), _WIDTH)


def _field(table: np.ndarray, start: int, stop: int) -> np.ndarray:
    """[n] byte strings of columns ``start:stop`` (0-based, stop exclusive)."""
    return np.ascontiguousarray(table[:, start:stop]).view(f"S{stop - start}").ravel()


def _numbers(field: np.ndarray, dtype) -> np.ndarray | None:
    """The field parsed as numbers, or None when a value does not parse (a blank one included)."""
    try:
        return field.astype(dtype)
    except ValueError:
        return None


def _resolve_altlocs(atoms: range, names: Sequence[str], fullnames: Sequence[str], altlocs: np.ndarray,
                     occupancy: np.ndarray) -> list[int] | None:
    """One record per atom name of a residue, in order of first appearance (None if not clean).

    An atom given in alternative locations is the one of highest occupancy, the first listed on a
    tie (Biopython's choice). Two records of one name are clean only if both have an alternative
    location, different ones, and the same name columns.
    """
    by_name: dict[str, list[int]] = {}
    for i in atoms:
        by_name.setdefault(names[i], []).append(i)
    chosen = []
    for records in by_name.values():
        if len(records) > 1:
            locations = [altlocs[i] for i in records]
            if b" " in locations or len(set(locations)) != len(records) or len({fullnames[i] for i in records}) > 1:
                return None
            best = max(range(len(records)), key=lambda k: (occupancy[records[k]], -k))
            chosen.append(records[best])
        else:
            chosen.append(records[0])
    return chosen


def read_clean_records(records: Sequence[str], source, canonical: Mapping[str, str],
                       keep_hydrogens: bool) -> Structure | None:
    """The structure of ATOM/HETATM ``records`` (one model, waters removed), or None if they are not clean.

    Args:
        records: coordinate lines as :func:`~geomol.data.io.pdb.read_structure` selects them.
        source: the file, for the structure's name.
        canonical: upper-case element column → element symbol (``'CL'`` → ``'Cl'``).
        keep_hydrogens: whether the records kept hydrogen atoms (recorded in the structure; the
            records are already without them otherwise).
    """
    table = _columns(records) if records else None
    if table is None:
        return None
    given = [e.strip().decode().upper() for e in _field(table, 76, 78)]
    elements = [canonical.get(e) for e in given]
    # a blank element column (Biopython guesses from the name), or an atom marked unknown ('X')
    if "" in given or None in elements or "X" in elements:
        return None
    xyz = _numbers(_field(table, 30, 54).view("S8").reshape(-1, 3), np.float64)
    occupancy = _numbers(_field(table, 54, 60), np.float64)
    resseq = _numbers(_field(table, 22, 26), np.int64)
    if xyz is None or occupancy is None or resseq is None or (occupancy < 0).any() \
            or _numbers(_field(table, 60, 66), np.float64) is None:
        return None
    hetatm = _field(table, 0, 6) == b"HETATM"
    resnames = _field(table, 17, 20)
    chain_col, icode_col = _field(table, 21, 22), _field(table, 26, 27)
    residue_key = np.char.add(np.char.add(np.char.add(chain_col, _field(table, 22, 27)), resnames),
                              np.where(hetatm, b"H", b" "))
    starts = np.flatnonzero(np.concatenate([[True], residue_key[1:] != residue_key[:-1]]))
    stops = np.append(starts[1:], len(records))
    residues: dict[str, list[int]] = {}
    seen = set()
    for r, first in enumerate(starts):
        chain, resname = chain_col[first].decode(), resnames[first].decode().strip()
        identity = (chain, f"H_{resname}" if hetatm[first] else " ", int(resseq[first]), icode_col[first])
        if identity in seen:  # a residue defined twice (a point mutation, a split residue)
            return None
        seen.add(identity)
        residues.setdefault(chain, []).append(r)
    fullnames = [line[12:16] for line in records]
    names = [full.strip() if len(full.split()) == 1 else full for full in fullnames]
    altlocs = _field(table, 16, 17)
    order = [r for chain_residues in residues.values() for r in chain_residues]
    atom_order, offsets = [], [0]
    for r in order:
        chosen = _resolve_altlocs(range(starts[r], stops[r]), names, fullnames, altlocs, occupancy)
        if chosen is None:
            return None
        atom_order.extend(chosen)
        offsets.append(len(atom_order))
    keep = np.asarray(atom_order, dtype=np.int64)
    first_atoms = starts[order]
    return Structure(str(source), xyz[keep].astype(np.float32).astype(np.float64), [elements[i] for i in keep],
                     [names[i] for i in keep], np.asarray(offsets), [chain_col[i].decode().strip() for i in first_atoms],
                     [int(resseq[i]) for i in first_atoms], [icode_col[i].decode().strip() for i in first_atoms],
                     [resnames[i].decode().strip() for i in first_atoms], hydrogens_kept=keep_hydrogens)
