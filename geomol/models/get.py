"""GET on BlockGraphs: embedding, coordinate normalisation, edges, encoder, read-outs and heads.

Reproduces the official affinity / LEP wrappers (``specs/GET.md`` §11.3–11.5):

1. atom features = atom-type + position-code + block-type embeddings;
2. coordinates: centred on the segment-0 (receptor) global atom, divided by 10 (Å → Å/10);
   each global atom moved to the mean of its segment's normalised atoms;
3. edges (:func:`geomol.nn.block_edges.build_block_edges`, k = 9) with a 4-type embedding;
4. the :class:`~geomol.models.get_core.GET` encoder;
5. block_repr = normalize(Σ atom H), graph_repr = normalize(Σ block_repr);
6. affinity: pK = −Σ_blocks energy_ffn(block_repr), over all blocks, globals included.

Deviations from the official code (deliberate; normal inputs give the official values):

* quirk Q3 (a lone atom pair in the whole batch double-counts a group) is not reproduced;
* Q4: the accumulated norm scale keeps the dtype of Z (upstream: always float32), so float64
  runs are exact;
* Q5: distances are differentiable (as in the official *training* copy of the module);
* E4: a graph whose coordinate spread is below 1e-6 (one atom, coincident atoms) is left
  unscaled by the equivariant norms instead of turning into NaN;
* RBF values below 1e-20 are set to 0 (exponents below −80 clamped first; upstream: subnormals):
  same sums to float32 resolution, no subnormal arithmetic, which made the exp ~7x and the weight
  gradients of these features up to 15x slower on CPU;
* robustness: ``edge_embedding_dim=0`` works (upstream crashes, E2), ``num_rbf=1`` raises a clear error,
  a graph without a segment-0 global atom is centred on segment 0's atoms (E9), and exact
  distance ties in the KNN are broken deterministically (upstream: unstable sort);
* on the CPU the per-pair stage of the attention runs as a compiled loop (:mod:`geomol.nn.native`; its
  exponential is a degree-7 polynomial, and sums run in another order): float32 results differ from the
  PyTorch formulation's by float32 rounding (~1e-7 relative);
* ``pre_norm`` (unused in every official configuration) is not implemented; the chunked
  attention path (default for large batches) supports first derivatives only.

Example::

    from geomol.data import complex_from_files
    from geomol.models.get import GETAffinity
    model = GETAffinity().eval()
    graph = complex_from_files("protein.pdb", "ligand.sdf")
    pk = model(graph)                      # tensor [1]
    pk = model([graph, other_graph])       # tensor [2]; a torch_geometric Batch works too
    inputs = model.prepare([graph])        # normalised coordinates, block edges, atom pairs (GETInputs)
    out = model.embed(inputs)              # GETOutput: H, X (Å), block_repr, graph_repr, edges
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping, Sequence

import torch
import torch.nn.functional as F
from torch import nn
from torch_geometric.data import Batch

from geomol.data.blocks import BlockGraph
from geomol.data.vocab import ATOM_TYPES, POSITION_CODES, VOCAB
from geomol.models.get_core import GET
from geomol.models.get_official import load_official_state_dict
from geomol.errors import ConfigError, ModelLoadError
from geomol.models.affinity_member import AffinityMember, register_member_kind, renamed_config, seeded
from geomol.models.readouts import ShiftedEnergyReadout, adapted_readout, readout_class
from geomol.nn.atom_pairs import AtomPairs
from geomol.nn.block_edges import NUM_EDGE_TYPES, build_block_edges
from geomol.nn.scatter import scatter_mean, scatter_sum

__all__ = ["GET", "GETConfig", "GETModel", "GETAffinity", "GETPairClassifier", "GETInputs", "GETOutput", "GETEmbedding",
           "load_official_state_dict", "as_batch", "normalise_coordinates"]

COORD_SCALE = 10.0  # Å per normalised unit (the official wrapper's fixed std)


@dataclass
class GETInputs:
    """A batch prepared for the encoder (N atoms, Nb blocks, B graphs, E edges).

    Attributes:
        graph: the batched BlockGraph.
        Z: [N, 1, 3] normalised coordinates (Å/10, see :func:`normalise_coordinates`).
        centre: [B, 3] centre of each graph in Å.
        block_batch: [Nb] graph of each block.
        edges: [2, E] block edges (row 0 receives); edge_type: [E] in 0..3.
        pairs: the sparse atom pairs of the edges, from Z (every layer uses them). They depend only
            on the inputs and ``sparse_k``, so models of one architecture (an ensemble) can share them.
    """

    graph: BlockGraph
    Z: torch.Tensor
    centre: torch.Tensor
    block_batch: torch.Tensor
    edges: torch.Tensor
    edge_type: torch.Tensor
    pairs: AtomPairs

    @property
    def num_graphs(self) -> int:
        return self.centre.size(0)


@dataclass
class GETOutput:
    """What the encoder gives for a batch of B complexes (N atoms, Nb blocks).

    Attributes:
        H: [N, d] atom features.
        X: [N, 3] output atom coordinates in Å, in the input frame.
        block_repr: [Nb, d] unit-norm block embeddings.
        graph_repr: [B, d] unit-norm complex embeddings.
        block_batch: [Nb] graph of each block.
        edges: [2, E] block edges used (row 0 receives); edge_type: [E] in 0..3.
        graph: the batched input BlockGraph (input coordinates, atom types, ligand chemistry), for
            read-outs that score the pose itself.
    """

    H: torch.Tensor
    X: torch.Tensor
    block_repr: torch.Tensor
    graph_repr: torch.Tensor
    block_batch: torch.Tensor
    edges: torch.Tensor
    edge_type: torch.Tensor
    graph: BlockGraph | None = None


def as_batch(graphs: BlockGraph | Batch | Sequence[BlockGraph]) -> BlockGraph:
    """A BlockGraph, a list of them or a PyG batch of them, as one batched graph."""
    if isinstance(graphs, (list, tuple)):
        return Batch.from_data_list(list(graphs))
    return graphs


class GETEmbedding(nn.Module):
    """H⁰_a = atom_embedding[A_a] + position_embedding[pos_a] + block_embedding[B[block(a)]].

    Shapes: A, atom_pos, block_id [N]; B [Nb] → [N, d]. Names as the official ``BlockEmbedding``.
    """

    def __init__(self, hidden: int, num_block_types: int, n_atom_types: int = len(ATOM_TYPES),
                 n_positions: int = len(POSITION_CODES)):
        super().__init__()
        self.block_embedding = nn.Embedding(num_block_types, hidden)
        self.atom_embedding = nn.Embedding(n_atom_types, hidden)
        self.position_embedding = nn.Embedding(n_positions, hidden)

    def forward(self, A, atom_pos, block_id, B):
        return self.atom_embedding(A) + self.position_embedding(atom_pos) + self.block_embedding(B)[block_id]


def normalise_coordinates(X, block_id, segment, is_global, block_batch, n_graphs):
    """The official wrapper's coordinate normalisation.

    Args: X [N, 3] Å; block_id [N]; segment, is_global, block_batch [Nb]; n_graphs B.
    Returns: Z [N, 1, 3] = (X − centre) / 10, with each global atom moved to the mean of its
    segment's other atoms, and centre [B, 3] in Å (the segment-0 global atom; without one,
    the mean of segment 0, else of all atoms).
    """
    atom_graph = block_batch[block_id]
    atom_segment = segment[block_id]
    atom_global = is_global[block_id]
    # Centre on the segment-0 global atom; without one, on segment 0's atoms, else on all atoms.
    priority = (atom_segment == 0).long() + (atom_global & (atom_segment == 0)).long()
    best = torch.zeros(n_graphs, dtype=torch.long, device=X.device).scatter_reduce(0, atom_graph, priority, "amax")
    anchor = priority == best[atom_graph]
    centre = scatter_mean(X[anchor], atom_graph[anchor], n_graphs)
    Z = (X - centre[atom_graph]) / COORD_SCALE
    # Segment groups (graph, segment) are contiguous runs of blocks.
    change = torch.ones_like(segment, dtype=torch.bool)
    change[1:] = (segment[1:] != segment[:-1]) | (block_batch[1:] != block_batch[:-1])
    atom_group = (torch.cumsum(change.long(), 0) - 1)[block_id]
    n_groups = int(atom_group.max()) + 1
    normal = ~atom_global
    group_mean = scatter_mean(Z[normal], atom_group[normal], n_groups)
    has_normal = torch.bincount(atom_group[normal], minlength=n_groups) > 0
    replace = atom_global & has_normal[atom_group]
    Z = torch.where(replace.unsqueeze(-1), group_mean[atom_group], Z)
    return Z.unsqueeze(1), centre


RENAMED = {"d_hidden": "hidden", "d_radial": "radial_dim", "n_rbf": "num_rbf", "d_edge": "edge_embedding_dim",
           "n_layers": "num_layers", "n_head": "num_heads", "n_block_types": "num_block_types"}
"""GET's hyperparameter names before one vocabulary (EGNO's and EGNN's ``hidden``, ``num_layers``, ...) → now."""


