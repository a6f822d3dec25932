"""The HTTP API, version 1: jobs in, job states and result files out, the models on offer, health.

Every handler reads the server's :class:`Runtime` (settings, job store, worker pool) from the app; no
handler parses a molecule or imports torch (the workers do, :mod:`geomol.serve.worker`). Errors are
raised as :class:`~geomol.serve.uploads.UploadError` / ``HTTPException`` and answered as JSON by
:mod:`geomol.serve.app`.
"""
from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

from fastapi import APIRouter, File, Form, HTTPException, Query, Request, UploadFile
from fastapi.responses import FileResponse, JSONResponse
from pydantic import BaseModel

from geomol.serve.pool import QueueFull, WorkerPool
from geomol.serve.settings import ServeSettings
from geomol.serve.store import JobRecord, JobStore
from geomol.serve.uploads import UnpackBudget, UploadedFile, UploadError, read_upload, smiles_text_upload
from geomol.version import __version__

__all__ = ["Runtime", "router", "job_spec", "RESULT_FILES"]

RESULT_FILES = {"results.json": "application/json", "results.csv": "text/csv; charset=utf-8",
                "poses.sdf": "chemical/x-mdl-sdfile", "plot.png": "image/png"}
MODELS_WAIT_SECONDS = 20.0


class ErrorDetail(BaseModel):
    """What went wrong: the exception's kind, its message (the library's, naming the file), the HTTP status,
    and the limit broken, if one was."""

    type: str
    message: str
    status: int
    limit: str | None = None


class ErrorBody(BaseModel):
    """Every error answer of the API."""

    error: ErrorDetail


router = APIRouter(responses={422: {"model": ErrorBody, "description": "invalid or inconsistent request"},
                              401: {"model": ErrorBody, "description": "token missing or wrong"}})


@dataclass
class Runtime:
    """What the handlers share: the settings, the job store and the worker pool."""

    settings: ServeSettings
    store: JobStore
    pool: WorkerPool


def _runtime(request: Request) -> Runtime:
    return request.app.state.runtime


def job_spec(record: JobRecord, store: JobStore) -> dict:
    """The worker's view of a job (:data:`geomol.serve.predict_job.JobSpec`)."""
    files = {item["role"]: item["file"] for item in record.inputs}
    return {"id": record.id, "dir": str(store.job_dir(record.id)), "model": record.model, "files": files,
            "pocket_cutoff": record.settings.get("pocket_cutoff"), "smiles": record.settings.get("smiles", False)}


def _links(record: JobRecord) -> dict:
    base = f"/v1/jobs/{record.id}"
    if record.state != "done":
        return {"self": base}
    return {"self": base, "summary": f"{base}/summary", "results_json": f"{base}/results.json",
            "results_csv": f"{base}/results.csv", "poses": f"{base}/poses.sdf", "plot": f"{base}/plot.png",
            "depictions": f"{base}/depictions/"}


def _public(record: JobRecord) -> dict:
    body = record.to_dict()
    body["progress"] = {"done": record.done, "total": record.ligands}
    body["links"] = _links(record)
    return body


# ---------------------------------------------------------------------- health and models
@router.get("/healthz", summary="Whether the server can take jobs (503 when its workers cannot start)")
def health(request: Request) -> JSONResponse:
    runtime = _runtime(request)
    pool = runtime.pool.status()
    failure = runtime.pool.failure
    body = {"status": "failed" if failure else "ok" if pool["ready"] else "starting", "version": __version__,
            "pool": pool, "jobs": runtime.store.counts(), **({"error": failure} if failure else {})}
    return JSONResponse(body, status_code=503 if failure else 200)


def _check_workers(runtime: Runtime) -> None:
    if runtime.pool.failure:
        raise HTTPException(503, runtime.pool.failure)


