"""``screen_library``: a compound library against one pocket, on a Dask cluster, resumable.

The driver (this process) checks the inputs, counts the library, starts or joins the cluster, sizes
the shards (:func:`auto_shard_size`, unless given or resumed), opens or creates the manifest,
streams the library's shards to the engine (:mod:`geomol.screen.engine`), writes each finished shard's
files atomically and records it, and at the end merges the shards (:mod:`geomol.screen.merge`) and
writes the summary and the plot. The driver holds a bounded number of shards at a time; the workers
hold one shard each.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import replace
from os import PathLike
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from geomol.data.store.cache import atomic_write_bytes, atomic_write_text
from geomol.errors import ConfigError, StructureReadError
from geomol.screen.engine import JobQueueSpec, dask_client, run_shards, worker_threads
from geomol.screen.library import Shard, count_library, iter_shards, library_format
from geomol.screen.manifest import Manifest, ShardRecord
from geomol.screen.merge import merge_shards
from geomol.screen.outputs import OutputFolder, table_bytes
from geomol.screen.progress import ScreenProgress
from geomol.screen.report import SHOWN_HITS, plot_screen
from geomol.screen.settings import ScreenInputs, ScreenSettings, model_digest
from geomol.screen.worker import ShardResult

__all__ = ["screen_library", "auto_shard_size"]

SHARDS_PER_THREAD = 4
"""Shards per worker thread when the size is chosen: the last round leaves a thread idle for at most a quarter
of its share (one 500-ligand shard per thread left one of two workers idle for the last third of a screen)."""
SHARD_SIZE_BOUNDS = (25, 500)
"""Fewest ligands per shard (a task's overhead: a worker that joins a screen loads the model first) and most (a
shard's memory)."""


def auto_shard_size(ligands: int, threads: int) -> int:
    """Ligands per shard for a library of ``ligands`` on ``threads`` worker threads: about
    :data:`SHARDS_PER_THREAD` shards per thread, within :data:`SHARD_SIZE_BOUNDS`."""
    low, high = SHARD_SIZE_BOUNDS
    return min(high, max(low, math.ceil(ligands / (max(1, threads) * SHARDS_PER_THREAD))))


def _earlier_shard_size(folder: OutputFolder) -> int | None:
    """The shard size of the screen recorded in ``folder`` (a resumed screen keeps it), or None."""
    try:
        return int(json.loads(folder.manifest.read_text())["library"]["shard_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _checked_inputs(library: Path, receptor, reference, settings: ScreenSettings) -> ScreenInputs:
    """Read and check everything once in the driver, so that a bad input is one clear error before any task."""
    from geomol.inference.loading import load_model
    from geomol.data.io import read_ligand
    from geomol.data.posing.poses import PoseTemplate
    from geomol.inference.affinity_model import AffinityModel

    library_format(library)
    if not library.is_file():
        raise StructureReadError("file not found (given as --library)", source=library)
    inputs = ScreenInputs.read(receptor, reference, settings)
    if settings.dock is not None:
        from geomol.screen.dock import check_docking_available

        check_docking_available()
    model = load_model(settings.model)
    if not isinstance(model, AffinityModel):
        raise ConfigError(f"{settings.model!r} is not a binding-affinity model")
    structure = model.recipe.read_receptor(receptor)
    if settings.receptor_chains:
        structure.select_chains(list(settings.receptor_chains))
    PoseTemplate(read_ligand(reference, 0), None, settings.pose)  # a reference without 3D coordinates fails here
    return replace(inputs, model_digest=model_digest(model))


def _failed_shard_rows(shard: Shard, exc: BaseException) -> list[dict]:
    reason = f"the shard's task failed ({type(exc).__name__}: {exc}); rerun the same command to retry it"
    return [{"index": e.index, "name": e.name, "smiles": e.text if shard.fmt == "smiles" else "", "status": "failed",
             "stage": "task", "error_kind": type(exc).__name__, "error": reason, "shard": shard.number}
            for e in shard.entries]


class _Driver:
    """Writes finished shards, records them and reports progress."""

    def __init__(self, folder: OutputFolder, manifest: Manifest, progress: ScreenProgress,
                 on_shard: Callable[[ShardResult], None] | None):
        self.folder, self.manifest, self.progress, self.on_shard = folder, manifest, progress, on_shard
        self.failed_shards: list[int] = []
        self.ran = self.skipped = 0

    def pending(self, shards):
        """The shards still to do (those done by an earlier run are counted and skipped)."""
        for shard in shards:
            self.ran += 1
            if self.manifest.is_done(shard.number, shard.digest):
                self.skipped += 1
                self.progress.skip(len(shard.entries))
                continue
            yield shard

    def finished(self, result: ShardResult) -> None:
        atomic_write_bytes(self.folder.shard_table(result.number), result.table)
        atomic_write_bytes(self.folder.shard_poses(result.number), result.poses)
        self.manifest.add(ShardRecord(result.number, result.digest, result.ligands, result.scored, result.failed,
                                      result.docked, result.seconds, result.worker, result.peak_rss_mb))
        self.progress.advance(result.ligands, result.failed, result.number)
        if self.on_shard is not None:
            self.on_shard(result)

    def failed(self, shard: Shard, exc: BaseException) -> None:
        atomic_write_bytes(self.folder.shard_table(shard.number), table_bytes(_failed_shard_rows(shard, exc)))
        self.failed_shards.append(shard.number)
        self.progress.advance(len(shard.entries), len(shard.entries), shard.number)


def _stage_seconds(records) -> dict[str, float]:
    total: dict[str, float] = {}
    for record in records:
        for stage, seconds in record.seconds.items():
            total[stage] = total.get(stage, 0.0) + seconds
    return total


def screen_library(library: str | PathLike, receptor: str | PathLike, reference: str | PathLike,
                   out: str | PathLike, settings: ScreenSettings | None = None, *, workers: int | None = None,
                   scheduler: str | None = None, jobqueue: JobQueueSpec | None = None, quiet: bool = False,
                   console: Console | None = None, on_shard: Callable[[ShardResult], None] | None = None,
                   plot: bool = True) -> dict[str, Any]:
    """Screen ``library`` against the pocket of ``reference`` in ``receptor``; results in ``out``.

    Args:
        library: ``.smi``/``.csv``/``.sdf`` file, plain or compressed (:mod:`geomol.screen.library`).
        receptor: PDB/mmCIF file of the receptor; reference: SDF/MOL2 file of a ligand posed in its pocket.
        out: output folder (:mod:`geomol.screen.outputs`); a rerun with the same inputs resumes in it.
        settings: :class:`~geomol.screen.settings.ScreenSettings` (defaults when None).
        workers: local worker processes (default 1); or ``scheduler`` (a Dask scheduler address) or
            ``jobqueue`` (a SLURM/PBS cluster), see :mod:`geomol.screen.engine`.
        quiet: no progress output; console: where progress goes (stderr).
        on_shard: called with each shard's result after its files are written and recorded.
        plot: write ``screen.png``.

    Returns:
        The summary (also written to ``summary.json``): ``counts`` (ligands, scored, failed, docked),
        ``failure_reasons``, ``run`` (shards, wall seconds, rate, CPU seconds per stage, peak worker
        memory), ``files`` and ``provenance``.

    Raises:
        GeomolError subclasses: unreadable inputs, a model that is not an affinity model, an output folder
        holding another screen, no Dask.
    """
    from geomol.provenance import provenance

    settings = settings or ScreenSettings()
    library = Path(library)
    inputs = _checked_inputs(library, receptor, reference, settings)
    ligand_count = count_library(library)
    folder = OutputFolder(out)
    started = time.monotonic()
    with dask_client(workers if scheduler is None and jobqueue is None else None, scheduler, jobqueue) as client:
        threads = (worker_threads(client) if scheduler is not None else
                   jobqueue.jobs * jobqueue.cores if jobqueue is not None else workers or 1)
        shard_size = settings.shard_size or _earlier_shard_size(folder) or auto_shard_size(ligand_count, threads)
        settings = replace(settings, shard_size=shard_size)
        inputs = replace(inputs, settings=settings)
        library_record = {"name": library.name, "ligands": ligand_count, "shard_size": shard_size}
        manifest = Manifest(folder, {**inputs.describe(), "library": library_record})
        with ScreenProgress(ligand_count, console, quiet) as progress:
            driver = _Driver(folder, manifest, progress, on_shard)
            run_shards(client, inputs, driver.pending(iter_shards(library, shard_size)), driver.finished,
                       driver.failed, progress.partial)
        threads = worker_threads(client)
    shard_count = -(-ligand_count // shard_size)
    wall = time.monotonic() - started
    merged = merge_shards(folder, shard_count, ligand_count, settings.top)
    records = list(manifest.completed.values())
    screened = ligand_count - progress.skipped
    shown = merged.top[:SHOWN_HITS]  # the table printed and the hits drawn: the same rows
    if plot and shown:
        plot_screen(folder.plot, merged.histogram, shown, Path(receptor).name, written=len(merged.top))
    summary = {
        "counts": {"ligands": merged.ligands, "scored": merged.scored, "failed": merged.failed,
                   "docked": merged.docked_scored},
        "failure_reasons": dict(merged.failure_reasons),
        "failed_shards": driver.failed_shards,
        "run": {"shards": shard_count, "shards_skipped": driver.skipped, "wall_seconds": wall,
                "ligands_screened": screened, "ligands_per_second": screened / wall if wall > 0 else 0.0,
                "worker_threads": threads, "cpu_seconds_by_stage": _stage_seconds(records),
                "peak_worker_rss_mb": max((r.peak_rss_mb for r in records), default=0.0),
                "workers": sorted({r.worker for r in records})},
        "top": shown, "top_written": len(merged.top),
        "files": {"top": folder.top_table.name, "top_poses": folder.top_poses.name,
                  "failures": folder.failures.name, "shards": "shards/", "poses": "poses/",
                  "plot": folder.plot.name if plot and merged.top else None},
        "inputs": manifest.description,
        "provenance": provenance(),
    }
    atomic_write_text(folder.summary, json.dumps(summary, indent=1, default=str) + "\n")
    manifest.write(totals=summary["counts"])
    return summary
