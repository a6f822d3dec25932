"""geomol.rollout / rollout_arrays / geomol rollout on the MDAnalysisTests AdK trajectory, with a tiny trained EGNO."""
from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest
import torch

import geomol
from geomol.cli import main
from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory, MDTrajectoryDataset
from geomol.errors import ConfigError, EmptySelectionError, TrajectoryError
from geomol.inference.dynamics.rollout import next_velocity
from geomol.testing import POSITION, VECTOR, assert_equivariant
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.rollout_fixtures import SELECTION, datafiles, train_tiny_egno

PSF, DCD = datafiles.PSF, datafiles.DCD
N_CA = 214


def _universe(*files):
    import MDAnalysis as mda

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return mda.Universe(*[str(f) for f in files])


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return train_tiny_egno(tmp_path_factory.mktemp("egno"))


@pytest.fixture(scope="module")
def model_dir(checkpoint):
    return geomol.export_model(checkpoint, checkpoint.parent / "tiny-egno", card="# tiny EGNO\n\nTest model.\n")


@pytest.fixture(scope="module")
def model(model_dir):
    return geomol.load_model(model_dir)


@pytest.fixture(scope="module")
def dataset():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        traj = MDTrajectory(PSF, DCD, selection=SELECTION)
    return MDTrajectoryDataset(traj, split="train", delta=15, num_timesteps=4, cutoff=8.0)


def test_export_records_the_data_protocol(model_dir, checkpoint, model, dataset):
    manifest = json.loads((model_dir / "manifest.json").read_text())
    assert manifest["task"] == "dynamics" and manifest["architecture"] == "EGNO"
    assert manifest["hyperparameters"]["num_timesteps"] == 4 and manifest["hyperparameters"]["hidden"] == 16
    protocol = manifest["preprocessing"]
    assert protocol["kind"] == "md" and protocol["target_offsets"] == [3, 7, 11, 15]
    assert protocol["selection"] == SELECTION and protocol["cutoff"] == 8.0
    assert protocol["charge_scale"] == pytest.approx(dataset.charge_scale)
    assert protocol["frame_time"] == 1.0 and protocol["length_unit"] == "Å"
    assert (model_dir / "README.md").read_text().startswith("# tiny EGNO")
    # the checkpoint itself is a model reference too, with the same weights and protocol
    from_checkpoint = geomol.load_model(checkpoint)
    item = dataset[5]
    assert from_checkpoint.protocol == model.protocol
    with torch.no_grad():
        assert torch.equal(from_checkpoint(item).x, model(item).x)


def test_one_window_equals_the_direct_prediction(model, dataset, tmp_path):
    item = dataset[7]
    start, _ = dataset.frames(7)
    with torch.no_grad():
        direct = model(item).x.transpose(0, 1).numpy()  # [P, N, 3]
    arrays = geomol.rollout_arrays(model, item.X, item.V, windows=1, charges=dataset.traj.charges)
    assert arrays.frame_offsets.tolist() == [0, 3, 7, 11, 15]
    np.testing.assert_allclose(arrays.positions[1:], direct, atol=1e-5)
    result = geomol.rollout(model, PSF, DCD, out=tmp_path / "one.dcd", selection=SELECTION, start=start, windows=1)
    assert result.frames.tolist() == [start, start + 3, start + 7, start + 11, start + 15]
    written = _universe(result.topology_file, result.out)
    frames = np.stack([written.atoms.positions.copy() for _ in written.trajectory])
    np.testing.assert_allclose(frames[0], item.X.numpy(), atol=1e-4)
    np.testing.assert_allclose(frames[1:], direct, atol=1e-4)


@pytest.mark.parametrize("suffix", [".dcd", ".xtc", ".pdb"])
def test_rollout_writes_a_trajectory_mdanalysis_reads(model, tmp_path, suffix):
    result = geomol.rollout(model, PSF, DCD, out=tmp_path / f"rollout{suffix}", start=2, frames=40)
    # offsets ≤ 40 over 3 windows of [3, 7, 11, 15]: 3 … 37, ten frames, after the start frame
    assert result.windows == 3
    assert (result.frames - 2).tolist() == [0, 3, 7, 11, 15, 18, 22, 26, 30, 33, 37]
    files = [result.out] if suffix == ".pdb" else [result.topology_file, result.out]
    assert (result.topology_file is None) == (suffix == ".pdb")
    written = _universe(*files)
    assert len(written.atoms) == N_CA and len(written.trajectory) == 11
    assert list(written.atoms.names[:2]) == ["CA", "CA"]
    if suffix == ".xtc":  # XTC keeps each frame's true time: non-uniform offsets stay visible
        times = [ts.time for ts in written.trajectory]
        np.testing.assert_allclose(times, result.times_ps, atol=1e-3)