async def _models(runtime: Runtime) -> list[dict]:
    _check_workers(runtime)
    ready = await asyncio.to_thread(runtime.pool.models_ready.wait, MODELS_WAIT_SECONDS)
    if not ready:
        _check_workers(runtime)
        raise HTTPException(503, "the workers are still starting; try again shortly", headers={"Retry-After": "5"})
    return runtime.pool.models


@router.get("/v1/models", summary="The affinity models jobs may name")
async def models(request: Request) -> list[dict]:
    runtime = _runtime(request)
    available = await _models(runtime)
    default = _resolve_model(runtime.settings.model, available)
    return [{key: m[key] for key in ("name", "description", "architecture", "members", "aliases")}
            | {"default": m["name"] == default} for m in available]


def _resolve_model(name: str, available: list[dict]) -> str:
    for model in available:
        if name == model["name"] or name in model["aliases"]:
            return model["name"]
    names = ", ".join(m["name"] for m in available) or "none"
    raise UploadError(f"no affinity model named {name!r} on this server (available: {names})", "model")


# ---------------------------------------------------------------------- jobs
async def _read(upload: UploadFile | None, role: str, runtime: Runtime, budget: UnpackBudget) -> UploadedFile | None:
    if upload is None:
        return None
    return read_upload(role, await upload.read(), upload.filename or "", budget, runtime.settings.limits.max_ligands)


async def _check_fields_once(request: Request) -> None:
    """Each field at most once: of two ``ligands`` files, which one would the job be?"""
    names = Counter(name for name, _ in (await request.form()).multi_items())
    repeated = sorted(name for name, count in names.items() if count > 1)
    if repeated:
        raise UploadError(f"the form gives {', '.join(repeated)} more than once; give each field once", repeated[0])


def _ligand_upload(ligands: UploadedFile | None, smiles: str | None, reference: UploadedFile | None,
                   max_ligands: int, budget: UnpackBudget) -> UploadedFile:
    if (ligands is None) == (not smiles):
        raise UploadError("give the ligands either as a file (ligands) or as SMILES text (smiles), not both "
                          "and not neither", "ligands")
    upload = ligands or smiles_text_upload(smiles, max_ligands, budget)
    if upload.is_smiles and reference is None:
        raise UploadError("SMILES ligands are posed on a reference ligand: upload its pose as 'reference' "
                          "(SDF or MOL2), or upload posed ligands (SDF, MOL2, PDBQT) instead", "reference")
    if reference is not None and not upload.is_smiles:
        raise UploadError("a reference ligand is used only with SMILES ligands; these ligands are already posed "
                          f"({upload.kind.upper()})", "reference")
    return upload


@router.post("/v1/jobs", status_code=202, summary="Submit a receptor and a ligand series",
             responses={413: {"model": ErrorBody, "description": "upload over a limit"},
                        415: {"model": ErrorBody, "description": "content is not what the field needs"},
                        503: {"model": ErrorBody, "description": "queue full (Retry-After)"}})
