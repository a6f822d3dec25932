"""An ensemble of GET affinity models, with the preprocessing they were trained with.

:class:`AffinityModel` is what :func:`geomol.load_model` returns for an affinity model: one or
more :class:`~geomol.models.get.GETAffinity` members of identical architecture, the
:class:`Preprocessing` that built their training graphs (pocket cutoff, hydrogens, ligand
fragments), and descriptive metadata (name, description, metrics). ``predict`` gives the mean
and the spread of the members' pK; ``save`` writes a shipped-model directory
(:mod:`geomol.inference.model_files`).
"""
from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch
from torch import nn

import geomol
from geomol.data.blocks import BlockGraph
from geomol.data.fragment import FragmentVocab
from geomol.data.vocab import VOCAB, BlockVocab
from geomol.errors import DatasetError, ModelLoadError
from geomol.inference.domain import ApplicabilityDomain
from geomol.inference.model_files import CheckpointContents, read_member_weights, write_model_dir
from geomol.models.get import GETAffinity, GETModel, as_batch

__all__ = ["Preprocessing", "AffinityModel", "GET_ARGUMENTS"]

GET_ARGUMENTS = tuple(p for p in inspect.signature(GETModel.__init__).parameters if p != "self")
"""Constructor arguments of :class:`GETAffinity`; other saved hyperparameters (lr, ...) are not the model's."""


@dataclass(frozen=True)
class Preprocessing:
    """How complexes were turned into graphs for training; prediction must do the same.

    Attributes:
        pocket_cutoff: Å; receptor blocks with a heavy atom this close to a ligand heavy atom.
        keep_hydrogens: hydrogens kept in the graphs.
        fragments: ligand fragment vocabulary (None: one block per ligand atom).
    """

    pocket_cutoff: float = 10.0
    keep_hydrogens: bool = False
    fragments: FragmentVocab | None = None

    @classmethod
    def from_dict(cls, data: Mapping[str, Any] | None, source: str | PathLike | None = None) -> "Preprocessing":
        """From a checkpoint's ``geomol_preprocessing`` or a manifest's ``preprocessing``.

        A missing record (a model trained without a geomol data module) falls back to the
        defaults with a warning.
        """
        if not data:
            warnings.warn(f"{source}: no preprocessing recorded with the model; assuming a {cls.pocket_cutoff:g} Å "
                          "pocket, no hydrogens, one block per ligand atom", UserWarning, stacklevel=3)
            return cls()
        cutoff = data.get("pocket_cutoff", cls.pocket_cutoff)
        if not isinstance(cutoff, (int, float)) or not math.isfinite(cutoff) or cutoff <= 0:
            raise ModelLoadError(f"preprocessing pocket_cutoff must be a positive number of Å, got {cutoff!r}",
                                 source=source)
        try:
            fragments = None if data.get("fragments") is None else FragmentVocab.from_dict(data["fragments"], source)
        except DatasetError as exc:
            raise ModelLoadError(f"bad fragment vocabulary in the preprocessing record: {exc.reason}",
                                 source=source) from None
        return cls(float(cutoff), bool(data.get("keep_hydrogens", False)), fragments)

    def to_dict(self) -> dict[str, Any]:
        return {"pocket_cutoff": self.pocket_cutoff, "keep_hydrogens": self.keep_hydrogens,
                "fragments": None if self.fragments is None else self.fragments.to_dict()}

    def block_vocab(self) -> BlockVocab:
        """The block vocabulary of the graphs: the official one, extended by the fragments if any."""
        return VOCAB if self.fragments is None else self.fragments.block_vocab()


def _architecture(hyperparameters: Mapping[str, Any], source) -> dict[str, Any]:
    """The GETAffinity constructor arguments among saved hyperparameters (n_block_types required)."""
    arguments = {k: hyperparameters[k] for k in GET_ARGUMENTS if k in hyperparameters}
    if not isinstance(arguments.get("n_block_types"), int):
        raise ModelLoadError("hyperparameters lack n_block_types (the block vocabulary size): not a trained "
                             "GET affinity model", source=source)
    return arguments


