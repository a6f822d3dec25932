"""Trained models on disk: shipped-model directories and Lightning checkpoints, read safely.

A **shipped model** is a directory ``models/<name>/``::

    manifest.json    what the model is: format and version, name, task, description, architecture,
                     hyperparameters, preprocessing, the member weight files (with SHA-256 and the
                     checkpoint each came from) and a metrics summary
    member_0.pt ...  one weights file per ensemble member: a plain ``state_dict`` (str → Tensor)
                     written with ``torch.save``, readable with ``torch.load(..., weights_only=True)``
    README.md        the model card

Every file is read with ``torch.load(weights_only=True)`` (Lightning checkpoints included), so a
model file can carry tensors, numbers and strings but never code: loading a model from an
untrusted source cannot run anything. Member files are checked against their SHA-256.

Names resolve to directories: ``"default"`` is an alias of ``"contact-corpus"``; a name is looked up in
each folder of ``$GEOMOL_MODELS`` (``os.pathsep``-separated), then in ``models/`` of the
repository that holds the ``geomol`` package (an editable install).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from geomol.errors import ConfigError, ModelLoadError
from geomol.version import PACKAGE_DIR

__all__ = ["FORMAT", "FORMAT_VERSION", "MANIFEST", "ALIASES", "MODELS_ENV", "CheckpointContents",
           "model_search_path", "find_model_dir", "list_shipped_models", "safe_torch_load", "read_lightning_checkpoint",
           "read_manifest", "read_member_weights", "write_model_dir", "update_manifest"]

FORMAT = "geomol-model"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
CARD = "README.md"
ALIASES = {"default": "contact-corpus"}
MODELS_ENV = "GEOMOL_MODELS"
_LIGHTNING_PREFIXES = ("model._orig_mod.", "model.")  # torch.compile wraps the model in _orig_mod


# ---------------------------------------------------------------------- finding models
def model_search_path() -> list[Path]:
    """Folders searched for shipped models by name: ``$GEOMOL_MODELS`` entries, then the repository's ``models/``."""
    folders = [Path(p) for p in os.environ.get(MODELS_ENV, "").split(os.pathsep) if p]
    folders.append(PACKAGE_DIR.parent / "models")
    return folders


def find_model_dir(name: str) -> Path:
    """The directory of the shipped model ``name`` (aliases such as ``"default"`` resolved).

    Raises:
        ModelLoadError: no folder of the search path holds ``<name>/manifest.json``; the message
            lists where it looked and which models it found there.
    """
    real = ALIASES.get(name, name)
    folders = model_search_path()
    for folder in folders:
        if (folder / real / MANIFEST).is_file():
            return folder / real
    found = sorted({p.parent.name for f in folders if f.is_dir() for p in f.glob(f"*/{MANIFEST}")})
    alias = f" (alias of {real!r})" if real != name else ""
    raise ModelLoadError(
        f"no shipped model named {name!r}{alias}: looked for {real}/{MANIFEST} in "
        f"{', '.join(str(f) for f in folders)}; models found there: {found or 'none'}. Set ${MODELS_ENV} to a "
        "folder of exported models, or pass a checkpoint (.ckpt) or model directory path instead",
        source=name)


def list_shipped_models(task: str | None = None) -> list[dict[str, Any]]:
    """The shipped models :func:`find_model_dir` can resolve by name, read from their manifests only (no weights).

    A name found in several folders of the search path is listed once, from the folder that wins; a folder
    whose manifest cannot be read is left out. Each entry: ``name``, ``task``, ``description``, ``architecture``,
    ``members`` (ensemble size), ``aliases`` (e.g. ``["default"]``), ``path`` and, for affinity models, the
    ``receptor_kinds`` of their training pockets (:mod:`geomol.inference.domain`); sorted by name.

    Args:
        task: only models of this task (``"affinity"``, ``"dynamics"``); None lists all.
    """
    found: dict[str, dict[str, Any]] = {}
    for folder in model_search_path():
        for manifest_path in sorted(folder.glob(f"*/{MANIFEST}")) if folder.is_dir() else ():
            name = manifest_path.parent.name
            if name in found:
                continue
            try:
                _, manifest = read_manifest(manifest_path)
            except ModelLoadError:
                continue
            found[name] = {"name": name, "task": str(manifest["task"]), "description": manifest.get("description", ""),
                           "architecture": manifest.get("architecture", ""), "members": len(manifest["members"]),
                           "aliases": sorted(a for a, real in ALIASES.items() if real == name),
                           "path": str(manifest_path.parent),
                           "receptor_kinds": list((manifest.get("domain") or {}).get("receptor_kinds", ["protein"]))
                           if manifest["task"] == "affinity" else []}
    return [entry for name, entry in sorted(found.items()) if task is None or entry["task"] == task]


