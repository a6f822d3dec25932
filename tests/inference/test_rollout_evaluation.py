"""Models, baselines and the reference MD on the same windows (geomol.evaluate_rollouts), and the chemistry in
every rollout's summary and report (geomol.rollout, geomol rollout), with the shipped egno-fkbp12 on helix MD made
at its frame interval (tests/rollout_fixtures.py). Every expectation follows the model's protocol (target offsets,
o_P), so the tests hold for whatever egno-fkbp12 is shipped. The plot's chemistry panels are drawn by
tests/test_rollout.py's plot test."""
from __future__ import annotations

import copy
import json
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
import torch

import geomol
from geomol.cli import main
from geomol.data.chemistry.covalent_graph import CovalentGraph
from geomol.data.datasets.trajectories.md_trajectory import MDTrajectory, MDTrajectoryDataset
from geomol.data.io.trajectory import open_selection
from geomol.data.chemistry.trajectory import trajectory_chemistry
from geomol.data.dynamics.protocol import TrajectoryProtocol
from geomol.errors import ConfigError, TrajectoryError
from geomol.inference.dynamics.rollout_evaluation import evaluation_offsets, window_starts
from geomol.models.dynamics import s2s_mse, s2t_mse
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.rollout_fixtures import MD_MODEL, helix_md  # noqa: F401 (session fixture)

BACKBONE_KINDS = {"C–CA", "C–N", "C–O", "CA–N"}


@pytest.fixture(scope="module")
def model():
    return geomol.load_model(MD_MODEL)


@pytest.fixture(scope="module")
def trajectory(helix_md):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return MDTrajectory(helix_md.topology, helix_md.trajectory, selection="backbone")


@pytest.fixture(scope="module")
def backbone(helix_md, trajectory):
    """The helix backbone's bonds perceived on frame 0, and how many a backbone of R residues has (4 R − 1)."""
    graph = CovalentGraph.of_selection(open_selection(helix_md.topology, helix_md.trajectory, "backbone")[1],
                                       trajectory.positions[0])
    residues = int(trajectory.residue_block.max()) + 1
    assert len(graph.bonds) == 4 * residues - 1  # N–CA, CA–C, C=O per residue and the peptide bonds
    return graph


def _starts(model) -> list[int]:
    """The first and the last window of one o_P that fits the helix run with its velocity frame."""
    return [1, model.protocol.window_frames + 2]


def stretched(model, atom: int, neighbour: int, by: float = 0.5):
    """A copy of ``model`` whose every predicted frame moves ``atom`` ``by`` Å further from ``neighbour``."""
    broken = copy.deepcopy(model)
    predict = broken.predict_states

    def predict_stretched(x, v, charges=None, **kwargs):
        positions = predict(x, v, charges, **kwargs).clone()  # [S, P, N, 3]
        bond = positions[..., atom, :] - positions[..., neighbour, :]
        positions[..., atom, :] += by * bond / bond.norm(dim=-1, keepdim=True)
        return positions

    broken.predict_states = predict_stretched
    return broken


