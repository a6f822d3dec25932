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

__all__ = ["AtomLineTable", "read_clean_records", "single_model_atom_table"]

_WIDTH = 80


_ATOM_RECORDS = (b"ATOM  ", b"HETATM")
_MODEL_RECORDS = (b"MODEL ", b"ENDMDL")
_OTHER_LINE_BREAKS = "\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # str.splitlines cuts at these too


class AtomLineTable:
    """The ATOM/HETATM lines of a PDB text whose lines end in plain newlines, located by byte offsets.

    Fields of these lines are read for all lines at once, as columns of bytes; a line is made a
    ``str`` only when asked for. Built by :func:`single_model_atom_table`.
    """

    def __init__(self, text: str, padded: np.ndarray, starts: np.ndarray, stops: np.ndarray, line_numbers: np.ndarray,
                 truncated_tail: bool):
        self.text = text
        self._padded = padded  # [len(text) + _WIDTH] uint8: the text, then newlines (no field reaches past a line)
        self._starts, self._stops = starts, stops  # [n] offsets of each atom line in the text, stop exclusive
        self._line_numbers = line_numbers  # [n] 1-based line number in the text
        self.truncated_tail = truncated_tail
        self._codes: dict[tuple[int, int], tuple[list[str], np.ndarray]] = {}

    @property
    def num_atoms(self) -> int:
        return len(self._starts)

    def line(self, i: int) -> str:
        return self.text[self._starts[i]:self._stops[i]]

    def lines(self, indices: Sequence[int]) -> list[str]:
        return [self.text[a:b] for a, b in zip(self._starts[indices].tolist(), self._stops[indices].tolist())]

    def line_number(self, i: int) -> int:
        return int(self._line_numbers[i])

    def line_numbers(self, indices: Sequence[int]) -> list[int]:
        return self._line_numbers[indices].tolist()

    def per_code(self, start: int, stop: int, meaning, dtype) -> np.ndarray:
        """[n] ``meaning(field)`` of columns ``start:stop`` (0-based) of each line, as ``line[start:stop]``
        would give it but with columns past the line's end read as spaces; computed once per distinct field.
        """
        codes, inverse = self._distinct_codes(start, stop)
        return np.array([meaning(code) for code in codes], dtype=dtype)[inverse]

    def _distinct_codes(self, start: int, stop: int) -> tuple[list[str], np.ndarray]:
        """(distinct values of columns ``start:stop``, index of each line's value among them)."""
        if (start, stop) not in self._codes:
            columns = self._starts[:, None] + np.arange(start, stop)
            field = self._padded[columns]
            field[columns >= self._stops[:, None]] = ord(" ")
            first, inverse = _distinct(field)
            self._codes[start, stop] = [field[i].tobytes().decode("latin-1") for i in first], inverse
        return self._codes[start, stop]


def single_model_atom_table(text: str) -> AtomLineTable | None:
    """The ATOM/HETATM lines of ``text``; None when it has MODEL/ENDMDL records, line breaks other
    than plain newlines, or characters beyond Latin-1 (such texts are read line by line)."""
    if any(mark in text for mark in _OTHER_LINE_BREAKS):
        return None
    try:
        data = np.frombuffer(text.encode("latin-1") + b"\n" * _WIDTH, dtype=np.uint8)
    except UnicodeEncodeError:
        return None
    size = len(text)
    newlines = np.flatnonzero(data[:size] == ord("\n"))
    starts, stops = np.append(0, newlines + 1), np.append(newlines, size)
    if starts[-1] == size:  # nothing after the last newline: no line there (as str.splitlines)
        starts, stops = starts[:-1], stops[:-1]
    record = np.ascontiguousarray(data[starts[:, None] + np.arange(6)]).view("S6").ravel()
    if np.isin(record, _MODEL_RECORDS).any():
        return None
    atom_lines = np.flatnonzero(np.isin(record, _ATOM_RECORDS))
    lengths = stops[atom_lines] - starts[atom_lines]
    truncated_tail = (not text.endswith("\n") and len(atom_lines) > 1 and atom_lines[-1] == len(starts) - 1
                      and lengths[-1] < lengths[-2])
    return AtomLineTable(text, data, starts[atom_lines], stops[atom_lines], atom_lines + 1, bool(truncated_tail))


