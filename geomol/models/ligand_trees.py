"""Ligand-only tree ensembles as data: a random forest or gradient-boosted trees on a complex's ligand features.

The ligand-only baselines (:mod:`geomol.training.ligand_baselines`) are fitted with scikit-learn; a fitted
ensemble is turned into arrays (:func:`geomol.training.ligand_baselines.ligand_trees`) held here as buffers, so a
shipped ligand-only member is a ``state_dict`` like any other (``torch.load(weights_only=True)``; nothing is
unpickled) and predicts with plain tensor operations:

    pK = offset + scale · Σ_trees value(leaf reached by the ligand's features)

with ``scale`` 1/T for a forest (the mean of its trees) and 1 for boosting (learning rate already in the leaf
values, the initial prediction in ``offset``). A node sends a ligand left when ``x[feature] <= threshold``, as
scikit-learn does; a forest compares the features rounded to float32, as scikit-learn's trees do.

Input: the features every complex graph built from a ligand molecule carries
(:func:`~geomol.data.chemistry.ligand_features.graph_ligand_features`): the folded Morgan counts
(``ligand_morgan``, radius 2, :data:`GRAPH_MORGAN_BITS` bits) and the descriptors
(``ligand_descriptors``, :data:`DESCRIPTOR_NAMES`), in that order. The receptor is never read.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import torch
from torch import nn

from geomol.data.chemistry.ligand_features import DESCRIPTOR_NAMES, GRAPH_MORGAN_BITS
from geomol.errors import ConfigError, ModelLoadError
from geomol.models.affinity_member import AffinityMember, register_member_kind

__all__ = ["LigandTrees", "LIGAND_FEATURES", "graph_ligand_inputs"]

LIGAND_FEATURES = GRAPH_MORGAN_BITS + len(DESCRIPTOR_NAMES)
"""Columns of a ligand's feature row: Morgan counts, then descriptors."""
NO_LIGAND = "a ligand-only model needs the ligand's chemistry: give the ligand as SDF, MOL2 or SMILES"


def graph_ligand_inputs(graphs: Sequence) -> torch.Tensor:
    """``(B, LIGAND_FEATURES)`` float64: each complex graph's Morgan counts then descriptors.

    Raises:
        ConfigError: a graph without its ligand's chemistry (non-finite descriptors), naming it.
    """
    rows = []
    for graph in graphs:
        descriptors = getattr(graph, "ligand_descriptors", None)
        if descriptors is None or not bool(torch.isfinite(descriptors).all()):
            raise ConfigError(NO_LIGAND, source=getattr(graph, "name", None))
        rows.append(torch.cat([graph.ligand_morgan.reshape(-1).double(), descriptors.reshape(-1).double()]))
    return torch.stack(rows)


