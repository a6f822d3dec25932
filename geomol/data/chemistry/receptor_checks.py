"""A protein receptor reduced to its backbone (C-alpha or N, CA, C, O only): readable, but not what a model scores.

Coarse models, low-resolution or homology-model files and some "clean" pipelines keep only C-alpha
atoms or the backbone. A contact model scores what each ligand atom touches in the pocket — mostly
side-chain atoms, with their hydrogen-bond donors, acceptors, charges and rings — so on such a receptor
its number means nothing; GET reads residue types as well as atoms, so its number is less affected but
still off the structures it was trained on. :func:`side_chain_findings` reports it, as an error where
the model needs side chains and as a warning otherwise.

A receptor counts as backbone-only when fewer than :data:`MIN_SIDE_CHAIN_FRACTION` of its amino acids
other than glycine have any side-chain heavy atom (a crystal structure missing a few disordered side
chains at the surface is not flagged).
"""
from __future__ import annotations

from geomol.data.chemistry.checks import ERROR, WARNING, Finding
from geomol.data.io.structure import Structure
from geomol.data.vocab import residue_block_symbol

__all__ = ["BACKBONE_ATOMS", "MIN_SIDE_CHAIN_FRACTION", "side_chain_findings", "side_chain_counts"]

BACKBONE_ATOMS = frozenset({"N", "CA", "C", "O", "OXT", "OT1", "OT2"})
MIN_SIDE_CHAIN_FRACTION = 0.5


def _is_amino_acid(resname: str) -> bool:
    symbol = residue_block_symbol(resname.strip().upper())
    return symbol is not None and len(symbol) == 1 and symbol != "G"  # one letter: amino acid; glycine has none


def side_chain_counts(receptor: Structure) -> tuple[int, int]:
    """(amino acids other than glycine, how many of them have a side-chain heavy atom)."""
    residues = with_side_chain = 0
    for r in range(receptor.num_residues):
        if not _is_amino_acid(receptor.resnames[r]):
            continue
        residues += 1
        start, end = int(receptor.residue_start[r]), int(receptor.residue_start[r + 1])
        with_side_chain += any(receptor.elements[i] != "H" and receptor.names[i].strip().upper() not in BACKBONE_ATOMS
                               for i in range(start, end))
    return residues, with_side_chain


def side_chain_findings(receptor: Structure, required: bool) -> list[Finding]:
    """A finding when the receptor's amino acids lack their side chains: an error if the model ``required`` them
    (the contact scorer), else a warning."""
    residues, with_side_chain = side_chain_counts(receptor)
    if not residues or with_side_chain >= MIN_SIDE_CHAIN_FRACTION * residues:
        return []
    counts = f"{residues - with_side_chain} of its {residues} amino acids other than glycine have no side-chain atom"
    if required:
        return [Finding(ERROR, "no_side_chains", f"the receptor is a C-alpha or backbone-only model ({counts}). This "
                        "model scores what the ligand's atoms touch, mostly side chains: give the all-atom structure "
                        "(or rebuild its side chains, e.g. with PDBFixer or Modeller)", receptor.source)]
    return [Finding(WARNING, "no_side_chains", f"the receptor is a C-alpha or backbone-only model ({counts}): the "
                    "model was trained on all-atom structures, so its number is an extrapolation", receptor.source)]
