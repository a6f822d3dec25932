"""One shard of a screen, on a worker: pose every ligand on the reference, score it, return the shard's files.

:func:`score_shard` is the task the engine runs; it takes the screen's :class:`~geomol.screen.settings.ScreenInputs`
and one :class:`~geomol.screen.library.Shard` and returns a :class:`ShardResult` holding the shard's table
(Parquet bytes, :data:`~geomol.screen.outputs.SCHEMA`) and poses (gzip SDF bytes); the driver writes them.
Posing and scoring are the library's own (:func:`~geomol.inference.smiles_inputs.posed_inputs`, then
:func:`~geomol.inference.affinity.predict_inputs`): what :func:`geomol.api.iter_affinity` and
``geomol predict-affinity --reference`` run, so a screen poses and scores exactly as they do.

What is expensive to set up — the model, the receptor structure, the reference molecule, Vina's maps —
is made once per worker process (for the screen's fingerprint) and reused by its later shards.
A ligand that fails (unreadable record, invalid SMILES, no common core, a failed input check, ...)
becomes a ``failed`` row with the stage and the reason; the shard goes on. While it poses (most of a
shard's time) the task reports the ligands posed so far as a Dask event, at most every
:data:`PROGRESS_SECONDS`, so that the driver's progress moves from the first ligand, not the first shard.
"""
from __future__ import annotations

import os
import resource
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rdkit import Chem

from geomol.data.io._source import rdkit_messages
from geomol.data.io.smiles import SmilesEntry
from geomol.errors import GeomolError
from geomol.screen.library import LibraryEntry, Shard
from geomol.screen.outputs import gzip_bytes, table_bytes
from geomol.screen.settings import ScreenInputs

__all__ = ["ShardResult", "score_shard", "PROGRESS_TOPIC", "PROGRESS_SECONDS"]

PROGRESS_TOPIC = "geomol-screen-progress"
"""Prefix of the Dask event topic of a run's progress events ``{"shard": number, "posed": ligands}``."""
PROGRESS_SECONDS = 1.0


@dataclass
class ShardResult:
    """What one shard task returns to the driver.

    Attributes:
        number, digest: the shard's number and the digest of its entries.
        table: Parquet bytes, one row per ligand of the shard.
        poses: gzip-compressed SDF bytes of the scored ligands' poses.
        ligands, scored, failed, docked: counts (``ligands == scored + failed``).
        seconds: CPU seconds of the worker per stage (``setup``, ``pose``, ``dock``, ``score``).
        worker: ``host:pid`` of the process that ran it; peak_rss_mb: that process's peak resident memory (MB).
    """

    number: int
    digest: str
    table: bytes
    poses: bytes
    ligands: int
    scored: int
    failed: int
    docked: int
    seconds: dict[str, float] = field(default_factory=dict)
    worker: str = ""
    peak_rss_mb: float = 0.0


class _Context:
    """A worker process's model, receptor, reference (and Vina, when docking), for one screen."""

    def __init__(self, inputs: ScreenInputs):
        import torch

        from geomol.inference.loading import load_model

        torch.set_num_threads(inputs.settings.threads)
        self.inputs = inputs
        self._folder = tempfile.TemporaryDirectory(prefix="geomol-screen-")
        receptor = self._materialise(inputs.receptor_name, inputs.receptor_data)
        reference = self._materialise(inputs.reference_name, inputs.reference_data)
        self.model = load_model(inputs.settings.model)
        self.receptor = self.model.recipe.read_receptor(receptor)
        if inputs.settings.receptor_chains:
            self.receptor = self.receptor.select_chains(list(inputs.settings.receptor_chains))
        from geomol.data.io import read_ligand

        self.reference = read_ligand(reference, 0)
        self._docker = None

    def _materialise(self, name: str, data: bytes) -> Path:
        path = Path(self._folder.name) / name
        path.write_bytes(data)
        return path

    @property
    def docker(self):
        if self._docker is None:
            from geomol.screen.dock import VinaDocker

            self._docker = VinaDocker(self.inputs.receptor_name, self.inputs.receptor_data, self.reference,
                                      self.inputs.settings.dock)
        return self._docker


_CONTEXTS: dict[str, _Context] = {}  # one screen at a time per process: memory stays that of one context


def _context(inputs: ScreenInputs) -> _Context:
    key = inputs.fingerprint
    if key not in _CONTEXTS:
        _CONTEXTS.clear()
        _CONTEXTS[key] = _Context(inputs)
    return _CONTEXTS[key]


def _row(entry: LibraryEntry, shard: int, smiles: str = "", **values: Any) -> dict[str, Any]:
    row = {"index": entry.index, "name": entry.name, "smiles": smiles, "status": "failed", "stage": "",
           "error_kind": "", "error": "", "pose_method": "", "warnings": "", "shard": shard}
    row.update(values)
    return row


def _smiles_of(entry: LibraryEntry, fmt: str) -> str:
    """The entry's SMILES (an SD record is read and written as an isomeric SMILES)."""
    if fmt == "smiles":
        return entry.text
    with rdkit_messages() as messages:
        mol = Chem.MolFromMolBlock(entry.text)
    if mol is None:
        raise GeomolError(f"unreadable SD record ({messages[0] if messages else 'RDKit returned nothing'})",
                          source=entry.source)
    return Chem.MolToSmiles(mol)


