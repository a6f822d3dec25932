"""Processed-data store: every complex is processed once and streamed from disk afterwards.

An item is described by a :class:`Recipe` (input files, a builder function and its parameters).
Its *key* is a hash of the input files' contents, the builder's name and every parameter, so a
changed file or option gives a new key, and the same inputs always hit the stored result.

Items live in one LMDB environment (``<root>/store.lmdb``) under three prefixes:

* ``i:<key>`` the tensors of the processed graph(s), in a small pickle-free binary format
  (:func:`encode_graphs`: a JSON header followed by raw little-endian arrays);
* ``m:<key>`` JSON metadata (block and atom counts, plus what the builder reported);
* ``f:<key>`` JSON failure record of an item whose builder raised a :class:`GeomolError`
  (such failures are deterministic, so they are not retried unless asked).

LMDB writes are transactional, so an interrupted run keeps every committed item and never a
half-written one; the next run resumes where it stopped. Readers open the environment lazily,
once per process, so a dataset can be handed to DataLoader worker processes (fork or spawn).
:func:`preprocess` (in :mod:`geomol.data.store.preprocess`) fills the store in parallel.
"""
from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

import lmdb
import numpy as np
import torch

from geomol.data.blocks import BlockGraph
from geomol.errors import ConfigError, DatasetError

__all__ = [
    "CACHE_FORMAT",
    "Recipe",
    "ProcessedStore",
    "FileHasher",
    "recipe_key",
    "encode_graphs",
    "decode_graphs",
    "atomic_write_text",
    "atomic_write_bytes",
    "shared_environment",
    "close_environment",
]

CACHE_FORMAT = 3  # 2: complex graphs carry ligand_descriptors and ligand_morgan; 3: and ligand_chemistry
"""Bumped whenever the stored layout or a builder's output changes meaning; part of every key."""

_MAGIC = b"GMR1"
_ALLOWED_DTYPES = {"<f4", "<f8", "<i8", "<i4", "|b1", "|u1", "<f2"}
_ALIGN = 8


# ------------------------------------------------------------------------------ recipes
@dataclass(frozen=True)
class Recipe:
    """How to build one item.

    Attributes:
        id: human-readable identifier used in reports (``'plb/cdk2/lig_17'``).
        builder: a module-level function ``builder(files, **params)`` returning a
            :class:`BlockGraph`, a ``{name: BlockGraph}`` dict, or ``(graphs, meta)`` with a
            JSON-serialisable ``meta`` dict. It must be importable by worker processes.
        files: ``{role: path}`` of the input files; their *contents* enter the key.
        params: JSON-serialisable keyword arguments of the builder; they enter the key.
        group: items of one group (e.g. one receptor file) are processed together by one
            worker, so a parsed receptor is reused for all its ligands.
    """

    id: str
    builder: Callable[..., Any]
    files: Mapping[str, str] = field(default_factory=dict)
    params: Mapping[str, Any] = field(default_factory=dict)
    group: str = ""

    @property
    def builder_name(self) -> str:
        return f"{self.builder.__module__}:{self.builder.__qualname__}"


def _canonical_json(value: Any, source: str) -> str:
    def default(obj):
        if isinstance(obj, (tuple, set, frozenset)):
            return sorted(obj) if isinstance(obj, (set, frozenset)) else list(obj)
        if isinstance(obj, Path):
            raise ConfigError(f"path {obj} given as a parameter; pass it in `files` so its content is hashed",
                              source)
        raise ConfigError(f"parameter value {obj!r} is not JSON-serialisable", source)

    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=default)