def test_rollout_rotates_reflects_and_translates_with_its_input(model, dataset):
    double = copy.deepcopy(model).double()  # float64: equivariance to rounding
    item, charges = dataset[3], dataset.traj.charges

    def roll(x, v):
        return {"positions": torch.from_numpy(geomol.rollout_arrays(double, x, v, windows=3, charges=charges).positions)}

    assert_equivariant(roll, {"x": (item.X.double(), POSITION), "v": (item.V.double(), VECTOR)},
                       {"positions": POSITION}, atol=1e-7, trials=2)


def test_next_window_starts_from_the_last_predicted_state(model, dataset):
    item, charges = dataset[0], dataset.traj.charges
    two = geomol.rollout_arrays(model, item.X, item.V, windows=2, include_start=False, charges=charges)
    first = two.positions[:4]
    v = next_velocity(model.protocol, torch.from_numpy(first), item.X.double()).numpy()
    np.testing.assert_allclose(v, (first[3] - first[2]) / 4)  # offsets 11 → 15
    second = geomol.rollout_arrays(model, first[3], v, windows=1, include_start=False, charges=charges)
    np.testing.assert_allclose(two.positions[4:], second.positions, atol=1e-5)


def test_start_from_a_structure_and_a_second_one_for_the_velocity(model, tmp_path):
    universe = _universe(PSF, DCD)
    paths = []
    for frame in (4, 5):  # whole-system coordinates for the PSF, which holds the charges
        universe.trajectory[frame]
        paths.append(tmp_path / f"frame{frame}.pdb")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            universe.atoms.write(str(paths[-1]))
    from_files = geomol.rollout(model, PSF, paths[0], out=tmp_path / "a.pdb", velocity_from=paths[1])
    from_trajectory = geomol.rollout(model, PSF, DCD, out=tmp_path / "b.pdb", start=4)
    assert from_files.summary["inputs"]["velocity"] == "x(frame5.pdb) − x[0]"
    a, b = (_universe(r.out) for r in (from_files, from_trajectory))
    for _ in zip(a.trajectory, b.trajectory):  # PDB keeps 3 decimals: inputs differ by ≤ 5e-4 Å
        np.testing.assert_allclose(a.atoms.positions, b.atoms.positions, atol=5e-3)


def test_reference_comparison_summary_and_plot(model, tmp_path):
    result = geomol.rollout(model, PSF, DCD, out=tmp_path / "r.dcd", start=10, frames=30, reference=True,
                            superpose=True, plot=tmp_path / "r.png", summary=tmp_path / "r.json")
    record = json.loads((tmp_path / "r.json").read_text())
    reference = record["reference"]
    assert reference["frames"] == result.frames[1:].tolist() and len(reference["rmsd_A"]) == len(result.frames) - 1
    assert reference["final_rmsd_A"] == pytest.approx(result.rmsd[-1])
    assert all(s <= r + 1e-6 for s, r in zip(reference["rmsd_superposed_A"], reference["rmsd_A"]))
    assert len(reference["per_atom_mean_error_A"]) == N_CA
    # the RMSD is the one of the frames written: recompute the last one from the files
    written, ref = _universe(result.topology_file, result.out), _universe(PSF, DCD)
    written.trajectory[-1]
    ref.trajectory[int(result.frames[-1])]
    diff = written.atoms.positions - ref.select_atoms(SELECTION).positions
    assert result.rmsd[-1] == pytest.approx(np.sqrt((diff ** 2).sum(-1).mean()), abs=1e-4)
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
    assert record["protocol"]["target_offsets"] == [3, 7, 11, 15] and record["inputs"]["selection"] == SELECTION
    # CA atoms have no bond between them: the plot's bond panel is empty, the clashes are counted
    chemistry = record["chemistry"]
    assert chemistry["bond_source"] == "perceived" and chemistry["num_bonds"] == 0
    assert chemistry["bond_error_median_A"] is None and chemistry["clash_fraction"] is not None


def test_a_diverged_rollout_stops_with_a_warning(model, tmp_path):
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.network.embedding.bias.fill_(float("nan"))
    with pytest.warns(UserWarning, match="diverged in window 1"):
        result = geomol.rollout(broken, PSF, DCD, out=tmp_path / "nan.dcd", frames=30, reference=True)
    assert result.windows == 0 and result.frames.tolist() == [0] and result.summary["diverged"]
    assert result.summary["reference"]["final_rmsd_A"] is None


