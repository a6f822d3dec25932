"""Per-atom ligand–receptor contact features: hand-computed values, E(3) invariance, real complexes."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from geomol.data import complex_from_files
from geomol.data.chemistry.contact_features import (ATOM_CONTACT_FEATURES, RADIAL_CONTACT_FEATURES, RECEPTOR_CLASSES,
                                          atom_contact_features, contact_pairs, graph_atom_contacts, graph_ligand_bonds,
                                          graph_pose_contacts, ligand_bond_pairs, ligand_frame, ligand_heavy_atoms,
                                          radial_contact_features, receptor_classes, rigid_moves)
from geomol.errors import EmptySelectionError
from geomol.testing import apply_e3, random_e3
from tests.builders import plb_target

COLUMN = {name: i for i, name in enumerate(ATOM_CONTACT_FEATURES)}


def test_hand_computed_pair_terms():
    # ligand: an N at the origin and a C 20 Å away (no contact); receptor: an O at 2.9 Å, a C at 5 Å of the N
    ligand_z, ligand_xyz = np.array([7, 6]), np.array([[0.0, 0, 0], [20.0, 0, 0]])
    receptor_z, receptor_xyz = np.array([8, 6]), np.array([[0.0, 2.9, 0], [0.0, 0, 5.0]])
    rows = atom_contact_features(receptor_z, receptor_xyz, ligand_z, ligand_xyz)
    nitrogen, carbon = rows
    s_o, s_c = 2.9 - 1.8 - 1.7, 5.0 - 1.8 - 1.9  # surface distances, Å
    assert nitrogen[COLUMN["lig_N"]] == 1 and nitrogen[COLUMN["near_O"]] == 1 and nitrogen[COLUMN["shell_C"]] == 1
    assert nitrogen[COLUMN["near_C"]] == 0 and nitrogen[COLUMN["burial"]] == 2
    assert nitrogen[COLUMN["gauss1"]] == pytest.approx(math.exp(-(s_o / 0.5) ** 2) + math.exp(-(s_c / 0.5) ** 2))
    assert nitrogen[COLUMN["repulsion"]] == pytest.approx(s_o ** 2)
    assert nitrogen[COLUMN["polar"]] == pytest.approx(-s_o / 0.7)  # N against O counts; N against C does not
    assert nitrogen[COLUMN["hydrophobic"]] == 0  # N is not hydrophobic
    assert carbon[COLUMN["lig_C"]] == 1 and carbon[6:].sum() == 0  # nothing within 8 Å


def test_hydrophobic_term_and_metals():
    rows = atom_contact_features(np.array([6, 30]), np.array([[4.0, 0, 0], [0, 0, 3.0]]), np.array([17]),
                                 np.zeros((1, 3)))
    assert rows[0, COLUMN["lig_ClBrI"]] == 1 and rows[0, COLUMN["near_other"]] == 1  # the zinc
    assert rows[0, COLUMN["hydrophobic"]] == pytest.approx(np.clip(1.5 - (4.0 - 1.8 - 1.9), 0, 1))


def test_receptor_classes_and_radial_shells():
    # roles: donor, acceptor, cation, anion, aromatic
    roles = np.array([[1, 0, 0, 0, 0], [0, 1, 0, 0, 0], [1, 1, 0, 0, 0], [0, 1, 0, 1, 0], [1, 0, 1, 0, 0],
                      [0, 0, 0, 0, 1], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0], [0, 0, 0, 0, 0]], dtype=bool)
    z = np.array([7, 8, 8, 8, 7, 6, 6, 16, 30])
    classes = [RECEPTOR_CLASSES[c] for c in receptor_classes(roles, z)]
    assert classes == ["donor", "acceptor", "donor_acceptor", "anion", "cation", "aromatic_carbon", "carbon",
                       "sulfur", "other"]
    # ligand atom 0: the donor N at 2.9 Å, the ring carbon at 4.5 Å; atom 1: the zinc at 3.3 Å (the next shell's
    # lower edge) and at 6.5 Å (past the last edge: not counted)
    receptor_xyz = np.zeros((9, 3))
    receptor_xyz[0], receptor_xyz[5], receptor_xyz[8] = [2.9, 0, 0], [0, 4.5, 0], [20.0, 3.3, 0]
    ligand_xyz = np.array([[0.0, 0, 0], [20.0, 0, 0]])
    receptor_xyz[[1, 2, 3, 4, 6, 7]] = [40.0, 40, 40]  # out of reach
    rows = radial_contact_features(receptor_classes(roles, z), 2, contact_pairs(ligand_xyz, receptor_xyz))
    column = {name: i for i, name in enumerate(RADIAL_CONTACT_FEATURES)}
    assert rows.shape == (2, len(RECEPTOR_CLASSES) * 4) and rows.sum() == 3
    assert rows[0, column["donor_0_3.3"]] == 1 and rows[0, column["aromatic_carbon_4_5"]] == 1
    assert rows[1, column["other_3.3_4"]] == 1


@pytest.fixture(scope="module")
def cdk2_graph():
    protein, mols = plb_target("cdk2", 1)
    graph = complex_from_files(protein, mols[0], pocket_cutoff=10.0)
    graph.X = graph.X.double()  # float64, so that invariance is checked to 1e-9
    return graph, mols[0]


def test_real_complex_one_row_per_ligand_heavy_atom(cdk2_graph):
    graph, mol = cdk2_graph
    rows = graph_atom_contacts(graph)
    assert rows.shape == (mol.GetNumHeavyAtoms(), len(ATOM_CONTACT_FEATURES))
    assert (rows[:, :6].sum(1) == 1).all() and (rows[:, 6:] >= 0).all()
    assert (rows[:, COLUMN["burial"]] > 0).all()  # a bound ligand: every atom has receptor atoms within 6 Å
    # bonds perceived from the pose are RDKit's bonds of the SDF record
    heavy = [atom for atom in mol.GetAtoms() if atom.GetAtomicNum() > 1]
    assert rows[:, COLUMN["degree"]].tolist() == [sum(n.GetAtomicNum() > 1 for n in a.GetNeighbors())
                                                  for a in heavy]
    assert rows[:, COLUMN["hetero_bonds"]].tolist() == [sum(n.GetAtomicNum() in (7, 8) for n in a.GetNeighbors())
                                                        for a in heavy]


def test_ligand_bonds_are_the_sdf_bonds_in_contact_row_order(cdk2_graph):
    graph, mol = cdk2_graph
    bonds = graph_ligand_bonds(graph)
    heavy = [atom.GetIdx() for atom in mol.GetAtoms() if atom.GetAtomicNum() > 1]
    row_of = {idx: row for row, idx in enumerate(heavy)}
    expected = {tuple(sorted((row_of[b.GetBeginAtomIdx()], row_of[b.GetEndAtomIdx()]))) for b in mol.GetBonds()
                if b.GetBeginAtomIdx() in row_of and b.GetEndAtomIdx() in row_of}
    assert {tuple(pair) for pair in bonds.tolist()} == expected and (bonds[:, 0] < bonds[:, 1]).all()
    # a C–C–O chain 1.5 and 1.43 Å apart, and a carbon 3 Å away from both: two bonds; fewer than two atoms: none
    chain = np.array([[0.0, 0, 0], [1.5, 0, 0], [2.93, 0, 0], [1.5, 3.0, 0]])
    assert ligand_bond_pairs(np.array([6, 6, 8, 6]), chain).tolist() == [[0, 1], [1, 2]]
    assert ligand_bond_pairs(np.array([6]), chain[:1]).shape == (0, 2)


@pytest.mark.parametrize("chemistry", [False, True], ids=["elements", "roles"])
@pytest.mark.parametrize("reflect", [False, True])
def test_invariant_to_rotations_reflections_translations(cdk2_graph, reflect, chemistry):
    graph, _ = cdk2_graph
    moved = graph.clone()
    q, t = random_e3(reflect, generator=torch.Generator().manual_seed(3))
    moved.X = apply_e3(graph.X, q, t)
    np.testing.assert_allclose(graph_atom_contacts(moved, chemistry), graph_atom_contacts(graph, chemistry),
                               rtol=1e-9, atol=1e-9)


def test_radial_shells_of_a_real_complex(cdk2_graph):
    graph, _ = cdk2_graph
    shells, rows = graph_atom_contacts(graph, radial=True)[:, len(ATOM_CONTACT_FEATURES):], graph_atom_contacts(graph)
    assert shells.shape == (len(rows), len(RADIAL_CONTACT_FEATURES))
    # the shells up to 6.5 Å hold every receptor atom within 6 Å (burial) and none beyond 6.5 Å
    assert (shells.sum(1) >= rows[:, COLUMN["burial"]]).all() and shells.sum() > rows[:, COLUMN["burial"]].sum()
    moved = graph.clone()
    q, t = random_e3(True, generator=torch.Generator().manual_seed(5))
    moved.X = apply_e3(graph.X, q, t)
    np.testing.assert_array_equal(graph_atom_contacts(moved, radial=True)[:, len(ATOM_CONTACT_FEATURES):], shells)


def test_rigid_moves_are_proper_rotations_and_shifts_of_the_asked_spread():
    rotations, shifts = rigid_moves(4000, 0.3, 8.0, seed=1)
    assert rotations.shape == (8000, 3, 3) and shifts.shape == (8000, 3)
    np.testing.assert_allclose(rotations @ rotations.transpose(0, 2, 1), np.broadcast_to(np.eye(3), rotations.shape),
                               atol=1e-12)
    np.testing.assert_allclose(np.linalg.det(rotations), 1.0, atol=1e-12)
    angles = np.degrees(np.arccos(np.clip((np.trace(rotations, axis1=1, axis2=2) - 1) / 2, -1, 1)))
    assert abs(np.sqrt(np.mean(angles ** 2)) - 8.0) < 0.3 and abs(shifts.std() - 0.3) < 0.01  # |N(0, 8°)|, N(0, 0.3 Å)
    mirror = np.diag([1.0, 1.0, -1.0])  # the second half mirrors the first through the frame's third axis
    np.testing.assert_allclose(rotations[4000:], mirror @ rotations[:4000] @ mirror)
    np.testing.assert_allclose(shifts[4000:], shifts[:4000] @ mirror)
    again = rigid_moves(4000, 0.3, 8.0, seed=1)
    assert np.array_equal(again[0], rotations) and np.array_equal(again[1], shifts)
    still = rigid_moves(3, 0.0, 0.0)
    assert np.array_equal(still[0], np.broadcast_to(np.eye(3), (6, 3, 3))) and not still[1].any()


def test_ligand_frame_turns_with_the_ligand(cdk2_graph):
    graph, _ = cdk2_graph
    xyz = graph.X[ligand_heavy_atoms(graph)].numpy()
    frame = ligand_frame(xyz)
    np.testing.assert_allclose(frame.T @ frame, np.eye(3), atol=1e-12)
    assert np.linalg.det(frame) == pytest.approx(1.0)
    spread = np.var((xyz - xyz.mean(0)) @ frame, axis=0)
    assert spread[0] >= spread[1] >= spread[2]
    q, t = (x.numpy() for x in random_e3(False, generator=torch.Generator().manual_seed(4)))
    np.testing.assert_allclose(ligand_frame(xyz @ q.T + t), q @ frame, atol=1e-9)


@pytest.mark.parametrize("chemistry", [False, True], ids=["elements", "roles"])
def test_pose_contacts_are_the_rows_of_the_moved_ligand(cdk2_graph, chemistry):
    graph, _ = cdk2_graph
    moves = rigid_moves(2, 0.5, 15.0, seed=2)
    poses = graph_pose_contacts(graph, chemistry, radial=True, moves=moves)
    assert len(poses) == 5
    np.testing.assert_array_equal(poses[0], graph_atom_contacts(graph, chemistry, radial=True))
    ligand = ligand_heavy_atoms(graph)
    centre, frame = graph.X[ligand].mean(0), torch.from_numpy(ligand_frame(graph.X[ligand].numpy()))
    for (rotation, shift), rows in zip(zip(*moves), poses[1:]):
        moved = graph.clone()
        moved.X = graph.X.clone()
        turn = frame @ torch.from_numpy(rotation) @ frame.T
        moved.X[ligand] = (graph.X[ligand] - centre) @ turn.T + centre + frame @ torch.from_numpy(shift)
        np.testing.assert_allclose(rows, graph_atom_contacts(moved, chemistry, radial=True), rtol=1e-9, atol=1e-9)
        assert not np.allclose(rows, poses[0])  # the contacts changed, the bonds (rigid move) did not
        np.testing.assert_array_equal(rows[:, [COLUMN["degree"], COLUMN["hetero_bonds"]]],
                                      poses[0][:, [COLUMN["degree"], COLUMN["hetero_bonds"]]])
    np.testing.assert_allclose(graph_atom_contacts(graph, chemistry, radial=True, moves=moves), np.mean(poses, axis=0))
    np.testing.assert_allclose(graph_atom_contacts(graph, chemistry, moves=rigid_moves(2, 0.0, 0.0)),
                               graph_atom_contacts(graph, chemistry), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("reflect", [False, True])
def test_rows_over_moved_poses_are_invariant(cdk2_graph, reflect):
    """The moves live in the ligand's frame and come in mirror pairs: the averaged rows are E(3)-invariant."""
    graph, _ = cdk2_graph
    moved = graph.clone()
    q, t = random_e3(reflect, generator=torch.Generator().manual_seed(6))
    moved.X = apply_e3(graph.X, q, t)
    moves = rigid_moves(3, 0.4, 12.0)
    np.testing.assert_allclose(graph_atom_contacts(moved, True, moves=moves),
                               graph_atom_contacts(graph, True, moves=moves), rtol=1e-9, atol=1e-9)


def test_graph_without_ligand_atoms_is_an_error(cdk2_graph):
    graph, _ = cdk2_graph
    receptor_only = graph.clone()
    receptor_only.segment = torch.zeros_like(graph.segment)
    with pytest.raises(EmptySelectionError, match="no ligand heavy atom"):
        graph_atom_contacts(receptor_only)
