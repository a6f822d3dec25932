"""What kind of receptor a complex has: protein, RNA, DNA, or a pocket where protein and nucleic acid meet.

An affinity model trained on protein pockets has never seen the phosphate backbone, base edges or metal ions of
an RNA pocket; its number there is an extrapolation. Shipped models record the kinds their training pockets had
(:class:`~geomol.inference.domain.ApplicabilityDomain`, ``receptor_kinds``) and prediction compares the kind of each
complex's pocket with them (:func:`graph_receptor_kind`), or of the whole receptor file before a model is chosen
(:func:`structure_receptor_kind`).

The kind counts the polymer blocks: amino acids (modified ones by their parent), DNA and RNA nucleotides
(:data:`~geomol.data.vocab.NUCLEOTIDES`). :func:`pdb_file_receptor_kind` reads only the residue names of a PDB
file's first model, to choose a model before the receptor is read with that model's recipe. ``'mixed'``: amino acids and nucleotides both, each at least
:data:`MIXED_SHARE` of the polymer blocks (a ribosome pocket, a protein–DNA interface); otherwise the majority
polymer, RNA or DNA by their larger count; ``'other'``: no polymer block (ions, cofactors only).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

from geomol.data.vocab import AMINO_ACIDS, NUCLEOTIDES, VOCAB, residue_block_symbol

__all__ = ["RECEPTOR_KINDS", "MIXED_SHARE", "kind_of_counts", "graph_receptor_kind", "structure_receptor_kind",
           "pdb_file_receptor_kind"]

RECEPTOR_KINDS = ("protein", "RNA", "DNA", "mixed", "other")
MIXED_SHARE = 0.1
_AMINO = {VOCAB.index(one) for one, _ in AMINO_ACIDS}
_DNA = {VOCAB.index(s) for s in NUCLEOTIDES if s.startswith("D")}
_RNA = {VOCAB.index(s) for s in NUCLEOTIDES if s.startswith("R")}


def kind_of_counts(amino: int, dna: int, rna: int) -> str:
    """The kind of a receptor with these polymer block counts (module notes)."""
    total = amino + dna + rna
    if total == 0:
        return "other"
    nucleic = dna + rna
    if amino >= MIXED_SHARE * total and nucleic >= MIXED_SHARE * total:
        return "mixed"
    if amino > nucleic:
        return "protein"
    return "RNA" if rna >= dna else "DNA"


def _kind_of_block_types(block_types: Sequence[int]) -> str:
    types = np.asarray(block_types)
    return kind_of_counts(*(int(np.isin(types, list(group)).sum()) for group in (_AMINO, _DNA, _RNA)))


def graph_receptor_kind(graph) -> str:
    """The kind of a complex graph's pocket (segment 0, global blocks left out; one complex, not a batch)."""
    return _kind_of_block_types(graph.B[graph.segment == 0].tolist())


def structure_receptor_kind(structure) -> str:
    """The kind of a whole receptor :class:`~geomol.data.io.Structure` (its residues)."""
    symbols = [residue_block_symbol(name) for name in structure.resnames]
    return _kind_of_block_types([VOCAB.index(s) for s in symbols if s is not None])


def pdb_file_receptor_kind(path) -> str | None:
    """The kind of the receptor in a PDB file (plain, .gz or .bz2) from the residue names of its ATOM/HETATM records
    (first model), without building a structure; ``None`` for another format (mmCIF, MOL2)."""
    from geomol.data.io._source import detect_format, iter_text_lines

    if detect_format(path) != "pdb":
        return None
    residues = {}
    for line in iter_text_lines(path):
        if line.startswith("ENDMDL"):
            break
        if line.startswith(("ATOM  ", "HETATM")):
            residues.setdefault(line[21:27], line[17:20].strip())  # chain, number and insertion code -> name
    symbols = [residue_block_symbol(name) for name in residues.values()]
    return _kind_of_block_types([VOCAB.index(s) for s in symbols if s is not None])
