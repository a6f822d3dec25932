"""EGNO, the Equivariant Graph Neural Operator (Xu et al., ICML 2024), ``specs/EGNO.md``.

One pass maps the current state of a 3D system (positions, velocities, invariant features) to
its positions at P future frames. The state is lifted to P time slices (node features plus a
sinusoidal embedding of the slice index), then each of L layers applies

1. a temporal Fourier convolution to the invariant channels h,
2. a temporal Fourier convolution to the vectors [x − x̄, v] (x̄: centroid of the input frame),
3. an EGNN layer with a velocity term, on every slice at once.

:class:`EGNO` computes the official function; :func:`load_official_state_dict` loads official
checkpoints (``saved_model.pth``) into it. The reference input features are built from a batch by
:func:`geomol.models.dynamics.dynamics_inputs`.
"""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

from geomol.errors import ConfigError, ModelLoadError
from geomol.models.dynamics import NodeAttrNorm, TrajectoryPrediction, dynamics_inputs
from geomol.nn.egnn import EGNNLayer, in_degree
from geomol.nn.temporal import ScalarTimeConv, VectorTimeConv, timestep_embedding

__all__ = ["EGNO", "load_official_state_dict"]


class EGNO(nn.Module):
    """Equivariant Graph Neural Operator.

    Args:
        node_features: F, invariant node features including |v| (N-body 1, Mocap/MD17/AdK 2).
        edge_features: E, edge features including the squared input distance (N-body/Mocap/AdK 2, MD17 5).
        hidden: H. num_layers: L.
        num_timesteps: P, number of predicted frames.
        num_modes: K, temporal Fourier modes (≤ ⌊P/2⌋ + 1).
        time_embedding_dim: D_t of the sinusoidal slice embedding.
        use_time_conv: apply the temporal convolutions (the official MD17 run has them off).
        node_attr_norm: how :meth:`forward` scales ``node_attr`` (see :func:`dynamics_inputs`).
        edge_chunk_elements: with gradients, above this many elements per [edges, P, H] tensor the edge
            activations are recomputed in the backward pass instead of being stored
            (:class:`~geomol.nn.egnn.EGNNLayer`); results are unchanged.

    :meth:`forward` takes a batched trajectory BlockGraph; :meth:`forward_tensors` the raw tensors.
    """

    def __init__(self, node_features: int = 1, edge_features: int = 2, hidden: int = 64, num_layers: int = 4,
                 num_timesteps: int = 5, num_modes: int = 2, time_embedding_dim: int = 32,
                 use_time_conv: bool = True, node_attr_norm: NodeAttrNorm = "dataset",
                 edge_chunk_elements: int = 1 << 23):
        super().__init__()
        if num_timesteps < 1 or num_layers < 1 or hidden < 1:
            raise ConfigError("num_timesteps, num_layers and hidden must be ≥ 1")
        if use_time_conv and num_timesteps > 1 and num_modes > num_timesteps // 2 + 1:
            raise ConfigError(f"num_modes={num_modes} exceeds ⌊P/2⌋+1 = {num_timesteps // 2 + 1} Fourier bins "
                              f"of P={num_timesteps} slices")
        if time_embedding_dim < 4:
            raise ConfigError(f"time_embedding_dim must be ≥ 4, got {time_embedding_dim}")
        self.node_features, self.edge_features, self.hidden = node_features, edge_features, hidden
        self.num_timesteps, self.num_modes, self.time_embedding_dim = num_timesteps, num_modes, time_embedding_dim
        self.use_time_conv, self.node_attr_norm = use_time_conv, node_attr_norm
        self.embedding = nn.Linear(node_features + time_embedding_dim, hidden)
        self.layers = nn.ModuleList(EGNNLayer(hidden, edge_features, edge_chunk_elements=edge_chunk_elements)
                                    for _ in range(num_layers))
        if use_time_conv:
            # Created layer by layer, scalar before vector, as the official code does: the random stream is
            # consumed in the official order, so a seed gives the official initial weights bit for bit.
            self.time_convs, self.vector_convs = nn.ModuleList(), nn.ModuleList()
            for _ in range(num_layers):
                self.time_convs.append(ScalarTimeConv(hidden, num_modes))
                self.vector_convs.append(VectorTimeConv(num_modes))

    def lift(self, h: torch.Tensor) -> torch.Tensor:
        """[N, F] node features → [N, P, H]: Linear of [h, time embedding of slice t] for each t."""
        w, f = self.embedding.weight, self.node_features
        emb = timestep_embedding(self.num_timesteps, self.time_embedding_dim, dtype=h.dtype, device=h.device)
        return F.linear(h, w[:, :f]).unsqueeze(1) + F.linear(emb, w[:, f:], self.embedding.bias).unsqueeze(0)

    def forward_tensors(self, x: torch.Tensor, h: torch.Tensor, edge_index: torch.Tensor, edge_attr: torch.Tensor,
                        v: torch.Tensor, center: torch.Tensor) -> TrajectoryPrediction:
        """The official ``EGNO.forward`` on node-major tensors.

        Args:
            x: [N, 3] positions; h: [N, F] node features; edge_index: [2, M] (row = receiver);
            edge_attr: [M, E]; v: [N, 3] velocities; center: [N, 3] centroid of each node's graph.

        Returns:
            x [N, P, 3] (slice t = the (t+1)-th target frame), v [N, P, 3], h [N, P, H].
        """
        P = self.num_timesteps
        degree = in_degree(edge_index[0], x.size(0), x.dtype)
        h = self.lift(h)
        x = x.unsqueeze(1).expand(-1, P, -1)
        v = v.unsqueeze(1).expand(-1, P, -1)
        center = center.unsqueeze(1)
        for i, layer in enumerate(self.layers):
            if self.use_time_conv:
                h = self.time_convs[i](h)
                x, v = self.vector_convs[i](x, v, center)
            x, h = layer(x, h, v, edge_index, edge_attr, degree)
        return TrajectoryPrediction(x, v.expand_as(x), h)

    def forward(self, graph) -> TrajectoryPrediction:
        """Predict the P target frames of a (batched) trajectory BlockGraph; see :mod:`geomol.models.dynamics`."""
        inputs = dynamics_inputs(graph, self.node_attr_norm)
        _check_widths(self, inputs.h, inputs.edge_attr)
        return self.forward_tensors(inputs.x, inputs.h, inputs.edge_index, inputs.edge_attr, inputs.v, inputs.center)


