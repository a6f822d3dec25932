"""The bond-restoring projection: exact on a hand-computed pair, converges on a real backbone, commutes with
E(3), keeps the centroid, and splits the bonds into groups without a shared atom."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.chemistry.trajectory import bond_lengths
from geomol.errors import ConfigError
from geomol.inference.dynamics.bond_restoring import BondRestoring, bond_groups
from geomol.testing import POSITION, assert_equivariant


def test_a_stretched_pair_is_pulled_back_symmetrically():
    graph = CovalentGraph.from_bonds([(0, 1)], ["C", "C"])
    restoring = BondRestoring(graph, np.array([[0.0, 0, 0], [1.0, 0, 0]]))
    restored = restoring(torch.tensor([[[0.0, 0, 0], [2.0, 0, 0]]], dtype=torch.float64))
    # 1 Å too long: each atom moves 0.5 Å towards the other, in one sweep
    assert torch.allclose(restored, torch.tensor([[[0.5, 0, 0], [1.5, 0, 0]]], dtype=torch.float64))
    assert restoring.sweeps == 1 and restoring.residual < 1e-12


@pytest.fixture(scope="module")
def backbone():
    datafiles = pytest.importorskip("MDAnalysisTests.datafiles")
    from geomol.data.io.trajectory import open_selection

    _, atoms = open_selection(datafiles.PSF, datafiles.DCD, "backbone")
    positions = atoms.positions.astype(np.float64)
    return CovalentGraph.of_selection(atoms, positions), positions


def test_a_noisy_backbone_gets_its_bond_lengths_back(backbone):
    graph, start = backbone
    noisy = torch.as_tensor(start + np.random.default_rng(0).normal(scale=0.15, size=(2, *start.shape)))
    restoring = BondRestoring(graph, start, tolerance=1e-4)
    restored = restoring(noisy.float())  # float32 in, float32 out
    assert restored.dtype == torch.float32 and restored.shape == noisy.shape
    error = (bond_lengths(restored.double(), graph.bonds) - bond_lengths(start, graph.bonds)).abs()
    assert float(error.max()) < 2e-4 and restoring.residual < 1e-4
    assert float((bond_lengths(noisy, graph.bonds) - bond_lengths(start, graph.bonds)).abs().max()) > 0.3
    assert torch.allclose(restored.double().mean(1), noisy.float().double().mean(1), atol=1e-4)  # centroids kept
    assert restoring.sweeps < 100


def test_restoring_commutes_with_rotations_reflections_and_translations(backbone):
    graph, start = backbone
    first = 60  # a stretch of backbone keeps the check fast
    keep = (graph.bonds < first).all(1)
    small = CovalentGraph.from_bonds(graph.bonds[keep], ["C"] * first)
    noisy = torch.as_tensor(start[:first] + np.random.default_rng(1).normal(scale=0.2, size=(first, 3)))
    reference = torch.as_tensor(start[:first])

    def restore(x, ref):
        return {"x": BondRestoring(small, ref, tolerance=1e-10, max_sweeps=2000)(x)}

    assert_equivariant(restore, {"x": (noisy, POSITION), "ref": (reference, POSITION)}, {"x": POSITION}, atol=1e-7)


def test_bond_groups_share_no_atom_and_cover_every_bond(backbone):
    graph, _ = backbone
    groups = bond_groups(graph.bonds, graph.num_atoms)
    assert sorted(np.concatenate(groups).tolist()) == list(range(len(graph.bonds)))
    for group in groups:
        atoms = graph.bonds[group].ravel()
        assert len(np.unique(atoms)) == len(atoms)
    assert len(groups) <= 4  # a backbone atom has at most three bonds


def test_no_bonds_or_bad_settings_raise():
    with pytest.raises(ConfigError, match="needs bonds"):
        BondRestoring(CovalentGraph.from_bonds(np.zeros((0, 2)), ["C", "C"]), np.zeros((2, 3)))
    with pytest.raises(ConfigError, match="tolerance"):
        BondRestoring(CovalentGraph.from_bonds([(0, 1)], ["C", "C"]), np.eye(2, 3), tolerance=0)
