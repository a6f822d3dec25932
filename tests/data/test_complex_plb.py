"""Every protein–ligand complex of the shared PLB benchmark, checked against independent counts.

Each protein is parsed once (module fixture); atom/residue counts are compared with MDAnalysis,
ligand atoms with RDKit, and each pocket with a brute-force scipy cKDTree search.
"""
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from rdkit import Chem
from scipy.spatial import cKDTree
from torch_geometric.data import Batch

from geomol.data import (
    BlockGraph,
    StructureWarning,
    complex_from_files,
    complex_from_structure,
    ligand_blocks,
    pocket_blocks,
    read_ligands,
    read_structure,
)
from geomol.data.vocab import BLOCK_GLOBAL, VOCAB, atom_index, residue_block_symbol
from tests.conftest import shared_path

CUTOFF = 10.0
WATERS = "HOH WAT"


def _targets() -> list[Path]:
    root = shared_path("plb")
    return sorted(p for p in root.iterdir() if (p / "01_protein/crd/protein.pdb").exists())


@pytest.fixture(scope="module")
def plb():
    """target name → (protein path, Structure, ligand molecules); these clean files warn about nothing."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", StructureWarning)
        return {t.name: (t / "01_protein/crd/protein.pdb", read_structure(t / "01_protein/crd/protein.pdb"),
                         read_ligands(t / "02_ligands/ligands.sdf")) for t in _targets()}


def _mda_heavy_atoms(path: Path):
    import MDAnalysis as mda

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        universe = mda.Universe(str(path))
    return universe.select_atoms(f"not resname {WATERS} and not element H")


def _label(atom) -> str:
    """Our block label of an MDAnalysis atom: residue blocks, or per-atom blocks for the rest."""
    residue = f"{atom.chainID}:{atom.resid}{atom.icode}:{atom.resname}"
    return residue if residue_block_symbol(atom.resname) else f"{residue}:{atom.name}"


def test_ten_targets_247_ligands(plb):
    assert len(plb) == 10
    assert sum(len(mols) for _, _, mols in plb.values()) == 247


def test_protein_counts_match_mdanalysis(plb):
    for path, structure, _ in plb.values():
        heavy = _mda_heavy_atoms(path)
        assert structure.num_atoms == heavy.n_atoms, path
        residues = {(a.chainID, a.resid, a.icode) for a in heavy}
        assert structure.num_residues == len(residues), path
        assert structure.num_blocks == len({_label(a) for a in heavy}), path
        ours, theirs = structure.coords, heavy.positions.astype(np.float64)  # same atoms, maybe not same order
        np.testing.assert_allclose(ours[np.lexsort(ours.T)], theirs[np.lexsort(theirs.T)], atol=1e-3)


def test_every_complex_against_brute_force(plb):
    for target, (path, structure, mols) in plb.items():
        heavy = _mda_heavy_atoms(path)
        tree = cKDTree(heavy.positions.astype(np.float64))
        labels = np.array([_label(a) for a in heavy])
        for mol in mols:
            ligand = ligand_blocks(mol)
            coords = mol.GetConformer().GetPositions()[[a.GetAtomicNum() > 1 for a in mol.GetAtoms()]]
            assert len(ligand) == Chem.RemoveHs(mol).GetNumAtoms() == len(coords)
            near = sorted({i for hits in tree.query_ball_point(coords, CUTOFF) for i in hits})
            expected = set(labels[near])
            pocket = pocket_blocks(structure, ligand, CUTOFF)
            assert {b.label for b in pocket} == expected, (target, mol.GetProp("_Name"))
            assert len(pocket) == len(expected)
            graph = complex_from_structure(structure, mol, pocket_cutoff=CUTOFF)
            _check_graph(graph, pocket, ligand, mol)


def _check_graph(graph: BlockGraph, pocket, ligand, mol):
    summary = graph.segment_summary()
    assert summary == [{"segment": 0, "blocks": len(pocket), "atoms": sum(len(b) for b in pocket)},
                       {"segment": 1, "blocks": len(ligand), "atoms": len(ligand)}]
    assert graph.num_blocks == len(pocket) + len(ligand) + 2
    assert int(graph.is_global.sum()) == 2
    heavy = [a.GetSymbol() for a in mol.GetAtoms() if a.GetAtomicNum() > 1]
    assert graph.B[graph.segment == 1][1:].tolist() == [VOCAB.index(e.lower()) for e in heavy]
    assert graph.A[graph.atom_segment == 1][1:].tolist() == [atom_index(e) for e in heavy]
    assert torch.all(graph.atom_pos[graph.atom_segment == 1][1:] == 13)  # 'sm'


def test_one_call_equals_cached_path(plb):
    target = "cdk2" if "cdk2" in plb else next(iter(plb))
    path, structure, mols = plb[target]
    sdf = path.parents[2] / "02_ligands/ligands.sdf"
    name = mols[3].GetProp("_Name")
    for which in (3, name):
        one = complex_from_files(path, sdf, ligand_index=which, y=6.5)
        cached = complex_from_structure(structure, mols[3], y=6.5)
        for key in ("X", "A", "atom_pos", "block_id", "B", "block_len", "segment", "y"):
            assert torch.equal(one[key], cached[key]), key


def test_batch_of_eight_real_complexes_splits_back(plb):
    graphs = [complex_from_structure(structure, mols[0], y=float(i))
              for i, (_, structure, mols) in enumerate(list(plb.values())[:8])]
    batch = Batch.from_data_list(graphs)
    assert batch.num_graphs == 8
    assert int(batch.block_id.max()) == batch.B.numel() - 1
    assert torch.all(batch.block_id[1:] >= batch.block_id[:-1])
    counts = torch.bincount(batch.block_id, minlength=batch.B.numel())
    assert torch.equal(counts, batch.block_len)
    assert torch.equal(torch.bincount(batch.block_batch), torch.tensor([g.num_blocks for g in graphs]))
    assert int((batch.B == BLOCK_GLOBAL).sum()) == 16
    for original, restored in zip(graphs, batch.to_data_list()):
        for key in ("X", "A", "atom_pos", "block_id", "B", "block_len", "segment", "y"):
            assert torch.equal(original[key], restored[key]), key