def test_rows_equal_the_model_and_baselines_computed_directly(model, helix_md, trajectory, backbone):
    starts, offsets = _starts(model), np.array(model.protocol.target_offsets)
    table = geomol.evaluate_rollouts({"EGNO": model}, helix_md.topology, helix_md.trajectory, starts=starts,
                                     restore_bonds=True)
    assert [r.name for r in table.rows] == ["EGNO", "EGNO + bond restoring", "no motion (last frame)",
                                            "linear extrapolation", "reference MD"]
    assert table.offsets == offsets.tolist() and table.starts == starts and "perceived" in table.bonds
    # the model: its prediction on the items of a data set built as in training (an independent path)
    delta, steps = model.protocol.window_frames, model.protocol.num_timesteps
    data = MDTrajectoryDataset(trajectory, split="train", ratios=(1.0, 0.0, 0.0), delta=delta, num_timesteps=steps,
                               cutoff=model.protocol.cutoff)
    assert data.offsets.tolist() == offsets.tolist() and data.begin == 0
    items = [data[s] for s in starts]
    with torch.no_grad():
        predicted = [model(item).x for item in items]  # [N, P, 3] each
    batch = torch.zeros(data.traj.num_atoms, dtype=torch.long)
    for metric, value in ((s2s_mse, table["EGNO"].s2s_mse), (s2t_mse, table["EGNO"].s2t_mse)):
        expected = np.mean([float(metric(p, i.X_target, batch, 1)) for p, i in zip(predicted, items)])
        # float32 positions tens of Å from the origin carry ~1e-5 Å of rounding, which the two paths round
        # differently: a few 1e-4 of an MSE of ~0.003 Å² (a wrong graph or frame would be off by far more)
        assert value == pytest.approx(expected, rel=1e-3)
    # the model's chemistry, from the same predictions against each window's start frame
    x = trajectory.positions.astype(np.float64)
    by_hand = [trajectory_chemistry(p.transpose(0, 1).double().numpy(), backbone, x[s])
               for p, s in zip(predicted, starts)]
    assert table["EGNO"].chemistry["bond_error_max_A"] == pytest.approx(max(c.bond_error_max.max() for c in by_hand),
                                                                        rel=1e-3, abs=1e-5)
    # the baselines and the reference, by hand
    still = [((x[s] - x[s + offsets]) ** 2).mean(axis=(1, 2)) for s in starts]
    linear = [((x[s] + offsets[:, None, None] * (x[s + 1] - x[s]) - x[s + offsets]) ** 2).mean(axis=(1, 2))
              for s in starts]
    assert table["no motion (last frame)"].s2s_mse == pytest.approx(np.mean([e[-1] for e in still]))
    assert table["linear extrapolation"].s2t_mse == pytest.approx(np.mean([e.mean() for e in linear]))
    assert table["no motion (last frame)"].chemistry["bond_error_max_A"] == pytest.approx(0, abs=1e-12)
    reference = [trajectory_chemistry(x[s + offsets], backbone, x[s]) for s in starts]
    assert table["reference MD"].s2s_mse is None
    assert table["reference MD"].chemistry["bond_error_max_A"] == pytest.approx(
        max(r.bond_error_max.max() for r in reference))
    # the same windows from arrays: the same rows
    arrays = geomol.evaluate_rollout_arrays({"EGNO": model}, x, backbone, starts, charges=trajectory.charges,
                                            baselines=False, reference=False)
    assert [r.name for r in arrays.rows] == ["EGNO"]
    assert arrays["EGNO"].s2s_mse == pytest.approx(table["EGNO"].s2s_mse, rel=1e-6)
    assert arrays["EGNO"].chemistry["bond_error_max_A"] == pytest.approx(table["EGNO"].chemistry["bond_error_max_A"],
                                                                         rel=1e-5)
    # bond restoring keeps every bond at its start length
    restored = table["EGNO + bond restoring"].chemistry
    assert restored["bond_error_max_A"] < 2e-3 and restored["broken_bond_fraction"] == 0.0
    by_kind = table["EGNO"].chemistry["by_bond_kind"]
    assert set(by_kind) == BACKBONE_KINDS and sum(k["bonds"] for k in by_kind.values()) == len(backbone.bonds)
    assert f"| CA–N ({by_kind['CA–N']['bonds']}) |" in table.bond_kinds_markdown()
    markdown = table.to_markdown()
    assert markdown.count("\n") == 6 and "| EGNO + bond restoring |" in markdown
    assert json.loads(json.dumps(table.to_dict()))["rows"][0]["name"] == "EGNO"


