"""Complexes as graphs of sets: a pocket or interface (segment 0) and a ligand or partner (segment 1).

One call reads the files, selects the pocket and builds the :class:`~geomol.data.blocks.BlockGraph`
(with one global block per segment)::

    graph = complex_from_files("protein.pdb", "ligands.sdf", ligand_index="lig_20", y=7.3)
    graph = complex_from_pdb("1hvr.pdb", ligand_resname="XK2")
    graph = complex_from_pdb("complex.pdb", receptor_chains=["A"], ligand_chains=["B"])

For many ligands against one protein, read the protein once and reuse it::

    receptor = read_structure("protein.pdb")
    graphs = [complex_from_structure(receptor, mol) for mol in read_ligands("ligands.sdf")]

The pocket is made of receptor blocks with any heavy atom within ``pocket_cutoff`` Å of any
ligand heavy atom (see :mod:`geomol.data.complexes.pocket`); blocks follow :mod:`geomol.data.io.structure`
and :mod:`geomol.data.io.ligand`.
"""
from __future__ import annotations

import warnings
from os import PathLike
from pathlib import Path
from typing import Sequence, Union

import numpy as np
import torch
from rdkit import Chem

from geomol.data.blocks import Block, BlockGraph
from geomol.data.io import Structure, StructureWarning, detect_format, read_structure
from geomol.data.io.ligand import Fragmenter, ligand_blocks, structure_ligand_blocks
from geomol.data.io.molecule import molecule_source, read_ligand
from geomol.data.complexes.pocket import DEFAULT_CUTOFF, blocks_near, heavy_or_all, partner_atoms, select_pocket
from geomol.data.vocab import VOCAB, BlockVocab, residue_block_symbol
from geomol.errors import ConfigError, EmptySelectionError, LigandNotFoundError

__all__ = ["complex_from_files", "complex_from_structure", "complex_from_pdb", "complex_in_structure",
           "complex_from_partners", "complex_from_blocks", "pocket_blocks"]

LigandInput = Union[str, PathLike, Chem.Mol, Sequence[Block]]


def _vocab(vocab: BlockVocab | None, fragments: Fragmenter | None) -> BlockVocab:
    """The given vocabulary, else the fragmenter's (``block_vocab()``), else the default."""
    if vocab is not None:
        return vocab
    make = getattr(fragments, "block_vocab", None)
    return make() if callable(make) else VOCAB


def _counted_coords(structure: Structure) -> np.ndarray:
    """[M, 3] coordinates of the atoms of a structure that count for distances (heavy atoms)."""
    return heavy_or_all(structure.coords, structure.is_heavy)


def pocket_blocks(structure: Structure, partner: np.ndarray | Sequence[Block], cutoff: float = DEFAULT_CUTOFF, *,
                  keep_hydrogens: bool = False) -> list[Block]:
    """Blocks of ``structure`` with a heavy atom within ``cutoff`` Å of the partner, in file order.

    Args:
        partner: [M, 3] coordinates (Å) of the partner atoms that count, or the partner's blocks
            (their heavy atoms count).
        keep_hydrogens: keep hydrogens inside the returned blocks (if the structure has them).
    """
    if not isinstance(partner, np.ndarray):
        partner = partner_atoms(partner)
    chosen = blocks_near(*structure.distance_atoms, structure.num_blocks, partner, cutoff)
    return structure.blocks(chosen, keep_hydrogens=keep_hydrogens)


def _ligand(ligand: LigandInput, fragments, keep_hydrogens: bool,
            ligand_index: int | str) -> tuple[list[Block], str, str, Chem.Mol | None]:
    """(ligand blocks, title, source description, molecule or None) of any accepted ligand input."""
    if isinstance(ligand, Chem.Mol):
        blocks = ligand_blocks(ligand, fragments=fragments, keep_hydrogens=keep_hydrogens)
        title = ligand.GetProp("_Name").strip() if ligand.HasProp("_Name") else ""
        return blocks, title or "ligand", molecule_source(ligand), ligand
    if isinstance(ligand, (str, PathLike)):
        if detect_format(ligand) in ("pdb", "cif"):
            if fragments is not None:
                raise ConfigError("fragments need bond orders: give the ligand as SDF/MOL2 or an RDKit Mol",
                                  source=ligand)
            structure = read_structure(ligand, keep_hydrogens=keep_hydrogens)
            return structure_ligand_blocks(structure), Path(ligand).name, str(ligand), None
        return _ligand(read_ligand(ligand, ligand_index), fragments, keep_hydrogens, ligand_index)
    blocks = list(ligand)
    if fragments is not None:
        raise ConfigError("fragments apply to molecules, not to ready-made ligand blocks")
    if not blocks or not all(isinstance(b, Block) for b in blocks):
        raise ConfigError("ligand must be a file, an RDKit Mol or a non-empty list of Blocks")
    return blocks, "ligand", "ligand blocks", None


