"""``load_model`` (any model reference → a ready model) and ``export_model`` (checkpoints → a shipped model).

A model reference is a shipped-model name (``"default"``, ``"contact-corpus"``, ``"get-plb"``), a shipped-model
directory or its ``manifest.json``, one Lightning ``.ckpt`` written by ``geomol fit``, a list of
``.ckpt`` files (an ensemble), or an already loaded model. What kind of model a file holds is
read from it (the manifest's ``task``, the checkpoint's LightningModule class) and the class
registered for that task in :data:`MODEL_CLASSES` builds it.
"""
from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

from torch import nn

from geomol.errors import ModelLoadError
from geomol.inference.affinity_model import AffinityModel
from geomol.inference.dynamics.dynamics_model import DynamicsModel
from geomol.inference.model_files import find_model_dir, read_lightning_checkpoint, read_manifest

__all__ = ["MODEL_CLASSES", "ModelReference", "load_model", "export_model"]

MODEL_CLASSES: dict[str, type] = {"affinity": AffinityModel, "dynamics": DynamicsModel}
"""Task → model class with ``from_checkpoints(contents, sources)`` and ``from_manifest(dir, manifest)``.
Each task's API module registers its class here."""

_TASK_OF_MODULE = {"AffinityModule": "affinity", "PairClassificationModule": "pair_classification",
                   "DynamicsModule": "dynamics"}
_FILE_SUFFIXES = (".ckpt", ".json", ".pt", ".pth")

ModelReference = Union[str, PathLike, nn.Module, Sequence[Union[str, PathLike]]]


def _model_class(task: str, source) -> type:
    if task not in MODEL_CLASSES:
        raise ModelLoadError(f"a {task!r} model cannot be loaded for prediction (supported: "
                             f"{', '.join(sorted(MODEL_CLASSES))})", source=source)
    return MODEL_CLASSES[task]


def _task_of_checkpoint(class_path: str | None, hyperparameters, source) -> str:
    if class_path is None:  # saved without LightningCLI's class record: tell the tasks apart by their arguments
        return "dynamics" if "num_timesteps" in hyperparameters else "affinity"
    task = _TASK_OF_MODULE.get(class_path.rsplit(".", 1)[-1])
    if task is None:
        raise ModelLoadError(f"checkpoint of {class_path}, which is not a geomol task module", source=source)
    return task


def _from_checkpoints(paths: Sequence[str | PathLike]) -> nn.Module:
    contents = [read_lightning_checkpoint(p) for p in paths]
    tasks = {_task_of_checkpoint(c.class_path, c.hyperparameters, p) for c, p in zip(contents, paths)}
    if len(tasks) > 1:
        raise ModelLoadError(f"the checkpoints are of different tasks ({sorted(tasks)})", source=paths[0])
    return _model_class(tasks.pop(), paths[0]).from_checkpoints(contents, [str(p) for p in paths])


def _from_directory(path: str | PathLike) -> nn.Module:
    model_dir, manifest = read_manifest(path)
    return _model_class(str(manifest["task"]), model_dir).from_manifest(model_dir, manifest)


def _looks_like_path(text: str) -> bool:
    return "/" in text or "\\" in text or text.lower().endswith(_FILE_SUFFIXES)


def load_model(model: ModelReference = "default", *, device: str = "cpu") -> nn.Module:
    """Load a trained model, safely (``torch.load(weights_only=True)`` only), in eval mode on ``device``.

    Args:
        model: a shipped-model name (``"default"`` = ``"contact-corpus"``, found in ``$GEOMOL_MODELS``
            or the repository's ``models/``), a shipped-model directory or its ``manifest.json``,
            a Lightning ``.ckpt`` from ``geomol fit``, a list of ``.ckpt`` files (one ensemble),
            or an already loaded model (returned as it is, moved to ``device``).

    Returns:
        for affinity models an :class:`~geomol.inference.affinity_model.AffinityModel`, which
        carries the preprocessing (pocket cutoff, hydrogens, fragments) it was trained with; for
        trajectory models a :class:`~geomol.inference.dynamics.dynamics_model.DynamicsModel` (EGNO or EGNN
        with its data protocol: target offsets, graph and feature definitions, units).

    Raises:
        ModelLoadError: not found (naming where it looked), unreadable, not loadable safely,
            weights that do not fit, ensemble members that disagree.
    """
    if isinstance(model, nn.Module):
        return model.to(device).eval()
    if isinstance(model, (list, tuple)):
        if not model:
            raise ModelLoadError("an empty list of checkpoints is not a model")
        dirs = [p for p in model if Path(p).is_dir()]
        if dirs:
            raise ModelLoadError("a list must hold Lightning checkpoints (.ckpt); a model directory is already "
                                 "a whole ensemble", source=dirs[0])
        return _from_checkpoints(list(model)).to(device).eval()
    path = Path(model)
    if path.is_dir() or (path.is_file() and path.suffix.lower() == ".json"):
        loaded = _from_directory(path)
    elif path.is_file():
        loaded = _from_checkpoints([path])
    elif _looks_like_path(str(model)):
        raise ModelLoadError("no such model file or directory", source=model)
    else:
        loaded = _from_directory(find_model_dir(str(model)))
    return loaded.to(device).eval()


def export_model(checkpoints: ModelReference, out_dir: str | PathLike, card: str | PathLike | None = None, *,
                 name: str | None = None, description: str | None = None, metrics: Mapping[str, Any] | None = None,
                 overwrite: bool = False) -> Path:
    """Turn trained Lightning checkpoints into a shipped-model directory (``models/<name>/``).

    Writes ``manifest.json`` (name, description, task, architecture and hyperparameters,
    preprocessing, members with SHA-256 and source checkpoint, metrics), ``member_<i>.pt`` (a
    plain state_dict per member, loadable with ``torch.load(weights_only=True)``) and
    ``README.md`` (the model card).

    Args:
        checkpoints: one ``.ckpt`` or a list of them (the ensemble members; all must share
            architecture and preprocessing); any reference :func:`load_model` accepts works.
        out_dir: the model directory to create (must not exist or be empty, unless ``overwrite``).
        card: the model card, as Markdown text or a path to a Markdown file; None writes the
            recorded facts only.
        name: model name (default: the folder name); description, metrics: manifest entries
            (metrics: a JSON-ready dict, e.g. cross-validation results).

    Returns:
        the directory written.
    """
    model = load_model(checkpoints)
    return model.save(out_dir, card=card, name=name, description=description, metrics=metrics, overwrite=overwrite)
