"""The contract of an affinity ensemble member, and the registry of member kinds.

Every kind of affinity model that a shipped ensemble can hold — GET with any read-out
(:class:`~geomol.models.get.GETAffinity`), the contact scorer with any featurisation
(:class:`~geomol.models.contact_scorer.ContactScorer`) and the ligand-only tree ensembles
(:class:`~geomol.models.ligand_trees.LigandTrees`) — is an ``nn.Module`` that implements
:class:`AffinityMember`:

* ``to_config()`` / ``from_config(config)``: its constructor settings as plain values, the manifest's
  ``hyperparameters`` (``from_config(member.to_config())`` builds the same architecture, untrained);
* ``inputs(graphs)``: what it reads from built complexes (``BlockGraph`` s of the model's
  :class:`~geomol.data.complexes.recipe.ComplexRecipe`), computed once for an ensemble of one config;
* ``forward(inputs)``: pK, shape ``[B]``;
* ``check_recipe(recipe)`` / ``check_complex(graph)``: refuse a graph recipe or a complex it cannot read;
* ``example(seed)``: a small member with random weights, on which :mod:`geomol.testing.affinity_members` runs the
  contract for every registered kind (a new kind is tested as soon as it registers and gives one);
* few-shot fine-tuning (:func:`geomol.training.finetune.adapt_member`): ``finetune_start()`` (a copy that
  can adapt), ``frozen(inputs)`` (the part that stays fixed, computed once), ``head(frozen)`` (pK from it),
  ``finetune_parameters()`` (what may move, pulled towards its start) and ``level`` (the scalar offset
  refitted to the target's measured level).

:class:`~geomol.inference.affinity_model.AffinityModel` resolves a manifest's ``architecture`` through
:data:`MEMBER_KINDS` (:func:`member_kind`); nothing else branches on the kind. A kind registers itself when its
module is imported (:func:`register_member_kind`); :func:`registered_kinds` imports the built-in ones.
"""
from __future__ import annotations

import warnings
from typing import Any, ClassVar, Literal, Mapping, Sequence

import torch
from torch import nn

from geomol.errors import ModelLoadError

__all__ = ["AffinityMember", "MEMBER_KINDS", "BUILT_IN_KINDS", "registered_kinds", "member_kind",
           "register_member_kind", "seeded", "renamed_config"]


class AffinityMember:
    """What every affinity member kind implements (a mixin of an ``nn.Module``; see the module notes).

    Class attributes:
        kind: the manifest's ``architecture`` (the class name).
        card_name: the first line of a model card written from the manifest alone.
        needs_side_chains: it reads the receptor's side-chain atoms (a backbone-only receptor is an error).
        finetune_loss: ``"centred"`` (fit the ranking within the target, then refit the level) or ``"mse"``
            (fit the ranking and the level together).
        reads_pose: its prediction depends on where the ligand sits (False for ligand-only members).
        recipe_keys: the entries of :meth:`to_config` that say how its inputs are made and read out (beside the
            :class:`~geomol.data.complexes.recipe.ComplexRecipe` that builds the graphs): :meth:`from_config`
            refuses a configuration without any of them, never filling one in.
    """

    kind: ClassVar[str] = ""
    card_name: ClassVar[str] = ""
    needs_side_chains: ClassVar[bool] = False
    finetune_loss: ClassVar[Literal["centred", "mse"]] = "centred"
    reads_pose: ClassVar[bool] = True
    recipe_keys: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], source=None) -> "AffinityMember":
        """An untrained member from its saved settings; bad values raise :class:`ModelLoadError` naming ``source``."""
        raise NotImplementedError

    def to_config(self) -> dict[str, Any]:
        """The settings :meth:`from_config` takes (plain values: a manifest's ``hyperparameters``)."""
        raise NotImplementedError

    @classmethod
    def example(cls, seed: int = 0) -> "AffinityMember":
        """A small member of this kind with random weights drawn from ``seed`` (float32, eval mode), reading the
        complexes of the default :class:`~geomol.data.complexes.recipe.ComplexRecipe`: what the contract tests and
        examples run on; it predicts nothing meaningful."""
        raise NotImplementedError

    def inputs(self, graphs: Sequence) -> Any:
        """The member's input for a list of complex graphs (members of one config share it)."""
        raise NotImplementedError

    @classmethod
    def check_recipe(cls, config: Mapping[str, Any], recipe, source=None) -> None:
        """Refuse a :class:`~geomol.data.complexes.recipe.ComplexRecipe` whose graphs a member of ``config``
        cannot read (:class:`~geomol.errors.ConfigError` or :class:`ModelLoadError` naming ``source``)."""

    def check_complex(self, graph, source=None) -> None:
        """Refuse one complex graph this member cannot read (:class:`~geomol.errors.ConfigError` naming ``source``)."""

    # ------------------------------------------------------------------ few-shot fine-tuning
    def finetune_start(self) -> "AffinityMember":
        """A copy of this member that fine-tuning may change (by default a deep copy)."""
        import copy

        return copy.deepcopy(self)

    def frozen(self, inputs: Any) -> Any:
        """What stays fixed while fine-tuning, computed once from :meth:`inputs` (by default the inputs)."""
        return inputs

    def head(self, frozen: Any) -> torch.Tensor:
        """pK ``[B]`` from :meth:`frozen`'s output (by default the whole forward pass)."""
        return self(frozen)

    def finetune_parameters(self) -> list[nn.Parameter]:
        """The parameters fine-tuning moves (the rest stay frozen); may be empty (the level alone adapts)."""
        raise NotImplementedError

    def finetune_moves(self) -> str:
        """What fine-tuning changes and keeps, in words (for the model card)."""
        raise NotImplementedError

    @property
    def level(self) -> torch.Tensor:
        """The scalar pK offset fine-tuning refits (a parameter or a buffer, changed in place)."""
        raise NotImplementedError


