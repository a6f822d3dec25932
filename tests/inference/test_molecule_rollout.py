"""Small-molecule models read the molecule they are given: any atom order in, the same order out; another molecule
refused; a generative model's seeded rollout repeats; the ensemble report compares with a reference run."""
from __future__ import annotations

import json

import numpy as np
import pytest

import geomol
from geomol.cli import main
from geomol.data.chemistry.molecule_frames import read_molecule_frames
from geomol.data.vocab import ELEMENTS
from geomol.errors import MoleculeMismatchError
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)

pytest.importorskip("rdkit")


def _write_xyz(path, numbers, frames, order) -> None:
    with open(path, "w") as out:
        for frame in frames:
            out.write(f"{len(order)}\nframe\n")
            out.writelines(f"{ELEMENTS[numbers[a] - 1]} {frame[a, 0]:.6f} {frame[a, 1]:.6f} {frame[a, 2]:.6f}\n"
                           for a in order)


def _aspirin_frames(count=3, seed=3):
    from geomol.simulate.molecules import starting_structure

    start = starting_structure("aspirin", seed=seed)
    rng = np.random.default_rng(seed)
    return start, start.positions + 0.01 * rng.standard_normal((count, *start.positions.shape))


def _heavy_in_file_order(numbers, order):
    return [a for a in order if numbers[a] > 1]


@pytest.mark.parametrize("with_hydrogens", [True, False])
def test_a_permuted_file_gives_the_permuted_trajectory(tmp_path, with_hydrogens):
    start, frames = _aspirin_frames()
    atoms = np.arange(len(start.numbers)) if with_hydrogens else np.flatnonzero(start.numbers > 1)
    outputs = {}
    for name, order in (("plain", atoms), ("shuffled", np.random.default_rng(0).permutation(atoms))):
        _write_xyz(tmp_path / f"{name}.xyz", start.numbers, frames, order)
        result = geomol.rollout("egno-md17-aspirin", tmp_path / f"{name}.xyz", out=tmp_path / f"{name}_roll.xyz",
                                start=0, windows=2)
        written = read_molecule_frames(tmp_path / f"{name}_roll.xyz")
        heavy = _heavy_in_file_order(start.numbers, order)
        assert written.atomic_numbers.tolist() == start.numbers[heavy].tolist()  # the file's heavy atoms, its order
        np.testing.assert_allclose(written.positions[0], frames[0][heavy], atol=1e-3)  # the start frame first
        outputs[name] = dict(zip(heavy, written.positions.transpose(1, 0, 2)))
        assert result.windows == 2 and len(written) == 1 + 2 * 8
    for atom, path in outputs["plain"].items():
        np.testing.assert_allclose(outputs["shuffled"][atom], path, atol=1e-3)


def test_another_molecule_is_refused(tmp_path):
    from geomol.simulate.molecules import starting_structure

    other = starting_structure("salicylic", seed=1)
    _write_xyz(tmp_path / "salicylic.xyz", other.numbers, other.positions[None].repeat(2, 0),
               np.arange(len(other.numbers)))
    with pytest.raises(MoleculeMismatchError, match="heavy atoms are C7O3"):
        geomol.rollout("egno-md17-aspirin", tmp_path / "salicylic.xyz", out=tmp_path / "roll.xyz")


@pytest.fixture(scope="module")
def flow_checkpoint(tmp_path_factory):
    """A tiny EGNOFlow trained for a few steps by geomol fit on a fake ethanol run (windows of 4 frames)."""
    from tests.builders import write_md17

    root = tmp_path_factory.mktemp("flow")
    data = write_md17(root / "md17_ethanol.npz", frames=300)
    main(["fit", "--config", "egno_flow_molecule",
                     "--data.init_args.paths", f"[{data}]", "--data.init_args.delta", "8",
                     "--data.init_args.num_timesteps", "4", "--data.init_args.skip_frames", "0",
                     "--data.init_args.valid_stride", "20", "--model.init_args.num_timesteps", "4",
                     "--model.init_args.num_modes", "2", "--model.init_args.hidden", "16",
                     "--trainer.max_steps", "3", "--trainer.val_check_interval", "3",
                     "--trainer.default_root_dir", str(root / "runs"), "--trainer.logger", "false"])
    return next((root / "runs").rglob("last.ckpt")), data