@dataclass(frozen=True)
class GETConfig:
    """The architecture of a GET model: the one place its arguments and their defaults are written.

    Defaults are the official LBA configuration (801,518 parameters with the 150-type vocabulary).

    Attributes:
        hidden, radial_dim, num_rbf, cutoff, edge_embedding_dim, num_layers, num_heads, dropout, sparse_k: as in
            :class:`~geomol.models.get_core.GET` (one coordinate channel; cutoff in normalised units).
        k_neighbors: block KNN k for intra- and inter-segment edges.
        num_block_types: rows of the block embedding (``len(vocab)``; fragments append rows).
        z_requires_grad: see :class:`GET` (the official wrappers pass False).
        readout: class path of the affinity read-out (:mod:`geomol.models.readouts`; default the official
            energy read-out). Used by :class:`GETAffinity` only.
    """

    hidden: int = 64
    radial_dim: int = 32
    num_rbf: int = 32
    cutoff: float = 7.0
    edge_embedding_dim: int = 64
    num_layers: int = 3
    num_heads: int = 4
    k_neighbors: int = 9
    sparse_k: int | None = 3
    dropout: float = 0.1
    num_block_types: int = len(VOCAB)
    z_requires_grad: bool = False
    readout: str = "geomol.models.readouts.EnergyReadout"

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any], source=None) -> "GETConfig":
        """The architecture among saved hyperparameters (optimiser settings etc. ignored; missing = default; the
        names of :data:`RENAMED` read as their new ones, with a deprecation warning)."""
        values = renamed_config(values, RENAMED, "GET", source)
        return cls(**{name: values[name] for name in cls.names() if name in values})

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


