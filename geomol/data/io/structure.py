"""A parsed macromolecular structure as flat arrays, and its blocks.

:class:`Structure` holds one model of a PDB/mmCIF file after altlocs, waters and (by default)
hydrogens have been resolved: atoms in file order, grouped into residues. Blocks are made
from it lazily, so that building a pocket touches only the residues in the pocket: the cost of
a cached receptor is then proportional to the pocket, not to the protein.

Block rules (``specs/GET.md`` §11.1):

* a residue whose name is a standard or modified amino acid or nucleotide
  (:func:`~geomol.data.vocab.residue_block_symbol`) is one block; each atom gets the position
  code of its name (:func:`~geomol.data.vocab.position_code`);
* anything else (ligands, ions, caps such as ACE/NME, cofactors) is one block per atom, with the
  lower-case element as block symbol;
* CHARMM nucleotide names (ADE, CYT, GUA, THY, URA) are nucleotides when the residue has a
  sugar (a C1' atom) -- DNA or RNA depending on whether it has a 2'-oxygen; without a sugar they
  are what the PDB means by these names, free bases (one block per atom).
"""
from __future__ import annotations

from functools import cached_property, lru_cache
from typing import Sequence

import numpy as np

from geomol.data.blocks import Block
from geomol.errors import EmptySelectionError
from geomol.data.vocab import element_block_symbol, position_code, residue_block_symbol

__all__ = ["Structure", "distance_mask", "is_polymer_residue"]

_CHARMM_NUCLEOTIDES = {"ADE": "A", "CYT": "C", "GUA": "G", "THY": "T", "URA": "U"}
_SUGAR_C1 = ("C1'", "C1*")
_SUGAR_2_OXYGEN = ("O2'", "O2*")


@lru_cache(maxsize=8192)
def _position(name: str, element: str) -> str:
    return position_code(name, element)


@lru_cache(maxsize=4096)
def _residue_symbol(resname: str) -> str | None:
    return residue_block_symbol(resname)


def is_polymer_residue(resname: str) -> bool:
    """True for (modified) amino acids and nucleotides, including CHARMM nucleotide names."""
    name = resname.strip().upper()
    return name in _CHARMM_NUCLEOTIDES or _residue_symbol(name) is not None


def _block_symbol(resname: str, atom_names: Sequence[str]) -> str | None:
    """Block symbol of a whole residue, or ``None`` when the residue is one block per atom."""
    base = _CHARMM_NUCLEOTIDES.get(resname)
    if base is not None:
        if not any(n in _SUGAR_C1 for n in atom_names):
            return None
        return ("R" if any(n in _SUGAR_2_OXYGEN for n in atom_names) else "D") + base
    return _residue_symbol(resname)


def distance_mask(is_heavy: np.ndarray, atom_block: np.ndarray, num_blocks: int) -> np.ndarray:
    """[N] bool: the atoms that count for distances (heavy atoms; all atoms of hydrogen-only blocks)."""
    has_heavy = np.zeros(num_blocks, dtype=bool)
    has_heavy[atom_block[is_heavy]] = True
    return is_heavy | ~has_heavy[atom_block]


