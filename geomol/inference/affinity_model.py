"""An ensemble of affinity networks, with the graph recipe they were trained with.

:class:`AffinityModel` is what :func:`geomol.load_model` returns for an affinity model: one or more members
of one kind and configuration — any :class:`~geomol.models.affinity_member.AffinityMember` (GET, the contact
scorer, the ligand-only trees), resolved from the manifest's ``architecture`` through
:data:`~geomol.models.affinity_member.MEMBER_KINDS` — the :class:`~geomol.data.complexes.recipe.ComplexRecipe`
that built their training graphs (pocket cutoff, hydrogens, ligand fragments), the applicability domain of its
training complexes (:mod:`geomol.inference.domain`, in the manifest's ``domain``) and descriptive metadata
(name, description, metrics). ``predict`` gives the mean and the spread of the members' pK; building and
saving are those of every shipped model (:class:`~geomol.inference.shipped.ShippedModel`).
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import torch

from geomol.data.blocks import BlockGraph
from geomol.data.complexes.recipe import ComplexRecipe
from geomol.inference.anchored_series import AnchoredSeries
from geomol.inference.domain import ApplicabilityDomain
from geomol.inference.shipped import ShippedModel
from geomol.models import contact_scorer, contact_trees, get, ligand_trees  # noqa: F401 (the built-in member kinds register)
from geomol.models.affinity_member import AffinityMember, member_kind

__all__ = ["AffinityModel"]


class AffinityModel(ShippedModel):
    """An ensemble of affinity members of one kind and configuration, sharing one graph recipe.

    Args:
        members: the trained models (≥ 1), :class:`~geomol.models.affinity_member.AffinityMember` s of one
            configuration.
        arguments: their configuration (``members[0].to_config()``: the manifest's ``hyperparameters``).
        recipe: how their training graphs were built.
        domain: what the training complexes covered (:mod:`geomol.inference.domain`); None: defaults.
        anchors: a series' measured ligands that predictions are anchored on
            (:class:`~geomol.inference.anchored_series.AnchoredSeries`, the manifest's ``anchors``: ``geomol
            finetune``, ``predict-affinity --anchors``); None: predictions are the members' own.
        name, description, metrics, origins: see :class:`~geomol.inference.shipped.ShippedModel`.
    """

    task = "affinity"
    recipe_type = ComplexRecipe
    default_architecture = "GETAffinity"

    def __init__(self, members: Sequence[AffinityMember], arguments: Mapping[str, Any], recipe: ComplexRecipe, *,
                 domain: ApplicabilityDomain | None = None, anchors: AnchoredSeries | None = None,
                 **metadata: Any):
        super().__init__(members, arguments, recipe, **metadata)
        type(self.members[0]).check_recipe(self.arguments, recipe, self.name or None)
        self.domain = domain or ApplicabilityDomain.defaults()
        self.anchors = anchors

    def __repr__(self) -> str:
        arch = ", ".join(f"{k}={v}" for k, v in self.arguments.items())
        return (f"AffinityModel({self.name or 'unnamed'!r}, {len(self.members)} member(s) of {self.architecture}({arch}), "
                f"pocket {self.recipe.pocket_cutoff:g} Å)")

    # ------------------------------------------------------------------ building
    @classmethod
    def architecture_of(cls, hyperparameters: Mapping[str, Any], source) -> str:
        return "GETAffinity"  # what Lightning checkpoints of the affinity task hold

    @classmethod
    def build_network(cls, architecture: str, hyperparameters: Mapping[str, Any], source) -> tuple[AffinityMember,
                                                                                                  dict]:
        member = member_kind(architecture, source).from_config(hyperparameters, source)
        return member, member.to_config()

    @classmethod
    def check_recipe(cls, arguments: Mapping[str, Any], recipe: ComplexRecipe, source, architecture: str) -> None:
        member_kind(architecture, source).check_recipe(arguments, recipe, source)

    @classmethod
    def manifest_metadata(cls, manifest: Mapping[str, Any], model_dir) -> dict[str, Any]:
        anchors = manifest.get("anchors")
        return {"domain": ApplicabilityDomain.from_dict(manifest.get("domain"), model_dir, warn=True),
                "anchors": None if anchors is None else AnchoredSeries.from_dict(anchors, model_dir)}

    def manifest_entries(self) -> dict[str, Any]:
        return {"domain": self.domain.to_dict(), **({"anchors": self.anchors.to_dict()} if self.anchors else {})}

    def card_facts(self, manifest: Mapping[str, Any]) -> list[str]:
        recipe = manifest["preprocessing"]
        kind = member_kind(manifest["architecture"], manifest.get("name"))
        return [kind.card_name, f"- ensemble members: {len(manifest['members'])}",
                f"- architecture: {manifest['architecture']} " + ", ".join(
                    f"{k}={v}" for k, v in manifest["hyperparameters"].items()),
                f"- pocket cutoff: {recipe['pocket_cutoff']:g} Å; hydrogens "
                f"{'kept' if recipe['keep_hydrogens'] else 'removed'}; ligand blocks: "
                f"{'fragments' if recipe['fragments'] else 'one per atom'}"]

    # ------------------------------------------------------------------ use
    def check_graph(self, graph: BlockGraph, source: str) -> None:
        """Refuse a complex the members cannot read (e.g. block types GET does not embed, or a ligand without
        the chemistry the contact scorer reads).

        Raises:
            ConfigError: naming ``source``.
        """
        self.members[0].check_complex(graph, source)

    @torch.inference_mode()
    def predict(self, graphs: BlockGraph | Sequence[BlockGraph]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ensemble prediction for B complexes.

        Returns:
            (pK [B], pK_std [B]) on the CPU: the mean over members and their standard deviation
            (with Bessel's correction; NaN for a single member, which has no spread).
        """
        graphs = [graphs] if isinstance(graphs, BlockGraph) else list(graphs)
        inputs = self.members[0].inputs(graphs)  # members share their configuration, so their inputs too
        per_member = torch.stack([member(inputs) for member in self.members])  # [M, B]
        mean = per_member.mean(0)
        std = per_member.std(0) if len(self.members) > 1 else torch.full_like(mean, math.nan)
        return mean.float().cpu(), std.float().cpu()