async def submit(request: Request,
                 receptor: Annotated[UploadFile, File(description="receptor: PDB or mmCIF (plain or gzip)")],
                 ligands: Annotated[UploadFile | None, File(description="posed ligands (SDF, MOL2, PDBQT) or "
                                                            "SMILES (.smi, or CSV with a smiles column)")] = None,
                 smiles: Annotated[str | None, Form(description="SMILES, one 'SMILES name' per line")] = None,
                 reference: Annotated[UploadFile | None, File(description="reference ligand pose for SMILES "
                                                              "(SDF or MOL2)")] = None,
                 measured: Annotated[UploadFile | None, File(description="measured values: CSV with name and "
                                                             "pK or dG_kcal_mol")] = None,
                 model: Annotated[str | None, Form(description="model name (GET /v1/models)")] = None,
                 pocket_cutoff: Annotated[float | None, Form(gt=0, le=30, description="pocket cutoff in Å "
                                                             "(default: the model's)")] = None) -> JSONResponse:
    runtime = _runtime(request)
    _check_workers(runtime)
    runtime.pool.check_room()
    await _check_fields_once(request)
    limits = runtime.settings.limits
    budget = UnpackBudget(limits.max_request_bytes)  # one for all files of this request
    uploads = {role: await _read(upload, role, runtime, budget) for role, upload in
               (("receptor", receptor), ("ligands", ligands), ("reference", reference), ("measured", measured))}
    uploads["ligands"] = _ligand_upload(uploads["ligands"], smiles, uploads["reference"], limits.max_ligands, budget)
    model_name = _resolve_model(model or runtime.settings.model, await _models(runtime))
    chosen = [u for u in uploads.values() if u is not None]
    settings = {"pocket_cutoff": pocket_cutoff, "smiles": uploads["ligands"].is_smiles,
                "measured": uploads["measured"] is not None}
    inputs = [{"role": u.role, "kind": u.kind, "file": u.file_name, "ligands": u.ligands} for u in chosen]
    record = await asyncio.to_thread(runtime.store.create, [(u.file_name, u.text) for u in chosen],
                                     model=model_name, settings=settings, inputs=inputs,
                                     ligands=uploads["ligands"].ligands)
    try:
        runtime.pool.submit(job_spec(record, runtime.store))
    except QueueFull:
        await asyncio.to_thread(runtime.store.discard, record.id)
        raise
    return JSONResponse(_public(record), status_code=202, headers={"Location": f"/v1/jobs/{record.id}"})


@router.get("/v1/jobs", summary="Recent jobs, newest first")
def list_jobs(request: Request, limit: Annotated[int, Query(ge=1, le=500)] = 50,
              state: Annotated[str | None, Query(pattern="^(queued|running|done|failed)$")] = None) -> list[dict]:
    return [_public(r) for r in _runtime(request).store.list(limit, state)]


def _job(request: Request, job_id: str) -> JobRecord:
    record = _runtime(request).store.get(job_id)
    if record is None:
        raise HTTPException(404, f"no job {job_id!r} on this server")
    return record


@router.get("/v1/jobs/{job_id}", summary="A job's state, progress and counts")
def job(request: Request, job_id: str) -> dict:
    return _public(_job(request, job_id))


def _result_file(request: Request, job_id: str, name: str) -> Path:
    record = _job(request, job_id)
    if record.state != "done":
        raise HTTPException(409, f"job {job_id} is {record.state}" + (f" ({record.error})" if record.error else "")
                            + "; its results exist once it is done")
    path = _runtime(request).store.results_dir(job_id) / name
    if not path.is_file():
        raise HTTPException(404, f"job {job_id} has no {name}" + (" (a plot needs measured values for at least "
                                                                   "two predicted ligands)" if name == "plot.png"
                                                                   else ""))
    return path


@router.get("/v1/jobs/{job_id}/summary", summary="Counts, comparison with measured values, which files exist")
def summary(request: Request, job_id: str) -> FileResponse:
    return FileResponse(_result_file(request, job_id, "summary.json"), media_type="application/json")


@router.get("/v1/jobs/{job_id}/{name}", summary="A result file: results.json, results.csv, poses.sdf, plot.png")
def result(request: Request, job_id: str, name: str) -> FileResponse:
    if name not in RESULT_FILES:
        raise HTTPException(404, f"no result file {name!r} (there are {', '.join(RESULT_FILES)})")
    download = f"geomol-{job_id[:8]}-{name}"
    return FileResponse(_result_file(request, job_id, name), media_type=RESULT_FILES[name],
                        filename=download if name != "results.json" else None)


@router.get("/v1/jobs/{job_id}/depictions/{index}.svg", summary="2D drawing of ligand `index` (table order)")
def depiction(request: Request, job_id: str, index: int) -> FileResponse:
    return FileResponse(_result_file(request, job_id, f"depictions/{int(index)}.svg"), media_type="image/svg+xml")