def _with_ligand_chemistry(graph: BlockGraph, mol: Chem.Mol | None) -> BlockGraph:
    """``graph`` with its ligand's descriptors and Morgan counts
    (:func:`~geomol.data.chemistry.ligand_features.graph_ligand_features`; NaN and 0 without a molecule) and the
    interaction roles of its ligand heavy atoms (``ligand_chemistry``, ``(L, 8)`` uint8 in graph order,
    :func:`~geomol.data.chemistry.atom_roles.graph_ligand_chemistry`; zeros without a molecule), so that every
    complex graph has the same attributes and graphs of any input batch together."""
    from geomol.data.chemistry.contact_features import ligand_heavy_atoms
    from geomol.data.chemistry.ligand_features import graph_ligand_features

    for key, values in graph_ligand_features(mol, graph.X[ligand_heavy_atoms(graph)].numpy()).items():
        setattr(graph, key, torch.from_numpy(values))
    return graph


def complex_from_structure(receptor: Structure, ligand: LigandInput, *, pocket_cutoff: float = DEFAULT_CUTOFF,
                           keep_hydrogens: bool = False, fragments: Fragmenter | None = None,
                           ligand_index: int | str = 0, y: float | None = None, name: str | None = None,
                           vocab: BlockVocab | None = None) -> BlockGraph:
    """Pocket of an already-read receptor + a ligand → BlockGraph (segment 0 pocket, 1 ligand).

    Args:
        receptor: from :func:`~geomol.data.io.read_structure` (read once, reuse for many ligands).
        ligand: SDF/MOL2 path (molecule chosen by ``ligand_index``: index or title), a PDB/mmCIF
            path holding only the ligand, an RDKit ``Mol`` with coordinates, or a list of Blocks.
        pocket_cutoff: Å; receptor blocks with a heavy atom this close to a ligand heavy atom.
        keep_hydrogens: keep hydrogens in the graph (the receptor must have been read with them).
        fragments: fragmenter for ligand blocks (default: one block per atom).
        y: label, e.g. pK; ``None`` stores nan.
        name: graph name (default ``'<receptor file>:<ligand title>'``).
        vocab: block vocabulary (default: the fragmenter's ``block_vocab()`` or the official one).

    Raises:
        GeomolError subclasses: unreadable ligand, empty pocket (naming both inputs), bad options.
    """
    if keep_hydrogens and not receptor.hydrogens_kept:
        raise ConfigError("keep_hydrogens=True but the receptor was read without hydrogens", source=receptor.source)
    blocks, title, ligand_source, mol = _ligand(ligand, fragments, keep_hydrogens, ligand_index)
    source = f"{receptor.source} + {ligand_source}"
    pocket = pocket_blocks(receptor, blocks, pocket_cutoff, keep_hydrogens=keep_hydrogens)
    if not pocket:
        raise EmptySelectionError(f"pocket is empty: no receptor atom within {pocket_cutoff:g} Å of the ligand",
                                  source=source)
    name = name or f"{Path(receptor.source).name}:{title}"
    return _with_ligand_chemistry(BlockGraph.from_blocks([pocket, blocks], y, vocab=_vocab(vocab, fragments),
                                                         name=name), mol)


