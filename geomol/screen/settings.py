"""What a screen is: its inputs and settings, as one object that travels to every worker.

:class:`ScreenSettings` holds the user's choices (model, pose parameters, docking, shard size, ...).
:class:`ScreenInputs` adds the receptor and reference files *as bytes*, so that workers on other
machines need no shared file system to read them (only a model given as a directory path must be
visible to the workers; shipped models are found by name). Its :attr:`~ScreenInputs.fingerprint`
identifies the screen: a rerun into the same output folder resumes only when the fingerprint is the
same (same receptor and reference content, same model weights, same settings).
"""
from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from geomol.data.posing.poses import PoseParameters
from geomol.errors import ConfigError, StructureReadError

__all__ = ["DockSettings", "ScreenSettings", "ScreenInputs", "model_digest"]

_NOT_IN_FINGERPRINT = ("top", "threads")  # a resumed run may show more hits or use other threads


@dataclass(frozen=True)
class DockSettings:
    """AutoDock Vina for ligands without a usable common core with the reference.

    Attributes:
        exhaustiveness: Vina's search exhaustiveness (its default is 8).
        padding: Å added on every side of the reference ligand's bounding box to make the search box.
        seed: Vina's random seed (docking is reproducible for one seed).
    """

    exhaustiveness: int = 8
    padding: float = 6.0
    seed: int = 1

    def __post_init__(self):
        if self.exhaustiveness < 1 or not self.padding >= 0:
            raise ConfigError(f"docking exhaustiveness must be ≥ 1 and padding ≥ 0 Å, got {self.exhaustiveness} "
                              f"and {self.padding}")


@dataclass(frozen=True)
class ScreenSettings:
    """The choices of a screen.

    Attributes:
        model: affinity model reference (:func:`geomol.load_model`: shipped name or directory/checkpoint path).
        receptor_chains: use only these receptor chains (None: all).
        pose: :class:`~geomol.data.posing.poses.PoseParameters` of the posing on the reference.
        dock: :class:`DockSettings` to dock ligands without a common core; None reports them as failures.
        shard_size: ligands per task; None: sized when the screen starts from the library and the worker
            threads (:func:`~geomol.screen.run.auto_shard_size`), or the size of the screen it resumes.
        batch_size: complexes per forward pass of the model.
        top: rows of the merged, ranked table (and poses of the top SDF).
        threads: torch threads per worker process.
    """

    model: str = "default"
    receptor_chains: tuple[str, ...] | None = None
    pose: PoseParameters = field(default_factory=PoseParameters)
    dock: DockSettings | None = None
    shard_size: int | None = None
    batch_size: int = 32
    top: int = 100
    threads: int = 1

    def __post_init__(self):
        if (self.shard_size is not None and self.shard_size < 1) or self.batch_size < 1 or self.top < 1 or \
                self.threads < 1:
            raise ConfigError("shard size, batch size, top and threads must be ≥ 1")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def model_digest(model) -> str:
    """SHA-256 of a model's weights (every tensor of its state dict, by name): the model's identity in a fingerprint."""
    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def _file_bytes(path: str | PathLike, option: str) -> bytes:
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise StructureReadError(f"file not found (given as {option})", source=path) from None
    except OSError as exc:
        raise StructureReadError(f"cannot read file ({exc.strerror or exc}; given as {option})", source=path) from None
    if not data.strip():
        raise StructureReadError(f"file is empty (given as {option})", source=path)
    return data


@dataclass(frozen=True)
class ScreenInputs:
    """Everything a worker needs to score a shard: settings, receptor and reference file contents, model identity.

    Attributes:
        settings: :class:`ScreenSettings`.
        receptor_name, receptor_data: the receptor file's name (its suffix tells the format) and bytes.
        reference_name, reference_data: the same for the reference ligand pose.
        model_digest: SHA-256 of the model's weights (filled by the driver after loading it).
    """

    settings: ScreenSettings
    receptor_name: str
    receptor_data: bytes
    reference_name: str
    reference_data: bytes
    model_digest: str = ""

    @classmethod
    def read(cls, receptor: str | PathLike, reference: str | PathLike, settings: ScreenSettings) -> "ScreenInputs":
        """Read the receptor and reference files.

        Raises:
            StructureReadError: a file is missing, unreadable or empty.
        """
        return cls(settings, Path(receptor).name, _file_bytes(receptor, "--receptor"), Path(reference).name,
                   _file_bytes(reference, "--reference"))

    @property
    def fingerprint(self) -> str:
        """SHA-256 over the settings that change results, the two files' contents and the model's weights."""
        choices = {k: v for k, v in self.settings.to_dict().items() if k not in _NOT_IN_FINGERPRINT}
        h = hashlib.sha256(json.dumps(choices, sort_keys=True, default=str).encode())
        for part in (self.receptor_data, self.reference_data, self.model_digest.encode()):
            h.update(hashlib.sha256(part).digest())
        return h.hexdigest()

    def describe(self) -> dict[str, Any]:
        """JSON-ready description (file names and content hashes, not contents) for the manifest."""
        return {"settings": self.settings.to_dict(), "receptor": self.receptor_name,
                "receptor_sha256": hashlib.sha256(self.receptor_data).hexdigest(), "reference": self.reference_name,
                "reference_sha256": hashlib.sha256(self.reference_data).hexdigest(),
                "model_sha256": self.model_digest, "fingerprint": self.fingerprint}
