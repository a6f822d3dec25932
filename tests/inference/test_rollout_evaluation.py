"""Models, baselines and the reference MD on the same windows (geomol.evaluate_rollouts), and the chemistry in
every rollout's summary and report (geomol.rollout, geomol rollout), with the shipped egno-adk on the
MDAnalysisTests AdK trajectory. The plot's chemistry panels are drawn by tests/test_rollout.py's plot test."""
from __future__ import annotations

import json
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import geomol
from geomol.cli import main
from geomol.data.covalent_graph import CovalentGraph
from geomol.data.datasets.md_trajectory import MDTrajectory, MDTrajectoryDataset
from geomol.data.trajectory_chemistry import trajectory_chemistry
from geomol.data.trajectory_protocol import TrajectoryProtocol
from geomol.errors import ConfigError, TrajectoryError
from geomol.inference.rollout_evaluation import evaluation_offsets, window_starts
from geomol.models.dynamics import s2s_mse, s2t_mse
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)

datafiles = pytest.importorskip("MDAnalysisTests.datafiles")
PSF, DCD = datafiles.PSF, datafiles.DCD
STARTS = [65, 81]  # the first and last window of the test part of the chronological split


@pytest.fixture(scope="module")
def model():
    return geomol.load_model("egno-adk")


@pytest.fixture(scope="module")
def trajectory():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MDTrajectory(PSF, DCD, selection="backbone")


def test_rows_equal_the_model_and_baselines_computed_directly(model, trajectory):
    table = geomol.evaluate_rollouts({"EGNO": model}, PSF, DCD, starts=STARTS, restore_bonds=True)
    assert [r.name for r in table.rows] == ["EGNO", "EGNO + bond restoring", "no motion (last frame)",
                                            "linear extrapolation", "reference MD"]
    assert table.offsets == [3, 7, 11, 15] and table.starts == STARTS and "from the topology" in table.bonds
    # the model: its prediction on the test items of the training data set (an independent path)
    data = MDTrajectoryDataset(trajectory, split="test", cutoff=model.protocol.cutoff)
    items = [data[s - data.begin] for s in STARTS]
    with torch.no_grad():
        predicted = [model(item).x for item in items]
    batch = torch.zeros(data.traj.num_atoms, dtype=torch.long)
    for metric, value in ((s2s_mse, table["EGNO"].s2s_mse), (s2t_mse, table["EGNO"].s2t_mse)):
        expected = np.mean([float(metric(p, i.X_target, batch, 1)) for p, i in zip(predicted, items)])
        assert value == pytest.approx(expected, rel=1e-4)
    # the baselines and the reference, by hand
    x = trajectory.positions.astype(np.float64)
    offsets = np.array([3, 7, 11, 15])
    still = [((x[s] - x[s + offsets]) ** 2).mean(axis=(1, 2)) for s in STARTS]
    linear = [((x[s] + offsets[:, None, None] * (x[s + 1] - x[s]) - x[s + offsets]) ** 2).mean(axis=(1, 2))
              for s in STARTS]
    assert table["no motion (last frame)"].s2s_mse == pytest.approx(np.mean([e[-1] for e in still]))
    assert table["linear extrapolation"].s2t_mse == pytest.approx(np.mean([e.mean() for e in linear]))
    assert table["no motion (last frame)"].chemistry["bond_error_max_A"] == pytest.approx(0, abs=1e-12)
    graph = CovalentGraph.of_selection(geomol.data.io.trajectory.open_selection(PSF, DCD, "backbone")[1], x[0])
    reference = [trajectory_chemistry(x[s + offsets], graph, x[s]) for s in STARTS]
    assert table["reference MD"].s2s_mse is None
    # the same windows from arrays: the same rows
    arrays = geomol.evaluate_rollout_arrays({"EGNO": model}, x, graph, STARTS, charges=trajectory.charges,
                                            baselines=False, reference=False)
    assert [r.name for r in arrays.rows] == ["EGNO"]
    assert arrays["EGNO"].s2s_mse == pytest.approx(table["EGNO"].s2s_mse, rel=1e-6)
    assert arrays["EGNO"].chemistry["bond_error_max_A"] == pytest.approx(table["EGNO"].chemistry["bond_error_max_A"],
                                                                         rel=1e-5)
    assert table["reference MD"].chemistry["bond_error_max_A"] == pytest.approx(
        max(r.bond_error_max.max() for r in reference))
    # bond restoring keeps every bond at its start length, the model alone does not
    restored = table["EGNO + bond restoring"].chemistry
    assert restored["bond_error_max_A"] < 2e-3 and restored["broken_bond_fraction"] == 0.0
    assert table["EGNO"].chemistry["bond_error_max_A"] > 0.3  # egno-adk stretches bonds within one window
    by_kind = table["EGNO"].chemistry["by_bond_kind"]
    assert set(by_kind) == {"C–CA", "C–N", "C–O", "CA–N"} and sum(k["bonds"] for k in by_kind.values()) == 854
    assert "| CA–N (214) |" in table.bond_kinds_markdown()
    markdown = table.to_markdown()
    assert markdown.count("\n") == 6 and "| EGNO + bond restoring |" in markdown
    assert json.loads(json.dumps(table.to_dict()))["rows"][0]["name"] == "EGNO"


