"""One running ``geomol serve`` app for the API and browser tests (two workers, default limits), and helpers.

Its workers fork from one forkserver that imports torch, RDKit and the API once for the whole session;
the apps with other settings (limits, token) share its job store and worker pool, so they start nothing.
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import pytest

from geomol.serve.settings import ServeSettings
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
BASE_URL = "http://localhost"
JOB_TIMEOUT = 120.0
START_TIMEOUT = 180.0


def example_upload(*roles: str) -> dict:
    """Multipart ``files=`` for the example: receptor, ligands (SDF), measured, reference, smiles (.smi)."""
    paths = {"receptor": "tnks2_protein.pdb", "ligands": "tnks2_ligands.sdf", "measured": "tnks2_measured.csv",
             "reference": "tnks2_ligands.sdf", "smiles": "tnks2_analogues.smi"}
    files = {}
    for role in roles:
        field = "ligands" if role == "smiles" else role
        files[field] = (paths[role], (EXAMPLE / paths[role]).read_bytes())
    return files


def wait_for_job(client, job_id: str, timeout: float = JOB_TIMEOUT, states=("done", "failed")) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        job = client.get(f"/v1/jobs/{job_id}").json()
        if job["state"] in states:
            return job
        time.sleep(0.1)
    raise AssertionError(f"job {job_id} still {job['state']} after {timeout} s")


def needs_serve_extra() -> None:
    """Skip (each test module calls this) where the optional extra ``serve`` or httpx is not installed."""
    for module in ("fastapi", "uvicorn", "multipart", "httpx"):
        pytest.importorskip(module)


class Served:
    """The session's app: ``client`` (TestClient), ``app``, ``runtime``, and apps sharing its runtime."""

    def __init__(self, client, app, settings: ServeSettings):
        self.client, self.app, self.settings = client, app, settings
        self.runtime = app.state.runtime

    def sibling(self, settings: ServeSettings, *, pool=None):
        """A client of a new app with ``settings`` on this job store (and this pool, or ``pool``)."""
        from fastapi.testclient import TestClient

        from geomol.serve.app import create_app
        from geomol.serve.routes import Runtime

        app = create_app(settings)
        app.state.runtime = Runtime(settings, self.runtime.store, pool or self.runtime.pool)
        return TestClient(app, base_url=BASE_URL, raise_server_exceptions=False, follow_redirects=False)


@pytest.fixture(scope="session")
def served(tmp_path_factory):
    needs_serve_extra()
    from fastapi.testclient import TestClient

    from geomol.serve.app import create_app

    warnings.filterwarnings("ignore", message=".*httpx.*", category=DeprecationWarning)
    settings = ServeSettings(data_dir=tmp_path_factory.mktemp("serve"), workers=2)
    app = create_app(settings)
    with TestClient(app, base_url=BASE_URL, raise_server_exceptions=False) as client:
        deadline = time.monotonic() + START_TIMEOUT  # the first worker waits for the forkserver's imports
        while client.get("/healthz").json()["pool"]["ready"] < settings.workers and time.monotonic() < deadline:
            time.sleep(0.2)
        assert client.get("/v1/models").status_code == 200
        yield Served(client, app, settings)


@pytest.fixture(scope="session")
def example_job(served) -> dict:
    """The example receptor, ligands and measured values, predicted once by the server."""
    response = served.client.post("/v1/jobs", files=example_upload("receptor", "ligands", "measured"))
    assert response.status_code == 202, response.text
    return wait_for_job(served.client, response.json()["id"])