# ---------------------------------------------------------------------- safe reading
def safe_torch_load(path: str | PathLike, what: str = "model file") -> Any:
    """``torch.load(path, weights_only=True)`` on the CPU, with failures as :class:`ModelLoadError`."""
    if not Path(path).is_file():
        raise ModelLoadError(f"{what} not found", source=path)
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises UnpicklingError, RuntimeError, EOFError ... for bad files
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ModelLoadError(f"cannot read {what} as plain tensors and values (torch.load with "
                             f"weights_only=True; geomol never unpickles objects): {reason}", source=path) from None


def _tensor_dict(state: Any, source, what: str) -> dict[str, torch.Tensor]:
    if not isinstance(state, Mapping) or not all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                 for k, v in state.items()):
        raise ModelLoadError(f"{what} is not a state_dict (a mapping of names to tensors)", source=source)
    return dict(state)


@dataclass
class CheckpointContents:
    """What prediction needs from one Lightning checkpoint written by ``geomol fit``.

    Attributes:
        class_path: the LightningModule class (``'geomol.tasks.AffinityModule'``), or None if unrecorded.
        hyperparameters: the module's saved ``hyper_parameters``.
        state_dict: the wrapped model's weights, ``model.`` prefix removed.
        preprocessing: the ``geomol_preprocessing`` entry (None if the checkpoint has none).
        origin: where the weights came from (file name, epoch, global step) for the manifest.
    """

    class_path: str | None
    hyperparameters: dict[str, Any]
    state_dict: dict[str, torch.Tensor]
    preprocessing: dict[str, Any] | None
    origin: dict[str, Any] = field(default_factory=dict)


def _strip_prefix(key: str) -> str | None:
    for prefix in _LIGHTNING_PREFIXES:
        if key.startswith(prefix):
            return key[len(prefix):]
    return None


def read_lightning_checkpoint(path: str | PathLike) -> CheckpointContents:
    """Read a ``.ckpt`` safely and keep the model weights, hyperparameters and preprocessing."""
    data = safe_torch_load(path, "checkpoint")
    if not isinstance(data, Mapping) or "state_dict" not in data or "hyper_parameters" not in data:
        raise ModelLoadError("not a Lightning checkpoint of geomol (no 'state_dict' / 'hyper_parameters')",
                             source=path)
    state = _tensor_dict(data["state_dict"], path, "the checkpoint's state_dict")
    model_state = {short: tensor for key, tensor in state.items() if (short := _strip_prefix(key)) is not None}
    if not model_state:
        raise ModelLoadError("the checkpoint's state_dict has no 'model.' weights", source=path)
    hyper = dict(data["hyper_parameters"])
    preprocessing = data.get("geomol_preprocessing")
    origin = {"checkpoint": Path(path).name, "epoch": data.get("epoch"), "global_step": data.get("global_step")}
    return CheckpointContents(hyper.get("_class_path"), hyper, model_state,
                              dict(preprocessing) if preprocessing else None, origin)