class GETModel(nn.Module):
    """GET encoder on BlockGraphs, with the official wrapper's embeddings and energy read-out.

    Args:
        config: the architecture (default :attr:`default_config`, the official LBA configuration).
        **overrides: fields of :class:`GETConfig` replacing those of ``config``
            (``GETAffinity(hidden=32, num_block_types=200)``).
    """

    default_config = GETConfig()

    def __init__(self, config: GETConfig | None = None, **overrides: Any):
        super().__init__()
        self.config = c = replace(config or self.default_config, **overrides)
        self.k_neighbors = c.k_neighbors
        self.embedding = GETEmbedding(c.hidden, c.num_block_types)
        self.edge_embedding = nn.Embedding(NUM_EDGE_TYPES, c.edge_embedding_dim)
        self.encoder = GET(c.hidden, c.radial_dim, 1, c.num_rbf, c.cutoff, c.edge_embedding_dim, c.num_layers,
                           c.num_heads, c.dropout, c.z_requires_grad, c.sparse_k)
        self.energy_ffn = nn.Sequential(nn.SiLU(), nn.Linear(c.hidden, c.hidden), nn.SiLU(),
                                        nn.Linear(c.hidden, 1, bias=False))

    def prepare(self, graphs: BlockGraph | Batch | Sequence[BlockGraph]) -> GETInputs:
        """Batch, normalise the coordinates, build the block edges and their atom pairs (no gradients
        through either)."""
        g = as_batch(graphs)
        block_batch = g.block_batch
        n_graphs = int(block_batch.max()) + 1
        X = g.X.to(self.edge_embedding.weight.dtype)
        Z, centre = normalise_coordinates(X, g.block_id, g.segment, g.is_global, block_batch, n_graphs)
        edges, edge_type = build_block_edges(Z.detach(), g.block_id, block_batch, g.segment, g.is_global,
                                             self.k_neighbors)
        pairs = self.encoder.atom_pairs(Z, g.block_id, edges, block_batch.numel())
        return GETInputs(g, Z, centre, block_batch, edges, edge_type, pairs)

    def embed(self, graphs: BlockGraph | Batch | Sequence[BlockGraph] | GETInputs) -> GETOutput:
        """Encode a BlockGraph, a list of them, a PyG batch of them, or prepared inputs."""
        inputs = graphs if isinstance(graphs, GETInputs) else self.prepare(graphs)
        g, block_batch = inputs.graph, inputs.block_batch
        H = self.embedding(g.A, g.atom_pos, g.block_id, g.B)
        H, Z = self.encoder(H, inputs.Z, g.block_id, block_batch, inputs.edges, self.edge_embedding(inputs.edge_type),
                            inputs.pairs)
        block_repr = F.normalize(scatter_sum(H, g.block_id, block_batch.numel()), dim=-1)
        graph_repr = F.normalize(scatter_sum(block_repr, block_batch, inputs.num_graphs), dim=-1)
        X = Z[:, 0] * COORD_SCALE + inputs.centre[block_batch[g.block_id]]
        return GETOutput(H, X, block_repr, graph_repr, block_batch, inputs.edges, inputs.edge_type, g)

    def energy(self, out: GETOutput) -> torch.Tensor:
        """[B] Σ over all blocks (globals included) of energy_ffn(block_repr)."""
        per_block = self.energy_ffn(out.block_repr).squeeze(-1)
        return scatter_sum(per_block, out.block_batch, out.graph_repr.size(0))

    def forward(self, graphs) -> GETOutput:
        return self.embed(graphs)