def complex_from_files(receptor: str | PathLike, ligand: LigandInput, *, pocket_cutoff: float = DEFAULT_CUTOFF,
                       keep_hydrogens: bool = False, fragments: Fragmenter | None = None,
                       ligand_index: int | str = 0, y: float | None = None, name: str | None = None,
                       vocab: BlockVocab | None = None, model: int = 0) -> BlockGraph:
    """Receptor file (PDB/mmCIF, optionally .gz) + ligand → BlockGraph; see :func:`complex_from_structure`.

    ``model`` selects the receptor model (0 = first).
    """
    structure = read_structure(receptor, keep_hydrogens=keep_hydrogens, model=model)
    return complex_from_structure(structure, ligand, pocket_cutoff=pocket_cutoff, keep_hydrogens=keep_hydrogens,
                                  fragments=fragments, ligand_index=ligand_index, y=y, name=name, vocab=vocab)


def complex_from_blocks(receptor: Sequence[Block], ligand: Sequence[Block], *, pocket_cutoff: float | None = DEFAULT_CUTOFF,
                        y: float | None = None, name: str | None = None, vocab: BlockVocab = VOCAB) -> BlockGraph:
    """Receptor blocks + ligand blocks → BlockGraph; the pocket is selected unless ``pocket_cutoff`` is None."""
    pocket = list(receptor) if pocket_cutoff is None else select_pocket(receptor, ligand, pocket_cutoff, source=name)
    return _with_ligand_chemistry(BlockGraph.from_blocks([pocket, list(ligand)], y, vocab=vocab, name=name), None)


# ---------------------------------------------------------------------- ligands and partners inside one file
def _non_polymer_names(structure: Structure) -> list[str]:
    return sorted({n for n in structure.resnames if residue_block_symbol(n) is None})


def _ligand_residue(structure: Structure, resname: str, chains: Sequence[str] | None, source) -> np.ndarray:
    """[R] bool selecting the first residue named ``resname`` (in ``chains``); other copies stay."""
    matches = np.flatnonzero(structure.residue_mask([resname], chains))
    if len(matches) == 0:
        where = f" in chains {list(chains)}" if chains is not None else ""
        raise LigandNotFoundError(f"no residue named {resname!r}{where}; non-polymer residues present: "
                                  f"{_non_polymer_names(structure)}", source=source)
    if len(matches) > 1:
        warnings.warn(f"{source}: {len(matches)} residues named {resname!r}; using the first "
                      f"({structure.residue_label(int(matches[0]))}), the others stay in the receptor "
                      "(choose with ligand_chains)", StructureWarning, stacklevel=3)
    mask = np.zeros(structure.num_residues, dtype=bool)
    mask[matches[0]] = True
    return mask


def _missing_chains(structure: Structure, chains: Sequence[str]) -> list[str]:
    present = set(structure.chains)
    return [c for c in chains if c not in present]


def complex_from_partners(structure: Structure, receptor_chains: Sequence[str] | None, ligand_chains: Sequence[str], *,
                          pocket_cutoff: float = DEFAULT_CUTOFF, keep_hydrogens: bool = False, y: float | None = None,
                          name: str | None = None, vocab: BlockVocab = VOCAB) -> BlockGraph:
    """The interface of two chain groups of one already-read structure (protein–protein and the like).

    Segment 0 holds the blocks of ``receptor_chains`` (None: every chain not in ``ligand_chains``) with a heavy
    atom within ``pocket_cutoff`` Å of the partner, segment 1 the partner's blocks within the same distance
    of the receptor chains.

    Raises:
        LigandNotFoundError: a named chain is not in the structure (naming it and the chains present).
        EmptySelectionError: no receptor atoms, or no interface (no heavy atoms of the two groups that close).
    """
    source = structure.source
    for side, chains in (("receptor", receptor_chains or ()), ("partner", ligand_chains)):
        missing = _missing_chains(structure, chains)
        if missing:
            raise LigandNotFoundError(f"{side} chain(s) {', '.join(missing)} not in the file (chains present: "
                                      f"{', '.join(sorted(set(structure.chains)))})", source=source)
    lig_mask = structure.residue_mask(chains=ligand_chains)
    receptor_mask = ~lig_mask & (structure.residue_mask(chains=receptor_chains) if receptor_chains else True)
    receptor, ligand = structure.select_residues(receptor_mask), structure.select_residues(lig_mask)
    if receptor.num_atoms == 0:
        raise EmptySelectionError("no receptor atoms besides the partner chains", source=source)
    ligand_side = pocket_blocks(ligand, _counted_coords(receptor), pocket_cutoff, keep_hydrogens=keep_hydrogens)
    pocket = pocket_blocks(receptor, _counted_coords(ligand), pocket_cutoff, keep_hydrogens=keep_hydrogens)
    if not pocket or not ligand_side:
        groups = ",".join(receptor_chains) if receptor_chains else "the other chains"
        raise EmptySelectionError(f"no interface: no heavy atom of chains {groups} within {pocket_cutoff:g} Å of "
                                  f"chains {','.join(ligand_chains)}", source=source)
    return _with_ligand_chemistry(BlockGraph.from_blocks([pocket, ligand_side], y, vocab=vocab,
                                                         name=name or Path(source).name), None)


