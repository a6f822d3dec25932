"""The EGNO model cards are generated from recorded learning curves (:mod:`geomol.evaluation.learning_curves`):
other trainings of the same recipe (a run directory or a benchmark result, with the official script's curve when it
ran) become columns of the card, and ``scripts/train_egno_models.py --card-only`` rewrites a shipped card from its
manifest without touching the weights."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from geomol.errors import ConfigError
from geomol.evaluation.learning_curves import (best_so_far, best_validation_checkpoint, comparison_curves,
                                              parse_official_log, seed_runs)
from geomol.config_files import key_value_overrides
from tests.conftest import REPO


def _curve(epochs, val, test):
    return [{"epoch": e, "val_s2s": v, "val_s2t": v / 2, "test_s2s": t, "test_s2t": t / 2, "seconds": 10.0 * e}
            for e, v, t in zip(epochs, val, test)]


def test_comparison_curves_read_run_directories_and_result_files(tmp_path):
    run = tmp_path / "nbody_seed3"
    run.mkdir()
    (run / "curve.json").write_text(json.dumps(_curve([4, 9], [0.2, 0.1], [0.3, 0.15])))
    result = tmp_path / "egno_accuracy_nbody_seed2.json"
    official = [{"epoch": 0, "val_s2s": 0.7, "test_s2s": 0.9}, {"epoch": 5, "val_s2s": 0.4, "test_s2s": 0.5}]
    result.write_text(json.dumps({"seed": 2, "geomol_curve": _curve([4], [0.25], [0.35]), "official_curve": official}))
    changed = tmp_path / "egno_accuracy_mocap_seed1_batch_max.json"
    changed.write_text(json.dumps({"seed": 1, "geomol_curve": _curve([4], [0.2], [0.3]), "official_curve": None,
                                   "model_overrides": {"node_attr_norm": "batch_max"}}))
    columns = comparison_curves([str(run), str(result), str(changed)])
    assert list(columns) == ["nbody_seed3 (same recipe)", "geomol seed 2", "official seed 2, run here",
                             "geomol seed 1, node_attr_norm=batch_max"]
    assert columns["official seed 2, run here"] == official
    assert columns["nbody_seed3 (same recipe)"][1]["test_s2s"] == 0.15


def _run_folder(runs, name, epochs, val, checkpoints):
    run = runs / name
    (run / "checkpoints").mkdir(parents=True)
    (run / "curve.json").write_text(json.dumps(_curve(epochs, val, val)))
    for epoch in checkpoints:
        (run / "checkpoints" / f"best-epoch={epoch}.ckpt").write_bytes(b"")
    return run


def test_best_validation_checkpoint_follows_the_curve_not_the_file_names(tmp_path):
    # a run resumed in a copied folder: the earlier run's best (epoch 9) lies beside the new best (epoch 14)
    run = _run_folder(tmp_path, "toluene_seed1", [4, 9, 14, 19], [0.4, 0.2, 0.1, 0.1], [9, 14])
    assert best_validation_checkpoint(run) == (run / "checkpoints" / "best-epoch=14.ckpt", 14, 19)
    (run / "checkpoints" / "best-epoch=14.ckpt").unlink()
    with pytest.raises(FileNotFoundError, match="best-epoch=14.ckpt"):
        best_validation_checkpoint(run)


def test_seed_runs_average_only_runs_at_the_first_seeds_budget(tmp_path):
    _run_folder(tmp_path, "uracil_seed1", [4, 9], [0.3, 0.2], [9])
    _run_folder(tmp_path, "uracil_seed2", [4, 9], [0.1, 0.2], [4])
    _run_folder(tmp_path, "uracil_seed3", [4], [0.1], [4])  # trained shorter: never mixed in
    used, skipped = seed_runs(tmp_path, "{molecule}_seed{seed}", [1, 2, 3, 4], molecule="uracil")
    assert {seed: (path.name, epoch) for seed, (path, epoch) in used.items()} == {
        1: ("best-epoch=9.ckpt", 9), 2: ("best-epoch=4.ckpt", 4)}
    assert sorted(skipped) == [3, 4]
    assert "trained 5 epochs, seed 1 10" in skipped[3] and "no run" in skipped[4]
    with pytest.raises(FileNotFoundError):  # the first seed sets the budget, so its run must exist
        seed_runs(tmp_path, "{molecule}_seed{seed}", [4, 1], molecule="uracil")


def test_card_only_rewrites_the_card_from_the_manifest_with_the_new_columns(tmp_path):
    model_dir = tmp_path / "egno-nbody"
    model_dir.mkdir()
    shutil.copy(REPO / "models" / "egno-nbody" / "manifest.json", model_dir)
    shipped = json.loads((model_dir / "manifest.json").read_text())["metrics"]
    epochs = [r["epoch"] for r in shipped["learning_curve"]]
    other = _curve(epochs, [1.0 / (1 + e) for e in epochs], [0.123456] * len(epochs))
    result = tmp_path / "seed2.json"
    result.write_text(json.dumps({"seed": 2, "geomol_curve": other, "official_curve": None}))
    done = subprocess.run([sys.executable, "scripts/train_egno_models.py", "--models", "nbody", "--card-only",
                           "--out-dir", str(tmp_path), "--compare-runs", str(result)], cwd=REPO, capture_output=True,
                          text=True, timeout=300, env={**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr
    assert "egno-nbody: card rewritten" in done.stdout
    card = (model_dir / "README.md").read_text()
    header = next(line for line in card.splitlines() if line.startswith("| epoch ≤"))
    assert "geomol seed 2 test S2S" in header
    row_535 = next(line for line in card.splitlines() if line.startswith("| 535 |"))
    assert "0.12346" in row_535 and f"{shipped['test_s2s_mse']:.5g}" in card
    assert sorted(p.name for p in model_dir.iterdir()) == ["README.md", "manifest.json"]  # no weights written


def test_official_log_lines_become_a_curve():
    log = ("train epoch 0 avg loss: 15.2\n==> val epoch 0 avg loss: 0.74931 avg lploss: 0\n"
           "==> test epoch 0 avg loss: 0.90897 avg lploss: 0\n==> val epoch 5 avg loss: 0.3 avg lploss: 0\n")
    assert parse_official_log(log) == [{"epoch": 0, "val_s2s": 0.74931, "test_s2s": 0.90897}]
    curve = [{"epoch": 0, "val_s2s": 0.7, "test_s2s": 0.9}, {"epoch": 5, "val_s2s": 0.4, "test_s2s": 0.5},
             {"epoch": 10, "val_s2s": 0.45, "test_s2s": 0.2}]
    assert best_so_far(curve, 10) == curve[1]  # the lowest validation S2S, not the lowest test S2S
    assert best_so_far(curve, 4) == curve[0] and best_so_far(curve, -1) is None
    partial = [{"epoch": 0, "val_s2s": 0.1}, *curve[1:]]  # the best validation lacks the test figure asked for
    assert best_so_far(partial, 10, "test_s2s") == curve[1] and best_so_far(partial, 10) == partial[0]


def test_model_overrides_are_parsed_as_yaml_values_and_malformed_ones_refused():
    assert key_value_overrides(["node_attr_norm=batch_max", "hidden=32", "modes=[1, 2]"]) == {
        "node_attr_norm": "batch_max", "hidden": 32, "modes": [1, 2]}
    with pytest.raises(ConfigError, match="--model-arg wants KEY=VALUE, got 'batch_max'"):
        key_value_overrides(["batch_max"])
    with pytest.raises(ConfigError, match="--option wants KEY=VALUE, got '=3'"):
        key_value_overrides(["=3"], "--option")
