"""Atoms matched by the molecular graph: any order, with or without hydrogens; another molecule refused."""
from __future__ import annotations

import numpy as np
import pytest

from geomol.data.chemistry.molecule_frames import read_molecule_frames
from geomol.data.chemistry.molecule_graph import NODE_FEATURES, heavy_atom_graph, molecule_graph
from geomol.data.chemistry.molecule_matching import MoleculeTemplate, heavy_formula
from geomol.errors import MoleculeMismatchError
from geomol.simulate.molecules import starting_structure


def _template(name: str) -> tuple[MoleculeTemplate, np.ndarray]:
    """The heavy-atom template of an MD17 molecule's starting structure and its heavy positions [n, 3]."""
    s = starting_structure(name, seed=1)
    heavy, bonds, hydrogens = heavy_atom_graph(s.numbers, s.bonds)
    x = s.positions[heavy]
    lengths = np.linalg.norm(x[bonds[:, 0]] - x[bonds[:, 1]], axis=-1)
    return MoleculeTemplate(tuple(s.numbers[heavy].tolist()), tuple(map(tuple, bonds.tolist())),
                            tuple(lengths.tolist()), name, tuple(hydrogens.tolist())), s


def _write_xyz(path, numbers, positions) -> None:
    from geomol.data.vocab import ELEMENTS

    lines = [str(len(numbers)), "test"] + [f"{ELEMENTS[z - 1]} {x:.6f} {y:.6f} {w:.6f}"
                                            for z, (x, y, w) in zip(numbers, positions)]
    path.write_text("\n".join(lines) + "\n")


def test_formula_in_hill_order():
    assert heavy_formula([6, 8, 6, 1, 8, 7]) == "C2NO2"


@pytest.mark.parametrize("with_hydrogens", [True, False])
def test_a_permuted_file_is_matched_back_to_the_model_order(tmp_path, with_hydrogens):
    template, s = _template("aspirin")
    keep = np.arange(len(s.numbers)) if with_hydrogens else np.flatnonzero(s.numbers > 1)
    permutation = np.random.default_rng(0).permutation(len(keep))
    numbers, positions = s.numbers[keep][permutation], s.positions[keep][permutation]
    _write_xyz(tmp_path / "aspirin.xyz", numbers, positions)
    frames = read_molecule_frames(tmp_path / "aspirin.xyz")
    assert frames.bonds_source == "perceived"
    matched = template.match(frames.atomic_numbers, frames.bonds, frames.positions[0])
    heavy = np.flatnonzero(s.numbers > 1)
    np.testing.assert_allclose(frames.positions[0][matched], s.positions[heavy], atol=1e-5)


def test_symmetric_atoms_are_told_apart_by_bond_lengths():
    """Without hydrogens the two carboxylic oxygens of aspirin are graph-symmetric; the C=O is matched to the
    model's C=O (shorter) and not to its C–O."""
    template, s = _template("aspirin")
    heavy = np.flatnonzero(s.numbers > 1)
    _, bonds, _ = heavy_atom_graph(s.numbers, s.bonds)
    order = np.arange(len(heavy))
    o_double, o_single = 3, 8  # model order of the MD17 aspirin: atom 3 is the carboxyl C=O, 8 the O–H oxygen
    blind = []
    for swap in (False, True):
        order = np.arange(len(heavy))
        if swap:
            order[[o_double, o_single]] = order[[o_single, o_double]]
        expected = np.argsort(order)
        args = (s.numbers[heavy][order], expected[bonds])
        np.testing.assert_array_equal(template.match(*args, s.positions[heavy][order]), expected)
        blind.append(np.array_equal(template.match(*args), expected))
    assert not all(blind)  # the graph alone cannot tell the two oxygens apart


def test_another_molecule_is_refused_with_what_differs(tmp_path):
    template, _ = _template("aspirin")
    other = starting_structure("salicylic", seed=1)
    with pytest.raises(MoleculeMismatchError, match=r"heavy atoms are C7O3.*aspirin \(C9O4"):
        template.match(other.numbers, other.bonds, other.positions)
    ethanol = starting_structure("ethanol", seed=1)
    isomer = MoleculeTemplate((6, 8, 6), ((0, 1), (1, 2)), name="dimethyl ether")  # C–O–C, not C–C–O
    with pytest.raises(MoleculeMismatchError, match="other bonds"):
        isomer.match(ethanol.numbers, ethanol.bonds)


def test_molecule_graph_permutes_with_the_atoms():
    s = starting_structure("aspirin", seed=1)
    _, bonds, hydrogens = heavy_atom_graph(s.numbers, s.bonds)
    z = s.numbers[s.numbers > 1]
    edges, edge_attr, node_attr = molecule_graph(z, bonds, hydrogens)
    perm = np.random.default_rng(1).permutation(len(z))
    inverse = np.argsort(perm)
    edges2, edge_attr2, node_attr2 = molecule_graph(z[perm], inverse[bonds], hydrogens[perm])
    np.testing.assert_array_equal(node_attr2, node_attr[perm])
    features = {(int(i), int(j)): tuple(a) for (i, j), a in zip(edges.T, edge_attr)}
    for (i, j), a in zip(edges2.T, edge_attr2):
        assert features[(int(perm[i]), int(perm[j]))] == tuple(a)
    assert node_attr[:, -1].sum() == 6  # the benzene ring's atoms
    oxygens = np.flatnonzero(z == 8)
    carrying = node_attr[oxygens][:, NODE_FEATURES.index("hydrogens 1")]
    assert carrying.tolist().count(1.0) == 1  # the carboxylic OH is told from the three other oxygens


def test_hydrogens_in_the_file_must_sit_where_the_template_has_them():
    """A tautomer of salicylic acid (the phenol's hydrogen moved to the carbonyl oxygen) has the same heavy-atom
    graph but is not the molecule."""
    template, s = _template("salicylic")
    hydrogens = list(template.hydrogens)
    neighbours = {k: [j for b in template.bonds for j in b if k in b and j != k] for k in range(len(hydrogens))}
    oxygens = [k for k, z in enumerate(template.atomic_numbers) if z == 8]
    carboxyl = next(c for c in range(len(hydrogens)) if sum(j in oxygens for j in neighbours[c]) == 2)
    carbonyl = next(k for k in neighbours[carboxyl] if k in oxygens and hydrogens[k] == 0)
    phenol = next(k for k in oxygens if carboxyl not in neighbours[k])
    hydrogens[carbonyl], hydrogens[phenol] = 1, 0
    tautomer = MoleculeTemplate(template.atomic_numbers, template.bonds, (), "tautomer", tuple(hydrogens))
    assert template.match(s.numbers, s.bonds) is not None
    with pytest.raises(MoleculeMismatchError, match="hydrogens on other atoms"):
        tautomer.match(s.numbers, s.bonds)


def test_molecule_graph_is_built_once_and_each_caller_gets_its_own_arrays():
    """A rollout asks for the same molecule's graph every window: the arrays are cached, and changing the ones a caller
    got does not change what the next caller gets."""
    z, bonds, hydrogens = [6, 6, 8], [[0, 1], [1, 2]], [3, 2, 1]
    first = molecule_graph(z, bonds, hydrogens)
    expected = [a.copy() for a in first]
    for array in first:
        array[...] = 0
    again = molecule_graph(np.array(z), np.array(bonds), np.array(hydrogens))
    for got, want in zip(again, expected):
        np.testing.assert_array_equal(got, want)
    assert again[2].sum() > 0 and again[1].shape == (6, 4)
