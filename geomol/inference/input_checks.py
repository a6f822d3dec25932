"""The checks run around building each complex for prediction, turning findings into errors and warnings.

Before a complex is built from a ligand file or molecule and a receptor file, the ligand alone
(:func:`~geomol.data.chemistry.checks.molecule_findings`,
:func:`~geomol.data.chemistry.checks.structure_ligand_findings`),
the receptor (:func:`~geomol.data.chemistry.checks.receptor_findings`) and the two together
(:func:`~geomol.data.chemistry.checks.contact_findings`) are checked, so that a 2D ligand or one at the origin
is reported as such rather than as an empty pocket. A ligand inside the receptor file (a residue
name or a chain group) is checked on the built graph. Then the model's applicability domain
(:mod:`geomol.inference.domain`) adds its warnings: a ligand unlike the training ligands, a pocket of a kind
(protein, RNA, DNA, mixed; :mod:`geomol.data.chemistry.receptor_kind`) the model never saw. Any error raises :class:`~geomol.errors.InputCheckError`
naming each problem with its file and molecule (its ``findings`` attribute holds them, codes included); the
warnings come back as findings for the record.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from geomol.data import read_structure
from geomol.data.blocks import BlockGraph, ligand_atom_mask
from geomol.data.chemistry.checks import (
    Finding,
    contact_findings,
    errors_of,
    ligand_geometry_findings,
    ligand_size_findings,
    molecule_findings,
    receptor_findings,
    structure_ligand_findings,
    warnings_of,
)
from geomol.data.chemistry.receptor_checks import side_chain_findings
from geomol.data.chemistry.receptor_kind import graph_receptor_kind
from geomol.data.io import Structure
from geomol.data.vocab import atom_symbol
from geomol.errors import InputCheckError
from geomol.inference.domain import ApplicabilityDomain, ligand_summary
from geomol.inference.ligand_inputs import LigandInput

__all__ = ["ReceptorContext", "checked_complex", "raise_errors"]


def raise_errors(findings: Sequence[Finding]) -> None:
    """Raise one :class:`InputCheckError` listing every error finding (each with its source)."""
    errors = errors_of(findings)
    if errors:
        error = InputCheckError("; ".join(str(f) for f in errors))
        error.findings = errors
        raise error


def _heavy(coords: np.ndarray, elements: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    keep = [i for i, e in enumerate(elements) if e != "H"] or list(range(len(elements)))
    return np.asarray(coords)[keep], [elements[i] for i in keep]


def _ligand_findings(item: LigandInput, keep_hydrogens: bool) -> tuple[list[Finding], np.ndarray]:
    """Findings of the ligand alone, and its [N, 3] heavy-atom coordinates (Å)."""
    if item.molecule is not None:
        mol = item.molecule
        elements = [mol.GetAtomWithIdx(i).GetSymbol() for i in range(mol.GetNumAtoms())]
        return molecule_findings(mol), _heavy(mol.GetConformer().GetPositions(), elements)[0]
    ligand = read_structure(item.ligand_file, keep_hydrogens=keep_hydrogens)
    return structure_ligand_findings(ligand), _heavy(ligand.coords, ligand.elements)[0]


@dataclass(frozen=True)
class ReceptorContext:
    """What the checks need of a receptor, worked out once per prediction run rather than per ligand."""

    findings: list[Finding]  # of the receptor alone
    heavy_coords: np.ndarray  # [M, 3] heavy-atom positions, Å
    heavy_elements: list[str]  # M element symbols

    @classmethod
    def of(cls, receptor: Structure, side_chains_required: bool = False) -> "ReceptorContext":
        """The context of ``receptor``; ``side_chains_required``: a backbone-only receptor is an error (else a
        warning), for models that score side-chain contacts."""
        coords, elements = _heavy(receptor.coords, receptor.elements)
        findings = receptor_findings(receptor.resnames, receptor.source)
        return cls(findings + side_chain_findings(receptor, side_chains_required), coords, elements)


def _before_building(item: LigandInput, receptor: ReceptorContext, keep_hydrogens: bool) -> list[Finding]:
    found, ligand = _ligand_findings(item, keep_hydrogens)
    if errors_of(found):  # a broken pose makes contacts meaningless
        return found
    return found + receptor.findings + contact_findings(ligand, receptor.heavy_coords, receptor.heavy_elements,
                                                        item.source)


def _graph_atoms(graph: BlockGraph, mask, symbols: Sequence[str]) -> tuple[np.ndarray, list[str]]:
    """[K, 3] heavy-atom coordinates (Å) and elements of the atoms of ``graph`` selected by ``mask`` ([N] bool)."""
    return _heavy(graph.X[mask].double().numpy(), [symbols[i] for i in np.flatnonzero(mask.numpy())])


def _graph_findings(graph: BlockGraph, item: LigandInput) -> list[Finding]:
    """Geometry and contact checks of a complex built from one file (ligand residue or partner chains)."""
    ligand = ligand_atom_mask(graph)
    receptor = (graph.segment[graph.block_id] == 0) & ~graph.is_global[graph.block_id]
    symbols = [atom_symbol(int(a)) for a in graph.A]
    ligand_coords, ligand_elements = _graph_atoms(graph, ligand, symbols)
    found = ligand_geometry_findings(ligand_coords, item.source)
    if item.resname is not None:  # a chain group is a protein partner by design
        found += ligand_size_findings(len(ligand_elements), 0, item.source)
    if errors_of(found):
        return found
    return found + contact_findings(ligand_coords, *_graph_atoms(graph, receptor, symbols), source=item.source)


def checked_complex(item: LigandInput, receptor: Callable[[], ReceptorContext], build: Callable[[], BlockGraph],
                    domain: ApplicabilityDomain, keep_hydrogens: bool) -> tuple[BlockGraph, list[Finding]]:
    """Check one input, build its complex with ``build()``, and return it with its warning findings.

    Args:
        receptor: gives the receptor's :class:`ReceptorContext` (made once by the caller) for file/molecule ligands.
        build: builds the complex graph (only called when the checks before building pass).
        domain: the model's applicability domain.

    Raises:
        InputCheckError: an input check failed (the message lists every failure).
        GeomolError subclasses: the ligand or receptor cannot be read, or the graph built.
    """
    found: list[Finding] = []
    if item.graph is None and not item.in_receptor_file:
        found = _before_building(item, receptor(), keep_hydrogens)
        raise_errors(found)
    graph = build()
    if item.in_receptor_file:
        found += _graph_findings(graph, item)
        raise_errors(found)
    elements, n_heavy = ligand_summary(graph)
    found += domain.ligand_findings(elements, n_heavy, item.source)
    found += domain.receptor_findings(graph_receptor_kind(graph), item.source)
    return graph, warnings_of(found)