@register_member_kind
class LigandTrees(nn.Module, AffinityMember):
    """A tree ensemble on ligand features (see the module notes).

    Args:
        n_trees: trees; n_nodes: nodes of the largest tree (smaller trees are padded with leaves);
        depth: edges on the longest root-to-leaf path; n_features: columns of the input (:data:`LIGAND_FEATURES`).
        average: the trees' mean (a forest) rather than their sum (boosting).
        float32_inputs: compare the features rounded to float32 (scikit-learn's forests do).
        model: what was fitted (``'rf'``, ``'et'`` extremely randomised trees, or ``'gbm'``), recorded for the card.

    Buffers: ``feature`` ``(T, M)`` long (−1 at a leaf), ``threshold`` ``(T, M)``, ``left`` / ``right`` ``(T, M)``
    long child nodes (a leaf points to itself), ``value`` ``(T, M)`` pK at the leaves, ``offset`` and ``scale``.
    """

    kind = "LigandTrees"
    card_name = "Ligand-only tree-ensemble affinity model (pK; the receptor is not read)."
    finetune_loss = "centred"
    reads_pose = False
    recipe_keys = ("n_features", "float32_inputs")

    def __init__(self, n_trees: int, n_nodes: int, depth: int, n_features: int = LIGAND_FEATURES,
                 average: bool = True, float32_inputs: bool = True, model: str = "rf"):
        super().__init__()
        self.n_features, self.depth, self.average = n_features, depth, average
        self.float32_inputs, self.model = float32_inputs, model
        self.register_buffer("feature", torch.full((n_trees, n_nodes), -1, dtype=torch.long))
        self.register_buffer("threshold", torch.zeros(n_trees, n_nodes, dtype=torch.float64))
        nodes = torch.arange(n_nodes).expand(n_trees, n_nodes).clone()
        self.register_buffer("left", nodes)
        self.register_buffer("right", nodes.clone())
        self.register_buffer("value", torch.zeros(n_trees, n_nodes, dtype=torch.float64))
        self.register_buffer("offset", torch.zeros((), dtype=torch.float64))
        self.register_buffer("scale", torch.tensor(1.0 / n_trees if average else 1.0, dtype=torch.float64))

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        """pK ``[B]`` of ligand feature rows ``features`` ``(B, n_features)``."""
        x = features.to(torch.float32).to(torch.float64) if self.float32_inputs else features.to(torch.float64)
        n_trees = self.feature.shape[0]
        tree = torch.arange(n_trees, device=x.device).expand(len(x), n_trees)
        node = torch.zeros_like(tree)
        for _ in range(self.depth):
            feature = self.feature[tree, node]
            go_left = x.gather(1, feature.clamp(min=0)) <= self.threshold[tree, node]
            child = torch.where(go_left, self.left[tree, node], self.right[tree, node])
            node = torch.where(feature < 0, node, child)
        return self.offset + self.scale * self.value[tree, node].sum(1)

    # ------------------------------------------------------------------ the member contract
    @classmethod
    def from_config(cls, config: Mapping[str, Any], source=None) -> "LigandTrees":
        sizes = {key: config.get(key) for key in ("n_trees", "n_nodes", "depth", "n_features")}
        flags = {key: config.get(key) for key in ("average", "float32_inputs")}
        if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in sizes.values()) \
                or not all(isinstance(v, bool) for v in flags.values()) or config.get("model") not in ("rf", "et", "gbm"):
            raise ModelLoadError(f"LigandTrees needs positive integer sizes (n_trees, n_nodes, depth, n_features), "
                                 f"true/false average and float32_inputs and model 'rf', 'et' or 'gbm', got "
                                 f"{dict(config)}",
                                 source=source)
        return cls(**sizes, **flags, model=config["model"])

    def to_config(self) -> dict[str, Any]:
        return {"n_trees": int(self.feature.shape[0]), "n_nodes": int(self.feature.shape[1]), "depth": self.depth,
                "n_features": self.n_features, "average": self.average, "float32_inputs": self.float32_inputs,
                "model": self.model}

    @classmethod
    def example(cls, seed: int = 0) -> "LigandTrees":
        """A forest of three full trees of depth 2 splitting on random features at random thresholds (the contract's
        example member)."""
        generator = torch.Generator().manual_seed(seed)
        trees, depth = 3, 2
        model = cls(n_trees=trees, n_nodes=2 ** (depth + 1) - 1, depth=depth)
        inner = 2 ** depth - 1  # nodes 0 … inner-1 split; node i's children are 2i+1 and 2i+2
        model.feature[:, :inner] = torch.randint(0, LIGAND_FEATURES, (trees, inner), generator=generator)
        model.threshold[:, :inner] = 2.0 * torch.rand(trees, inner, generator=generator, dtype=torch.float64)
        model.left[:, :inner] = 2 * torch.arange(inner) + 1
        model.right[:, :inner] = 2 * torch.arange(inner) + 2
        model.value[:, inner:] = 6.0 + torch.randn(trees, model.value.shape[1] - inner, generator=generator,
                                                   dtype=torch.float64)
        return model.eval()

    def check_complex(self, graph, source=None) -> None:
        descriptors = getattr(graph, "ligand_descriptors", None)
        if descriptors is None or not bool(torch.isfinite(descriptors).all()):
            raise ConfigError(NO_LIGAND, source=source)

    def inputs(self, graphs: Sequence) -> torch.Tensor:
        if self.n_features != LIGAND_FEATURES:
            raise ConfigError(f"this ligand-only model reads {self.n_features} columns; complex graphs carry "
                              f"{LIGAND_FEATURES} (Morgan counts and descriptors)")
        return graph_ligand_inputs(graphs).to(self.value.device)

    def finetune_parameters(self) -> list[nn.Parameter]:
        """None: trees do not move; fine-tuning refits the level alone."""
        return []

    def finetune_moves(self) -> str:
        return "the trees are unchanged; only the constant offset"

    @property
    def level(self) -> torch.Tensor:
        return self.offset