def test_window_starts_and_offsets_shared_by_the_models():
    assert window_starts(98, 15, split="test", delta=15) == list(range(65, 82))  # the data set's test starts
    assert window_starts(98, 60, stride=10) == [0, 10, 20, 30]  # every window reaches s + 60 ≤ 97
    assert window_starts(98, 30, split="test", delta=15) == list(range(65, 68))

    def fake(offsets):
        return SimpleNamespace(protocol=TrajectoryProtocol("md", offsets, selection="backbone", cutoff=6.0))

    assert evaluation_offsets([fake((3, 7, 11, 15)), fake((5, 10, 15))], 15) == [15]
    assert evaluation_offsets([fake((3, 7, 11, 15)), fake((5, 10, 15))], 30) == [15, 30]
    with pytest.raises(ConfigError, match="no common frame"):
        evaluation_offsets([fake((3, 7, 11, 15)), fake((5, 10, 15))], 11)


def test_windows_that_do_not_fit_raise(model):
    with pytest.raises(TrajectoryError, match="cannot reach"):
        geomol.evaluate_rollouts(model, PSF, DCD, starts=[90])
    with pytest.raises(TrajectoryError, match="no start frame"):
        geomol.evaluate_rollouts(model, PSF, DCD, split="test", horizon=40)


def test_rollout_summary_and_report_carry_the_chemistry(model, tmp_path, capsys):
    out = tmp_path / "rollout.dcd"
    result = geomol.rollout(model, PSF, DCD, selection="backbone", start=10, frames=7, out=out, reference=True,
                            summary=tmp_path / "rollout.json")
    record = json.loads((tmp_path / "rollout.json").read_text())
    chemistry = record["chemistry"]
    assert chemistry["frames"] == [13, 17] and chemistry["bond_source"] == "topology" and chemistry["num_bonds"] == 854
    assert record["bond_restoring"] is None and result.chemistry == chemistry
    # the summary's numbers are those of the written frames
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        written = MDTrajectory(out.with_name("rollout_topology.pdb"), out, selection="all").positions
    graph = CovalentGraph.from_bonds(
        CovalentGraph.of_selection(geomol.data.io.trajectory.open_selection(PSF, DCD, "backbone")[1]).bonds,
        ["C"] * written.shape[1])
    direct = trajectory_chemistry(written[1:], graph, written[0])
    np.testing.assert_allclose(chemistry["per_frame"]["bond_error_max_A"], direct.bond_error_max, atol=1e-4)
    assert chemistry["per_frame"]["clashes"] == direct.clashes.tolist()
    reference = record["reference"]
    assert len(reference["rmsd_linear_A"]) == 2 and reference["chemistry"]["frames"] == [13, 17]
    assert reference["chemistry"]["broken_bond_fraction"] == 0.0  # real dynamics keeps its bonds
    # the command, with the bond-restoring projection
    assert main(["rollout", "--model", "egno-adk", "--topology", PSF, "--trajectory", DCD, "--start", "10",
                 "--horizon", "7", "--out", str(tmp_path / "restored.xtc"), "--restore-bonds"]) == 0
    printed = capsys.readouterr().out.replace("\n", " ")
    assert "chemistry vs frame 10 (854 bonds and 1066 angles from the topology)" in printed
    restored = json.loads((tmp_path / "restored.json").read_text())
    assert restored["bond_restoring"]["tolerance_A"] == 1e-3
    assert 1 <= restored["bond_restoring"]["most_sweeps_used"] < 500
    assert restored["bond_restoring"]["largest_bond_error_left_A"] <= 1e-3
    assert restored["chemistry"]["bond_error_max_A"] < 2e-3 and restored["chemistry"]["broken_bond_fraction"] == 0.0
