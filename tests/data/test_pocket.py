"""Pocket and interface selection against brute force (scipy cKDTree)."""
import numpy as np
import pytest
from scipy.spatial import cKDTree

from geomol.data import Block, select_interface, select_pocket
from geomol.data.complexes.pocket import atoms_within
from geomol.data.io.structure import distance_mask
from geomol.errors import ConfigError, EmptySelectionError


def _reference(atoms, partner, cutoff):
    hits = cKDTree(partner).query_ball_point(atoms, cutoff)
    return np.array([len(h) > 0 for h in hits])


@pytest.mark.parametrize("max_pairs", [7, 500, 1 << 21])
def test_atoms_within_matches_kdtree(max_pairs):
    rng = np.random.default_rng(0)
    atoms = rng.uniform(-40, 40, size=(3000, 3))  # more than one chunk of consecutive atoms
    partner = rng.uniform(-8, 8, size=(120, 3))
    for cutoff in (0.0, 3.5, 10.0):
        np.testing.assert_array_equal(atoms_within(atoms, partner, cutoff, max_pairs=max_pairs),
                                      _reference(atoms, partner, cutoff))


def test_cutoff_is_inclusive_and_validated():
    partner = np.zeros((1, 3))
    atoms = np.array([[10.0, 0, 0], [10.000001, 0, 0], [0, 6.0, 8.0]])
    assert atoms_within(atoms, partner, 10.0).tolist() == [True, False, True]
    assert atoms_within(np.zeros((0, 3)), partner, 10.0).shape == (0,)
    with pytest.raises(ConfigError):
        atoms_within(atoms, partner, -1.0)


def test_hydrogen_only_blocks_use_their_hydrogens():
    is_heavy = np.array([True, False, False, True])
    atom_block = np.array([0, 0, 1, 2])
    assert distance_mask(is_heavy, atom_block, 3).tolist() == [True, False, True, True]


def _block(symbol, elements, coords, label):
    return Block(symbol, tuple(elements), ("",) * len(elements), np.asarray(coords, float), label=label)


def test_select_pocket_counts_heavy_atoms_only():
    receptor = [_block("A", "CH", [[0, 0, 0], [0, 0, 9]], "near-by-hydrogen-only"),
                _block("G", "C", [[0, 0, 9.5]], "near"),
                _block("h", "H", [[0, 0, 9.9]], "lone-hydrogen")]
    ligand = [_block("c", "C", [[0, 0, 19.5]], "lig"), _block("h", "H", [[0, 0, 10]], "lig-h")]
    # the ligand hydrogen does not count; the receptor's lone hydrogen is measured by itself
    assert [b.label for b in select_pocket(receptor, ligand, 10.0)] == ["near", "lone-hydrogen"]
    with pytest.raises(EmptySelectionError, match="complex.pdb: pocket is empty"):
        select_pocket(receptor, ligand, 5.0, source="complex.pdb")


def test_select_interface_both_sides():
    side_a = [_block("A", "C", [[x, 0, 0]], f"a{x}") for x in range(0, 30, 5)]
    side_b = [_block("G", "C", [[x, 4, 0]], f"b{x}") for x in range(20, 50, 5)]
    a, b = select_interface(side_a, side_b, 4.5)
    assert [x.label for x in a] == ["a20", "a25"] and [x.label for x in b] == ["b20", "b25"]
    with pytest.raises(EmptySelectionError, match="interface is empty"):
        select_interface(side_a, side_b, 1.0)
