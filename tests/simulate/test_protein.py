"""OpenMM protein generator on a tiny real peptide: files that read back, determinism, exact resume."""
from __future__ import annotations

import gzip

import numpy as np
import pytest

from geomol.errors import ConfigError
from tests.conftest import shared_path

pytest.importorskip("openmm")
pytest.importorskip("pdbfixer")

from geomol.simulate import ProteinSettings, simulate_protein  # noqa: E402
from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory  # noqa: E402

# 40 fs frames of 4 fs steps, 0.1 ps of equilibration: a few hundred steps in all
FAST = ProteinSettings(frame_interval_ps=0.04, equilibration_ps=0.1)


@pytest.fixture(scope="module")
def peptide(tmp_path_factory):
    """The first three residues of FKBP12 (Uni-FEP's prepared structure), 43 atoms."""
    source = shared_path("uni_fep", "Hermite__FKBP12", "protein.pdb.gz")
    with gzip.open(source, "rt") as handle:
        lines = [line for line in handle if line.startswith("ATOM") and int(line[22:26]) <= 3]
    path = tmp_path_factory.mktemp("peptide") / "tri.pdb"
    path.write_text("".join(lines) + "END\n")
    return path


def _run(peptide, out, frames, settings=FAST, **kw):
    return simulate_protein(peptide, out, frames, settings, platform="Reference", progress=False, **kw)


def _positions(folder):
    return MDTrajectory(folder / "topology.pqr", folder / "trajectory.dcd", selection="all").positions


def test_writes_a_trajectory_that_reads_back_with_charges(peptide, tmp_path):
    summary = _run(peptide, tmp_path, 4)
    traj = MDTrajectory(tmp_path / "topology.pqr", tmp_path / "trajectory.dcd", selection="backbone")
    assert len(traj) == 4 and traj.num_atoms == 12 and summary["frames"] == 4
    assert np.allclose(np.diff(traj.time_ps), 0.04, atol=1e-6)
    everything = MDTrajectory(tmp_path / "topology.pqr", tmp_path / "trajectory.dcd", selection="all")
    assert abs(everything.charges.sum()) < 1e-3  # a neutral peptide: the force field's charges sum to 0
    assert summary["settings"]["seed"] == 1 and summary["engine"]["name"] == "OpenMM"
    x = traj.positions
    assert 0 < np.abs(x[1:] - x[:-1]).max() < 2.0  # moving, not exploding
    n_ca = np.linalg.norm(x[:, 0] - x[:, 1], axis=-1)  # backbone N–CA of residue 1
    assert np.all((n_ca > 1.3) & (n_ca < 1.6))


def test_seed_determines_the_trajectory(peptide, tmp_path):
    _run(peptide, tmp_path / "a", 3)
    _run(peptide, tmp_path / "b", 3)
    _run(peptide, tmp_path / "c", 3, ProteinSettings(seed=2, frame_interval_ps=0.04, equilibration_ps=0.1))
    a, b, c = (_positions(tmp_path / d) for d in "abc")
    np.testing.assert_array_equal(a, b)
    assert not np.allclose(a[-1], c[-1])


def test_interrupted_and_extended_runs_equal_one_run(peptide, tmp_path, monkeypatch):
    from openmm.app import DCDFile

    _run(peptide, tmp_path / "whole", 6)
    _run(peptide, tmp_path / "extended", 3)
    _run(peptide, tmp_path / "extended", 6)
    original, written = DCDFile.writeModel, {"n": 0}

    def killed_at_fifth_frame(self, *args, **kw):
        written["n"] += 1
        if written["n"] == 5:
            raise KeyboardInterrupt
        return original(self, *args, **kw)

    monkeypatch.setattr(DCDFile, "writeModel", killed_at_fifth_frame)
    with pytest.raises(KeyboardInterrupt):
        _run(peptide, tmp_path / "killed", 6, checkpoint_every=3)
    monkeypatch.setattr(DCDFile, "writeModel", original)
    _run(peptide, tmp_path / "killed", 6, checkpoint_every=3)
    whole = _positions(tmp_path / "whole")
    for folder in ("extended", "killed"):
        np.testing.assert_allclose(_positions(tmp_path / folder), whole, atol=1e-4)


def test_other_settings_are_refused(peptide, tmp_path):
    _run(peptide, tmp_path, 2)
    with pytest.raises(ConfigError, match="timestep_fs"):
        _run(peptide, tmp_path, 3, ProteinSettings(timestep_fs=2.0, frame_interval_ps=0.04, equilibration_ps=0.1))
