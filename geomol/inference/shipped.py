"""The base of every trained model geomol loads for prediction: networks + graph recipe + metadata.

A :class:`ShippedModel` is one or more networks of one architecture (an ensemble), the recipe
their training graphs were built with (:class:`~geomol.data.complexes.recipe.ComplexRecipe` for affinity,
:class:`~geomol.data.dynamics.protocol.TrajectoryProtocol` for trajectories) and descriptive
metadata. It is built from Lightning checkpoints (``from_checkpoints``) or a shipped-model
directory (``from_manifest``) and written as one (``save``); a task's subclass only says which
architectures it knows, how to read their arguments, and what its model card lists.
"""
from __future__ import annotations

import itertools

from os import PathLike
from pathlib import Path
from typing import Any, ClassVar, Mapping, Sequence

import torch
from torch import nn

from geomol.errors import ModelLoadError
from geomol.inference.model_files import CheckpointContents, read_member_weights, write_model_dir
from geomol.version import __version__

__all__ = ["ShippedModel", "card_text"]


def card_text(card: str | PathLike) -> str:
    """The card itself, or the contents of the Markdown file it names."""
    if isinstance(card, PathLike) or (isinstance(card, str) and "\n" not in card and Path(card).is_file()):
        return Path(card).read_text(encoding="utf-8")
    return str(card)


def load_weights(network: nn.Module, state: Mapping[str, torch.Tensor], label: str, source) -> nn.Module:
    """``network`` holding exactly the weights in ``state``; a mismatch is a :class:`ModelLoadError`."""
    try:
        result = network.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # shape mismatches raise even when not strict
        raise ModelLoadError(f"weights do not fit {label}: {str(exc).strip().splitlines()[-1].strip()}",
                             source=source) from None
    if result.missing_keys or result.unexpected_keys:
        raise ModelLoadError(f"weights do not fit {label}: {len(result.missing_keys)} missing "
                             f"(e.g. {result.missing_keys[:2]}), {len(result.unexpected_keys)} unexpected "
                             f"(e.g. {result.unexpected_keys[:2]})", source=source)
    return network


