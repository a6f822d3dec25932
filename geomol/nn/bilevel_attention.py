"""GET's bilevel attention layer (``specs/GET.md`` §3 and §5): H ← H + W_out G, Z ← Z + ΔZ with (G, ΔZ) the
attention of :func:`geomol.nn.attend.attend`, whose docstring states the maths with its shapes and units.

Heads share all weights and differ by the slice of H, of the edge features and of the RBF
(the basis functions are partitioned across heads) they see.

Implementation. The first linear layer of each pair MLP is split by input blocks: the query,
key and value parts are applied once per atom and the edge part once per edge, so only the RBF
part is a product over pairs. The per-pair stage (the three pair MLPs, the scalar read-outs, the
softmax within each group and the α-weighted sums) runs as one compiled loop where it is available
(:mod:`geomol.nn.native`: no [pairs, heads, 3rh] tensor is formed), else in PyTorch (:func:`_pair_stage`:
the three MLPs as one block-diagonal product on the concatenated [pairs, heads, 3·r/h] state). Both give
the same function to float32 rounding. The work runs in chunks of whole receiving blocks, recomputed in
the backward pass (:mod:`geomol.nn.chunked`): memory stays flat and the chunks stay in cache. The backward
pass of a chunk is written by hand (:func:`attend_backward`: one forward recomputation without autograd,
then the chain rule). With the compiled pair stage, the block and group level (block softmax β, coordinate
coefficients, the scatter onto the receiving atoms: :mod:`geomol.nn.attend_groups`) and the two group MLPs
(:mod:`geomol.nn.group_mlp`) run compiled too, forward and backward; the forward pass keeps, per chunk, the pair
stage's outputs with the distances and receiver rows, the group MLPs' outputs and the block softmax ([g, ·], [e, ·]
and [p, C] tensors), so that the backward pass recomputes only what the compiled loops recompute row by row.
``chunked=False`` runs :func:`attend` on everything at once with plain autograd and the PyTorch stage instead
(second derivatives, 4× the memory). The hand-written backward pass is :mod:`geomol.nn.attend_backward`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from geomol.nn import native
from geomol.nn.atom_pairs import AtomPairs
from geomol.nn.attend import (AttendInputs, AttendWeights, AttentionHeads, GroupMLP, PairWeights, _attend,
                              _native_ready, attend)
from geomol.nn.attend_backward import attend_backward
from geomol.nn.chunked import Chunk, chunked_recompute
from geomol.nn.mlp import mlp2
from geomol.nn.radial import RadialBasis

__all__ = ["BilevelAttention", "attend", "attend_backward"]


def _flat_grads(found: tuple[tuple[torch.Tensor, ...], AttendWeights]) -> tuple[torch.Tensor, ...]:
    """:func:`attend_backward`'s gradients in the order of the chunked inputs (the four inputs, then the weights)."""
    input_grads, weight_grads = found
    return (*input_grads, *weight_grads.flat())


