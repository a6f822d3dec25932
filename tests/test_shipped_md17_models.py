"""The EGNO models trained on MD17-protocol data made by ``geomol simulate`` (egno-md17-*): their protocol
describes the molecule the generator simulates (heavy atoms and bonds of its SMILES, in its atom order), and
one window rolled out from an RDKit conformer stays a molecule near its start and turns with the input."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.spatial.transform import Rotation

import geomol
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)

pytest.importorskip("rdkit")


@pytest.mark.parametrize("molecule", ["aspirin", "ethanol"])
def test_md17_model_protocol_and_one_window(molecule):
    from geomol.simulate.molecules import starting_structure

    model = geomol.load_model(f"egno-md17-{molecule}")
    start = starting_structure(molecule, seed=3)
    heavy = np.flatnonzero(start.numbers > 1)
    assert model.protocol.kind == "md17"
    assert list(model.protocol.atomic_numbers) == start.numbers[heavy].tolist()
    heavy_bonds = {(i, j) for i, j in start.bonds if i in heavy and j in heavy}
    assert {tuple(sorted(b)) for b in model.protocol.bonds} == heavy_bonds

    x = start.positions[heavy]
    v = np.zeros_like(x)
    out = geomol.rollout_arrays(model, x, v, include_start=False).positions
    assert out.shape == (len(model.protocol.target_offsets), len(heavy), 3) and np.isfinite(out).all()
    rmsd = np.sqrt(((out - x) ** 2).sum(-1).mean(-1))
    assert rmsd.max() < 1.5  # up to 1.5 ps at 500 K: heavy atoms move a few tenths of an Å, not away
    # equivariance of the shipped weights: a rotated and translated input gives the rotated prediction
    rotation = Rotation.random(random_state=7).as_matrix()
    turned = geomol.rollout_arrays(model, x @ rotation.T + 5.0, v, include_start=False).positions
    np.testing.assert_allclose(turned, out @ rotation.T + 5.0, atol=2e-3)