class ShippedModel(nn.Module):
    """Networks of one architecture, their graph recipe and metadata (subclass per task).

    Args:
        members: the trained networks (≥ 1; exactly ``max_members`` at most), same constructor arguments.
        arguments: their constructor arguments. recipe: how their training graphs were built.
        name, description, metrics: metadata carried into a shipped model's manifest.
        origins: per member, where its weights came from (checkpoint file, epoch, step).

    Subclasses set ``task``, ``recipe_type``, ``max_members`` and implement :meth:`architecture_of`,
    :meth:`build_network`, and :meth:`card_facts`.
    """

    task: ClassVar[str] = ""
    recipe_type: ClassVar[type] = object
    max_members: ClassVar[int | None] = None
    default_architecture: ClassVar[str] = ""

    def __init__(self, members: Sequence[nn.Module], arguments: Mapping[str, Any], recipe, *, name: str = "",
                 description: str = "", metrics: Mapping[str, Any] | None = None,
                 origins: Sequence[Mapping[str, Any]] | None = None):
        super().__init__()
        if not members:
            raise ModelLoadError(f"a {self.task} model needs at least one ensemble member", source=name or None)
        self.members = nn.ModuleList(members)
        self.arguments, self.recipe = dict(arguments), recipe
        self.name, self.description = name, description
        self.metrics = dict(metrics or {})
        self.origins = [dict(o) for o in origins] if origins is not None else [{} for _ in members]
        self.eval()

    @property
    def architecture(self) -> str:
        return type(self.members[0]).__name__

    @property
    def device(self) -> torch.device:
        return self._first_tensor().device

    @property
    def dtype(self) -> torch.dtype:
        """The members' floating-point dtype (of their first parameter, or buffer for members without any)."""
        return self._first_tensor().dtype

    def _first_tensor(self) -> torch.Tensor:
        floating = (t for t in itertools.chain(self.parameters(), self.buffers()) if t.is_floating_point())
        return next(floating)  # lazily: a rollout asks for the device every window

    # ------------------------------------------------------------------ what a task says
    @classmethod
    def architecture_of(cls, hyperparameters: Mapping[str, Any], source) -> str:
        """The architecture a checkpoint's saved hyperparameters describe."""
        raise NotImplementedError

    @classmethod
    def build_network(cls, architecture: str, hyperparameters: Mapping[str, Any], source) -> tuple[nn.Module, dict]:
        """(an untrained network, its constructor arguments) from saved hyperparameters; bad values raise
        :class:`ModelLoadError`."""
        raise NotImplementedError

    def card_facts(self, manifest: Mapping[str, Any]) -> list[str]:
        """Lines of a model card written from the manifest alone (architecture, recipe)."""
        raise NotImplementedError

    @classmethod
    def check_recipe(cls, arguments: Mapping[str, Any], recipe, source, architecture: str) -> None:
        """Refuse a recipe the networks of ``architecture`` cannot take (e.g. more block types than embedded)."""

    @classmethod
    def manifest_metadata(cls, manifest: Mapping[str, Any], model_dir: Path) -> dict[str, Any]:
        """Constructor keywords of task-specific manifest entries (e.g. an applicability domain)."""
        return {}

    def manifest_entries(self) -> dict[str, Any]:
        """Task-specific manifest entries, the counterpart of :meth:`manifest_metadata`."""
        return {}

    # ------------------------------------------------------------------ building
    @classmethod
    def _check_count(cls, count: int, source) -> None:
        if cls.max_members is not None and count > cls.max_members:
            raise ModelLoadError(f"{count} members given: a {cls.task} model is {cls.max_members} network(s), "
                                 "not an ensemble", source=source)

    @classmethod
    def _assemble(cls, architecture: str, hyperparameters: Mapping[str, Any], recipe, states,
                  source, **metadata) -> "ShippedModel":
        """The model from saved hyperparameters, its recipe and ``[(state_dict, source), ...]``."""
        members, arguments = [], None
        for state, member_source in states:
            network, arguments = cls.build_network(architecture, hyperparameters, member_source)
            members.append(load_weights(network, state, f"{architecture}({arguments})", member_source))
        cls.check_recipe(arguments, recipe, source, architecture)
        return cls(members, arguments, recipe, **metadata)

    @classmethod
    def from_checkpoints(cls, checkpoints: Sequence[CheckpointContents], sources: Sequence[str | PathLike],
                         name: str = "") -> "ShippedModel":
        """An ensemble of Lightning checkpoints (all must agree on architecture and recipe)."""
        first, source = checkpoints[0], sources[0]
        cls._check_count(len(checkpoints), source)
        architecture = cls.architecture_of(first.hyperparameters, source)
        arguments = cls.build_network(architecture, first.hyperparameters, source)[1]
        recipe = cls.recipe_type.from_dict(first.preprocessing, source)
        for contents, other in zip(checkpoints[1:], sources[1:]):
            if cls.build_network(cls.architecture_of(contents.hyperparameters, other), contents.hyperparameters,
                           other)[1] != arguments:
                raise ModelLoadError(f"architecture differs from {Path(source).name}: ensemble members must "
                                     "share their hyperparameters", source=other)
            if cls.recipe_type.from_dict(contents.preprocessing, other) != recipe:
                raise ModelLoadError(f"preprocessing differs from {Path(source).name}: ensemble members must "
                                     "see graphs built the same way", source=other)
        return cls._assemble(architecture, first.hyperparameters, recipe,
                             [(c.state_dict, s) for c, s in zip(checkpoints, sources)], source, name=name,
                             origins=[c.origin for c in checkpoints])

    @classmethod
    def from_manifest(cls, model_dir: Path, manifest: Mapping[str, Any]) -> "ShippedModel":
        """A shipped model (see :mod:`geomol.inference.model_files`) from its directory and manifest."""
        architecture = str(manifest.get("architecture", cls.default_architecture))
        entries = manifest["members"]
        cls._check_count(len(entries), model_dir)
        recipe = cls.recipe_type.from_dict(manifest["preprocessing"], model_dir)
        states = [(read_member_weights(model_dir, e), model_dir / str(e.get("file") if isinstance(e, Mapping) else e))
                  for e in entries]
        return cls._assemble(architecture, manifest["hyperparameters"], recipe, states, model_dir,
                             name=str(manifest.get("name", model_dir.name)),
                             description=str(manifest.get("description", "")), metrics=manifest.get("metrics"),
                             origins=[e.get("source", {}) if isinstance(e, Mapping) else {} for e in entries],
                             **cls.manifest_metadata(manifest, model_dir))

    # ------------------------------------------------------------------ saving
    def manifest(self, **overrides: Any) -> dict[str, Any]:
        """The manifest entries of this model (member files are added by the writer)."""
        return {"name": self.name, "task": self.task, "description": self.description,
                "architecture": self.architecture, "hyperparameters": self.arguments,
                "preprocessing": self.recipe.to_dict(), "metrics": self.metrics, **self.manifest_entries(),
                "geomol_version": __version__, **overrides,
                "members": [{"source": origin} for origin in self.origins]}

    def save(self, out_dir: str | PathLike, *, card: str | PathLike | None = None, name: str | None = None,
             description: str | None = None, metrics: Mapping[str, Any] | None = None,
             overwrite: bool = False) -> Path:
        """Write this model as a shipped-model directory (manifest, ``member_<i>.pt``, README.md); returns its path.

        Args:
            card: the model card (README.md) as text, or the path of a Markdown file holding it;
                None writes a card of the recorded facts only.
            name, description, metrics: override the model's own (name defaults to the folder name).
        """
        out_dir = Path(out_dir)
        manifest = self.manifest(name=name or self.name or out_dir.name,
                                 description=self.description if description is None else description,
                                 metrics=self.metrics if metrics is None else dict(metrics))
        text = card_text(card) if card is not None else self._facts_card(manifest)
        return write_model_dir(out_dir, manifest, [m.state_dict() for m in self.members], text, overwrite=overwrite)

    def _facts_card(self, manifest: Mapping[str, Any]) -> str:
        """A model card listing what the manifest records, for models exported without a written card."""
        lines = [f"# {manifest['name']}", "", manifest["description"] or self.card_facts(manifest)[0], "",
                 "No card text was given when this model was exported; the facts below come from its manifest.", "",
                 *self.card_facts(manifest)[1:]]
        lines += [f"- {key}: {value}" for key, value in manifest["metrics"].items()]
        return "\n".join(lines) + "\n"