def test_a_stretched_bond_is_counted_broken_in_every_frame_and_restored(model, helix_md, backbone):
    """A prediction with one bond 0.5 Å too long: broken (> 0.3 Å off) in every predicted frame of every window,
    its error at least 0.5 Å less the model's own; the bond-restoring projection puts it back."""
    atom, neighbour = (int(i) for i in backbone.bonds[len(backbone.bonds) // 2])
    models = {"EGNO": model, "stretched": stretched(model, atom, neighbour)}
    table = geomol.evaluate_rollouts(models, helix_md.topology, helix_md.trajectory, starts=_starts(model),
                                     restore_bonds=True, baselines=False, reference=False)
    plain, broken = table["EGNO"].chemistry, table["stretched"].chemistry
    assert broken["broken_bond_fraction"] == 1.0 and broken["broken_bond_window_fraction"] == 1.0
    assert broken["bond_error_max_A"] >= 0.5 - plain["bond_error_max_A"]
    assert table["stretched"].s2s_mse > table["EGNO"].s2s_mse
    fixed = table["stretched + bond restoring"].chemistry
    assert fixed["bond_error_max_A"] < 2e-3 and fixed["broken_bond_fraction"] == 0.0


def test_judge_protein_counts_a_stretched_bond_and_restoring_keeps_every_bond(model, helix_md, backbone):
    """The long-rollout judge (benchmarks/protein_ensembles.py): a model that stretches one bond by 0.5 Å has it off
    its MD mean in every frame; with ``restore_bonds`` every bond is back to the first start frame's length."""
    from geomol.evaluation.protein_ensembles import judge_protein

    atom, neighbour = (int(i) for i in backbone.bonds[len(backbone.bonds) // 2])
    broken = stretched(model, atom, neighbour)
    plain = judge_protein(broken, helix_md.topology, helix_md.trajectory, starts=2, windows=3)
    assert plain["frames_with_a_bond_off_md_mean"] == 1.0 and plain["bond_restoring"] is None
    assert plain["bond_deviation_from_md_mean_max_A"] > 0.5 - plain["reference_bond_deviation_max_A"]
    fixed = judge_protein(broken, helix_md.topology, helix_md.trajectory, starts=2, windows=3, restore_bonds=True)
    assert fixed["windows"] == 3 and not fixed["diverged"]
    assert fixed["bond_restoring"]["largest_bond_error_left_A"] <= 1e-3
    assert fixed["frames_with_a_bond_off_md_mean"] == 0.0
    assert fixed["bond_deviation_from_md_mean_max_A"] < 0.3
    assert set(fixed["ramachandran"]) == {"phi", "psi", "phi_psi_map"}


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


def test_windows_that_do_not_fit_raise(model, helix_md):
    with pytest.raises(TrajectoryError, match="cannot reach"):
        geomol.evaluate_rollouts(model, helix_md.topology, helix_md.trajectory, starts=[helix_md.frames - 2])
    with pytest.raises(TrajectoryError, match="no start frame"):
        geomol.evaluate_rollouts(model, helix_md.topology, helix_md.trajectory, split="test", horizon=helix_md.frames)


def test_rollout_summary_and_report_carry_the_chemistry(model, helix_md, backbone, tmp_path, capsys):
    offsets = model.protocol.target_offsets
    start, horizon = 2, offsets[min(1, len(offsets) - 1)]  # one window, cut after its second predicted frame
    predicted = [start + o for o in offsets if o <= horizon]
    out = tmp_path / "rollout.dcd"
    result = geomol.rollout(model, helix_md.topology, helix_md.trajectory, selection="backbone", start=start,
                            frames=horizon, out=out, reference=True, summary=tmp_path / "rollout.json")
    record = json.loads((tmp_path / "rollout.json").read_text())
    chemistry = record["chemistry"]
    assert chemistry["frames"] == predicted and chemistry["bond_source"] == "perceived"
    assert chemistry["num_bonds"] == len(backbone.bonds)
    assert record["bond_restoring"] is None and result.chemistry == chemistry
    # the summary's numbers are those of the written frames
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        written = MDTrajectory(out.with_name("rollout_topology.pdb"), out, selection="all").positions
    assert len(written) == 1 + len(predicted) and np.isfinite(written).all()
    graph = CovalentGraph.from_bonds(backbone.bonds, ["C"] * written.shape[1])
    direct = trajectory_chemistry(written[1:], graph, written[0])
    np.testing.assert_allclose(chemistry["per_frame"]["bond_error_max_A"], direct.bond_error_max, atol=1e-4)
    assert chemistry["per_frame"]["clashes"] == direct.clashes.tolist()
    reference = record["reference"]
    assert len(reference["rmsd_linear_A"]) == len(predicted) and reference["chemistry"]["frames"] == predicted
    assert reference["chemistry"]["broken_bond_fraction"] == 0.0  # real dynamics keeps its bonds
    # the command (its default model), with the bond-restoring projection
    assert main(["rollout", "--topology", helix_md.topology, "--trajectory", helix_md.trajectory,
                 "--start", str(start), "--horizon", str(horizon), "--out", str(tmp_path / "restored.xtc"),
                 "--restore-bonds"]) == 0
    printed = capsys.readouterr().out.replace("\n", " ")
    angles = len(backbone.angles)
    assert (f"chemistry vs frame {start} ({len(backbone.bonds)} bonds and {angles} angles from distances" in printed)
    restored = json.loads((tmp_path / "restored.json").read_text())
    assert restored["model"] == MD_MODEL  # the default of --model
    assert restored["bond_restoring"]["tolerance_A"] == 1e-3
    assert 1 <= restored["bond_restoring"]["most_sweeps_used"] < 500
    assert restored["bond_restoring"]["largest_bond_error_left_A"] <= 1e-3
    assert restored["chemistry"]["bond_error_max_A"] < 2e-3 and restored["chemistry"]["broken_bond_fraction"] == 0.0
