"""Chemistry metrics of a trajectory (bond-length and angle errors, broken bonds, clashes) against hand-computed
values on a small molecule, bonds from a topology or perceived, invariance under E(3), and real AdK topologies."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from geomol.data.chemistry.covalent_graph import CovalentGraph, perceive_bonds, selection_bonds
from geomol.data.chemistry.trajectory import (ChemistryFrames, bond_angles, bond_errors, bond_errors_by_kind,
                                              bond_kinds, bond_lengths, count_clashes, trajectory_chemistry)
from geomol.errors import ConfigError
from geomol.testing import random_e3

# A four-carbon chain C0–C1–C2–C3 with right angles at C1 and C2, a free oxygen O4 and a hydrogen H5
# (not bonded in the "topology" below; hydrogens never clash).
ELEMENTS = ["C", "C", "C", "C", "O", "H"]
BONDS = [(0, 1), (1, 2), (2, 3)]
START = np.array([[0, 0, 0], [1.5, 0, 0], [1.5, 1.5, 0], [3.0, 1.5, 0], [10, 10, 10], [0, 0, -1.0]])
# Frame A: C1 pulled out to x = 1.9 (C0–C1 1.9 Å: off by 0.4, broken; C1–C2 √(0.4² + 1.5²)); both angles
# become atan2(1.5, 0.4); O4 1.5 Å above C0: a clash. The 1-3 pair C1…C3 is 1.86 Å apart: excluded.
FRAME_A = START.copy()
FRAME_A[1] = [1.9, 0, 0]
FRAME_A[4] = [0, 0, 1.5]
# Frame B: C3 moved to x = 0.5 (C2–C3 1.0 Å: off by 0.5, broken; angle at C2 still 90°); the 1-4 pair
# C0…C3 is then 1.58 Å apart (a clash), the 1-3 pair C1…C3 1.80 Å (excluded).
FRAME_B = START.copy()
FRAME_B[3] = [0.5, 1.5, 0]


@pytest.fixture
def graph() -> CovalentGraph:
    return CovalentGraph.from_bonds(BONDS, ELEMENTS)


def test_graph_angles_and_excluded_pairs(graph):
    assert graph.angles.tolist() == [[0, 1, 2], [1, 2, 3]]
    n = len(ELEMENTS)
    assert sorted(graph.excluded.tolist()) == sorted(i * n + j for i, j in [(0, 1), (1, 2), (2, 3), (0, 2), (1, 3)])
    assert graph.heavy.tolist() == [True] * 5 + [False]
    assert graph.source == "topology" and graph.describe().startswith("3 bonds and 2 angles from the topology")


def test_metrics_match_hand_computed_values(graph):
    frames = trajectory_chemistry(np.stack([FRAME_A, FRAME_B, START]), graph, START)
    stretched = math.hypot(0.4, 1.5) - 1.5  # C1–C2 in frame A
    bent = 90 - math.degrees(math.atan2(1.5, 0.4))  # both angles in frame A
    np.testing.assert_allclose(frames.bond_error_median, [stretched, 0, 0], atol=1e-12)
    np.testing.assert_allclose(frames.bond_error_max, [0.4, 0.5, 0], atol=1e-12)
    np.testing.assert_allclose(frames.angle_error_median, [bent, 0, 0], atol=1e-9)
    np.testing.assert_allclose(frames.angle_error_max, [bent, 0, 0], atol=1e-9)
    assert frames.broken_bonds.tolist() == [1, 1, 0]
    assert frames.clashes.tolist() == [1, 1, 0]
    summary = frames.summary()
    assert summary["bond_error_median_A"] == pytest.approx(stretched / 3)
    assert summary["bond_error_max_A"] == pytest.approx(0.5)
    assert summary["angle_error_median_deg"] == pytest.approx(bent / 3)
    assert summary["broken_bond_fraction"] == pytest.approx(2 / 3)
    assert summary["clash_fraction"] == pytest.approx(2 / 3)
    assert summary["first_broken_index"] == 0
    # the pieces directly
    np.testing.assert_allclose(bond_lengths(FRAME_A, BONDS)[0].numpy(), [1.9, math.hypot(0.4, 1.5), 1.5])
    np.testing.assert_allclose(bond_angles(START, graph.angles)[0].numpy(), [90, 90], atol=1e-12)
    # by kind of bond: the two outer bonds are one kind, the middle one another
    kinds = bond_kinds(BONDS, ["CA", "C", "N", "CA"])
    assert kinds == ["C–CA", "C–N", "CA–N"]
    errors = bond_errors(np.stack([FRAME_A, FRAME_B]), BONDS, START).numpy()  # [[0.4, s, 0], [0, 0, 0.5]]
    by_kind = bond_errors_by_kind(errors, ["outer", "middle", "outer"])
    assert by_kind["outer"] == {"bonds": 2, "median_A": pytest.approx(0.2), "max_A": pytest.approx(0.5),
                                "broken_frame_fraction": 1.0}
    assert by_kind["middle"] == {"bonds": 1, "median_A": pytest.approx(stretched / 2),
                                 "max_A": pytest.approx(stretched), "broken_frame_fraction": 0.0}


def test_a_hydrogen_or_an_excluded_pair_never_clashes(graph):
    close = START.copy()
    close[5] = [0.5, 0, 0]  # H 0.5 Å from C0 and 1.0 Å from C1: hydrogens are not counted
    close[2] = [0.2, 1.2, 0]  # the 1-3 pair C0…C2 1.22 Å apart: excluded
    assert count_clashes(close, graph).tolist() == [0]
    close[4] = [0.0, 0.0, 1.0]  # O4 is bonded to nothing: it clashes with C0 (1.0 Å), C1 (1.80) and C2 (1.57)
    assert count_clashes(close, graph).tolist() == [3]


def test_clash_counts_do_not_depend_on_the_chunk_of_frames(graph):
    rng = np.random.default_rng(0)
    frames = START + rng.normal(scale=0.6, size=(9, *START.shape))
    assert count_clashes(frames, graph, frames_per_chunk=2).tolist() == count_clashes(frames, graph).tolist()


def test_bonds_perceived_from_distances():
    bonds = perceive_bonds(ELEMENTS, START).tolist()
    assert bonds == [[0, 1], [0, 5], [1, 2], [2, 3]]  # the hydrogen 1.0 Å from C0 is bonded to it
    assert perceive_bonds([6, 6, 6, 6, 8, 1], START).tolist() == bonds  # atomic numbers work too
    graph = CovalentGraph.perceived(ELEMENTS, START)
    assert graph.source == "perceived" and "perceived" in graph.describe()


def test_metrics_are_invariant_under_rotations_reflections_and_translations(graph):
    rng = np.random.default_rng(1)
    frames = torch.as_tensor(START + rng.normal(scale=0.3, size=(4, *START.shape)))
    reference = torch.as_tensor(START)
    before = trajectory_chemistry(frames, graph, reference)
    for trial in range(4):
        g = random_e3(reflect=bool(trial % 2), generator=torch.Generator().manual_seed(trial))
        after = trajectory_chemistry(g.act(frames, "position"), graph, g.act(reference, "position"))
        for name in ("bond_error_median", "bond_error_max", "angle_error_median", "angle_error_max"):
            np.testing.assert_allclose(getattr(after, name), getattr(before, name), atol=1e-8)
        assert after.clashes.tolist() == before.clashes.tolist()
        assert after.broken_bonds.tolist() == before.broken_bonds.tolist()


def test_bad_input_raises(graph):
    with pytest.raises(ConfigError, match="NaN"):
        trajectory_chemistry(np.full((1, 6, 3), np.nan), graph, START)
    with pytest.raises(ConfigError, match="reference frame"):
        trajectory_chemistry(START[:4], graph, START)
    with pytest.raises(ConfigError, match="two different atoms"):
        CovalentGraph.from_bonds([(0, 9)], ELEMENTS)


def test_no_bonds_gives_no_bond_numbers():
    graph = CovalentGraph.from_bonds(np.zeros((0, 2)), ELEMENTS)
    frames = trajectory_chemistry(np.stack([START, FRAME_A]), graph, START)
    summary = frames.summary()
    assert summary["bond_error_median_A"] is None and summary["broken_bond_fraction"] is None
    assert frames.per_frame()["bond_error_max_A"] == [None, None]
    # nothing is excluded without bonds: the three 1.5 Å C–C pairs clash, in frame A also C0…O4 and C1…C3
    assert frames.clashes.tolist() == [3, 5] and summary["clash_fraction"] == 1.0
    assert ChemistryFrames.concatenate([]).summary()["clash_fraction"] is None


def test_adk_topology_bonds_and_perceived_fallback():
    datafiles = pytest.importorskip("MDAnalysisTests.datafiles")
    from geomol.data.io.trajectory import open_selection

    _, backbone = open_selection(datafiles.PSF, datafiles.DCD, "backbone")
    graph = CovalentGraph.of_selection(backbone)
    assert graph.source == "topology" and len(graph.bonds) == 854  # N–CA, CA–C, C=O and the peptide bonds
    assert np.array_equal(graph.bonds, CovalentGraph.perceived([n[0] for n in backbone.names],
                                                               backbone.positions).bonds)
    _, calpha = open_selection(datafiles.PSF, datafiles.DCD, "name CA")
    assert len(selection_bonds(calpha)) == 0  # no topology bond joins two CA atoms
    fallback = CovalentGraph.of_selection(calpha)
    assert fallback.source == "perceived" and len(fallback.bonds) == 0  # 3.8 Å apart: no bond perceived


def test_atoms_the_topology_leaves_unbonded_get_perceived_bonds(tmp_path):
    pytest.importorskip("MDAnalysis")
    from geomol.data.io.trajectory import open_selection

    # a PDB whose CONECT records bond C0–C1 only (as files that cover only the ligand): C2, C3 and H5 are
    # perceived; O4, 10 Å away, stays alone
    lines = [f"HETATM{i + 1:5d} {e + str(i):<4s} LIG A   1    {x:8.3f}{y:8.3f}{z:8.3f}  1.00  0.00          {e:>2s}"
             for i, (e, (x, y, z)) in enumerate(zip(ELEMENTS, START))]
    (tmp_path / "partial.pdb").write_text("\n".join(lines + ["CONECT    1    2", "END"]) + "\n")
    _, atoms = open_selection(tmp_path / "partial.pdb", None, "all")
    graph = CovalentGraph.of_selection(atoms)
    assert graph.source == "topology+perceived" and graph.bonds.tolist() == [[0, 1], [0, 5], [1, 2], [2, 3]]