class FileHasher:
    """Content hashes of input files, memoised by (path, size, mtime) across runs.

    The memo is a JSON file in the store; a file whose size or modification time changed is
    hashed again. Hashing a multi-gigabyte LMDB therefore happens once, not at every start.
    """

    def __init__(self, memo_path: str | os.PathLike | None = None):
        self.memo_path = None if memo_path is None else Path(memo_path)
        self._memo: dict[str, list] = {}
        self._dirty = False
        if self.memo_path is not None and self.memo_path.exists():
            try:
                self._memo = json.loads(self.memo_path.read_text())
            except (OSError, ValueError):
                self._memo = {}  # a damaged memo only costs rehashing

    def digest(self, path: str | os.PathLike) -> str:
        """Hex blake2b digest of the file's bytes."""
        real = os.path.realpath(path)
        try:
            stat = os.stat(real)
        except OSError as exc:
            raise DatasetError(f"input file missing: {exc.strerror}", path) from None
        known = self._memo.get(real)
        if known is not None and known[0] == stat.st_size and known[1] == stat.st_mtime_ns:
            return known[2]
        digest = hashlib.blake2b(digest_size=16)
        with open(real, "rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 20), b""):
                digest.update(chunk)
        self._memo[real] = [stat.st_size, stat.st_mtime_ns, digest.hexdigest()]
        self._dirty = True
        return digest.hexdigest()

    def save(self) -> None:
        if self.memo_path is not None and self._dirty:
            atomic_write_text(self.memo_path, json.dumps(self._memo))
            self._dirty = False


def recipe_key(recipe: Recipe, hasher: FileHasher) -> str:
    """The store key of a recipe: hash of file contents, builder name, parameters and format."""
    payload = {
        "format": CACHE_FORMAT,
        "builder": recipe.builder_name,
        "params": json.loads(_canonical_json(dict(recipe.params), recipe.id)),
        "files": {role: hasher.digest(path) for role, path in sorted(recipe.files.items())},
    }
    return hashlib.blake2b(_canonical_json(payload, recipe.id).encode(), digest_size=16).hexdigest()


# ------------------------------------------------------------------------------ encoding
def _graph_fields(graph: BlockGraph) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    arrays, scalars = {}, {}
    for name, value in graph.to_dict().items():
        if isinstance(value, torch.Tensor):
            arrays[name] = value.detach().cpu().numpy()
        elif isinstance(value, (str, int, float, bool)) or value is None:
            scalars[name] = value
        else:
            raise ConfigError(f"graph attribute {name!r} of type {type(value).__name__} cannot be stored",
                              getattr(graph, "name", None))
    return arrays, scalars


def encode_graphs(graphs: Mapping[str, BlockGraph], meta: Mapping[str, Any] | None = None) -> bytes:
    """Serialise named graphs to bytes without pickle.

    Layout: ``b'GMR1'``, a little-endian uint32 header length, a JSON header
    ``{"graphs": {name: {"arrays": {field: [dtype, shape, offset]}, "scalars": {...}}}, "meta": ...}``,
    then the raw array bytes, each aligned to 8 bytes.
    """
    header: dict[str, Any] = {"graphs": {}, "meta": dict(meta or {})}
    chunks: list[bytes] = []
    offset = 0
    for name, graph in graphs.items():
        arrays, scalars = _graph_fields(graph)
        entry = {"arrays": {}, "scalars": scalars}
        for field_name, array in arrays.items():
            array = np.ascontiguousarray(array)
            dtype = array.dtype.newbyteorder("<") if array.dtype.byteorder == ">" else array.dtype
            data = array.astype(dtype, copy=False).tobytes()
            entry["arrays"][field_name] = [dtype.str, list(array.shape), offset]
            pad = (-len(data)) % _ALIGN
            chunks.append(data + b"\0" * pad)
            offset += len(data) + pad
        header["graphs"][name] = entry
    head = json.dumps(header, separators=(",", ":")).encode()
    return b"".join([_MAGIC, struct.pack("<I", len(head)), head, *chunks])


def decode_graphs(blob: bytes, *, source: str | None = None) -> tuple[dict[str, BlockGraph], dict[str, Any]]:
    """Inverse of :func:`encode_graphs`: ``({name: BlockGraph}, meta)``."""
    if blob[:4] != _MAGIC:
        raise DatasetError("stored item has an unknown format (rebuild the cache)", source)
    (head_len,) = struct.unpack_from("<I", blob, 4)
    header = json.loads(bytes(blob[8:8 + head_len]))
    body = bytearray(blob[8 + head_len:])  # one writable copy; tensors below are views of it
    graphs = {}
    for name, entry in header["graphs"].items():
        fields: dict[str, Any] = dict(entry["scalars"])
        for field_name, (dtype, shape, offset) in entry["arrays"].items():
            if dtype not in _ALLOWED_DTYPES:
                raise DatasetError(f"stored array {field_name!r} has unsupported dtype {dtype}", source)
            count = int(np.prod(shape)) if shape else 1
            array = np.frombuffer(body, dtype=np.dtype(dtype), count=count, offset=offset).reshape(shape)
            fields[field_name] = torch.from_numpy(array)
        graphs[name] = BlockGraph(**fields)
    return graphs, header["meta"]


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> None:
    """Write a file so that readers see the old or the new content, never a partial one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def atomic_write_text(path: str | os.PathLike, text: str) -> None:
    """Write a text file (UTF-8) so that readers see the old or the new content, never a partial one."""
    atomic_write_bytes(path, text.encode("utf-8"))


# ------------------------------------------------------------------------------ store
# LMDB allows one handle per environment and process, so handles are shared through this
# registry (keyed by real path). A forked child inherits the parent's handles but must not use
# them: it closes them (LMDB then clears only the child's reader slots, and fcntl locks are not
# inherited, so the parent is unaffected) and opens its own.
_ENVS: dict[str, tuple[int, bool, lmdb.Environment]] = {}


def shared_environment(path: str | os.PathLike, *, write: bool = False, subdir: bool = True,
                       map_size: int = 1 << 28) -> lmdb.Environment:
    """This process's handle of the LMDB environment at ``path`` (opened on first use).

    Read-only handles are opened without locking (``lock=False``): stores are read after they
    were written. A write request upgrades a read-only handle.
    """
    path = Path(path)
    real = os.path.realpath(path)
    entry = _ENVS.get(real)
    if entry is not None:
        pid, writable, env = entry
        if pid == os.getpid() and (writable or not write):
            return env
        env.close()
    if write:
        (path if subdir else path.parent).mkdir(parents=True, exist_ok=True)
    elif not path.exists():
        raise DatasetError("LMDB environment does not exist (run preprocessing first?)", path)
    env = lmdb.open(str(path), subdir=subdir, map_size=map_size, readonly=not write, lock=write,
                    readahead=False, meminit=False, max_readers=512)
    _ENVS[real] = (os.getpid(), write, env)
    return env


def close_environment(path: str | os.PathLike) -> None:
    """Close this process's handle of ``path`` (before forking workers, say)."""
    entry = _ENVS.pop(os.path.realpath(path), None)
    if entry is not None:
        entry[2].close()


class ProcessedStore:
    """An LMDB-backed key → processed-item store under ``root``.

    The environment is opened lazily and re-opened after a fork (handles are tied to the
    process id), so the same object may be used by the main process and by DataLoader workers.

    Args:
        root: directory of the store (created on the first write).
        map_size: initial LMDB map size in bytes; doubled automatically when full.
    """

    def __init__(self, root: str | os.PathLike, *, map_size: int = 1 << 28):
        self.root = Path(root)
        self.path = self.root / "store.lmdb"
        self._map_size = map_size

    def _open(self, write: bool) -> lmdb.Environment:
        return shared_environment(self.path, write=write, map_size=self._map_size)

    def close(self) -> None:
        """Close this process's handle (before forking workers, say)."""
        close_environment(self.path)

    def _get(self, raw_key: bytes) -> bytes | None:
        if not self.path.exists():
            return None
        env = self._open(write=False)
        try:
            with env.begin(buffers=False) as txn:
                return txn.get(raw_key)
        except lmdb.MapResizedError:  # another process grew the map since we opened it
            env.set_mapsize(0)
            with env.begin(buffers=False) as txn:
                return txn.get(raw_key)

    # ---- reads
    def has(self, key: str) -> bool:
        return self._get(b"m:" + key.encode()) is not None

    def meta(self, key: str) -> dict[str, Any] | None:
        raw = self._get(b"m:" + key.encode())
        return None if raw is None else json.loads(raw)

    def failure(self, key: str) -> dict[str, Any] | None:
        raw = self._get(b"f:" + key.encode())
        return None if raw is None else json.loads(raw)

    def load(self, key: str) -> tuple[dict[str, BlockGraph], dict[str, Any]]:
        """The stored graphs and builder metadata of ``key``."""
        blob = self._get(b"i:" + key.encode())
        if blob is None:
            raise DatasetError(f"item {key} is not in the processed store", self.path)
        return decode_graphs(blob, source=f"{self.path} [{key}]")

    def keys(self) -> list[str]:
        """Keys of all stored items."""
        if not self.path.exists():
            return []
        with self._open(write=False).begin() as txn:
            return [k[2:].decode() for k, _ in txn.cursor() if k.startswith(b"m:")]

    # ---- writes
    def write(self, items: Iterable[tuple[str, bytes | None, dict[str, Any]]]) -> None:
        """Store ``(key, blob, meta)`` items in one transaction; ``blob=None`` records a failure."""
        items = list(items)
        while True:
            env = self._open(write=True)
            try:
                with env.begin(write=True) as txn:
                    for key, blob, meta in items:
                        raw = key.encode()
                        if blob is None:
                            txn.put(b"f:" + raw, json.dumps(meta).encode())
                        else:
                            txn.put(b"i:" + raw, blob)
                            txn.put(b"m:" + raw, json.dumps(meta).encode())
                            txn.delete(b"f:" + raw)
                return
            except lmdb.MapFullError:
                self._map_size = max(self._map_size, env.info()["map_size"]) * 2
                env.set_mapsize(self._map_size)

    def forget_failure(self, key: str) -> None:
        with self._open(write=True).begin(write=True) as txn:
            txn.delete(b"f:" + key.encode())
