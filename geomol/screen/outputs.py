"""The files of a screen's output folder, and the one table schema every shard is written with.

Layout of ``OUT``::

    manifest.json          what was screened (inputs' hashes, settings, fingerprint), the totals at the end
    shards.jsonl           one line per completed shard (the resume record)
    shards/shard-000000.parquet   every ligand of the shard: scored or failed, with the reason (SCHEMA)
    poses/shard-000000.sdf.gz     the poses of the shard's scored ligands, compressed
    top.csv, top.sdf       the merged top-N ligands by pK, ranked, with their poses
    failures.csv           every ligand that could not be scored, with the stage and the reason
    summary.json           counts, rates, failures by reason, peak worker memory, provenance
    screen.png             score distribution and the top hits' 2D depictions

A ligand is one row of exactly one shard table (its library ``index`` is unique), so
``ligands in = scored + failed`` can be checked from the shard tables alone.
"""
from __future__ import annotations

import gzip
import io
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["SCHEMA", "OutputFolder", "table_bytes", "read_table", "gzip_bytes"]

SCHEMA = pa.schema([
    ("index", pa.int64()),               # position in the library (from 0): the ligand's identity
    ("name", pa.string()),
    ("smiles", pa.string()),
    ("status", pa.string()),             # 'scored' | 'failed'
    ("stage", pa.string()),              # failed at: 'read' | 'pose' | 'dock' | 'score' ('' when scored)
    ("error_kind", pa.string()),         # e.g. 'InvalidSmilesError', 'NoCommonCoreError'
    ("error", pa.string()),
    ("pK", pa.float64()),
    ("pK_std", pa.float64()),
    ("dG_kcal_mol", pa.float64()),       # kcal/mol at 298.15 K
    ("Kd_M", pa.float64()),              # mol/L
    ("n_pocket_blocks", pa.int64()),
    ("pose_method", pa.string()),        # 'core' (on the reference) | 'vina' (docked) | ''
    ("core_atoms", pa.int64()),
    ("core_rmsd", pa.float64()),         # Å
    ("min_receptor_distance", pa.float64()),  # Å
    ("clashes", pa.int64()),
    ("vina_score", pa.float64()),        # kcal/mol (docked ligands only)
    ("warnings", pa.string()),
    ("shard", pa.int64()),
])
"""Columns of every shard table (and of the merged tables), in order."""


def table_bytes(rows: Sequence[dict[str, Any]]) -> bytes:
    """Rows (dicts with the :data:`SCHEMA` columns) as a zstd-compressed Parquet file's bytes."""
    table = pa.Table.from_pylist(list(rows), schema=SCHEMA)
    buffer = io.BytesIO()
    pq.write_table(table, buffer, compression="zstd")
    return buffer.getvalue()


def read_table(path: str | Path, columns: Sequence[str] | None = None) -> pa.Table:
    """A shard table (or some of its columns)."""
    return pq.read_table(path, columns=list(columns) if columns else None, schema=SCHEMA)


class OutputFolder:
    """Paths of the files of one screen's output folder (see the module notes)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    @property
    def manifest(self) -> Path:
        return self.root / "manifest.json"

    @property
    def shard_log(self) -> Path:
        return self.root / "shards.jsonl"

    def shard_table(self, number: int) -> Path:
        return self.root / "shards" / f"shard-{number:06d}.parquet"

    def shard_poses(self, number: int) -> Path:
        return self.root / "poses" / f"shard-{number:06d}.sdf.gz"

    @property
    def top_table(self) -> Path:
        return self.root / "top.csv"

    @property
    def top_poses(self) -> Path:
        return self.root / "top.sdf"

    @property
    def failures(self) -> Path:
        return self.root / "failures.csv"

    @property
    def summary(self) -> Path:
        return self.root / "summary.json"

    @property
    def plot(self) -> Path:
        return self.root / "screen.png"


def gzip_bytes(text: str) -> bytes:
    """``text`` (UTF-8) gzip-compressed, with a fixed timestamp so equal poses give equal files."""
    return gzip.compress(text.encode("utf-8"), mtime=0)
