"""``geomol fit --ckpt_path last`` after an interruption continues the same run: the same version folder,
the same checkpoints, and a ``metrics.csv`` equal to an uninterrupted run's."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
import torch

from geomol.tasks.callbacks import ValidationReport
from geomol.tasks.resume import EarlierLog, newest_resumable_version
from tests.test_cli_journeys import _nbody

RUN = ["--trainer.max_epochs", "3", "--trainer.check_val_every_n_epoch", "1", "--trainer.log_every_n_steps", "1",
       "--seed_everything", "3"]


class SimulatedKill(Exception):
    pass


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def _same(a: dict[str, str], b: dict[str, str]) -> bool:
    if set(a) != set(b):
        return False
    for key in a:
        if (a[key] == "") != (b[key] == ""):
            return False
        if a[key] and not math.isclose(float(a[key]), float(b[key]), rel_tol=1e-5, abs_tol=1e-7):
            return False
    return True


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_interrupted_fit_resumed_with_ckpt_path_last_equals_an_uninterrupted_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _nbody("fit", tmp_path / "whole", *RUN) == 0
    whole = _rows(tmp_path / "whole" / "egno_nbody" / "version_0" / "metrics.csv")

    def kill_in_epoch_two(self, trainer, module, batch, batch_idx):
        if trainer.global_step == 4:  # 3 steps per epoch: last.ckpt of step 3 exists, one more batch ran
            raise SimulatedKill

    with monkeypatch.context() as patch:
        patch.setattr(ValidationReport, "on_train_batch_start", kill_in_epoch_two, raising=False)
        with pytest.raises(SimulatedKill):
            _nbody("fit", tmp_path / "cut", *RUN)
    run = tmp_path / "cut" / "egno_nbody"
    assert newest_resumable_version(run) == "version_0"
    assert torch.load(run / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 3

    assert _nbody("fit", tmp_path / "cut", *RUN, "--ckpt_path", "last") == 0
    assert sorted(p.name for p in run.iterdir()) == ["version_0"]  # no second version
    resumed = _rows(run / "version_0" / "metrics.csv")
    assert len(resumed) == len(whole) and all(_same(a, b) for a, b in zip(whole, resumed))
    assert torch.load(run / "version_0" / "checkpoints" / "last.ckpt", weights_only=True)["global_step"] == 9


def test_earlier_log_keeps_the_rows_of_steps_before_the_checkpoint(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text("epoch,step,train/loss,val/loss\n0,0,1.5,\n0,2,,0.9\n1,3,1.1,\n1,4,1.0,\n")
    earlier = EarlierLog.read(path)
    assert earlier.header == ["epoch", "step", "train/loss", "val/loss"]
    assert [row["step"] for row in earlier.kept_rows(3)] == ["0", "2"]


def test_no_resumable_version_without_a_last_checkpoint(tmp_path):
    (tmp_path / "run" / "version_0" / "checkpoints").mkdir(parents=True)
    (tmp_path / "run" / "version_0" / "checkpoints" / "best.ckpt").write_bytes(b"")
    assert newest_resumable_version(tmp_path / "run") is None


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_cpu_hours_are_logged_and_carried_over_a_resume(tmp_path, monkeypatch):
    """``CPUTime`` logs a growing ``time/cpu_hours`` at each validation, and a run resumed from a checkpoint
    starts from the count stored in it, not from zero."""
    monkeypatch.chdir(tmp_path)
    with_cpu_time = ["--trainer.callbacks+=geomol.tasks.callbacks.CPUTime", *RUN[:1], "2", *RUN[2:]]
    assert _nbody("fit", tmp_path / "run", *with_cpu_time) == 0
    version = tmp_path / "run" / "egno_nbody" / "version_0"
    hours = [float(row["time/cpu_hours"]) for row in _rows(version / "metrics.csv") if row.get("time/cpu_hours")]
    assert len(hours) == 2 and 0 < hours[0] < hours[1]
    state = torch.load(version / "checkpoints" / "last.ckpt", weights_only=True)["callbacks"]["CPUTime"]
    assert state["cpu_seconds"] >= hours[1] * 3600

    from geomol.tasks.callbacks import CPUTime
    resumed = CPUTime()
    resumed.load_state_dict(state)
    assert resumed.cpu_seconds() >= state["cpu_seconds"]
    assert CPUTime().cpu_seconds() < state["cpu_seconds"]


def _uneven_epochs(monkeypatch) -> None:
    """Make epoch 1 of the n-body training loader one batch shorter and epoch 2 one batch longer than epoch 0
    (3, 2 and 4 batches), as block-budget batching packs each epoch's shuffle into its own number of batches."""
    from geomol.data.batching.sampler import FixedBatchSampler

    whole_epochs = FixedBatchSampler._epoch_batches

    def uneven(self):
        batches = whole_epochs(self)
        if not self.shuffle or len(batches) < 2:
            return batches
        return {1: batches[:-1], 2: batches + batches[:1]}.get(self.epoch, batches)

    monkeypatch.setattr(FixedBatchSampler, "_epoch_batches", uneven)