class Structure:
    """Atoms of one model, grouped into residues. Coordinates in Å.

    Args:
        source: file name (used in messages and block labels of errors).
        coords: [N, 3] float64 atom coordinates.
        elements: N canonical element symbols (``'C'``, ``'Cl'``; ``'X'`` = unknown).
        names: N atom names as in the file (``'CA'``, ``"C1'"``).
        residue_start: [R + 1] offsets of each residue's atoms (atoms of a residue are consecutive).
        chains, numbers, icodes, resnames: per residue (R each): chain id, sequence number,
            insertion code (``''`` when none), residue name.
        hydrogens_kept: whether hydrogens were kept when the file was read.
    """

    def __init__(self, source: str, coords: np.ndarray, elements: Sequence[str], names: Sequence[str],
                 residue_start: np.ndarray, chains: Sequence[str], numbers: Sequence[int],
                 icodes: Sequence[str], resnames: Sequence[str], hydrogens_kept: bool = False):
        self.source = str(source)
        self.coords = np.asarray(coords, dtype=np.float64).reshape(-1, 3)
        self.elements = list(elements)
        self.names = list(names)
        self.residue_start = np.asarray(residue_start, dtype=np.int64)
        self.chains, self.numbers = list(chains), list(numbers)
        self.icodes, self.resnames = list(icodes), list(resnames)
        self.hydrogens_kept = hydrogens_kept
        self._made: dict[tuple[int, bool], Block | None] = {}
        if len(self.residue_start) != len(self.resnames) + 1 or self.residue_start[-1] != len(self.elements):
            raise ValueError("residue offsets do not match the atoms")

    # ------------------------------------------------------------------ basic views
    @property
    def num_atoms(self) -> int:
        return len(self.elements)

    @property
    def num_residues(self) -> int:
        return len(self.resnames)

    def __repr__(self) -> str:
        return f"Structure({self.source!r}, {self.num_residues} residues, {self.num_atoms} atoms)"

    def residue_label(self, r: int) -> str:
        """``'chain:number+icode:name'``, e.g. ``'A:42A:ALA'``."""
        return f"{self.chains[r]}:{self.numbers[r]}{self.icodes[r]}:{self.resnames[r]}"

    @cached_property
    def is_heavy(self) -> np.ndarray:
        """[N] bool, False for hydrogen atoms."""
        return np.array([e != "H" for e in self.elements], dtype=bool)

    def residue_mask(self, resnames: Sequence[str] | None = None, chains: Sequence[str] | None = None) -> np.ndarray:
        """[R] bool: residues whose name is in ``resnames`` and chain in ``chains`` (None = any)."""
        names = None if resnames is None else {r.strip().upper() for r in resnames}
        chain_set = None if chains is None else set(chains)
        return np.array([(names is None or n.upper() in names) and (chain_set is None or c in chain_set)
                         for n, c in zip(self.resnames, self.chains)], dtype=bool)

    def select_residues(self, mask: np.ndarray) -> "Structure":
        """A new structure with the residues where ``mask`` ([R] bool) is True."""
        keep = np.flatnonzero(mask)
        atoms = np.flatnonzero(np.repeat(np.asarray(mask, dtype=bool), np.diff(self.residue_start)))
        offsets = np.concatenate([[0], np.cumsum(np.diff(self.residue_start)[keep])])
        per_residue = ([values[r] for r in keep] for values in (self.chains, self.numbers, self.icodes, self.resnames))
        return Structure(self.source, self.coords[atoms], [self.elements[i] for i in atoms],
                         [self.names[i] for i in atoms], offsets, *per_residue, hydrogens_kept=self.hydrogens_kept)

    def select_chains(self, chains: Sequence[str]) -> "Structure":
        """A new structure with the residues of ``chains``.

        Raises:
            EmptySelectionError: no residue is in any of them.
        """
        mask = self.residue_mask(chains=list(chains))
        if not mask.any():
            raise EmptySelectionError(f"no receptor chain among {list(chains)} (chains: {sorted(set(self.chains))})",
                                      source=self.source)
        return self.select_residues(mask)

    # ------------------------------------------------------------------ blocks
    @cached_property
    def _block_table(self) -> tuple[np.ndarray, list[str], np.ndarray]:
        """(block_start [Nb + 1], block symbols, residue of each block [Nb])."""
        starts: list[int] = []
        symbols: list[str] = []
        residue: list[int] = []
        for r, resname in enumerate(self.resnames):
            s, e = int(self.residue_start[r]), int(self.residue_start[r + 1])
            symbol = _block_symbol(resname.upper(), self.names[s:e])
            if symbol is not None:
                starts.append(s)
                symbols.append(symbol)
                residue.append(r)
                continue
            starts.extend(range(s, e))
            symbols.extend(element_block_symbol(el) for el in self.elements[s:e])
            residue.extend([r] * (e - s))
        starts.append(self.num_atoms)
        return np.asarray(starts, dtype=np.int64), symbols, np.asarray(residue, dtype=np.int64)

    @property
    def num_blocks(self) -> int:
        return len(self._block_table[1])

    @cached_property
    def atom_block(self) -> np.ndarray:
        """[N] block index of each atom (blocks as made by :meth:`blocks`)."""
        starts = self._block_table[0]
        return np.repeat(np.arange(len(starts) - 1), np.diff(starts))

    @cached_property
    def distance_atoms(self) -> tuple[np.ndarray, np.ndarray]:
        """(coordinates [M, 3] in Å, block of each [M]) of the atoms that count for pocket distances.

        Heavy atoms, and the atoms of hydrogen-only blocks (:func:`distance_mask`);
        computed once, as a pocket is selected again for every ligand of a receptor.
        """
        counted = distance_mask(self.is_heavy, self.atom_block, self.num_blocks)
        return self.coords[counted], self.atom_block[counted]

    def blocks(self, indices: Sequence[int] | np.ndarray | None = None, *, keep_hydrogens: bool = True) -> list[Block]:
        """The blocks at ``indices`` (all blocks when None), in the given order.

        Args:
            keep_hydrogens: False drops hydrogen atoms from residue blocks and skips
                single-hydrogen blocks (only matters when the file was read with hydrogens).
        """
        indices = range(self.num_blocks) if indices is None else indices
        blocks = (self._block(int(b), keep_hydrogens) for b in indices)
        return [b for b in blocks if b is not None]

    def _block(self, b: int, keep_hydrogens: bool) -> Block | None:
        """Block ``b`` (memoised: blocks are immutable, and pockets of one target overlap)."""
        key = (b, keep_hydrogens or not self.hydrogens_kept)
        if key not in self._made:
            starts, symbols, residue = self._block_table
            s, e = int(starts[b]), int(starts[b + 1])
            atoms = range(s, e) if key[1] else [i for i in range(s, e) if self.elements[i] != "H"]
            self._made[key] = self._make_block(symbols[b], atoms, int(residue[b])) if atoms else None
        return self._made[key]

    def _make_block(self, symbol: str, atoms: Sequence[int], residue: int) -> Block:
        elements = tuple(self.elements[i] for i in atoms)
        names = tuple(self.names[i] for i in atoms)
        per_atom = symbol[:1].islower()  # element blocks are lower-case, residue blocks upper-case
        label = self.residue_label(residue) + (f":{names[0]}" if per_atom else "")
        coords = self.coords[atoms.start:atoms.stop] if isinstance(atoms, range) else self.coords[list(atoms)]
        return Block(symbol, elements, tuple(_position(n, e) for n, e in zip(names, elements)), coords, names, label)
