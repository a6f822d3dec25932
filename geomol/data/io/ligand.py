"""Ligand blocks: one block per atom (the reference LBA setting) or one per fragment.

Per-atom blocks follow ``specs/GET.md`` §11.2: block symbol = lower-case element, position code
``'sm'``. With a fragmenter (an object with ``fragment(mol) -> [(atom indices, block symbol), ...]``,
such as :class:`geomol.data.complexes.fragment.FragmentVocab`) the groups become the blocks; the fragmenter
is given the molecule as it is (hydrogens included if it has them) and, unless hydrogens are kept,
hydrogens are then removed from the groups (groups of only hydrogens disappear).
"""
from __future__ import annotations

from typing import Protocol, Sequence

import numpy as np
from rdkit import Chem

from geomol.data.blocks import Block
from geomol.data.io.molecule import molecule_source
from geomol.data.io.structure import Structure
from geomol.data.vocab import element_block_symbol
from geomol.errors import ConfigError, EmptySelectionError, StructureReadError, UnknownElementError

__all__ = ["Fragmenter", "ligand_blocks", "structure_ligand_blocks"]

SMALL_MOLECULE = "sm"


class Fragmenter(Protocol):
    """Anything that partitions a molecule's atoms into ``[(atom indices, block symbol), ...]``."""

    def fragment(self, mol: Chem.Mol) -> list[tuple[tuple[int, ...], str]]: ...


def _atom_blocks(elements: Sequence[str], coords: np.ndarray, names: Sequence[str], label: str) -> list[Block]:
    return [Block(element_block_symbol(e), (e,), (SMALL_MOLECULE,), coords[i:i + 1], (n,), f"{label}:{n}")
            for i, (e, n) in enumerate(zip(elements, names))]


def _atom_list(mol: Chem.Mol) -> list[Chem.Atom]:
    # GetAtomWithIdx is a direct C++ call; iterating mol.GetAtoms() goes through a slow Python sequence
    return [mol.GetAtomWithIdx(i) for i in range(mol.GetNumAtoms())]


def _checked_atoms(mol: Chem.Mol | None, source: str) -> tuple[list[Chem.Atom], list[str], np.ndarray]:
    """Atoms, element symbols and [n, 3] coordinates (Å) of a molecule, validated."""
    if mol is None or mol.GetNumAtoms() == 0:
        raise StructureReadError("molecule is missing or has no atoms", source=source)
    if mol.GetNumConformers() == 0:
        raise StructureReadError("molecule has no 3D coordinates", source=source)
    atoms = _atom_list(mol)
    dummies = [a.GetIdx() for a in atoms if a.GetAtomicNum() == 0]
    if dummies:
        raise UnknownElementError(f"atom {dummies[0]} is a dummy or query atom, not an element "
                                  f"({len(dummies)} such atoms)", source=source)
    coords = mol.GetConformer().GetPositions()
    if not np.isfinite(coords).all():
        raise StructureReadError("non-finite atom coordinates", source=source)
    return atoms, [a.GetSymbol() for a in atoms], coords


def _atom_names(atoms: Sequence[Chem.Atom], elements: Sequence[str], keep: Sequence[bool]) -> list[str]:
    """MOL2/PDB atom names when the molecule has them, else element + 1-based index (``'C12'``).

    Atoms not kept (``keep[i]`` False) get ``''``: their names are never used.
    """
    return [_atom_name(atom, element, i) if kept else ""
            for i, (atom, element, kept) in enumerate(zip(atoms, elements, keep))]


def _atom_name(atom: Chem.Atom, element: str, index: int) -> str:
    if atom.HasProp("_TriposAtomName"):
        return atom.GetProp("_TriposAtomName")
    info = atom.GetPDBResidueInfo()
    return info.GetName().strip() if info is not None else f"{element}{index + 1}"


def _fragment_blocks(mol, fragments: Fragmenter, elements, coords, names, keep, label, source) -> list[Block]:
    groups = fragments.fragment(mol)
    covered = sorted(i for atoms, _ in groups for i in atoms)
    if covered != list(range(mol.GetNumAtoms())):
        raise ConfigError("fragmenter did not put every atom in exactly one group", source=source)
    blocks = []
    for k, (atoms, symbol) in enumerate(groups):
        atoms = [i for i in atoms if keep[i]]
        if atoms:
            blocks.append(Block(symbol, tuple(elements[i] for i in atoms), (SMALL_MOLECULE,) * len(atoms),
                                coords[atoms], tuple(names[i] for i in atoms), f"{label}:{k}"))
    return blocks


def ligand_blocks(mol: Chem.Mol, *, fragments: Fragmenter | None = None, keep_hydrogens: bool = False,
                  label: str | None = None) -> list[Block]:
    """The blocks of a small molecule with 3D coordinates.

    Args:
        mol: RDKit molecule with a conformer (coordinates in Å), e.g. from
            :func:`~geomol.data.io.read_ligand`.
        fragments: optional fragmenter; None gives one block per atom.
        keep_hydrogens: keep hydrogen atoms (default: heavy atoms only).
        label: prefix of the block labels (default: the molecule title or ``'LIG'``).

    Raises:
        StructureReadError: no atoms, no coordinates or non-finite coordinates.
        UnknownElementError: a dummy/query atom (atomic number 0).
        EmptySelectionError: nothing left (a molecule of hydrogens only, hydrogens dropped).
        ConfigError: the fragmenter's groups do not partition the atoms.
    """
    source = molecule_source(mol) if mol is not None else "molecule"
    atoms, elements, coords = _checked_atoms(mol, source)
    label = label or (mol.GetProp("_Name").strip() if mol.HasProp("_Name") else "") or "LIG"
    keep = [keep_hydrogens or e != "H" for e in elements]
    names = _atom_names(atoms, elements, keep)
    if fragments is not None:
        blocks = _fragment_blocks(mol, fragments, elements, coords, names, keep, label, source)
    else:
        atoms = [i for i in range(len(elements)) if keep[i]]
        blocks = _atom_blocks([elements[i] for i in atoms], coords[atoms], [names[i] for i in atoms], label)
    if not blocks:
        raise EmptySelectionError("ligand has no heavy atoms", source=source)
    return blocks


def structure_ligand_blocks(ligand: Structure) -> list[Block]:
    """One ``'sm'`` block per atom of a ligand read from a PDB/mmCIF file (as the LBA reference).

    Block labels are ``'chain:number:resname:atom'``.
    """
    if ligand.num_atoms == 0:
        raise EmptySelectionError("ligand has no atoms", source=ligand.source)
    blocks = []
    for r in range(ligand.num_residues):
        s, e = int(ligand.residue_start[r]), int(ligand.residue_start[r + 1])
        blocks += _atom_blocks(ligand.elements[s:e], ligand.coords[s:e], ligand.names[s:e], ligand.residue_label(r))
    return blocks
