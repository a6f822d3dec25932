"""Tree ensembles on a complex's summed contact features: the ligand's contacts, read whole.

The contact scorer (:mod:`geomol.models.contact_scorer`) scores every ligand atom and sums the scores; a
:class:`ContactTrees` member sums the atoms' contact rows first (what the ligand touches in all: hydrogen bonds by
base edge, stacking, phosphate and ion contacts, burial, ...; a
:class:`~geomol.data.chemistry.contact_recipe.ContactRecipe` makes them) and appends the ligand descriptors, then
reads the row with a tree ensemble fitted by scikit-learn and stored as arrays (the
:class:`~geomol.models.ligand_trees.LigandTrees` evaluation: a ``state_dict`` is the whole model, loaded with
``weights_only=True``). Trees see interactions between totals that a sum over atoms cannot (a receptor's family,
a pocket's enclosure), which helps where labels are absolute affinities across unrelated receptors (the
nucleic-acid set, :mod:`geomol.evaluation.nucleic_models`).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import torch

from geomol.data.chemistry.contact_features import ATOM_CONTACT_FEATURES, LIGAND_GROUPS
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES
from geomol.errors import ConfigError, ModelLoadError
from geomol.models.affinity_member import register_member_kind
from geomol.models.contact_scorer import NO_CHEMISTRY, has_ligand_chemistry
from geomol.models.ligand_trees import LigandTrees

__all__ = ["ContactTrees", "contact_tree_rows"]


def contact_tree_rows(graphs: Sequence, recipe: ContactRecipe) -> np.ndarray:
    """``(B, recipe.width + len(DESCRIPTOR_NAMES))``: each complex's finished contact rows summed over its ligand
    atoms, then its ligand descriptors. The rows are rounded to float32 first, as training stores them
    (:class:`~geomol.training.contact_scorer.ContactData`), so that a sum equals the one the trees were fitted on."""
    return np.stack([np.concatenate([recipe.views(graph)[0].astype(np.float32).astype(np.float64).sum(axis=0),
                                     graph.ligand_descriptors.reshape(-1).double().numpy()]) for graph in graphs])


@register_member_kind
class ContactTrees(LigandTrees):
    """A tree ensemble on :func:`contact_tree_rows` (see the module notes).

    Args:
        recipe: how a complex's per-atom contact rows are made (one view: no augmented poses).
        Other arguments: see :class:`~geomol.models.ligand_trees.LigandTrees` (``n_features`` defaults to the
        recipe's width plus the descriptors).
    """

    kind = "ContactTrees"
    card_name = "Contact tree-ensemble affinity model (pK): trees on the ligand's summed contact features."
    needs_side_chains = True  # the rows count what the ligand touches
    reads_pose = True
    recipe_keys = ("features", "n_features", "float32_inputs")

    def __init__(self, n_trees: int, n_nodes: int, depth: int, n_features: int | None = None, average: bool = True,
                 float32_inputs: bool = True, model: str = "et", recipe: ContactRecipe | None = None):
        recipe = recipe or ContactRecipe()
        if recipe.n_views != 1:
            raise ConfigError("contact trees read one view of a complex: a recipe with pose_views 'augment' moves "
                              "cannot be used")
        width = recipe.width + len(DESCRIPTOR_NAMES)
        if n_features is not None and n_features != width:
            raise ConfigError(f"the contact recipe and descriptors make {width} columns, the trees read {n_features}")
        super().__init__(n_trees, n_nodes, depth, width, average, float32_inputs, model)
        self.recipe = recipe

    @classmethod
    def from_trees(cls, trees: LigandTrees, recipe: ContactRecipe) -> "ContactTrees":
        """The trees of a fitted :class:`LigandTrees` (:func:`~geomol.training.ligand_baselines.ligand_trees`) read
        as contact trees of ``recipe``."""
        config = trees.to_config()
        member = cls(**{k: v for k, v in config.items() if k != "n_features"}, n_features=config["n_features"],
                     recipe=recipe)
        member.load_state_dict(trees.state_dict())
        return member.eval()

    @classmethod
    def from_config(cls, config: Mapping[str, Any], source=None) -> "ContactTrees":
        """Trees of a saved configuration; one without its contact recipe (``features``) is refused: how the rows
        were made is never guessed."""
        if not isinstance(config.get("features"), Mapping):
            raise ModelLoadError("the contact trees' configuration records no contact recipe (hyperparameters."
                                 "features): how their input rows were made cannot be known", source=source)
        missing = [key for key in cls.recipe_keys if key not in config]
        if missing:
            raise ModelLoadError(f"the contact trees' configuration records no {', '.join(missing)}: how their input "
                                 "rows are read cannot be known", source=source)
        try:
            recipe = ContactRecipe.from_dict(config["features"], source)
            base = LigandTrees.from_config({k: v for k, v in config.items() if k != "features"}, source).to_config()
            return cls(**base, recipe=recipe)
        except ConfigError as exc:
            raise ModelLoadError(exc.reason, source=source) from None

    @classmethod
    def example(cls, seed: int = 0) -> "ContactTrees":
        """Eight full trees of depth 4 on the nucleic-acid recipe's summed rows, splitting on random columns of the
        receptor-atom counts and contact terms at random thresholds in the range such sums take (the contract's
        example member)."""
        generator = torch.Generator().manual_seed(seed)
        recipe = ContactRecipe(roles=True, nucleic=True)
        trees, depth = 8, 4
        model = cls(n_trees=trees, n_nodes=2 ** (depth + 1) - 1, depth=depth, recipe=recipe)
        inner = 2 ** depth - 1  # nodes 0 … inner-1 split; node i's children are 2i+1 and 2i+2
        geometric = torch.arange(len(LIGAND_GROUPS), len(ATOM_CONTACT_FEATURES) - 2)  # the counts and contact terms
        model.feature[:, :inner] = geometric[torch.randint(0, len(geometric), (trees, inner), generator=generator)]
        model.threshold[:, :inner] = torch.empty(trees, inner, dtype=torch.float64).uniform_(1.0, 80.0,
                                                                                          generator=generator)
        model.left[:, :inner] = 2 * torch.arange(inner) + 1
        model.right[:, :inner] = 2 * torch.arange(inner) + 2
        model.value[:, inner:] = 6.0 + torch.randn(trees, model.value.shape[1] - inner, generator=generator,
                                                   dtype=torch.float64)
        return model.eval()

    def to_config(self) -> dict[str, Any]:
        return {**super().to_config(), "features": self.recipe.to_dict()}

    @classmethod
    def check_recipe(cls, config: Mapping[str, Any], recipe, source=None) -> None:
        """Refuse complexes whose pocket is narrower than the contact features read."""
        ContactRecipe.from_dict(config.get("features"), source).check_pocket(recipe.pocket_cutoff, source)

    def check_complex(self, graph, source=None) -> None:
        if not has_ligand_chemistry(graph):
            raise ConfigError(NO_CHEMISTRY, source=source)

    def inputs(self, graphs: Sequence) -> torch.Tensor:
        for graph in graphs:
            self.check_complex(graph, getattr(graph, "name", None))
        return torch.from_numpy(contact_tree_rows(graphs, self.recipe)).to(self.value.device)