def test_a_blown_up_rollout_stops_before_writing_absurd_coordinates(model, dataset):
    """Finite but exploding windows (each spreading the system 20× further) stop the rollout once the
    system is over a thousand times its starting size, instead of returning 1e20 Å coordinates."""
    exploding = copy.deepcopy(model)
    predict = exploding.predict_states

    def spread(x, v, charges=None, **kwargs):  # x [S, N, 3], windows [S, P, N, 3]
        out = predict(x, v, charges, **kwargs)
        centre = x.mean(dim=1, keepdim=True).unsqueeze(1)
        return centre + 20 * (out - centre)

    exploding.predict_states = spread
    item = dataset[0]
    with pytest.warns(UserWarning, match=r"diverged in window 3 of 5 \(positions spread over 1000"):
        result = geomol.rollout_arrays(exploding, item.X, item.V, windows=5, charges=dataset.traj.charges)
    assert result.frame_offsets[-1] == 2 * model.protocol.window_frames
    assert np.isfinite(result.positions).all()


def test_bad_inputs_give_clear_errors(model, tmp_path):
    with pytest.raises(EmptySelectionError, match="matched no atom") as empty:
        geomol.rollout(model, PSF, DCD, out=tmp_path / "x.dcd", selection="resname NOPE")
    assert "adk.psf" in str(empty.value)
    with pytest.raises(TrajectoryError, match="98 frame") as short:
        geomol.rollout(model, PSF, DCD, out=tmp_path / "x.dcd", start=97)
    assert "adk_dims.dcd" in str(short.value)
    with pytest.raises(TrajectoryError, match="reference has 98 frames") as reference:
        geomol.rollout(model, PSF, DCD, out=tmp_path / "x.dcd", start=60, frames=60, reference=True)
    assert "adk_dims.dcd" in str(reference.value)
    with pytest.raises(ConfigError, match="no trajectory writer"):
        geomol.rollout(model, PSF, DCD, out=tmp_path / "x.unknown")
    with pytest.raises(ConfigError, match="not both"):
        geomol.rollout(model, PSF, DCD, out=tmp_path / "x.dcd", frames=30, windows=2)


def test_rollout_command(model_dir, tmp_path, capsys):
    out = tmp_path / "cli.xtc"
    code = main(["rollout", "--model", str(model_dir), "--topology", PSF, "--trajectory", DCD, "--select", SELECTION,
                 "--start", "0", "--horizon", "30", "--out", str(out), "--compare", "--quiet"])
    assert code == 0
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["frames"][0] == 0 and record["frames"][-1] == 30 and "reference" in record
    assert out.with_suffix(".png").is_file() and (tmp_path / "cli_topology.pdb").is_file()
    code = main(["rollout", "--model", str(model_dir), "--topology", PSF, "--trajectory", DCD,
                 "--select", "name XYZ", "--out", str(tmp_path / "bad.dcd"), "--quiet"])
    assert code == 1 and "matched no atom" in capsys.readouterr().err


@pytest.mark.parametrize("extra, count, predicted", [([], 7, 6), (["--no-start"], 7, 7),
                                                     (["--output-frames", "ends"], 3, 2)])
def test_frames_option_counts_the_frames_written(model_dir, tmp_path, extra, count, predicted):
    """``--frames N`` means N frames in the output trajectory (the start frame counts unless --no-start)."""
    import MDAnalysis as mda

    from geomol.api import load_model
    from geomol.inference.dynamics.rollout import horizon_for_frames

    out = tmp_path / "n.xtc"
    assert main(["rollout", "--model", str(model_dir), "--topology", PSF, "--trajectory", DCD, "--select", SELECTION,
                 "--frames", str(count), "--out", str(out), "--compare", "--quiet", *extra]) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    assert len(record["frames"]) == count == len(mda.Universe(str(tmp_path / "n_topology.pdb"), str(out)).trajectory)
    protocol = load_model(model_dir).protocol
    ends = "ends" in extra
    assert record["frames"][-1] == horizon_for_frames(protocol, predicted, "ends" if ends else "all")
    step, offsets = protocol.window_frames, protocol.target_offsets
    expected = [k * step + o for k in range(predicted) for o in (offsets[-1:] if ends else offsets)][:predicted]
    assert record["frames"][-predicted:] == expected
    # the "no motion" baseline: RMSD of the start frame to each compared reference frame
    assert len(record["reference"]["rmsd_no_motion_A"]) == len(record["reference"]["rmsd_A"])
    assert record["reference"]["rmsd_no_motion_A"][0] > 0
