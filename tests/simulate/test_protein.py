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


def _whole_extended_killed(run, tmp_path, monkeypatch, frames: int, first: int, killed_at: int) -> dict:
    """Positions of one run of ``frames``, of one of ``first`` frames extended to ``frames``, and of one killed
    while writing frame ``killed_at`` and run again; ``run(folder, frames)`` runs one."""
    from openmm.app import DCDFile

    run("whole", frames)
    run("extended", first)
    run("extended", frames)
    original, written = DCDFile.writeModel, {"n": 0}

    def killed(self, *args, **kw):
        written["n"] += 1
        if written["n"] == killed_at + 1:
            raise KeyboardInterrupt
        return original(self, *args, **kw)

    monkeypatch.setattr(DCDFile, "writeModel", killed)
    with pytest.raises(KeyboardInterrupt):
        run("killed", frames)
    monkeypatch.setattr(DCDFile, "writeModel", original)
    run("killed", frames)
    return {folder: _positions(tmp_path / folder) for folder in ("whole", "extended", "killed")}


def test_interrupted_and_extended_runs_equal_one_run(peptide, tmp_path, monkeypatch):
    def run(folder, frames):
        return _run(peptide, tmp_path / folder, frames, checkpoint_every=3)

    positions = _whole_extended_killed(run, tmp_path, monkeypatch, 6, 3, 4)
    for folder in ("extended", "killed"):
        np.testing.assert_array_equal(positions[folder], positions["whole"])


def _final_state(folder) -> bytes:
    return np.load(folder / "trajectory.work" / "checkpoint.npz")["openmm_checkpoint"].tobytes()


def test_on_the_cpu_platform_a_resumed_run_is_bit_for_bit_the_uninterrupted_one(peptide, tmp_path, monkeypatch):
    """OpenMM's CPU platform sums forces in an order that depends on the context's history: resumed from a
    checkpoint into a new context, the run drifted (1e-4 Å within 200 frames here, Å over a long run)."""

    def run(folder, frames):
        return simulate_protein(peptide, tmp_path / folder, frames, FAST, platform="CPU", threads=1, progress=False,
                                checkpoint_every=10)

    positions = _whole_extended_killed(run, tmp_path, monkeypatch, 31, 25, 25)
    for folder in ("extended", "killed"):
        np.testing.assert_array_equal(positions[folder], positions["whole"])
        assert _final_state(tmp_path / folder) == _final_state(tmp_path / "whole")  # positions, velocities in double
    with pytest.raises(ConfigError, match="checkpoint_every"):
        simulate_protein(peptide, tmp_path / "whole", 41, FAST, platform="CPU", threads=1, progress=False,
                         checkpoint_every=5)
    with pytest.warns(UserWarning, match="not bit for bit"):
        simulate_protein(peptide, tmp_path / "whole", 32, FAST, platform="CPU", threads=2, progress=False,
                         checkpoint_every=10)


def test_other_settings_are_refused(peptide, tmp_path):
    _run(peptide, tmp_path, 2)
    with pytest.raises(ConfigError, match="timestep_fs"):
        _run(peptide, tmp_path, 3, ProteinSettings(timestep_fs=2.0, frame_interval_ps=0.04, equilibration_ps=0.1))
