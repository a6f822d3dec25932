"""Screening a compound library against one pocket on an existing distributed engine (Dask).

``geomol screen`` (:mod:`geomol.commands.screen`) and :func:`screen_library` stream a library of
SMILES (or SD records), pose each ligand on a reference ligand in the receptor's pocket and score it
with an affinity model — through the posing and prediction path of :func:`geomol.api.iter_affinity`
(``posed_inputs``, ``predict_inputs``), as ``geomol predict-affinity --reference`` does — one shard of ligands per Dask task, on a local
cluster or on a cluster (an existing scheduler, or SLURM/PBS through dask-jobqueue). Results are
sharded Parquet tables and compressed SDF poses, a manifest lets an interrupted screen resume, and
the merge writes the ranked top-N table and poses, the failures table, a summary and a plot.
Needs the optional extra ``screen`` (``pip install 'geomol[screen]'``). See ``docs/screen.md``.

Modules: library (streaming, shards), settings, worker (one shard), dock (Vina), engine (Dask),
manifest (resume), outputs (layout, schema), merge, progress, report, run, analogues (test libraries).
"""
from geomol.screen.settings import DockSettings, ScreenInputs, ScreenSettings

__all__ = ["screen_library", "ScreenSettings", "DockSettings", "ScreenInputs", "JobQueueSpec"]


def __getattr__(name: str):  # the engine imports Dask: only when a screen runs
    if name == "screen_library":
        from geomol.screen.run import screen_library

        return screen_library
    if name == "JobQueueSpec":
        from geomol.screen.engine import JobQueueSpec

        return JobQueueSpec
    raise AttributeError(name)
