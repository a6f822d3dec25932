"""An ensemble of affinity networks, with the graph recipe they were trained with.

:class:`AffinityModel` is what :func:`geomol.load_model` returns for an affinity model: one or
more members of identical architecture, either :class:`~geomol.models.get.GETAffinity`
(:class:`~geomol.models.get.GETConfig`) or the contact scorer
(:class:`~geomol.models.contact_scorer.ContactScorer`, per-atom contacts of the same complex graphs), the
:class:`~geomol.data.complexes.recipe.ComplexRecipe` that built their training graphs (pocket cutoff, hydrogens, ligand fragments), the applicability domain of its
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
from geomol.errors import ConfigError, ModelLoadError
from geomol.inference.domain import ApplicabilityDomain
from geomol.inference.shipped import ShippedModel
from geomol.models.contact_scorer import NO_CHEMISTRY, ContactScorer, contact_inputs, has_ligand_chemistry
from geomol.models.get import GETAffinity, GETConfig, as_batch

__all__ = ["AffinityModel", "ARCHITECTURES"]

ARCHITECTURES = ("GETAffinity", "ContactScorer")
CONTACT_ARGUMENTS = ("hidden", "n_atom_features", "n_descriptors")


class AffinityModel(ShippedModel):
    """An ensemble of GETAffinity or ContactScorer members sharing one architecture and one graph recipe.

    Args:
        members: the trained models (≥ 1), same constructor arguments.
        arguments: their :class:`~geomol.models.get.GETConfig` fields (``n_block_types`` included), or
            the ContactScorer's (``hidden``, ``n_atom_features``, ``n_descriptors``).
        recipe: how their training graphs were built.
        domain: what the training complexes covered (:mod:`geomol.inference.domain`); None: defaults.
        name, description, metrics, origins: see :class:`~geomol.inference.shipped.ShippedModel`.
    """

    task = "affinity"
    recipe_type = ComplexRecipe
    default_architecture = "GETAffinity"

    def __init__(self, members: Sequence[GETAffinity], arguments: Mapping[str, Any], recipe: ComplexRecipe, *,
                 domain: ApplicabilityDomain | None = None, **metadata: Any):
        super().__init__(members, arguments, recipe, **metadata)
        self.domain = domain or ApplicabilityDomain.defaults()

    def __repr__(self) -> str:
        arch = ", ".join(f"{k}={v}" for k, v in self.arguments.items())
        return (f"AffinityModel({self.name or 'unnamed'!r}, {len(self.members)} member(s) of {self.architecture}({arch}), "
                f"pocket {self.recipe.pocket_cutoff:g} Å)")

    # ------------------------------------------------------------------ building
    @classmethod
    def architecture_of(cls, hyperparameters: Mapping[str, Any], source) -> str:
        return "GETAffinity"

    @classmethod
    def build_network(cls, architecture: str, hyperparameters: Mapping[str, Any], source) -> tuple[GETAffinity, dict]:
        if architecture == "ContactScorer":
            return cls._contact_network(hyperparameters, source)
        if architecture != "GETAffinity":
            raise ModelLoadError(f"architecture {architecture!r} is none of {ARCHITECTURES}", source=source)
        if not isinstance(hyperparameters.get("n_block_types"), int):
            raise ModelLoadError("hyperparameters lack n_block_types (the block vocabulary size): not a trained "
                                 "GET affinity model", source=source)
        try:
            config = GETConfig.from_mapping(hyperparameters)
            return GETAffinity(config), config.to_dict()
        except (TypeError, ValueError) as exc:
            raise ModelLoadError(f"cannot build GETAffinity({dict(hyperparameters)}): {exc}", source=source) from None

    @staticmethod
    def _contact_network(hyperparameters: Mapping[str, Any], source) -> tuple[ContactScorer, dict]:
        arguments = {key: hyperparameters.get(key) for key in CONTACT_ARGUMENTS}
        if "pooled" in hyperparameters:  # the optional non-additive term (absent: none)
            arguments["pooled"] = hyperparameters["pooled"]
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in arguments.values()):
            raise ModelLoadError(f"a ContactScorer needs integer {CONTACT_ARGUMENTS}, got {dict(hyperparameters)}",
                                 source=source)
        return ContactScorer(**arguments), arguments

    @property
    def is_contact_scorer(self) -> bool:
        return isinstance(self.members[0], ContactScorer)

    def contact_inputs(self, graphs: Sequence[BlockGraph]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The members' input for complexes (a contact-scorer model): :func:`~geomol.models.contact_scorer.contact_inputs`
        with the interaction-role columns when the members read them."""
        return contact_inputs(list(graphs), self.members[0].reads_chemistry)

    @classmethod
    def check_recipe(cls, arguments: Mapping[str, Any], recipe: ComplexRecipe, source) -> None:
        if "n_block_types" not in arguments:  # a contact scorer reads atoms, not block types
            return
        if arguments["n_block_types"] < recipe.num_block_types:
            raise ModelLoadError(f"the model has {arguments['n_block_types']} block types but its preprocessing "
                                 f"(fragments) defines {recipe.num_block_types}", source=source)

    @classmethod
    def manifest_metadata(cls, manifest: Mapping[str, Any], model_dir) -> dict[str, Any]:
        return {"domain": ApplicabilityDomain.from_dict(manifest.get("domain"), model_dir, warn=True)}

    def manifest_entries(self) -> dict[str, Any]:
        return {"domain": self.domain.to_dict()}

    def card_facts(self, manifest: Mapping[str, Any]) -> list[str]:
        recipe = manifest["preprocessing"]
        kind = ("Contact-scorer" if manifest["architecture"] == "ContactScorer" else "GET") + " binding-affinity model (pK)."
        return [kind, f"- ensemble members: {len(manifest['members'])}",
                f"- architecture: {manifest['architecture']} " + ", ".join(
                    f"{k}={v}" for k, v in manifest["hyperparameters"].items()),
                f"- pocket cutoff: {recipe['pocket_cutoff']:g} Å; hydrogens "
                f"{'kept' if recipe['keep_hydrogens'] else 'removed'}; ligand blocks: "
                f"{'fragments' if recipe['fragments'] else 'one per atom'}"]

    # ------------------------------------------------------------------ use
    def check_graph(self, graph: BlockGraph, source: str) -> None:
        """Refuse a complex the members cannot read: block types GET does not embed, or (contact scorer)
        a ligand without the descriptors of its chemistry.

        Raises:
            ConfigError: naming ``source``.
        """
        if self.is_contact_scorer:
            if not has_ligand_chemistry(graph):
                raise ConfigError(NO_CHEMISTRY, source=source)
            return
        n_block_types = self.arguments["n_block_types"]
        if int(graph.B.max()) >= n_block_types:
            raise ConfigError(f"the complex has block type {int(graph.B.max())} but the model knows {n_block_types} "
                              "(a graph built with another block vocabulary)", source=source)

    @torch.inference_mode()
    def predict(self, graphs: BlockGraph | Sequence[BlockGraph]) -> tuple[torch.Tensor, torch.Tensor]:
        """Ensemble prediction for B complexes.

        Returns:
            (pK [B], pK_std [B]) on the CPU: the mean over members and their standard deviation
            (with Bessel's correction; NaN for a single member, which has no spread).
        """
        if self.is_contact_scorer:
            graphs = [graphs] if isinstance(graphs, BlockGraph) else list(graphs)
            atoms, owner, descriptors = (t.to(self.device) for t in self.contact_inputs(graphs))
            per_member = torch.stack([m(atoms, owner, descriptors, n_ligands=len(graphs)) for m in self.members])
        else:
            # Members share k_neighbors, sparse_k and dtype, so the edges and atom pairs built once serve them all.
            inputs = self.members[0].prepare(as_batch(graphs).to(self.device))
            per_member = torch.stack([member(inputs) for member in self.members])  # [M, B]
        mean = per_member.mean(0)
        std = per_member.std(0) if len(self.members) > 1 else torch.full_like(mean, math.nan)
        return mean.float().cpu(), std.float().cpu()
