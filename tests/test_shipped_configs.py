"""Issue 43, item 5: ``geomol fit`` discoverable — shipped configs listed, named from any directory, their data
under ``$GEOMOL_SHARED_DATA`` (or ``--shared-data``), and Lightning's noise left out."""
from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from geomol.shipped_configs import (
    CONFIGS_DIR,
    config_summary,
    expand_shared_data,
    resolve_config,
    resolve_config_arguments,
    shipped_configs,
    take_shared_data_option,
)
from tests.conftest import REPO, shared_path


def test_bare_fit_lists_every_shipped_config_in_80_columns_without_importing_torch(tmp_path):
    probe = ("import sys; from geomol.cli import main; code = main(['fit']); "
             "print('heavy:', [m for m in ('torch', 'lightning') if m in sys.modules]); sys.exit(code)")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "COLUMNS": "80"}, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "heavy: []" and max(len(line) for line in lines) <= 80
    configs = shipped_configs()
    listed = [line.split()[0] for line in lines if line.startswith("  ") and not line.lstrip().startswith("[")]
    assert [name for name in configs if "/" not in name] == [n for n in listed if not n.endswith("/…")]
    assert {n.split("/")[0] + "/…" for n in configs if "/" in n} == {n for n in listed if n.endswith("/…")}
    assert "geomol fit --config NAME --help" in done.stdout


def test_configs_are_package_data_named_by_short_name_from_anywhere(tmp_path, monkeypatch):
    assert (REPO / "geomol" / "configs").resolve() == (REPO / "configs").resolve() == CONFIGS_DIR.resolve()
    monkeypatch.chdir(tmp_path)
    assert resolve_config("get_plb") == str(CONFIGS_DIR / "get_plb.yaml")
    assert resolve_config("configs/get_plb.yaml") == str(CONFIGS_DIR / "get_plb.yaml")  # docs' form, elsewhere
    assert resolve_config("md17/aspirin") == str(CONFIGS_DIR / "md17" / "aspirin.yaml")
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "get_plb.yaml").write_text("seed_everything: 1\n")
    assert resolve_config("configs/get_plb.yaml") == "configs/get_plb.yaml"  # a file that exists is used
    assert resolve_config("no_such_config") == "no_such_config"  # left for Lightning to report
    assert resolve_config_arguments(["fit", "--config", "egno_md17", "--config=md17/aspirin", "--x", "get_plb"]) == [
        "fit", "--config", str(CONFIGS_DIR / "egno_md17.yaml"), f"--config={CONFIGS_DIR / 'md17' / 'aspirin.yaml'}",
        "--x", "get_plb"]
    assert config_summary(CONFIGS_DIR / "get_lep.yaml") == "GET pair classifier on ATOM3D LEP, the official LEP " \
                                                           "configuration"


def test_data_roots_come_from_the_shared_data_folder_not_the_clone(tmp_path, monkeypatch):
    for path in shipped_configs().values():
        text = path.read_text(encoding="utf-8")
        data_lines = [line for line in text.splitlines() if not line.lstrip().startswith("#")]
        assert not any("../shared" in line for line in data_lines), path
    monkeypatch.setenv("GEOMOL_SHARED_DATA", str(tmp_path))
    assert expand_shared_data("${GEOMOL_SHARED_DATA}/plb") == f"{tmp_path}/plb"
    assert take_shared_data_option(["fit", "--shared-data", "/d", "--config", "x"]) == ("/d", ["fit", "--config", "x"])
    assert take_shared_data_option(["fit", "--shared-data=/e"]) == ("/e", ["fit"])
    with pytest.raises(ValueError):
        take_shared_data_option(["fit", "--shared-data"])


def test_a_shipped_config_builds_from_another_directory_with_the_shared_data(tmp_path, monkeypatch):
    from geomol.tasks.runs import build_from_config
    from geomol.tasks.quiet import ModelSummary

    plb = shared_path("plb")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GEOMOL_SHARED_DATA", str(plb.parent))
    cli = build_from_config("get_plb", {"data": {"init_args": {"targets": ["cdk2", "cmet", "ptp1b"], "n_folds": 3}},
                                        "trainer": {"default_root_dir": str(tmp_path / "runs")}})
    assert cli.datamodule.plb_root == f"{plb.parent}/plb"
    summaries = [c for c in cli.trainer.callbacks if "ModelSummary" in type(c).__name__]
    assert summaries and all(isinstance(c, ModelSummary) for c in summaries)


def test_lightning_advertisements_and_empty_flop_counts_are_left_out(caplog, capsys):
    import torch
    from lightning.pytorch.utilities import rank_zero_info
    from lightning.pytorch.utilities.model_summary import summarize

    from geomol.tasks.quiet import ModelSummary, quiet_lightning

    quiet_lightning()
    with caplog.at_level(logging.INFO):
        rank_zero_info("💡 Tip: For seamless cloud logging, try installing something")
        rank_zero_info("GPU available: False, used: False")
    assert [r.getMessage() for r in caplog.records] == ["GPU available: False, used: False"]

    import lightning.pytorch as pl

    class Tiny(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(3, 2)

    summary = summarize(Tiny(), max_depth=1)
    ModelSummary.summarize(summary._get_summary_data(), summary.total_parameters, summary.trainable_parameters,
                           summary.model_size, summary.total_training_modes, summary.total_flops)
    printed = capsys.readouterr().out
    assert "layer" in printed and "Linear" in printed and "Total params: 8" in printed and "FLOPs" not in printed