@pytest.mark.filterwarnings("ignore::UserWarning")
def test_epochs_of_different_lengths_train_every_batch_and_validate_at_their_end(tmp_path, monkeypatch):
    """Every epoch trains on all its batches and validates once, at its end (Lightning alone, which sizes every
    epoch by the first, would skip epoch 1's validation and cut epoch 2 short)."""
    monkeypatch.chdir(tmp_path)
    _uneven_epochs(monkeypatch)
    assert _nbody("fit", tmp_path / "run", *RUN) == 0
    rows = _rows(tmp_path / "run" / "egno_nbody" / "version_0" / "metrics.csv")
    trained = [sum(1 for r in rows if r["epoch"] == str(e) and r.get("train/loss")) for e in range(3)]
    validated = [r["epoch"] for r in rows if r.get("val/loss")]
    assert trained == [3, 2, 4] and validated == ["0", "1", "2"]


EVERY_STEP = ["--trainer.callbacks+=lightning.pytorch.callbacks.ModelCheckpoint", "--trainer.callbacks.filename=last",
              "--trainer.callbacks.every_n_train_steps=1", "--trainer.callbacks.enable_version_counter=false"]


@pytest.mark.parametrize("killed_at_step", [4, 7])  # in the middle of the shorter epoch 1, of the longer epoch 2
@pytest.mark.filterwarnings("ignore::UserWarning")
def test_resumed_in_the_middle_of_an_epoch_of_its_own_length_equals_an_uninterrupted_run(
        tmp_path, monkeypatch, killed_at_step):
    """last.ckpt after every step, the run killed in the middle of an epoch whose length differs from the first
    epoch's: the resumed run continues that epoch's shuffle where it stopped, ends the epoch after its own
    number of batches, validates at its end, and logs exactly what the uninterrupted run logs."""
    monkeypatch.chdir(tmp_path)
    _uneven_epochs(monkeypatch)
    assert _nbody("fit", tmp_path / "whole", *RUN, *EVERY_STEP) == 0
    whole = _rows(tmp_path / "whole" / "egno_nbody" / "version_0" / "metrics.csv")

    def kill(self, trainer, module, batch, batch_idx):
        if trainer.global_step == killed_at_step:
            raise SimulatedKill

    with monkeypatch.context() as patch:
        patch.setattr(ValidationReport, "on_train_batch_start", kill, raising=False)
        with pytest.raises(SimulatedKill):
            _nbody("fit", tmp_path / "cut", *RUN, *EVERY_STEP)
    last = tmp_path / "cut" / "egno_nbody" / "version_0" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == killed_at_step

    assert _nbody("fit", tmp_path / "cut", *RUN, *EVERY_STEP, "--ckpt_path", "last") == 0
    resumed = _rows(tmp_path / "cut" / "egno_nbody" / "version_0" / "metrics.csv")
    assert [r["epoch"] for r in resumed if r.get("val/loss")] == ["0", "1", "2"]
    assert len(resumed) == len(whole) and all(_same(a, b) for a, b in zip(whole, resumed))
