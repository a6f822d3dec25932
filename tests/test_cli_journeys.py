"""The documented ``geomol fit|validate|test|predict`` journeys, as a Lightning user runs them.

Each test drives the command (in-process through :func:`geomol.cli.main`, or ``python -m geomol`` in a
subprocess) from a folder outside the repository and checks the files it writes and what it says.
"""
from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

from geomol.cli import main
from tests import builders
from tests.conftest import REPO

CONFIGS = REPO / "configs"
NBODY = ["--data.init_args.num_train", "60", "--data.init_args.num_valid", "20", "--data.init_args.num_test", "20",
         "--data.init_args.max_train", "60", "--data.init_args.batch_size", "20"]


def _nbody(command: str, root: Path, *extra: str) -> int:
    return main([command, "--config", str(CONFIGS / "egno_nbody.yaml"), *NBODY, "--data.init_args.cache_dir",
                 str(root.parent / "nbody_cache"), "--trainer.default_root_dir", str(root), *extra])


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_fit_test_predict_stay_in_the_run_folder(tmp_path, monkeypatch, capsys):
    """Items 1, 2, 3, 5: a run too short to validate still ends with last.ckpt and says why nothing was
    selected; a validated run prints its metrics; everything lands below --trainer.default_root_dir;
    test and predict on a checkpoint log into its run (no new version, no 'dirpath has changed')."""
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "elsewhere" / "out"
    assert _nbody("fit", root, "--trainer.max_epochs", "1") == 0  # validation only every 5 epochs
    said = capsys.readouterr().out
    run = root / "egno_nbody" / "version_0"
    last = run / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 3
    assert "no checkpoint selected by val/s2s_mse" in said and f"last checkpoint: {last}" in said
    assert not (tmp_path / "runs").exists() and (root / "tensorboard" / "egno_nbody" / "version_0").is_dir()

    assert _nbody("fit", root, "--trainer.max_epochs", "2", "--trainer.check_val_every_n_epoch", "1") == 0
    said = capsys.readouterr().out
    assert "validation after epoch 0, step 3: val/loss" in said and "val/s2s_mse" in said
    assert "validation after epoch 1, step 6:" in said and "best checkpoint (val/s2s_mse" in said

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert _nbody("test", root, "--ckpt_path", str(last), "--threads", "1") == 0
        assert _nbody("predict", root, "--ckpt_path", str(last)) == 0
    assert not [w for w in caught if "dirpath has changed" in str(w.message) or "Be aware" in str(w.message)]
    assert sorted(p.name for p in (root / "egno_nbody").iterdir()) == ["version_0", "version_1"]
    assert "test/s2s_mse" in (run / "test" / "metrics.csv").read_text()
    rows = _rows(run / "predict" / "predictions.csv")
    assert [r["name"] for r in rows] == [f"nbody_test_{i}" for i in range(20)]
    assert set(rows[0]) == {"name", "num_nodes", "s2s_mse", "s2t_mse"} and float(rows[0]["s2s_mse"]) > 0
    items = json.loads((run / "predict" / "predictions.json").read_text())
    assert len(items) == 20 and torch.tensor(items[0]["positions"]).shape == (5, 5, 3)
    assert str(run / "predict" / "predictions.csv") in capsys.readouterr().out


@pytest.mark.parametrize("budget, steps", [(["--trainer.max_steps", "2"], 2),
                                           (["--trainer.limit_val_batches", "0"], 3),
                                           (["--trainer.max_steps", "2", "--trainer.val_check_interval", "1"], 2)])
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_short_runs_end_with_a_checkpoint_of_their_last_step(tmp_path, monkeypatch, budget, steps):
    """Item 2: max_steps / limit_val_batches / val_check_interval combinations with early stopping and a
    monitored checkpoint in the config neither crash nor end without a checkpoint."""
    monkeypatch.chdir(tmp_path)
    assert _nbody("fit", tmp_path / "out", "--trainer.max_epochs", "1", "--trainer.check_val_every_n_epoch", "1",
                  *budget) == 0
    last = tmp_path / "out" / "egno_nbody" / "version_0" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == steps


@pytest.mark.filterwarnings("ignore")
def test_predict_writes_one_row_per_complex_for_an_affinity_config(tmp_path, monkeypatch):
    """Item 1 for affinity configs: ``geomol predict`` on a fit's checkpoint writes name, pK, measured pK."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GEOMOL_CACHE", str(tmp_path / "cache"))
    common = ["--config", str(CONFIGS / "get_ppa.yaml"), "--data.init_args.table", str(builders.write_ppa(tmp_path / "ppa")),
              "--data.init_args.valid_fraction", "0.2", "--data.init_args.test_fraction", "0.2",
              "--data.init_args.preprocess_workers", "0", "--data.init_args.max_blocks", "150",
              "--model.init_args.hidden", "16", "--trainer.default_root_dir", "out"]
    assert main(["fit", *common, "--trainer.max_steps", "1"]) == 0
    run = tmp_path / "out" / "get_ppa" / "version_0"
    assert main(["predict", *common, "--ckpt_path", str(run / "checkpoints" / "last.ckpt")]) == 0
    rows = _rows(run / "predict" / "predictions.csv")
    assert rows and all(r["name"].startswith("c") for r in rows)
    assert set(rows[0]) == {"name", "pK", "measured_pK"}
    assert {float(r["measured_pK"]) for r in rows} <= {6 + 0.5 * i for i in range(6)}


def test_a_missing_data_folder_is_one_line_naming_the_option(tmp_path):
    """Item 4: the config's ${GEOMOL_SHARED_DATA}/plb does not exist: one clean line naming the folder and the
    option, exit 1 (from any directory: the config is named by its short name)."""
    empty = tmp_path / "no_shared_data"
    empty.mkdir()
    done = subprocess.run([sys.executable, "-m", "geomol", "fit", "--config", "get_plb", "--shared-data", str(empty)],
                          cwd=tmp_path, capture_output=True, text=True, env=_env(), timeout=300)
    assert done.returncode == 1
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert errors == [errors[-1]] and errors[-1].startswith(f"geomol fit: error: {empty / 'plb'}: ")
    assert errors[-1].endswith("pass --data.init_args.root PATH")
    assert not (tmp_path / "runs").exists()


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