def _check_widths(model: nn.Module, h: torch.Tensor, edge_attr: torch.Tensor) -> None:
    if h.size(-1) != model.node_features or edge_attr.size(-1) != model.edge_features:
        raise ConfigError(
            f"batch has {h.size(-1)} node and {edge_attr.size(-1)} edge features (|v| and d² included), "
            f"the model expects {model.node_features} and {model.edge_features}")


_LAYER_KEYS = {
    "edge_message_net.scalar_net.mlp.0": "message_in",
    "edge_message_net.scalar_net.mlp.2": "message_out",
    "coord_net.mlp.0": "coord_hidden",
    "coord_net.mlp.2": "coord_out",
    "node_v_net.mlp.0": "velocity_hidden",
    "node_v_net.mlp.2": "velocity_out",
    "node_net.mlp.0": "node_hidden",
    "node_net.mlp.2": "node_out",
}


def _official_key(key: str) -> str:
    """Our parameter name for one official key (``specs/EGNO.md`` §2.6, Appendix A)."""
    parts = key.split(".")
    if parts[0] == "layers":
        prefix, param = ".".join(parts[2:-1]), parts[-1]
        if prefix in _LAYER_KEYS:
            return f"layers.{parts[1]}.{_LAYER_KEYS[prefix]}.{param}"
    elif parts[0] == "time_conv_modules" and parts[2:] == ["t_conv", "weights1"]:
        return f"time_convs.{parts[1]}.weight"
    elif parts[0] == "time_conv_x_modules" and parts[2:] == ["t_conv", "weights1"]:
        return f"vector_convs.{parts[1]}.weight"
    elif parts[0] == "embedding":
        return key
    return ""


def load_official_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor]) -> None:
    """Load an official EGNO (or official EGNN) ``state_dict`` into ``model``, in place.

    Keys and shapes are those of the official code (``layers.{i}.edge_message_net.scalar_net.mlp.0.weight``,
    ``time_conv_modules.{i}.t_conv.weights1``, ...); a ``module.`` prefix (DataParallel) is accepted.
    Every official key must map to one of our parameters and every parameter must be covered.

    Raises:
        ModelLoadError: unknown or missing keys, or a shape that differs (e.g. another H or E).
    """
    ours = model.state_dict()
    converted, unknown = {}, []
    for key, value in state_dict.items():
        key = key[len("module."):] if key.startswith("module.") else key
        name = _official_key(key)
        if name not in ours:
            unknown.append(key)
            continue
        if tuple(value.shape) != tuple(ours[name].shape):
            raise ModelLoadError(f"official '{key}' has shape {tuple(value.shape)}, "
                                 f"the model expects {tuple(ours[name].shape)} for '{name}'")
        converted[name] = value
    missing = sorted(set(ours) - set(converted))
    if unknown or missing:
        raise ModelLoadError(f"state_dict does not match {type(model).__name__}: unknown keys {unknown[:5]}"
                             f"{'...' if len(unknown) > 5 else ''}, missing {missing[:5]}"
                             f"{'...' if len(missing) > 5 else ''}")
    model.load_state_dict(converted)