def _member(arguments: dict[str, Any], state: dict[str, torch.Tensor], source) -> GETAffinity:
    """A GETAffinity with ``arguments`` holding exactly the weights in ``state``."""
    try:
        model = GETAffinity(**arguments)
    except (TypeError, ValueError) as exc:
        raise ModelLoadError(f"cannot build GETAffinity({arguments}): {exc}", source=source) from None
    try:
        result = model.load_state_dict(state, strict=False)
    except RuntimeError as exc:  # shape mismatches raise even when not strict
        raise ModelLoadError(f"weights do not fit GETAffinity({arguments}): {str(exc).splitlines()[-1].strip()}",
                             source=source) from None
    if result.missing_keys or result.unexpected_keys:
        raise ModelLoadError(f"weights do not fit GETAffinity({arguments}): {len(result.missing_keys)} missing "
                             f"(e.g. {result.missing_keys[:2]}), {len(result.unexpected_keys)} unexpected "
                             f"(e.g. {result.unexpected_keys[:2]})", source=source)
    return model


def _check_vocab(arguments: dict[str, Any], preprocessing: Preprocessing, source) -> None:
    needed = len(preprocessing.block_vocab())
    if arguments["n_block_types"] < needed:
        raise ModelLoadError(f"the model has {arguments['n_block_types']} block types but its preprocessing "
                             f"(fragments) defines {needed}", source=source)


