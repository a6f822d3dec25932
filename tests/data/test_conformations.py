"""Conformational ensembles: internal coordinates and JS divergences against hand-computed values."""
from __future__ import annotations

import math

import numpy as np
import pytest

from geomol.data.chemistry.conformations import (BIN_WIDTHS, InternalCoordinates, bond_deviations, ensemble_divergence,
                                       frozen_structure, half_against_half, histogram_divergence, js_divergence)


def _butane_like(torsion_deg: float) -> np.ndarray:
    """Four atoms, bonds 1.5 Å, angles 90°, with the given dihedral about the middle bond."""
    t = math.radians(torsion_deg)
    return np.array([[1.5, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 1.5, 0.0], [1.5 * math.cos(t), 1.5, 1.5 * math.sin(t)]])


def test_coordinates_of_a_chain_and_a_ring():
    chain = InternalCoordinates.of_bonds([(0, 1), (2, 1), (2, 3), (1, 2)])  # duplicates and order do not matter
    assert chain.bonds.tolist() == [[0, 1], [1, 2], [2, 3]]
    assert chain.angles.tolist() == [[0, 1, 2], [1, 2, 3]]
    assert chain.torsions.tolist() == [[0, 1, 2, 3]]
    ring = InternalCoordinates.of_bonds([(0, 1), (1, 2), (2, 0)])  # a triangle: no torsion (i = l)
    assert ring.counts() == {"bond": 3, "angle": 3, "torsion": 0}


@pytest.mark.parametrize("turn", [-150.0, -60.0, 0.0, 45.0, 180.0])
def test_values_match_hand_computed_geometry(turn):
    """The fourth atom turned by ``turn`` from +x towards +z about the +y bond: the IUPAC dihedral is −turn
    (MDAnalysis' calc_dihedrals agrees on a random geometry below)."""
    chain = InternalCoordinates.of_bonds([(0, 1), (1, 2), (2, 3)])
    values = chain.values(_butane_like(turn))
    assert values["bond"][0] == pytest.approx([1.5, 1.5, 1.5])
    assert values["angle"][0] == pytest.approx([90.0, 90.0])
    assert abs((values["torsion"][0, 0] + turn + 180.0) % 360.0 - 180.0) < 1e-9


def test_torsions_follow_the_iupac_sign_of_mdanalysis():
    from MDAnalysis.lib.distances import calc_dihedrals

    x = np.random.default_rng(3).normal(size=(4, 3))
    ours = InternalCoordinates.of_bonds([(0, 1), (1, 2), (2, 3)]).values(x)["torsion"][0, 0]
    assert ours == pytest.approx(math.degrees(calc_dihedrals(*(x[i:i + 1] for i in range(4)))[0]), abs=1e-3)  # float32 there


def test_js_divergence_by_hand():
    assert js_divergence([1, 0], [0, 1]) == pytest.approx(1.0)  # no overlap: 1 bit
    assert js_divergence([3, 1], [3, 1]) == pytest.approx(0.0)
    # p = (1/2, 1/2), q = (1, 0): m = (3/4, 1/4); JS = ½[½log2(2/3) + ½log2(2)] + ½[log2(4/3)]
    expected = 0.5 * (0.5 * math.log2(0.5 / 0.75) + 0.5 * math.log2(0.5 / 0.25)) + 0.5 * math.log2(1 / 0.75)
    assert js_divergence([1, 1], [2, 0]) == pytest.approx(expected)


def test_histograms_share_one_grid_and_torsions_wrap():
    # the same values split across ±180°: one bin on the circle, so no divergence
    assert histogram_divergence([179.0, -179.0], [-178.0, 178.0], 10.0, periodic=True) == pytest.approx(0.0)
    # bond lengths 0.1 Å apart with 0.02 Å bins never share a bin
    assert histogram_divergence([1.50, 1.505], [1.60, 1.605], BIN_WIDTHS["bond"]) == pytest.approx(1.0)


def test_floor_frozen_and_model_on_a_sampled_ensemble():
    rng = np.random.default_rng(0)
    chain = InternalCoordinates.of_bonds([(0, 1), (1, 2), (2, 3)])
    reference = np.stack([_butane_like(t) for t in rng.uniform(-180, 180, 4000)])
    reference = reference + rng.normal(scale=0.03, size=reference.shape)
    floor = half_against_half(chain, reference)
    frozen = frozen_structure(chain, reference[0], reference)
    same = ensemble_divergence(chain, reference[::-1][:2000], reference)
    assert all(floor[k] < 0.05 for k in floor) and all(same[k] < 0.05 for k in same)
    assert frozen["bond"] > 0.5 and frozen["angle"] > 0.3 and frozen["torsion"] > 0.9  # one value against a spread
    squeezed = reference.copy()
    squeezed[:, 3] = reference[:, 2] + 0.8 * (reference[:, 3] - reference[:, 2])  # one bond 20 % short
    assert ensemble_divergence(chain, squeezed, reference)["bond"] > 0.25


def test_bond_deviation_from_a_mean():
    frames = np.stack([_butane_like(0.0), _butane_like(0.0) * 1.2])
    deviation = bond_deviations(frames, [(0, 1), (1, 2)], [1.5, 1.5])
    np.testing.assert_allclose(deviation, [[0.0, 0.0], [0.3, 0.3]], atol=1e-12)
