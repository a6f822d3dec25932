"""Every limit and guard of geomol serve: token, host, sizes, ligand count, content, queue, errors as JSON."""
from __future__ import annotations

import argparse
import dataclasses
import gzip
import os
import re
import shlex
import stat

import pytest

from geomol.errors import ConfigError
from geomol.serve.pool import WorkerPool
from geomol.serve.settings import ServeSettings, read_token
from tests.conftest import REPO
from tests.serve.conftest import EXAMPLE, example_upload, needs_serve_extra, wait_for_job

needs_serve_extra()

TOKEN = "team-secret-0123456789abcdef"


def _error(response, status: int) -> dict:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["status"] == status and "Traceback" not in error["message"]
    return error


# ---------------------------------------------------------------------- who may call
def test_other_hosts_need_a_token_and_tokens_must_be_long_and_private(tmp_path):
    with pytest.raises(ConfigError, match="--token-file"):
        ServeSettings(host="0.0.0.0")
    with pytest.raises(ConfigError, match="at least 16"):
        ServeSettings(host="0.0.0.0", token="short")
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, 0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        read_token(token_file)
    os.chmod(token_file, stat.S_IRUSR | stat.S_IWUSR)
    assert read_token(token_file) == TOKEN
    assert ServeSettings(host="::1").host == "::1"


def test_the_command_refuses_a_public_host_without_a_token(capsys):
    from geomol.cli import main

    assert main(["serve", "--host", "0.0.0.0", "--port", "0"]) == 1
    assert "--token-file" in capsys.readouterr().err


def test_the_documented_team_command_gives_a_tokened_loopback_server(tmp_path):
    """docs/serve.md's team command (not run: a server runs until stopped) parses into the settings it promises."""
    from geomol.commands import serve as command

    blocks = re.findall(r"```bash\n(.*?)```", (REPO / "docs" / "serve.md").read_text(encoding="utf-8"), re.S)
    words = shlex.split(next(b for b in blocks if "--token-file" in b).replace("\\\n", " "), comments=True)
    assert words[:2] == ["geomol", "serve"]
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    os.chmod(token_file, stat.S_IRUSR | stat.S_IWUSR)
    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    args = parser.parse_args([str(token_file) if w == "/etc/geomol/token" else w for w in words[2:]])
    settings = command.settings_from(args)
    assert (settings.host, settings.port, settings.token, settings.workers) == ("127.0.0.1", 8000, TOKEN, 4)
    assert str(settings.data_dir) == "/srv/geomol"