class AffinityModel(nn.Module):
    """An ensemble of GETAffinity members sharing one architecture and one preprocessing.

    Args:
        members: the trained models (≥ 1), same constructor arguments.
        arguments: their GETAffinity constructor arguments (``n_block_types`` included).
        preprocessing: how their training graphs were built.
        name, description, metrics: metadata carried into a shipped model's manifest.
        origins: per member, where its weights came from (checkpoint file, epoch, step).
        domain: what the training complexes covered (:mod:`geomol.inference.domain`); None: defaults.
    """

    task = "affinity"
    architecture = "GETAffinity"

    def __init__(self, members: Sequence[GETAffinity], arguments: Mapping[str, Any], preprocessing: Preprocessing,
                 *, name: str = "", description: str = "", metrics: Mapping[str, Any] | None = None,
                 origins: Sequence[Mapping[str, Any]] | None = None, domain: ApplicabilityDomain | None = None):
        super().__init__()
        if not members:
            raise ModelLoadError("an affinity model needs at least one ensemble member", source=name or None)
        self.members = nn.ModuleList(members)
        self.arguments = dict(arguments)
        self.preprocessing = preprocessing
        self.name, self.description = name, description
        self.metrics = dict(metrics or {})
        self.origins = [dict(o) for o in origins] if origins is not None else [{} for _ in members]
        self.domain = domain or ApplicabilityDomain.defaults()
        self.eval()

    def __repr__(self) -> str:
        arch = ", ".join(f"{k}={v}" for k, v in self.arguments.items())
        return (f"AffinityModel({self.name or 'unnamed'!r}, {len(self.members)} member(s) of GETAffinity({arch}), "
                f"pocket {self.preprocessing.pocket_cutoff:g} Å)")

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    # ------------------------------------------------------------------ building
    @classmethod
    def from_checkpoints(cls, checkpoints: Sequence[CheckpointContents], sources: Sequence[str | PathLike],
                         name: str = "") -> "AffinityModel":
        """An ensemble of Lightning checkpoints (all must agree on architecture and preprocessing)."""
        arguments = _architecture(checkpoints[0].hyperparameters, sources[0])
        preprocessing = Preprocessing.from_dict(checkpoints[0].preprocessing, sources[0])
        _check_vocab(arguments, preprocessing, sources[0])
        members = []
        for contents, source in zip(checkpoints, sources):
            if _architecture(contents.hyperparameters, source) != arguments:
                raise ModelLoadError(f"architecture differs from {Path(sources[0]).name}: ensemble members must "
                                     "share their GET hyperparameters", source=source)
            if contents.preprocessing != checkpoints[0].preprocessing:
                raise ModelLoadError(f"preprocessing differs from {Path(sources[0]).name}: ensemble members must "
                                     "see graphs built the same way", source=source)
            members.append(_member(arguments, contents.state_dict, source))
        return cls(members, arguments, preprocessing, name=name, origins=[c.origin for c in checkpoints])

    @classmethod
    def from_manifest(cls, model_dir: Path, manifest: Mapping[str, Any]) -> "AffinityModel":
        """A shipped model (see :mod:`geomol.inference.model_files`) from its directory and manifest."""
        if manifest.get("architecture", cls.architecture) != cls.architecture:
            raise ModelLoadError(f"architecture {manifest.get('architecture')!r} is not {cls.architecture}",
                                 source=model_dir)
        arguments = _architecture(manifest["hyperparameters"], model_dir)
        preprocessing = Preprocessing.from_dict(manifest["preprocessing"], model_dir)
        _check_vocab(arguments, preprocessing, model_dir)
        members = []
        for entry in manifest["members"]:
            file = entry.get("file") if isinstance(entry, Mapping) else entry
            members.append(_member(arguments, read_member_weights(model_dir, entry), model_dir / str(file)))
        origins = [e.get("source", {}) if isinstance(e, Mapping) else {} for e in manifest["members"]]
        return cls(members, arguments, preprocessing, name=str(manifest.get("name", model_dir.name)),
                   description=str(manifest.get("description", "")), metrics=manifest.get("metrics"),
                   origins=origins, domain=ApplicabilityDomain.from_dict(manifest.get("domain"), model_dir, warn=True))

    # ------------------------------------------------------------------ use
    @torch.inference_mode()
    def predict(self, graphs: BlockGraph | Sequence[BlockGraph]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ensemble prediction for B complexes.

        Returns:
            (pK [B], pK_std [B]) on the CPU: the mean over members and their standard deviation
            (with Bessel's correction; NaN for a single member, which has no spread).
        """
        # Members share k_neighbors and dtype, so the edges built once serve them all.
        inputs = self.members[0].prepare(as_batch(graphs).to(self.device))
        per_member = torch.stack([member(inputs) for member in self.members])  # [M, B]
        mean = per_member.mean(0)
        std = per_member.std(0) if len(self.members) > 1 else torch.full_like(mean, math.nan)
        return mean.float().cpu(), std.float().cpu()

    # ------------------------------------------------------------------ saving
    def manifest(self, **overrides: Any) -> dict[str, Any]:
        """The manifest entries of this model (member files are added by the writer)."""
        return {"name": self.name, "task": self.task, "description": self.description,
                "architecture": self.architecture, "hyperparameters": self.arguments,
                "preprocessing": self.preprocessing.to_dict(), "metrics": self.metrics,
                "domain": self.domain.to_dict(), "geomol_version": geomol.__version__, **overrides,
                "members": [{"source": origin} for origin in self.origins]}

    def save(self, out_dir: str | PathLike, *, card: str | PathLike | None = None, name: str | None = None,
             description: str | None = None, metrics: Mapping[str, Any] | None = None,
             overwrite: bool = False) -> Path:
        """Write this model as a shipped-model directory; returns its path.

        Args:
            card: the model card (README.md) as text, or the path of a Markdown file holding it;
                None writes a card of the recorded facts only.
            name, description, metrics: override the model's own (name defaults to the folder name).
        """
        out_dir = Path(out_dir)
        manifest = self.manifest(name=name or self.name or out_dir.name,
                                 description=self.description if description is None else description,
                                 metrics=self.metrics if metrics is None else dict(metrics))
        text = _card_text(card) if card is not None else _facts_card(manifest)
        return write_model_dir(out_dir, manifest, [m.state_dict() for m in self.members], text, overwrite=overwrite)


def _card_text(card: str | PathLike) -> str:
    """The card itself, or the contents of the Markdown file it names."""
    if isinstance(card, PathLike) or (isinstance(card, str) and "\n" not in card and Path(card).is_file()):
        return Path(card).read_text(encoding="utf-8")
    return str(card)


def _facts_card(manifest: Mapping[str, Any]) -> str:
    """A model card listing what the manifest records, for models exported without a written card."""
    lines = [f"# {manifest['name']}", "", manifest["description"] or "GET binding-affinity model (pK).", "",
             "No card text was given when this model was exported; the facts below come from its manifest.", "",
             f"- ensemble members: {len(manifest['members'])}",
             f"- architecture: {manifest['architecture']} " + ", ".join(
                 f"{k}={v}" for k, v in manifest["hyperparameters"].items()),
             f"- pocket cutoff: {manifest['preprocessing']['pocket_cutoff']:g} Å; hydrogens "
             f"{'kept' if manifest['preprocessing']['keep_hydrogens'] else 'removed'}; ligand blocks: "
             f"{'fragments' if manifest['preprocessing']['fragments'] else 'one per atom'}"]
    lines += [f"- {key}: {value}" for key, value in manifest["metrics"].items()]
    return "\n".join(lines) + "\n"