@register_member_kind
class GETAffinity(GETModel, AffinityMember):
    """Binding-affinity predictor: pK = −energy by default (official ``AffinityPredictor``; LBA defaults),
    or another read-out of ``config.readout`` (:mod:`geomol.models.readouts`).

    ``forward(graphs)`` takes a BlockGraph, a list or a batch of them (or their prepared :meth:`inputs`) and
    returns the predicted pK per complex, shape [B]. Trained with MSE against pK. An
    :class:`~geomol.models.affinity_member.AffinityMember`: few-shot fine-tuning keeps the encoder and moves the
    read-out (an energy read-out gains an offset, :class:`~geomol.models.readouts.ShiftedEnergyReadout`).
    """

    kind = "GETAffinity"
    card_name = "GET binding-affinity model (pK)."
    finetune_loss = "mse"
    recipe_keys = ("readout",)

    def __init__(self, config: GETConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        self.readout = readout_class(self.config.readout)(self.config.hidden)

    def forward(self, graphs) -> torch.Tensor:
        return self.readout(self, self.embed(graphs))

    # ------------------------------------------------------------------ the member contract
    @classmethod
    def from_config(cls, config: Mapping[str, Any], source=None) -> "GETAffinity":
        """From saved hyperparameters (optimiser settings ignored); ``num_block_types`` and the ``readout`` are
        required (how a model reads its pK out is never guessed)."""
        config = renamed_config(config, RENAMED, "GET", source)
        if not isinstance(config.get("num_block_types"), int):
            raise ModelLoadError("hyperparameters lack num_block_types (the block vocabulary size): not a trained "
                                 "GET affinity model", source=source)
        if not isinstance(config.get("readout"), str):
            raise ModelLoadError("the GET configuration records no read-out (hyperparameters.readout: the class path "
                                 "of a read-out of geomol.models.readouts): how the model reads pK out cannot be "
                                 "known", source=source)
        try:
            return cls(GETConfig.from_mapping(config))
        except (TypeError, ValueError) as exc:
            raise ModelLoadError(f"cannot build GETAffinity({dict(config)}): {exc}", source=source) from None

    def to_config(self) -> dict[str, Any]:
        return self.config.to_dict()

    @classmethod
    def example(cls, seed: int = 0) -> "GETAffinity":
        """A GET of 16 features, one layer and two heads (the contract's example member)."""
        config = GETConfig(hidden=16, radial_dim=8, num_rbf=8, edge_embedding_dim=8, num_layers=1, num_heads=2)
        return seeded(lambda: cls(config), seed).eval()

    @classmethod
    def check_recipe(cls, config: Mapping[str, Any], recipe, source=None) -> None:
        num_block_types = GETConfig.from_mapping(config, source).num_block_types
        if num_block_types < recipe.num_block_types:
            raise ModelLoadError(f"the model has {num_block_types} block types but its preprocessing "
                                 f"(fragments) defines {recipe.num_block_types}", source=source)

    def check_complex(self, graph, source=None) -> None:
        if int(graph.B.max()) >= self.config.num_block_types:
            raise ConfigError(f"the complex has block type {int(graph.B.max())} but the model knows "
                              f"{self.config.num_block_types} (a graph built with another block vocabulary)", source)

    def inputs(self, graphs) -> GETInputs:
        """Prepared inputs (edges and atom pairs built once: members of one config share them)."""
        return self.prepare(as_batch(graphs).to(self.edge_embedding.weight.device))

    def finetune_start(self) -> "GETAffinity":
        """A copy whose read-out has an offset to fit the target's level (an energy read-out becomes
        :class:`~geomol.models.readouts.ShiftedEnergyReadout`; read-outs with an offset of their own stay)."""
        new = GETAffinity(replace(self.config, readout=adapted_readout(self.config))).to(self.edge_embedding.weight)
        new.load_state_dict(self.state_dict(), strict=False)  # only readout.offset can be new (energy read-out)
        return new

    def frozen(self, inputs) -> GETOutput:
        """The encoder's output (fine-tuning never moves the encoder)."""
        return self.embed(inputs)

    def head(self, frozen: GETOutput) -> torch.Tensor:
        return self.readout(self, frozen)

    def finetune_parameters(self) -> list[nn.Parameter]:
        """The energy MLP (for the energy read-outs), else the read-out's own weights; the offset is the level."""
        weights = self.energy_ffn if isinstance(self.readout, ShiftedEnergyReadout) else self.readout
        return [p for name, p in weights.named_parameters() if name != "offset"]

    def finetune_moves(self) -> str:
        return (f"the encoder is unchanged; the read-out's weights (read-out "
                f"`{self.config.readout.rpartition('.')[2]}`)")

    @property
    def level(self) -> torch.Tensor:
        return self.readout.offset

    @staticmethod
    def loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """Mean squared error between predicted and measured pK (official training loss)."""
        return F.mse_loss(pred, target.to(pred.dtype))


class GETPairClassifier(GETModel):
    """LEP head: is the second conformation of each pair the active one? (official
    ``GraphPairClassifier``; defaults: the LEP configuration, hidden 128, radial 64).

    ``forward(graphs)`` takes 2P graphs ordered (inactive, active) pair by pair and returns
    logits [P, 2] of ``class_ffn([graph_repr_2p ‖ graph_repr_2p+1])``; class 1 = active.
    The energy read-out exists (frozen) only so that official checkpoints load.
    """

    default_config = GETConfig(hidden=128, radial_dim=64)

    def __init__(self, config: GETConfig | None = None, **overrides: Any):
        super().__init__(config, **overrides)
        self.class_ffn = nn.Linear(2 * self.config.hidden, 2)
        self.energy_ffn.requires_grad_(False)

    def forward(self, graphs) -> torch.Tensor:
        rep = self.embed(graphs).graph_repr
        if rep.size(0) % 2:
            raise ValueError(f"GETPairClassifier needs an even number of graphs (pairs), got {rep.size(0)}")
        return self.class_ffn(torch.cat([rep[0::2], rep[1::2]], dim=1))

    @staticmethod
    def loss(logits: torch.Tensor, label: torch.Tensor) -> torch.Tensor:
        """Cross-entropy over pairs (label 1 = active)."""
        return F.cross_entropy(logits, label.long())