def complex_from_pdb(path: str | PathLike, *, ligand_resname: str | None = None,
                     receptor_chains: Sequence[str] | None = None, ligand_chains: Sequence[str] | None = None,
                     pocket_cutoff: float = DEFAULT_CUTOFF, keep_hydrogens: bool = False, y: float | None = None,
                     name: str | None = None, model: int = 0, vocab: BlockVocab = VOCAB) -> BlockGraph:
    """A complex from one PDB/mmCIF file: a ligand residue, or two groups of chains.

    * ``ligand_resname`` given: the ligand is the first residue of that name (HETATM or ATOM
      records alike, optionally only in ``ligand_chains``), one ``'sm'`` block per atom; segment 0
      is the pocket among the other residues (of ``receptor_chains`` if given).
    * otherwise ``ligand_chains`` is the partner: :func:`complex_from_partners` (segment 0 the blocks of
      ``receptor_chains``, default all other chains, within ``pocket_cutoff`` Å of the partner; segment 1 the
      partner's blocks within ``pocket_cutoff`` Å of the receptor chains).

    Raises:
        LigandNotFoundError: no such residue or chain. EmptySelectionError: empty pocket/interface.
        ConfigError: neither ``ligand_resname`` nor ``ligand_chains`` given.
    """
    structure = read_structure(path, keep_hydrogens=keep_hydrogens, model=model)
    return complex_in_structure(structure, ligand_resname=ligand_resname, receptor_chains=receptor_chains,
                                ligand_chains=ligand_chains, pocket_cutoff=pocket_cutoff,
                                keep_hydrogens=keep_hydrogens, y=y, name=name, vocab=vocab)


def complex_in_structure(structure: Structure, *, ligand_resname: str | None = None,
                         receptor_chains: Sequence[str] | None = None, ligand_chains: Sequence[str] | None = None,
                         pocket_cutoff: float = DEFAULT_CUTOFF, keep_hydrogens: bool = False, y: float | None = None,
                         name: str | None = None, vocab: BlockVocab = VOCAB) -> BlockGraph:
    """:func:`complex_from_pdb` on a structure already read (the whole file: every chain), so that one read serves
    every ligand named inside it. Arguments and errors as :func:`complex_from_pdb`."""
    if keep_hydrogens and not structure.hydrogens_kept:
        raise ConfigError("keep_hydrogens=True but the structure was read without hydrogens", source=structure.source)
    path = structure.source
    name = name or Path(path).name
    if ligand_resname is None and ligand_chains:
        return complex_from_partners(structure, receptor_chains, ligand_chains, pocket_cutoff=pocket_cutoff,
                                     keep_hydrogens=keep_hydrogens, y=y, name=name, vocab=vocab)
    if ligand_resname is None:
        raise ConfigError("give ligand_resname (a ligand residue) or ligand_chains (a partner chain group)",
                          source=path)
    lig_mask = _ligand_residue(structure, ligand_resname, ligand_chains, path)
    receptor_mask = ~lig_mask & (structure.residue_mask(chains=receptor_chains) if receptor_chains else True)
    ligand = structure.select_residues(lig_mask)
    receptor = structure.select_residues(receptor_mask)
    if receptor.num_atoms == 0:
        raise EmptySelectionError("no receptor atoms besides the ligand", source=path)
    pocket = pocket_blocks(receptor, _counted_coords(ligand), pocket_cutoff, keep_hydrogens=keep_hydrogens)
    if not pocket:
        raise EmptySelectionError(f"no receptor atom within {pocket_cutoff:g} Å of the ligand", source=path)
    return _with_ligand_chemistry(BlockGraph.from_blocks([pocket, structure_ligand_blocks(ligand)], y, vocab=vocab,
                                                         name=name), None)
