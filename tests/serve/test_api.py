"""The /v1 API end to end on a running app with real worker processes: jobs in, results out, failures reported."""
from __future__ import annotations

import concurrent.futures
import math
import os
import signal
import time

import pytest

from geomol.serve.store import JOB_ID
from tests.serve.conftest import EXAMPLE, example_upload, needs_serve_extra, wait_for_job

needs_serve_extra()


def test_health_models_and_offline_api_docs(served):
    health = served.client.get("/healthz").json()
    assert health["status"] == "ok" and health["pool"]["workers"] == 2
    models = served.client.get("/v1/models").json()
    assert {m["name"] for m in models} >= {"contact-corpus", "get-plb"}
    assert [m["name"] for m in models if m["default"]] == ["contact-corpus"]
    spec = served.client.get("/openapi.json").json()
    assert {"/v1/jobs", "/v1/jobs/{job_id}", "/v1/models", "/healthz"} <= set(spec["paths"])
    refusals = spec["paths"]["/v1/jobs"]["post"]["responses"]
    assert refusals["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    assert refusals["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    docs = served.client.get("/docs")
    assert docs.status_code == 200 and "/docs-assets/swagger-ui-bundle.js" in docs.text and "http" not in docs.text
    pytest.importorskip("swagger_ui_bundle")
    assert served.client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200


def test_posed_ligands_with_measured_values_give_the_api_numbers_table_poses_plot_and_drawings(served, example_job):
    import geomol.api

    assert example_job["state"] == "done", example_job["error"]
    assert (example_job["predicted"], example_job["failed"]) == (6, 0)
    job = example_job["id"]
    rows = served.client.get(f"/v1/jobs/{job}/results.json").json()
    direct = geomol.api.predict_affinity(EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf")
    assert [r["name"] for r in rows] == [r.name for r in direct]
    assert all(math.isclose(r["pK"], d.pK, abs_tol=1e-6) for r, d in zip(rows, direct))
    assert rows[0]["measured_pK"] == pytest.approx(6.268)
    csv = served.client.get(f"/v1/jobs/{job}/results.csv")
    assert csv.headers["content-type"].startswith("text/csv") and "attachment" in csv.headers["content-disposition"]
    assert csv.text.splitlines()[0].startswith("name,pK,dG_kcal_mol,Kd_M,pK_std,n_pocket_blocks,error,warnings")
    poses = served.client.get(f"/v1/jobs/{job}/poses.sdf").text
    assert poses.count("$$$$") == 6 and poses.count("<geomol_pK>") == 6
    plot = served.client.get(f"/v1/jobs/{job}/plot.png")
    assert plot.headers["content-type"] == "image/png" and plot.content[:8] == b"\x89PNG\r\n\x1a\n"
    summary = served.client.get(f"/v1/jobs/{job}/summary").json()
    assert summary["comparison"]["n"] == 6 and summary["depictions"] == [True] * 6
    drawing = served.client.get(f"/v1/jobs/{job}/depictions/2.svg")
    assert drawing.headers["content-type"].startswith("image/svg+xml") and "<svg" in drawing.text
    assert "style=" not in drawing.text and "fill='#FFFFFF'" in drawing.text  # drawn under the CSP: no inline styles
    assert served.client.get(f"/v1/jobs/{job}/depictions/6.svg").status_code == 404


def test_smiles_text_posed_on_the_reference(served):
    smiles = (EXAMPLE / "tnks2_analogues.smi").read_text()
    response = served.client.post("/v1/jobs", files=example_upload("receptor", "reference"),
                                  data={"smiles": smiles, "model": "default"})
    assert response.status_code == 202, response.text
    job = wait_for_job(served.client, response.json()["id"])
    assert job["state"] == "done" and job["predicted"] == 5 and job["settings"]["smiles"]
    rows = served.client.get(f"/v1/jobs/{job['id']}/results.json").json()
    assert [r["name"] for r in rows] == ["lig_3a", "lig_5a", "lig_5f", "lig_8a", "lig_7"]
    assert all(r["core_atoms"] >= 5 and r["core_rmsd"] < 1.0 for r in rows)
    assert served.client.get(f"/v1/jobs/{job['id']}/plot.png").status_code == 404  # no measured values


def test_concurrent_jobs_all_finish_with_their_own_results(served):
    def submit(_):
        return served.client.post("/v1/jobs", files=example_upload("receptor", "ligands"))

    with concurrent.futures.ThreadPoolExecutor(4) as threads:
        responses = list(threads.map(submit, range(4)))
    assert [r.status_code for r in responses] == [202] * 4
    ids = [r.json()["id"] for r in responses]
    assert len(set(ids)) == 4 and all(JOB_ID.match(i) for i in ids)
    jobs = [wait_for_job(served.client, i) for i in ids]
    assert [j["state"] for j in jobs] == ["done"] * 4
    tables = [served.client.get(f"/v1/jobs/{i}/results.csv").text for i in ids]
    assert len(set(tables)) == 1 and tables[0].count("\n") == 7
    listed = {j["id"] for j in served.client.get("/v1/jobs", params={"state": "done", "limit": 500}).json()}
    assert set(ids) <= listed


def test_an_unreadable_receptor_fails_the_job_with_its_reason_and_no_results(served):
    files = example_upload("ligands")
    files["receptor"] = ("receptor.pdb", b"HEADER    nothing\nATOM      1  CA  GLY A   1    not numbers here\nEND\n")
    job = wait_for_job(served.client, served.client.post("/v1/jobs", files=files).json()["id"])
    assert job["state"] == "failed" and "receptor.pdb" in job["error"]
    assert "Traceback" not in job["error"] and str(served.settings.data_dir) not in job["error"]
    refused = served.client.get(f"/v1/jobs/{job['id']}/results.csv")
    assert refused.status_code == 409 and job["error"] in refused.json()["error"]["message"]


def test_a_bad_record_fails_its_own_row_only(served):
    sdf = (EXAMPLE / "tnks2_ligands.sdf").read_text()
    broken = "broken\n  RDKit\n\n  2  1  0  0  0  0  0  0  0  0999 V2000\nnot an atom line\n$$$$\n"
    files = example_upload("receptor")
    files["ligands"] = ("ligands.sdf", (sdf + broken).encode())
    job = wait_for_job(served.client, served.client.post("/v1/jobs", files=files).json()["id"])
    assert job["state"] == "done" and (job["predicted"], job["failed"]) == (6, 1)
    rows = served.client.get(f"/v1/jobs/{job['id']}/results.json").json()
    assert rows[-1]["error"] and rows[-1]["pK"] is None


def test_warnings_the_api_gives_about_the_inputs_reach_the_summary(served):
    files = example_upload("receptor")
    files["ligands"] = ("ligands.sdf", (EXAMPLE / "tnks2_ligands.sdf").read_bytes() * 2)  # every name twice
    job = wait_for_job(served.client, served.client.post("/v1/jobs", files=files).json()["id"])
    assert job["state"] == "done" and job["predicted"] == 12
    notes = served.client.get(f"/v1/jobs/{job['id']}/summary").json()["notes"]
    assert notes and any("lig_1a" in note for note in notes)


def test_unknown_and_malformed_job_ids_are_404(served):
    assert served.client.get("/v1/jobs/" + "0" * 32).status_code == 404
    for path in ("/v1/jobs/..%2F..%2Fjobs.sqlite", "/v1/jobs/abc/results.csv", "/v1/jobs/" + "0" * 32 + "/x.txt"):
        response = served.client.get(path)
        assert response.status_code == 404 and response.json()["error"]["type"] == "NotFound"


def _long_job() -> dict:
    """The example receptor with its six ligands ten times over (60 ligands: a job of seconds, not a fraction)."""
    files = example_upload("receptor")
    files["ligands"] = ("ligands.sdf", (EXAMPLE / "tnks2_ligands.sdf").read_bytes() * 10)
    return files


def test_a_killed_worker_fails_its_job_and_is_replaced(served):
    pool = served.runtime.pool
    files = _long_job()
    job_id = served.client.post("/v1/jobs", files=files).json()["id"]
    wait_for_job(served.client, job_id, states=("running", "done", "failed"))
    worker = next((w for w in pool._workers if w.job == job_id), None)
    if worker is None:
        pytest.skip("the job finished before the test could stop its worker")
    os.kill(worker.process.pid, signal.SIGKILL)
    job = wait_for_job(served.client, job_id)
    assert job["state"] == "failed" and "exit code -9" in job["error"], job
    deadline = time.monotonic() + 30
    while served.client.get("/healthz").json()["pool"]["ready"] < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    assert served.client.get("/healthz").json()["pool"]["ready"] == 2


def test_a_job_over_the_time_limit_is_stopped_with_the_reason(served):
    pool = served.runtime.pool
    pool.settings = served.settings.with_limits(job_seconds=0.05)
    try:
        job_id = served.client.post("/v1/jobs", files=_long_job()).json()["id"]
        job = wait_for_job(served.client, job_id)
    finally:
        pool.settings = served.settings
    assert job["state"] == "failed" and "time limit of 0.05 s" in job["error"]
    assert not (served.runtime.store.job_dir(job_id) / "results").exists()
    after = wait_for_job(served.client, served.client.post("/v1/jobs", files=example_upload(
        "receptor", "ligands")).json()["id"])
    assert after["state"] == "done"


def test_gzip_receptor_and_csv_smiles_are_read_by_content(served):
    import gzip

    files = {"receptor": ("upload.bin", gzip.compress((EXAMPLE / "tnks2_protein.pdb").read_bytes())),
             "ligands": ("series.txt", b"name,smiles\nlig_3a,CC(C)(C)c1ccc(-c2nc3ccccc3c(=O)[nH]2)cc1\n"),
             "reference": ("ref", (EXAMPLE / "tnks2_ligands.sdf").read_bytes())}
    response = served.client.post("/v1/jobs", files=files)
    assert response.status_code == 202, response.text
    kinds = {i["role"]: (i["kind"], i["file"]) for i in response.json()["inputs"]}
    assert kinds == {"receptor": ("pdb", "receptor.pdb"), "ligands": ("csv", "ligands.csv"),
                     "reference": ("sdf", "reference.sdf")}
    assert wait_for_job(served.client, response.json()["id"])["predicted"] == 1
    inputs = served.runtime.store.job_dir(response.json()["id"]) / "inputs"
    assert sorted(p.name for p in inputs.iterdir()) == ["ligands.csv", "receptor.pdb", "reference.sdf"]


def test_docking_output_in_pdbqt_is_read_through_the_api(served):
    meeko = pytest.importorskip("meeko")
    from rdkit import Chem

    ligand = Chem.MolFromMolFile(str(EXAMPLE / "tnks2_ligands.sdf"), removeHs=False)
    text, ok, problem = meeko.PDBQTWriterLegacy.write_string(meeko.MoleculePreparation().prepare(ligand)[0])
    assert ok, problem
    files = example_upload("receptor")
    files["ligands"] = ("docked.txt", f"MODEL 1\n{text}ENDMDL\nMODEL 2\n{text}ENDMDL\n".encode())
    response = served.client.post("/v1/jobs", files=files)
    assert response.status_code == 202, response.text
    assert {i["role"]: i["kind"] for i in response.json()["inputs"]}["ligands"] == "pdbqt"
    job = wait_for_job(served.client, response.json()["id"])
    assert job["state"] == "done" and job["ligands"] == 2 and job["predicted"] == 2, job