def test_with_a_token_every_request_needs_it(served):
    client = served.sibling(ServeSettings(host="0.0.0.0", token=TOKEN, data_dir=served.settings.data_dir))
    for path in ("/healthz", "/v1/models", "/v1/jobs", "/openapi.json", "/static/app.js"):
        assert _error(client.get(path), 401)["message"].startswith("a token is required")
    assert _error(client.post("/v1/jobs", files=example_upload("receptor", "ligands")), 401)
    assert _error(client.get("/v1/jobs", headers={"Authorization": "Bearer " + TOKEN[:-1] + "x"}), 401)[
        "message"].startswith("wrong token")
    assert client.get("/v1/jobs", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert client.get("/").headers["location"] == "/login"
    assert client.get("/login").status_code == 200 and client.get("/static/login.js").status_code == 200
    wrong = client.post("/login", data={"token": "guess-guess-guess-guess"})
    assert wrong.status_code == 303 and wrong.headers["location"] == "/login?wrong=1"
    right = client.post("/login", data={"token": TOKEN})
    cookie = right.headers["set-cookie"]
    assert right.status_code == 303 and "HttpOnly" in cookie and "SameSite=strict" in cookie
    assert client.get("/").status_code == 200  # the cookie now travels with every request
    assert client.get("/v1/jobs").status_code == 200


def test_without_a_token_only_loopback_host_names_are_answered(served):
    assert _error(served.client.get("/healthz", headers={"Host": "rebound.example.com"}), 421)
    assert served.client.get("/healthz", headers={"Host": "127.0.0.1:8000"}).status_code == 200
    assert served.client.get("/healthz", headers={"Host": "[::1]:8000"}).status_code == 200
    assert served.client.get("/healthz", headers={"Host": "LOCALHOST:8000"}).status_code == 200  # any case


def test_security_headers(served):
    page = served.client.get("/")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff" and page.headers["x-frame-options"] == "DENY"
    assert served.client.get("/v1/jobs").headers["cache-control"] == "no-store"
    assert "https://" not in page.text and "http://" not in page.text  # nothing from elsewhere: works offline


# ---------------------------------------------------------------------- sizes and counts
def test_oversized_uploads_are_refused_by_declared_or_counted_size(served):
    small = served.settings.with_limits(max_request_bytes=64 * 1024)
    client = served.sibling(small)
    files = example_upload("receptor", "ligands")  # the receptor alone is ~280 kB
    assert _error(client.post("/v1/jobs", files=files), 413)["limit"] == "max_request_bytes"
    body = b"x" * (70 * 1024)
    chunked = client.post("/v1/jobs", content=iter([body[:40_000], body[40_000:]]),
                          headers={"Content-Type": "multipart/form-data; boundary=b"})
    assert _error(chunked, 413)["limit"] == "max_request_bytes"


def test_a_gzip_that_unpacks_past_the_limit_is_refused(served):
    client = served.sibling(served.settings.with_limits(max_request_bytes=1024 * 1024))
    bomb = gzip.compress(b"ATOM  " + b" " * (3 * 1024 * 1024))
    files = {"receptor": ("r.pdb.gz", bomb), "ligands": example_upload("ligands")["ligands"]}
    assert len(bomb) < 10_000
    assert "uncompressed" in _error(client.post("/v1/jobs", files=files), 413)["message"]


def test_too_many_ligands(served):
    client = served.sibling(served.settings.with_limits(max_ligands=5))
    error = _error(client.post("/v1/jobs", files=example_upload("receptor", "ligands")), 422)
    assert error["limit"] == "max_ligands" and "6 ligands" in error["message"]
    smiles = "\n".join(["c1ccccc1 benzene"] * 6)
    error = _error(client.post("/v1/jobs", files=example_upload("receptor", "reference"), data={"smiles": smiles}),
                   422)
    assert error["limit"] == "max_ligands"


def test_the_queue_limit_refuses_with_retry_after_and_loses_no_admitted_job(served):
    settings = served.settings.with_limits(max_queue=1)
    store = served.runtime.store
    idle_pool = WorkerPool(store, dataclasses.replace(settings, workers=1))  # never started: jobs only wait
    idle_pool.models = served.runtime.pool.models
    idle_pool.models_ready.set()
    client = served.sibling(settings, pool=idle_pool)
    admitted = [client.post("/v1/jobs", files=example_upload("receptor", "ligands")) for _ in range(2)]
    assert [r.status_code for r in admitted] == [202, 202]
    refused = client.post("/v1/jobs", files=example_upload("receptor", "ligands"))
    assert _error(refused, 503)["limit"] == "max_queue" and int(refused.headers["retry-after"]) >= 1
    queued = {r.id for r in store.list(limit=1000, state="queued")}
    assert {r.json()["id"] for r in admitted} <= queued
    assert len(list(store.jobs_dir.glob("*"))) == len(store.list(limit=10_000))  # the refused one left nothing
    for response in admitted:
        store.discard(response.json()["id"])


# ---------------------------------------------------------------------- content
@pytest.mark.parametrize("role, name, content, status, words", [
    pytest.param("ligands", "ligands.sdf", (EXAMPLE / "tnks2_protein.pdb").read_bytes(), 415, "PDB structure",
                 id="pdb-named-sdf"),
    pytest.param("ligands", "ligands.smi", (EXAMPLE / "tnks2_protein.pdb").read_bytes()[:4000], 415,
                 "not a molecular file", id="pdb-header-named-smi"),
    pytest.param("receptor", "receptor.pdb", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", 415, "binary content",
                 id="png-named-pdb"),
    pytest.param("receptor", "receptor.pdb", (EXAMPLE / "tnks2_ligands.sdf").read_bytes(), 415, "an SD file",
                 id="sdf-named-pdb"),
    pytest.param("receptor", "receptor.pdb", b"", 422, "empty", id="empty"),
    pytest.param("ligands", "ligands.sdf.gz", b"\x1f\x8bnot really gzip", 415, "gzip", id="broken-gzip"),
    pytest.param("measured", "measured.csv", b"compound,IC50\nx,1\n", 415, "without the columns",
                 id="csv-without-columns"),
])
def test_files_are_judged_by_their_content_not_their_name(served, role, name, content, status, words):
    files = example_upload("receptor", "ligands")
    files[role] = (name, content)
    assert words in _error(served.client.post("/v1/jobs", files=files), status)["message"]


def test_client_file_names_never_reach_the_disk(served):
    files = example_upload("receptor", "ligands")
    files["receptor"] = ("../../../escaped.pdb", files["receptor"][1])
    files["ligands"] = ("/tmp/../ligands;rm -rf.sdf", files["ligands"][1])
    response = served.client.post("/v1/jobs", files=files)
    assert response.status_code == 202, response.text
    job = response.json()["id"]
    inputs = served.runtime.store.job_dir(job) / "inputs"
    assert sorted(p.name for p in inputs.iterdir()) == ["ligands.sdf", "receptor.pdb"]  # the server's names
    data_dir = served.settings.data_dir
    assert not any(data_dir.parent.rglob("escaped.pdb")) and not any(data_dir.rglob("*rm -rf*"))
    assert wait_for_job(served.client, job)["state"] == "done"


@pytest.mark.parametrize("roles, data, words", [
    (("receptor", "smiles"), {}, "reference ligand"),
    (("receptor",), {"smiles": "c1ccccc1 benzene"}, "reference ligand"),
    (("receptor", "ligands", "reference"), {}, "only with SMILES"),
    (("receptor", "ligands"), {"smiles": "c1ccccc1"}, "not both"),
    (("receptor",), {}, "not both and not neither"),
    (("receptor", "ligands"), {"model": "../../etc/passwd"}, "no affinity model named"),
    (("receptor", "ligands"), {"model": "egno-fkbp12"}, "no affinity model named"),
    (("receptor", "ligands"), {"pocket_cutoff": "-2"}, "pocket_cutoff"),
    (("ligands",), {}, "receptor"),
])
def test_inconsistent_inputs_are_422_with_the_reason(served, roles, data, words):
    response = served.client.post("/v1/jobs", files=example_upload(*roles), data=data)
    assert words in _error(response, 422)["message"]


def test_a_malformed_multipart_body_is_a_json_error(served):
    response = served.client.post("/v1/jobs", content=b"--x\r\nContent-Disposition: form-data\r\n\r\nno end",
                                  headers={"Content-Type": "multipart/form-data; boundary=x"})
    assert response.status_code in (400, 422) and "error" in response.json()


def test_an_unexpected_failure_is_a_500_without_traceback(served, monkeypatch):
    client = served.sibling(served.settings)

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire /very/secret/path")

    monkeypatch.setattr(served.runtime.store, "list", broken)
    error = _error(client.get("/v1/jobs"), 500)
    assert error["message"].startswith("internal server error") and "secret" not in error["message"]
