"""The Ramachandran dihedrals of a backbone selection, found by atom names, and their divergence."""
from __future__ import annotations

import math

import numpy as np
import pytest

from geomol.data.io.trajectory import open_selection
from geomol.evaluation.protein_ensembles import backbone_dihedrals, ramachandran_divergence

mda_tests = pytest.importorskip("MDAnalysisTests.datafiles")


def test_phi_and_psi_of_adenylate_kinase_match_mdanalysis():
    from MDAnalysis.lib.distances import calc_dihedrals

    universe, backbone = open_selection(mda_tests.PSF, mda_tests.DCD, "backbone")
    found = backbone_dihedrals(backbone.names, backbone.resids)
    residues = len(set(backbone.resids))
    assert len(found["phi"]) == residues - 1 and len(found["psi"]) == residues - 1
    ten = universe.select_atoms("resid 10")  # φ of residue 10: C(9)–N(10)–CA(10)–C(10)
    expected = calc_dihedrals(*(universe.select_atoms(s).positions for s in
                                ("resid 9 and name C", "resid 10 and name N", "resid 10 and name CA",
                                 "resid 10 and name C")))[0]
    row = next(i for i, q in enumerate(found["phi"]) if backbone.resids[q[1]] == 10)
    x = backbone.positions.astype(np.float64)[None]
    ours = ramachandran_divergence(x, x, found)
    assert ours == {"phi": 0.0, "psi": 0.0, "phi_psi_map": 0.0}
    from geomol.evaluation.protein_ensembles import _dihedral_values

    assert _dihedral_values(x, found["phi"][row:row + 1])[0, 0] == pytest.approx(math.degrees(expected), abs=1e-3)
    assert len(ten) > 0


def test_a_ramachandran_map_moved_by_a_rotation_of_one_dihedral_diverges():
    universe, backbone = open_selection(mda_tests.PSF, mda_tests.DCD, "backbone")
    found = backbone_dihedrals(backbone.names, backbone.resids)
    frames = np.stack([backbone.positions.astype(np.float64) for _ in universe.trajectory])
    same = ramachandran_divergence(frames[::2], frames[1::2], found)
    assert same["phi"] < 0.5 and same["phi_psi_map"] < 0.9
    flipped = frames.copy()
    flipped[..., 2] *= -1  # the mirror image: every dihedral changes sign
    assert ramachandran_divergence(flipped, frames, found)["phi_psi_map"] > same["phi_psi_map"] + 0.05
