"""Starting the workers of a real ``geomol serve``: from any folder, and loudly when they cannot start.

The server runs as users run it, through the ``geomol`` console script. From a folder that holds a ``geomol/``
directory (the parent of a clone) its workers start and predict; when the workers cannot start at all (here: a
``torch`` that fails to import, which only the workers import) the server says why and exits with status 1
instead of answering 503 "still starting" for ever.
"""
from __future__ import annotations

import pytest

from tests.serve.conftest import needs_serve_extra
from tests.serve.processes import CONSOLE_SCRIPT, Server, raw_request

needs_serve_extra()

pytestmark = pytest.mark.skipif(not CONSOLE_SCRIPT.is_file(), reason="needs the installed 'geomol' console script")
FAILURE_TIMEOUT = 60.0


def test_workers_start_from_a_folder_that_holds_a_geomol_directory(tmp_path):
    (tmp_path / "geomol" / "data").mkdir(parents=True)  # as in the parent of a clone: no __init__.py
    server = Server(tmp_path / "serve-data", tmp_path / "server.log", "--workers", "1", cwd=tmp_path,
                    console_script=True)
    try:
        server.wait_ready()
        job = server.submit()
        server.wait_until(lambda: server.get(f"/v1/jobs/{job}")["state"] == "done", "the job", 120)
        assert raw_request(server.port, "GET", "/healthz", headers={"Host": f"LOCALHOST:{server.port}"})[0] == 200
    finally:
        server.kill_group()
    assert "ModuleNotFoundError" not in server.log_path.read_text(errors="replace")


def test_the_server_exits_with_the_reason_when_its_workers_cannot_start(tmp_path):
    broken = tmp_path / "broken" / "torch"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise ImportError('this torch is broken on purpose')\n")
    server = Server(tmp_path / "serve-data", tmp_path / "server.log", "--workers", "1", cwd=tmp_path,
                    env={"PYTHONPATH": str(broken.parent)}, console_script=True)
    try:
        status = server.process.wait(timeout=FAILURE_TIMEOUT)
    finally:
        server.kill_group()
    log = server.log_path.read_text(errors="replace")
    assert status == 1, log
    assert "geomol serve: error: stopped, the worker processes cannot start" in log
    assert "this torch is broken on purpose" in log  # the workers' own error is in the log above
