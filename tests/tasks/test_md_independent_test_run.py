"""MDTrajectoryDataModule with a test trajectory from an independent run."""
from __future__ import annotations

import pytest

from geomol.errors import ConfigError
from geomol.tasks import MDTrajectoryDataModule


def test_test_windows_come_from_the_independent_run():
    from MDAnalysisTests.datafiles import DCD, DCD2, PSF

    data = MDTrajectoryDataModule(PSF, DCD, selection="name CA", delta=15, ratios=(0.8, 0.2, 0.0),
                                  test_trajectory=DCD2)
    data.setup()
    train, valid, test = (data.splits[s] for s in ("train", "valid", "test"))
    assert test.traj is not train.traj and test.traj.source[-1] == DCD2
    assert (test.begin, test.end) == (0, len(test.traj) - 1 - 15)  # every window of the other run
    assert valid.end <= len(train.traj) - 1 - 15 and train.end <= valid.begin
    assert test[0].X.shape == train[0].X.shape


def test_a_test_fraction_with_a_test_run_is_refused():
    from MDAnalysisTests.datafiles import DCD, DCD2, PSF

    with pytest.raises(ConfigError, match="test fraction"):
        MDTrajectoryDataModule(PSF, DCD, test_trajectory=DCD2)