class BilevelAttention(nn.Module):
    """One GET layer: atom-level and block-level attention with an equivariant coordinate update.

    Args:
        d_hidden: d, size of atom features H.
        d_radial: r, size of the attention/message space (split into ``n_head`` chunks).
        n_channel: C, coordinates per atom.
        n_rbf: R, radial basis functions (split into ``n_head`` chunks).
        cutoff: RBF cutoff, in the units of Z.
        d_edge: size of edge features (0: no edge features).
        n_head: h; r, R and d must be divisible by h.
        chunked: True (default): process receiving blocks in chunks recomputed in backward (fast,
            memory independent of the number of pairs, no second derivatives); False: plain autograd
            on everything at once.

    Shapes (``forward``): H [N, d], Z [N, C, 3], pairs (P pairs, M groups, E edges),
    edge_attr [E, d_edge] → (H [N, d], Z [N, C, 3]).

    Submodule names and shapes follow the official ``GETLayer`` (``linear_qk`` rows 0, 2, 4, …
    give queries, rows 1, 3, 5, … keys).
    """

    def __init__(self, d_hidden: int, d_radial: int, n_channel: int, n_rbf: int, cutoff: float = 7.0,
                 d_edge: int = 0, n_head: int = 4, chunked: bool = True):
        super().__init__()
        if d_radial % n_head or n_rbf % n_head or d_hidden % n_head:
            raise ValueError(f"d_hidden {d_hidden}, d_radial {d_radial} and n_rbf {n_rbf} must be divisible by "
                             f"n_head {n_head}")
        self.n_head, self.n_channel, self.chunked = n_head, n_channel, chunked
        self.rh, self.dh, self.rbf_h = d_radial // n_head, d_hidden // n_head, n_rbf // n_head
        rh, crh = self.rh, n_channel * self.rbf_h
        self.linear_qk = nn.Linear(self.dh, 2 * rh, bias=False)
        self.linear_v = nn.Linear(self.dh, rh)
        self.rbf = RadialBasis(n_rbf, cutoff)
        self.att_mlp = mlp2(3 * rh + crh if d_edge else 2 * rh + crh, rh, rh)
        self.unit_att_linear = nn.Linear(rh, 1)
        self.block_att_linear = nn.Linear(rh, 1)
        self.edge_linear = nn.Linear(d_edge, d_radial) if d_edge else None
        self.node_mlp = mlp2(d_radial, d_hidden, d_hidden)
        self.node_out_linear = nn.Linear(d_hidden, d_hidden)
        self.coord_mlp = mlp2(d_radial, d_hidden, n_head * n_channel)
        self.unit_msg_mlp = mlp2(rh + crh, rh, rh)
        self.unit_msg_coord_mlp = mlp2(rh + crh, rh, rh)
        self.unit_msg_coord_linear = nn.Linear(rh, n_channel)

    def _atom_terms(self, H, edge_attr, n_edges):
        """Query terms [N, h, rh], sender terms [N, h, 3rh] and edge terms [E, h, rh]."""
        h, rh, crh = self.n_head, self.rh, self.n_channel * self.rbf_h
        att, msg, cmsg = self.att_mlp[0], self.unit_msg_mlp[0], self.unit_msg_coord_mlp[0]
        heads = H.view(H.size(0), h, self.dh)
        qk = self.linear_qk(heads)
        v = self.linear_v(heads)
        query = F.linear(qk[..., 0::2], att.weight[:, :rh], att.bias)
        sender = torch.cat([qk[..., 1::2] @ att.weight[:, rh:2 * rh].T, F.linear(v, msg.weight[:, :rh], msg.bias),
                            F.linear(v, cmsg.weight[:, :rh], cmsg.bias)], -1)
        if self.edge_linear is None:
            return query, sender, H.new_zeros(n_edges, h, rh)
        edge = self.edge_linear(edge_attr).view(n_edges, h, rh) @ att.weight[:, 2 * rh + crh:].T
        return query, sender, edge

    def _kernel_weights(self) -> AttendWeights:
        """The weights of :func:`attend`, assembled from the official-layout parameters."""
        rh, crh, C = self.rh, self.n_channel * self.rbf_h, self.n_channel
        att, msg, cmsg = self.att_mlp, self.unit_msg_mlp, self.unit_msg_coord_mlp
        w_rbf = torch.cat([att[0].weight[:, 2 * rh:2 * rh + crh], msg[0].weight[:, rh:], cmsg[0].weight[:, rh:]])
        w2 = torch.block_diag(att[2].weight, msg[2].weight, cmsg[2].weight)
        b2 = torch.cat([att[2].bias, msg[2].bias, cmsg[2].bias])
        logits = torch.cat([self.unit_att_linear.weight, self.block_att_linear.weight])
        zeros = logits.new_zeros
        w3 = torch.cat([torch.cat([logits, zeros(2, 2 * rh)], 1),
                        torch.cat([zeros(C, 2 * rh), self.unit_msg_coord_linear.weight], 1)])
        b3 = torch.cat([self.unit_att_linear.bias, zeros(1), self.unit_msg_coord_linear.bias])
        node, coord = self.node_mlp, self.coord_mlp
        return AttendWeights(PairWeights(w_rbf, w2, b2, w3, b3), self.block_att_linear.bias,
                             GroupMLP(node[0].weight, node[0].bias, node[2].weight, node[2].bias),
                             GroupMLP(coord[0].weight, coord[0].bias, coord[2].weight, coord[2].bias))

    def forward(self, H: torch.Tensor, Z: torch.Tensor, pairs: AtomPairs,
                edge_attr: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        query, sender, edge = self._atom_terms(H, edge_attr, pairs.edge_pairs.numel())
        x = Z.index_select(0, pairs.pair_atom) - Z.index_select(0, pairs.pair_neighbor)  # [P, C, 3]
        heads = AttentionHeads(self.rbf, self.n_head)
        native.forget_derived([*self.parameters(), *self.buffers()])  # writes through .data since the last pass
        weights = self._kernel_weights()
        if self.chunked and not torch.is_grad_enabled() and _native_ready(x, sender, query, edge, *weights.pair[:4]):
            # inference with the compiled pair stage: chunks read the sending atoms' rows in place
            G, dZ = H.new_zeros(H.shape), torch.zeros_like(Z)
            for c in pairs.chunks:
                (a0, a1), (p0, p1) = c.atoms, c.pairs
                inputs = AttendInputs(x[p0:p1], sender, query[a0:a1], edge.index_select(0, c.edge_ids), c.neighbor)
                G[a0:a1], dZ[a0:a1] = attend(c.index, inputs, weights, heads)
        elif self.chunked:
            # every chunk reads the rows of its distinct sending atoms, each pair through its position among them
            # (the context: index and positions), and its sender gradient comes summed per sending atom
            flat = weights.flat()
            chunks = [Chunk((c.index, c.sender_local),
                            (c.pairs, c.senders, c.atoms, c.edge_ids) + (None,) * len(flat), (c.atoms, c.atoms))
                      for c in pairs.chunks]

            def records(chunk, tensors):
                return chunk[0], AttendInputs(*tensors[:4], chunk[1]), AttendWeights.from_flat(tensors[4:])

            # under autocast the chunks' inputs mix dtypes: recompute them under autograd instead
            hand_written = not torch.is_autocast_enabled(H.device.type)
            G, dZ = chunked_recompute(
                lambda chunk, *tensors: attend(*records(chunk, tensors), heads),
                (x, sender, query, edge, *flat), chunks, (H.shape, Z.shape),
                backward=(lambda chunk, tensors, grads, saved=None: _flat_grads(attend_backward(
                    *records(chunk, tensors), grads, heads, saved=saved))) if hand_written else None,
                forward=(lambda chunk, *tensors: _attend(*records(chunk, tensors), heads)) if hand_written else None)
        else:
            inputs = AttendInputs(x, sender.index_select(0, pairs.pair_neighbor), query, edge)
            G, dZ = attend(pairs.full_index(), inputs, weights, heads)
        return H + self.node_out_linear(G), Z + dZ
