"""Ligand-only features: Morgan counts and descriptors on molecules whose values are known by hand."""
from __future__ import annotations

import numpy as np
import pytest

from geomol.data.chemistry.ligand_features import (
    DESCRIPTOR_NAMES,
    LigandFeaturizer,
    heavy_atom_count,
    ligand_descriptors,
    molecule_from_smiles,
    morgan_counts,
)
from geomol.errors import InvalidSmilesError


def _descriptors(smiles: str) -> dict[str, float]:
    return dict(zip(DESCRIPTOR_NAMES, ligand_descriptors(molecule_from_smiles(smiles))))


def test_descriptors_of_phenol_ethanol_and_acetate():
    phenol = _descriptors("Oc1ccccc1")
    assert phenol["heavy_atoms"] == 7 and phenol["h_bond_donors"] == 1 and phenol["h_bond_acceptors"] == 1
    assert phenol["rings"] == 1 and phenol["aromatic_rings"] == 1 and phenol["rotatable_bonds"] == 0
    assert phenol["fraction_sp3"] == 0 and phenol["formal_charge"] == 0
    assert phenol["mol_weight"] == pytest.approx(94.11, abs=0.01)
    assert phenol["tpsa"] == pytest.approx(20.23, abs=0.01)  # one aromatic-bound OH
    assert _descriptors("CCO")["fraction_sp3"] == 1.0
    acetate = _descriptors("CC(=O)[O-]")
    assert acetate["formal_charge"] == -1 and acetate["rings"] == 0
    assert _descriptors("c1ccccc1CCc1ccccc1")["rotatable_bonds"] == 3  # ring-CH2, CH2-CH2, CH2-ring
    assert heavy_atom_count("CC(=O)Nc1ccc(O)cc1") == 11


def test_radius_zero_counts_are_atom_environments():
    # radius 0: one environment per heavy atom; benzene's six identical carbons share one count
    benzene = morgan_counts(molecule_from_smiles("c1ccccc1"), radius=0, n_bits=64)
    assert benzene.sum() == 6 and benzene.max() == 6
    phenol = morgan_counts(molecule_from_smiles("Oc1ccccc1"), radius=0, n_bits=2048)
    assert phenol.sum() == 7 and sorted(phenol[phenol > 0]) == [1, 1, 5]  # O, ipso C, five CH
    # radius 2 adds the larger environments: more counts than atoms
    assert morgan_counts(molecule_from_smiles("Oc1ccccc1"), radius=2).sum() > 7


def test_featurizer_matrix_layout_and_reuse():
    featurizer = LigandFeaturizer(n_bits=128)
    smiles = ["Oc1ccccc1", "CCO", "Oc1ccccc1"]
    matrix = featurizer.matrix(smiles)
    assert matrix.shape == (3, 128 + len(DESCRIPTOR_NAMES))
    assert featurizer.feature_names[128] == "heavy_atoms" and len(featurizer.feature_names) == matrix.shape[1]
    assert matrix[:, 128].tolist() == [7, 3, 7]
    np.testing.assert_array_equal(matrix[0], matrix[2])
    assert featurizer.features("Oc1ccccc1") is featurizer.features("Oc1ccccc1")  # featurised once


def test_unkekulisable_ring_still_featurised_and_bad_smiles_named():
    # a pyrrole written without its N-H cannot be kekulised; its graph still gives counts and descriptors
    row = LigandFeaturizer(n_bits=64).features("c1cc[n]c1")
    assert row[64] == 5 and row[64 + DESCRIPTOR_NAMES.index("rings")] == 1
    with pytest.raises(InvalidSmilesError, match="series/lig_3.*not-a-smiles"):
        LigandFeaturizer().matrix(["CCO", "not-a-smiles"], ["series/lig_1", "series/lig_3"])


def test_complex_graphs_carry_the_ligand_chemistry_of_its_smiles():
    """An SDF ligand with explicit hydrogens gets the descriptors and Morgan counts of its SMILES; a ligand
    without bonds (PDB records) gets NaN descriptors and no counts, and both kinds batch together."""
    import torch
    from rdkit import Chem
    from torch_geometric.data import Batch

    from geomol.data import complex_from_files
    from geomol.data.io import read_ligands
    from geomol.data.chemistry.ligand_features import GRAPH_MORGAN_BITS, graph_ligand_features
    from tests.conftest import REPO

    example = REPO / "data" / "example"
    mol = read_ligands(example / "tnks2_ligands.sdf")[0]
    graph = complex_from_files(example / "tnks2_protein.pdb", mol)
    expected = LigandFeaturizer(n_bits=GRAPH_MORGAN_BITS).features(Chem.MolToSmiles(Chem.RemoveHs(mol)))
    assert graph.ligand_morgan.shape == (1, GRAPH_MORGAN_BITS) and graph.ligand_morgan.dtype.is_floating_point is False
    np.testing.assert_array_equal(graph.ligand_morgan[0].numpy(), expected[:GRAPH_MORGAN_BITS])
    np.testing.assert_allclose(graph.ligand_descriptors[0].numpy(), expected[GRAPH_MORGAN_BITS:], rtol=1e-6)

    missing = graph_ligand_features(None)
    assert np.isnan(missing["ligand_descriptors"]).all() and not missing["ligand_morgan"].any()
    other = graph.clone()
    other.ligand_descriptors = torch.from_numpy(missing["ligand_descriptors"])
    assert Batch.from_data_list([graph, other]).ligand_descriptors.shape == (2, len(DESCRIPTOR_NAMES))