def renamed_config(config: Mapping[str, Any], renamed: Mapping[str, str], what: str, source=None) -> dict[str, Any]:
    """``config`` with deprecated hyperparameter names (``renamed``: old → new) read as their new names.

    Models saved before geomol's hyperparameters shared one vocabulary (``hidden``, ``num_layers``, ``num_heads``,
    ... as EGNO and EGNN spell them) still load; a :class:`FutureWarning` names the old names and says how to
    record the new ones.

    Raises:
        ModelLoadError: a name given both ways.
    """
    old = [key for key in config if key in renamed]
    if not old:
        return dict(config)
    both = [key for key in old if renamed[key] in config]
    if both:
        raise ModelLoadError(f"{what} hyperparameters give both {both} and their new names "
                             f"{[renamed[key] for key in both]}", source=source)
    warnings.warn(f"{source or 'a saved model'}: the {what} hyperparameter name(s) {', '.join(old)} are deprecated "
                  f"and read as {', '.join(renamed[key] for key in old)}; save the model again (load it and export "
                  "it, or rebuild it) to record the new names", FutureWarning, stacklevel=3)
    return {renamed.get(key, key): value for key, value in config.items()}


def seeded(build, seed: int):
    """``build()`` with torch's global generator seeded by ``seed`` inside a fork, so that the caller's random
    stream is untouched (for :meth:`AffinityMember.example`)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build()


MEMBER_KINDS: dict[str, type] = {}
"""Manifest ``architecture`` → member class: the kinds a shipped affinity model may hold."""


def register_member_kind(cls: type) -> type:
    """Make an :class:`AffinityMember` subclass loadable by its ``kind`` (usable as a decorator)."""
    if not (isinstance(cls, type) and issubclass(cls, AffinityMember) and issubclass(cls, nn.Module) and cls.kind):
        raise TypeError(f"{cls!r} is not an nn.Module implementing AffinityMember with a kind")
    MEMBER_KINDS[cls.kind] = cls
    return cls


BUILT_IN_KINDS = ("geomol.models.get", "geomol.models.contact_scorer", "geomol.models.ligand_trees",
                  "geomol.models.contact_trees")
"""The modules of the member kinds geomol ships (each registers its kind when imported)."""


def registered_kinds() -> dict[str, type]:
    """:data:`MEMBER_KINDS` with the built-in kinds imported (and so registered)."""
    from importlib import import_module

    for module in BUILT_IN_KINDS:
        import_module(module)
    return MEMBER_KINDS


def member_kind(architecture: str, source=None) -> type:
    """The member class of a manifest's ``architecture``.

    Raises:
        ModelLoadError: an architecture no registered kind has, naming the registered ones.
    """
    if architecture not in registered_kinds():
        raise ModelLoadError(f"architecture {architecture!r} is no affinity member kind (known: "
                             f"{sorted(MEMBER_KINDS)})", source=source)
    return MEMBER_KINDS[architecture]
