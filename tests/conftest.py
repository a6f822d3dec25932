"""Shared fixtures: where the real data lives, and deterministic torch settings."""
from __future__ import annotations

import os
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GEOMOL_SHARED_DATA", REPO.parent / "shared" / "data"))


def shared_path(*parts: str) -> Path:
    """Path under the shared real-data folder; skips the test if that folder is absent."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared data not found: {path} (set GEOMOL_SHARED_DATA)")
    return path


@pytest.fixture
def shared_data() -> Path:
    return shared_path()


# One thread per test process: on a small shared machine, oversubscribed OpenMP threads make the
# many small kernels of these tests several times slower.
torch.set_num_threads(1)


@pytest.fixture(autouse=True)
def _seed_torch():
    torch.manual_seed(0)
    yield


@pytest.fixture(autouse=True)
def _one_thread_after_cli_runs():
    """``geomol.cli.main`` sets torch's threads to the command's default; later tests keep one."""
    yield
    if torch.get_num_threads() != 1:
        torch.set_num_threads(1)