def _columns(records: Sequence[str]) -> np.ndarray | None:
    """[n, 80] bytes of the records, padded or cut to 80 columns; None for non-ASCII text."""
    try:
        if set(map(len, records)) == {_WIDTH}:  # the usual case: no padding or cutting needed
            text = "".join(records).encode("ascii")
        else:
            text = "".join(f"{line:<{_WIDTH}.{_WIDTH}}" for line in records).encode("ascii")
    except UnicodeEncodeError:
        return None
    return np.frombuffer(text, dtype="S1").reshape(len(records), _WIDTH)


def _distinct(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(index of the first occurrence of each distinct value, index of each entry's value among them)
    of a [n] byte-string field or [n, width] uint8 field."""
    width = keys.dtype.itemsize if keys.ndim == 1 else keys.shape[1]
    keys = np.ascontiguousarray(keys).view(f"<u{width}" if width in (1, 2, 4, 8) else f"V{width}").ravel()
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def _per_distinct(field: np.ndarray, meaning) -> tuple[list, np.ndarray]:
    """(``meaning(value)`` of each distinct value of a field, index of each entry's value among them).

    ``field`` is [n] byte strings (values as NumPy gives them, trailing NULs dropped) or an
    [n, width] block of byte columns (each row given as the ``str`` of all its bytes).
    """
    first, inverse = _distinct(field)
    return [meaning(field[i] if field.ndim == 1 else field[i].tobytes().decode("latin-1")) for i in first], inverse


def _expanded(values: list, inverse: np.ndarray) -> list:
    """``[values[k] for k in inverse]``, gathered by NumPy."""
    table = np.empty(len(values), dtype=object)
    for k, value in enumerate(values):
        table[k] = value
    return table[inverse].tolist()


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


def _names_unique_per_residue(names: Sequence[str], name_of_atom: np.ndarray, residue_sizes: np.ndarray) -> bool:
    """Whether no atom name comes twice within a residue.

    Args:
        names: the distinct atom names (two may be equal: names of different name columns).
        name_of_atom: [N] index of each atom's entry in ``names``.
        residue_sizes: atoms of each residue (residues are consecutive runs of atoms).
    """
    number = {name: k for k, name in enumerate(names)}
    name_id = np.array([number[name] for name in names], dtype=np.int64)[name_of_atom]
    residue = np.repeat(np.arange(len(residue_sizes), dtype=np.int64), residue_sizes)
    return len(np.unique(residue * len(names) + name_id)) == len(name_id)


def _with_altlocs_resolved(order: Sequence[int], starts: np.ndarray, stops: np.ndarray, names: Sequence[str],
                           fullnames: Sequence[str], altlocs: np.ndarray,
                           occupancy: np.ndarray) -> tuple[np.ndarray | None, np.ndarray | None]:
    """(atoms kept, in residue ``order``; residue offsets among them), or (None, None) when not clean."""
    atom_order, offsets = [], [0]
    for r in order:
        chosen = _resolve_altlocs(range(starts[r], stops[r]), names, fullnames, altlocs, occupancy)
        if chosen is None:
            return None, None
        atom_order.extend(chosen)
        offsets.append(len(atom_order))
    return np.asarray(atom_order, dtype=np.int64), np.asarray(offsets)


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
    given, element_of_atom = _per_distinct(_field(table, 76, 78), lambda e: e.strip().decode().upper())
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
    fullnames, name_of_atom = _per_distinct(table[:, 12:16], str)
    names = [full.strip() if len(full.split()) == 1 else full for full in fullnames]  # as Biopython names atoms
    order = [r for chain_residues in residues.values() for r in chain_residues]
    if _names_unique_per_residue(names, name_of_atom, stops - starts):  # no alternative locations to choose from
        sizes = (stops - starts)[order]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        keep = np.arange(offsets[-1]) + np.repeat(starts[order] - offsets[:-1], sizes)  # residue runs in order
    else:
        keep, offsets = _with_altlocs_resolved(order, starts, stops, _expanded(names, name_of_atom),
                                               _expanded(fullnames, name_of_atom), _field(table, 16, 17), occupancy)
        if keep is None:
            return None
    first_atoms = starts[order]
    return Structure(str(source), xyz[keep].astype(np.float32).astype(np.float64),
                     _expanded(elements, element_of_atom[keep]), _expanded(names, name_of_atom[keep]), offsets,
                     [chain_col[i].decode().strip() for i in first_atoms],
                     [int(resseq[i]) for i in first_atoms], [icode_col[i].decode().strip() for i in first_atoms],
                     [resnames[i].decode().strip() for i in first_atoms], hydrogens_kept=keep_hydrogens)
