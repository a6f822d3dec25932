"""Inputs for the rollout tests.

* :func:`train_tiny_egno`: a tiny EGNO trained for a few steps on MDAnalysisTests' AdK trajectory (CA atoms),
  exported as a shipped model. The checkpoint is written by Lightning after ``Trainer.fit`` with the real data
  module, so it carries the data protocol exactly as ``geomol fit`` records it. Hidden 16, two layers, six steps:
  the tests check the rollout plumbing (windows, velocities, files, errors), not accuracy.
* :func:`helix_md` (session fixture): MD of the 13-residue helix of MDAnalysisTests (``PDB_helix``) made by the
  library's own generator (:func:`geomol.simulate.simulate_protein`, OpenMM implicit solvent), with frames as far
  apart as the shipped ``egno-fkbp12`` was trained on (its protocol's ``frame_interval``, read from the model, so
  the fixture follows whatever model is shipped under that name). Skipped without OpenMM and PDBFixer (the ``md``
  extra).
"""
from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest

datafiles = pytest.importorskip("MDAnalysisTests.datafiles")

SELECTION = "name CA"
TINY_EGNO = dict(node_features=2, edge_features=2, hidden=16, num_layers=2, num_timesteps=4, lr=1e-3)
MD_MODEL = "egno-fkbp12"  # the shipped protein model the MD rollout tests use


def train_tiny_egno(folder: Path, data=None, module_args: dict | None = None, steps: int = 6) -> Path:
    """Fit a tiny EGNO (``module_args``, default :data:`TINY_EGNO`) for ``steps`` steps on ``data`` (default: PSF + DCD,
    CA atoms, Δ 15, P 4); returns the checkpoint path."""
    import lightning.pytorch as pl

    from geomol.tasks import DynamicsModule, MDTrajectoryDataModule

    pl.seed_everything(0, verbose=False)
    data = data or MDTrajectoryDataModule(datafiles.PSF, datafiles.DCD, selection=SELECTION, batch_size=8)
    module = DynamicsModule(**(module_args or TINY_EGNO))
    trainer = pl.Trainer(max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, limit_val_batches=0, accelerator="cpu")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer.fit(module, data)
    path = folder / "tiny_egno.ckpt"
    trainer.save_checkpoint(path)
    return path


@dataclass(frozen=True)
class HelixMD:
    """A generated helix trajectory: ``topology`` (PQR, with the force field's charges), ``trajectory`` (DCD of
    ``frames`` frames, ``frame_interval_ps`` apart) and the summary the generator wrote."""

    topology: str
    trajectory: str
    frames: int
    frame_interval_ps: float
    summary: dict


def helix_frames(window_frames: int) -> int:
    """Frames the rollout tests need: two windows of o_P frames from frame 1, a velocity frame and a spare."""
    return 2 * window_frames + 4


@pytest.fixture(scope="session")
def helix_md(tmp_path_factory) -> HelixMD:
    """The helix simulated once per test session at the shipped MD model's frame interval (about a second:
    0.2 ps of equilibration, then 2 o_P + 4 frames on OpenMM's CPU platform with one thread)."""
    pytest.importorskip("openmm")
    pytest.importorskip("pdbfixer")
    import geomol
    from geomol.simulate import ProteinSettings, simulate_protein

    protocol = geomol.load_model(MD_MODEL).protocol
    settings = ProteinSettings(seed=1, frame_interval_ps=protocol.frame_interval, equilibration_ps=0.2)
    frames = helix_frames(protocol.window_frames)
    out = tmp_path_factory.getbasetemp() / "helix_md"  # one run per session, whichever test module asks first
    if (out / "trajectory.json").is_file():
        summary = json.loads((out / "trajectory.json").read_text())
    else:
        summary = simulate_protein(datafiles.PDB_helix, out, frames, settings, platform="CPU", threads=1,
                                   progress=False)
    return HelixMD(str(out / "topology.pqr"), str(out / "trajectory.dcd"), frames, protocol.frame_interval, summary)