class _Clock:
    """CPU seconds per stage of a shard."""

    def __init__(self):
        self.seconds: dict[str, float] = {}

    def add(self, stage: str, since: float) -> float:
        now = time.process_time()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + now - since
        return now


def _docked_input(context: _Context, item, posed, rows: dict[int, dict], entry: LibraryEntry, shard: int):
    """Dock a ligand that has no common core; its prediction input, or None (its failed row is recorded)."""
    from geomol.inference.ligand_inputs import LigandInput

    try:
        pose, score = context.docker.dock(posed.smiles, entry.name)
    except GeomolError as exc:
        rows[entry.index] = _row(entry, shard, posed.smiles, stage="dock", error_kind=type(exc).__name__,
                                 error=f"{posed.error}; docking: {exc}")
        return None
    extra = {"pose_method": "vina", "vina_score": score}
    return LigandInput(item.name, item.source, molecule=pose, extra=extra)


def _progress_events(topic: str | None, shard: int):
    """A callback that sends ``(shard, ligands posed)`` to ``topic``: the first ligand at once (a shard faster than
    :data:`PROGRESS_SECONDS` still shows it has started), then at most every :data:`PROGRESS_SECONDS` (None outside
    a Dask worker or without a topic)."""
    if topic is None:
        return None
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # run outside a worker (a test calling the task directly)
        return None
    last = [-float("inf")]

    def report(posed: int) -> None:
        now = time.monotonic()
        if now - last[0] >= PROGRESS_SECONDS:
            last[0] = now
            worker.log_event(topic, {"shard": shard, "posed": posed})

    return report


def score_shard(inputs: ScreenInputs, shard: Shard, progress_topic: str | None = None) -> ShardResult:
    """Pose, (dock,) and score every ligand of ``shard``; see the module notes (``progress_topic``: where the
    progress events go, None: nowhere)."""
    from geomol.inference.smiles_inputs import posed_inputs

    clock = _Clock()
    start = time.process_time()
    context = _context(inputs)
    settings = inputs.settings
    start = clock.add("setup", start)
    rows: dict[int, dict] = {}
    entries, smiles_entries = [], []
    for entry in shard.entries:
        try:
            smiles = _smiles_of(entry, shard.fmt)
        except GeomolError as exc:
            rows[entry.index] = _row(entry, shard.number, stage="read", error_kind=type(exc).__name__, error=str(exc))
            continue
        entries.append(entry)
        smiles_entries.append(SmilesEntry(entry.name, smiles, entry.source))
    to_score, scored_entries, docked = [], [], 0
    if smiles_entries:
        items, posed = posed_inputs(context.receptor, smiles_entries, context.reference, parameters=settings.pose,
                                    progress=_progress_events(progress_topic, shard.number))
        start = clock.add("pose", start)
        for entry, item, pose in zip(entries, items, posed):
            if pose.ok:
                item.extra["pose_method"] = "core"
            elif settings.dock is not None and pose.error_kind == "NoCommonCoreError":
                item = _docked_input(context, item, pose, rows, entry, shard.number)
                docked += item is not None
                if item is None:
                    continue
            else:
                rows[entry.index] = _row(entry, shard.number, pose.smiles, stage="pose", error_kind=pose.error_kind,
                                         error=pose.error)
                continue
            to_score.append(item)
            scored_entries.append((entry, pose.smiles))
        start = clock.add("dock", start)
    sdf = _score(context, to_score, scored_entries, rows, shard.number)
    clock.add("score", start)
    ordered = [rows[e.index] for e in shard.entries]
    scored = sum(r["status"] == "scored" for r in ordered)
    return ShardResult(shard.number, shard.digest, table_bytes(ordered), gzip_bytes(sdf), len(ordered), scored,
                       len(ordered) - scored, docked, clock.seconds, f"{os.uname().nodename}:{os.getpid()}",
                       resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)


_POSE_NUMBERS = ("core_atoms", "core_rmsd", "min_receptor_distance", "clashes", "vina_score")


def _score(context: _Context, items: list, entries: list, rows: dict[int, dict], shard: int) -> str:
    """Score the posed ligands with the model; fill their rows; the SD text of the scored poses."""
    from io import StringIO

    from geomol.inference.affinity import predict_inputs

    text = StringIO()
    writer = Chem.SDWriter(text)
    records = predict_inputs(context.receptor, items, context.model, batch_size=context.inputs.settings.batch_size)
    for item, (entry, smiles), record in zip(items, entries, records):
        pose = {k: record.extra.get(k) for k in _POSE_NUMBERS}
        pose = {k: (None if v is None or v != v else v) for k, v in pose.items()}
        common = dict(pose_method=item.extra.get("pose_method", ""), warnings="; ".join(record.warnings), **pose)
        if not record.ok:
            rows[entry.index] = _row(entry, shard, smiles, stage="score", error=record.error, **common)
            continue
        rows[entry.index] = _row(entry, shard, smiles, status="scored", pK=record.pK, pK_std=record.pK_std,
                                 dG_kcal_mol=record.dG_kcal_mol, Kd_M=record.Kd_M,
                                 n_pocket_blocks=record.n_pocket_blocks, **common)
        molecule = Chem.Mol(item.molecule)
        for key, value in (("index", entry.index), ("pK", record.pK), ("pose_method", common["pose_method"])):
            molecule.SetProp(key, f"{value:.4f}" if isinstance(value, float) else str(value))
        writer.write(molecule)
    writer.close()
    return text.getvalue()