# ---------------------------------------------------------------------- shipped-model directories
def read_manifest(path: str | PathLike) -> tuple[Path, dict[str, Any]]:
    """(model directory, manifest) from a model directory or its ``manifest.json``."""
    path = Path(path)
    manifest_path = path / MANIFEST if path.is_dir() else path
    if not manifest_path.is_file():
        raise ModelLoadError(f"no {MANIFEST} in the model directory", source=path)
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ModelLoadError(f"cannot read the manifest: {exc}", source=manifest_path) from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise ModelLoadError(f"not a geomol model manifest (expected \"format\": \"{FORMAT}\")", source=manifest_path)
    if manifest.get("format_version") != FORMAT_VERSION:
        raise ModelLoadError(f"unsupported model format version {manifest.get('format_version')!r} "
                             f"(this geomol reads version {FORMAT_VERSION})", source=manifest_path)
    for key in ("task", "hyperparameters", "preprocessing", "members"):
        if key not in manifest:
            raise ModelLoadError(f"the manifest has no {key!r}", source=manifest_path)
    if not isinstance(manifest["members"], list) or not manifest["members"]:
        raise ModelLoadError("the manifest lists no member weight files", source=manifest_path)
    return manifest_path.parent, manifest


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_member_weights(model_dir: Path, entry: str | Mapping[str, Any]) -> dict[str, torch.Tensor]:
    """One member's state_dict; ``entry`` is a file name or ``{"file": ..., "sha256": ...}``."""
    entry = {"file": entry} if isinstance(entry, str) else dict(entry)
    name = entry.get("file")
    if not isinstance(name, str) or Path(name).name != name:
        raise ModelLoadError(f"member entry {entry!r} must name a file inside the model directory", source=model_dir)
    path = model_dir / name
    state = safe_torch_load(path, "member weights file")
    if entry.get("sha256") and _sha256(path) != entry["sha256"]:
        raise ModelLoadError("SHA-256 differs from the manifest: the file was changed or corrupted", source=path)
    return _tensor_dict(state, path, "the member weights")


def _json_ready(value: Any, what: str) -> Any:
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{what} must be JSON-serialisable: {exc}") from None


def write_model_dir(out_dir: str | PathLike, manifest: dict[str, Any], members: Sequence[Mapping[str, torch.Tensor]],
                    card: str, *, overwrite: bool = False) -> Path:
    """Write a shipped-model directory (all files in a temporary sibling, then renamed into place).

    ``manifest`` gets ``format``, ``format_version`` and the ``members`` list (file + SHA-256,
    merged with any per-member dicts already in ``manifest['members']``) filled in here.
    """
    out_dir = Path(out_dir)
    if out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())) and not overwrite:
        raise ConfigError("output exists and is not an empty directory (pass overwrite=True to replace it)",
                          source=out_dir)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.", dir=out_dir.parent))
    try:
        work.chmod(0o755)  # mkdtemp makes it private; a shipped model is an ordinary folder
        extra = list(manifest.get("members", [])) + [{}] * len(members)
        entries = []
        for i, state in enumerate(members):
            name = f"member_{i}.pt"
            torch.save({k: v.detach().cpu().clone() for k, v in state.items()}, work / name)
            entries.append({"file": name, "sha256": _sha256(work / name),
                            **{k: v for k, v in extra[i].items() if k not in ("file", "sha256")}})
        full = {"format": FORMAT, "format_version": FORMAT_VERSION, **manifest, "members": entries}
        (work / MANIFEST).write_text(json.dumps(_json_ready(full, "the manifest"), indent=1) + "\n", encoding="utf-8")
        (work / CARD).write_text(card if card.endswith("\n") else card + "\n", encoding="utf-8")
        if out_dir.exists():
            shutil.rmtree(out_dir) if out_dir.is_dir() else out_dir.unlink()
        os.replace(work, out_dir)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return out_dir


def update_manifest(path: str | PathLike, entries: Mapping[str, Any]) -> Path:
    """Set top-level entries of an existing model's manifest (written atomically); member files are untouched.

    For records computed after training (such as the applicability domain) that change no weight.
    """
    model_dir, manifest = read_manifest(path)
    manifest.update(_json_ready(dict(entries), "the manifest entries"))
    target = model_dir / MANIFEST
    work = target.with_name(f".{MANIFEST}.tmp{os.getpid()}")
    work.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(work, target)
    return target