def test_a_seeded_generative_rollout_repeats_and_reports_its_ensemble(tmp_path, flow_checkpoint):
    checkpoint, data = flow_checkpoint
    model = geomol.load_model(checkpoint)
    assert model.generative and model.protocol.kind == "molecule" and model.protocol.seeds_in_distribution
    runs = [geomol.rollout(model, data, out=tmp_path / f"roll{k}.xyz", start=20, windows=3, seed=seed,
                           reference=True, summary=tmp_path / f"roll{k}.json")
            for k, seed in enumerate((4, 4, 5))]
    frames = [read_molecule_frames(tmp_path / f"roll{k}.xyz").positions for k in range(3)]
    np.testing.assert_array_equal(frames[0], frames[1])
    assert not np.allclose(frames[0][1:], frames[2][1:])
    summary = json.loads((tmp_path / "roll0.json").read_text())
    ensemble = summary["ensemble"]
    assert set(ensemble["js_divergence"]) == {"bond", "angle", "torsion"}
    assert 0 <= ensemble["js_divergence"]["bond"] <= 1 and ensemble["verdict"]
    assert summary["inputs"]["velocity_in_distribution"] is True and runs[0].windows == 3


def test_evaluation_reads_a_file_with_its_atoms_in_another_order_as_the_same_molecule(tmp_path):
    """md17_test_table once read heavy atoms in the file's order whatever the model's, and a permuted run of the
    same molecule scored thousands of Å² silently: the atoms are matched to the model's molecule first."""
    from tests.builders import write_md17

    path = write_md17(tmp_path / "md17_ethanol.npz", frames=3200)
    with np.load(path) as data:
        R, z = data["R"], data["z"]
    order = [2, 0, 1, 4, 3, 5, 8, 6, 7]  # the oxygen first
    np.savez(tmp_path / "permuted.npz", R=R[:, order], z=z[order])
    tables = [geomol.evaluate_rollouts({"EGNO": "egno-md17-ethanol"}, f, starts=[0, 40], baselines=False)
              for f in (path, tmp_path / "permuted.npz")]
    first, second = (t["EGNO"] for t in tables)
    assert first.s2s_mse == pytest.approx(second.s2s_mse, rel=1e-5) and first.s2s_mse < 1.0
    with pytest.raises(MoleculeMismatchError):
        geomol.evaluate_rollouts("egno-md17-aspirin", path, starts=[0])


def test_the_sampler_settings_are_saved_with_the_model_and_refused_where_they_make_no_sense(tmp_path,
                                                                                              flow_checkpoint):
    from geomol.errors import ConfigError

    checkpoint, data = flow_checkpoint
    model = geomol.load_model(checkpoint)
    model.set_sampling(steps=3, noise=0.5)
    saved = geomol.load_model(model.save(tmp_path / "flow", name="flow"))
    assert (saved.network.sampling_steps, saved.network.sampling_noise) == (3, 0.5)
    rolls = {}
    for noise in (0.5, 0.0):
        saved.set_sampling(noise=noise)
        rolls[noise] = geomol.rollout(saved, data, out=tmp_path / f"roll{noise}.xyz", start=20, windows=2, seed=1)
    frames = [read_molecule_frames(tmp_path / f"roll{noise}.xyz").positions for noise in (0.5, 0.0)]
    assert not np.allclose(frames[0][1:], frames[1][1:])
    with pytest.raises(ConfigError, match="η must be ≥ 0"):
        saved.set_sampling(noise=-1)
    with pytest.raises(ConfigError, match="no sampler"):
        geomol.load_model("egno-md17-ethanol").set_sampling(noise=1.0)
