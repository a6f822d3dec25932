"""Decoy complexes keep the pocket and move, turn or replace the ligand, as their names say."""
import math

import pytest
import torch
from torch_geometric.data import Batch

from geomol.data import complex_from_files
from geomol.data.posing.decoys import decoy_batch, random_rotation, shift_ligand, swap_ligand, turn_ligand
from geomol.data.io import read_ligands
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"


@pytest.fixture(scope="module")
def graphs():
    ligands = read_ligands(EXAMPLE / "tnks2_ligands.sdf")[:3]
    out = [complex_from_files(EXAMPLE / "tnks2_protein.pdb", mol, y=6.0 + i) for i, mol in enumerate(ligands)]
    for i, g in enumerate(out):
        g.series = "tnks2" if i < 2 else "other"
    return out


def _parts(graph):
    ligand = graph.segment[graph.block_id] == 1
    return graph.X[~ligand].double(), graph.X[ligand].double()


def _internal(X):
    return torch.cdist(X, X)


def test_random_rotation_is_proper_and_respects_the_minimum_angle():
    generator = torch.Generator().manual_seed(0)
    for _ in range(20):
        R = random_rotation(generator, min_angle=math.pi / 2)
        assert torch.allclose(R @ R.T, torch.eye(3, dtype=torch.float64), atol=1e-12)
        assert torch.det(R).item() == pytest.approx(1.0)
        assert math.acos((torch.trace(R).item() - 1) / 2) >= math.pi / 2 - 1e-9


def test_shift_moves_the_ligand_rigidly_by_4_to_8_angstrom(graphs):
    generator = torch.Generator().manual_seed(1)
    graph = graphs[0]
    decoy = shift_ligand(graph, generator)
    pocket, ligand = _parts(graph)
    pocket_d, ligand_d = _parts(decoy)
    assert torch.equal(pocket, pocket_d)
    moves = ligand_d - ligand
    assert torch.allclose(moves, moves[:1].expand_as(moves), atol=1e-5)
    assert 4.0 - 1e-5 <= moves[0].norm().item() <= 8.0 + 1e-5
    assert torch.equal(decoy.A, graph.A) and torch.equal(decoy.y, graph.y)


def test_turn_keeps_the_centroid_and_shape_but_moves_the_atoms(graphs):
    graph = graphs[1]
    decoy = turn_ligand(graph, torch.Generator().manual_seed(2))
    _, ligand = _parts(graph)
    _, turned = _parts(decoy)
    assert torch.allclose(turned.mean(0), ligand.mean(0), atol=1e-4)
    assert torch.allclose(_internal(turned), _internal(ligand), atol=1e-4)
    assert (turned - ligand).norm(dim=1).mean() > 1.0


def test_swap_puts_another_ligand_into_this_pocket(graphs):
    graph, donor = graphs[0], graphs[2]
    decoy = swap_ligand(graph, donor, torch.Generator().manual_seed(3))
    pocket, ligand = _parts(graph)
    pocket_d, swapped = _parts(decoy)
    _, donor_ligand = _parts(donor)
    assert torch.equal(pocket_d, pocket)
    assert torch.allclose(_internal(swapped), _internal(donor_ligand), atol=1e-4)
    assert torch.allclose(swapped.mean(0), ligand.mean(0), atol=1e-4)
    assert torch.equal(decoy.ligand_morgan, donor.ligand_morgan) and torch.equal(decoy.y, graph.y)
    assert decoy.block_id[-1].item() == decoy.B.numel() - 1 and int(decoy.block_len.sum()) == decoy.X.size(0)
    assert torch.equal(decoy.segment, torch.sort(decoy.segment).values)


def test_decoy_batch_pairs_each_decoy_with_its_complex_and_prefers_other_series(graphs):
    batch = Batch.from_data_list(graphs)
    decoys, origin = decoy_batch(batch, ["swap"], fraction=1.0, generator=torch.Generator().manual_seed(4))
    assert origin.tolist() == [0, 1, 2] and decoys.num_graphs == 3
    donors_heavy = decoys.ligand_descriptors[:, 0].tolist()
    heavy = batch.ligand_descriptors[:, 0].tolist()
    assert donors_heavy[0] == heavy[2] and donors_heavy[1] == heavy[2]  # tnks2 ligands get the other series'
    half, origin = decoy_batch(batch, ["shift", "turn"], fraction=0.5, generator=torch.Generator().manual_seed(5))
    assert half.num_graphs == 2 and len(set(origin.tolist())) == 2
    with pytest.raises(ValueError, match="decoy kinds"):
        decoy_batch(batch, ["jiggle"])
