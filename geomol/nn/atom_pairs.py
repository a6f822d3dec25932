"""Sparse atom pairs of GET's bilevel attention (``specs/GET.md`` §4), and their chunk plan.

A block edge e = (I, J) (I receives) expands into one *group* per atom i of block I; the group
(i, e) keeps the ``min(k, n_J)`` atoms j of block J nearest to i (distance summed over
channels). Pairs are listed group by group, nearest first; each pair knows its slot (rank) in
its group, so per-group softmaxes run on a small padded [groups, K] view.

Groups are enumerated over the edges sorted (stably) by receiving block, so everything that
reaches one block (its edges, their groups and pairs) is contiguous. The *chunk plan* cuts
that order at block boundaries into pieces of about ``chunk_pairs`` pairs; a chunk then holds
every edge competing in the block-level softmax of its blocks and can be processed alone
(:mod:`geomol.nn.chunked`).

GET computes the pairs once per forward pass, from the *input* coordinates, and reuses them in
every layer (upstream behaviour).
"""
from __future__ import annotations

from typing import NamedTuple

import torch

from geomol.nn import native
from geomol.nn.ranges import chunk_bounds, expand_ranges, padded_blocks_rows, segment_starts

__all__ = ["AtomPairs", "PairIndex", "PairChunk", "CHUNK_PAIRS", "INFERENCE_CHUNK_PAIRS", "sparse_atom_pairs"]

_DIST_CHUNK = 1 << 20
CHUNK_PAIRS = 4096
"""Pairs per chunk of the plan when training: each chunk's activations, recomputed in the backward pass, stay in
cache."""
INFERENCE_CHUNK_PAIRS = 3 * CHUNK_PAIRS
"""Pairs per chunk without autograd (no backward to keep in cache): fewer chunks, less Python per pair. Forward of
GET on a batch of 16 PLB pockets, one thread, alternated: 4,096 → 1.15 s, 8,192 → 1.08 s, 12,288 → 1.06–1.07 s,
16,384 → 1.12 s, 24,576 → 1.30 s."""


class PairIndex(NamedTuple):
    """Indices of a set of receiving blocks, local to it (all blocks, or one chunk).

    Attributes:
        pair_group, pair_slot, pair_atom: [p] group, rank in group, receiving atom of each pair.
        group_atom, group_edge: [g] receiving atom and block edge of each group.
        edge_block, edge_pairs: [e] receiving block and number of pairs of each edge.
        n_atoms, n_blocks: sizes of the atom and block ranges covered.
        width: K, the largest group size.
        group_start: [g + 1] offset of each group's first pair (groups are consecutive runs of pairs).
    """

    pair_group: torch.Tensor
    pair_slot: torch.Tensor
    pair_atom: torch.Tensor
    group_atom: torch.Tensor
    group_edge: torch.Tensor
    edge_block: torch.Tensor
    edge_pairs: torch.Tensor
    n_atoms: int
    n_blocks: int
    width: int
    group_start: torch.Tensor


class PairChunk(NamedTuple):
    """A run of receiving blocks: local ``index``, its atom and pair row ranges, the original ids
    of its edges [e], the (global) sending atom of each of its pairs [p], and the distinct sending atoms
    ``senders`` [s] (sorted) with each pair's position among them, ``sender_local`` [p]."""

    index: PairIndex
    atoms: tuple[int, int]
    pairs: tuple[int, int]
    edge_ids: torch.Tensor
    neighbor: torch.Tensor
    senders: torch.Tensor
    sender_local: torch.Tensor


class AtomPairs(NamedTuple):
    """Atom pairs of all block edges, grouped by (receiving atom, block edge).

    Attributes:
        group_atom: [M] receiving atom i of each group.
        group_edge: [M] block edge e of each group (index into the caller's edge list).
        pair_group: [P] group of each pair (non-decreasing).
        pair_atom: [P] receiving atom i of each pair.
        pair_neighbor: [P] sending atom j of each pair.
        pair_slot: [P] rank of the pair inside its group, 0 = nearest.
        edge_block: [E] receiving block of each edge.
        edge_pairs: [E] number of pairs of each edge (n_I · min(k, n_J)).
        width: K = min(k, max n_J), the largest group size.
        n_atoms, n_blocks: N and Nb.
        group_start: [M + 1] offset of each group's first pair.
        chunks: the chunk plan.
    """

    group_atom: torch.Tensor
    group_edge: torch.Tensor
    pair_group: torch.Tensor
    pair_atom: torch.Tensor
    pair_neighbor: torch.Tensor
    pair_slot: torch.Tensor
    edge_block: torch.Tensor
    edge_pairs: torch.Tensor
    width: int
    n_atoms: int
    n_blocks: int
    group_start: torch.Tensor
    chunks: list[PairChunk]

    @property
    def num_pairs(self) -> int:
        return self.pair_group.numel()

    @property
    def num_groups(self) -> int:
        return self.group_atom.numel()

    def full_index(self) -> PairIndex:
        """The :class:`PairIndex` of all receiving blocks at once (global indices)."""
        return PairIndex(self.pair_group, self.pair_slot, self.pair_atom, self.group_atom, self.group_edge,
                         self.edge_block, self.edge_pairs, self.n_atoms, self.n_blocks, self.width, self.group_start)


def _nearest_neighbors(Z, block_start, block_len, group_atom, group_block, group_n, width, keep, chunk):
    """[M, keep] for each group, the ``keep`` atoms of its sending block nearest to its atom.

    Sending blocks are gathered whole, as rows of a padded [Nb, width, C, 3] copy (one row per group rather
    than one per candidate atom). A group whose sending block has a single atom (a ligand atom's block, a
    global block: about half of the groups of a complex) takes that atom without a distance being measured.
    Slots past a block's end are never chosen while it has ``keep`` atoms; when it has fewer, the extra
    columns hold indices past the block, which the caller drops. Where the compiled library is available
    (:func:`geomol.nn.native.nearest_atoms`), one loop does it (ties to the lower atom index).
    """
    first = block_start.index_select(0, group_block)
    if keep <= native.MAX_NEAREST and native.native_ready(Z, first):  # one compiled loop, same choice
        return native.nearest_atoms(Z, group_atom, first, group_n, keep)
    n_blocks, C = block_len.numel(), Z.size(1)
    offsets = torch.arange(width, device=Z.device)
    padded = padded_blocks_rows(Z, block_start, block_len, width)[0].view(n_blocks, -1)
    neighbor = first.unsqueeze(1) + torch.arange(keep, device=Z.device)
    measured = (group_n > 1).nonzero(as_tuple=True)[0]
    for begin, end in chunk_bounds(torch.full_like(measured, width), chunk):
        rows = measured[begin:end]
        senders = padded.index_select(0, group_block.index_select(0, rows)).view(-1, width, C, 3)
        dist = torch.linalg.vector_norm(Z.index_select(0, group_atom.index_select(0, rows)).unsqueeze(1) - senders,
                                        dim=-1).sum(-1)  # [g, width]
        valid = offsets < group_n.index_select(0, rows).unsqueeze(1)
        nearest = dist.masked_fill_(~valid, float("inf")).topk(keep, dim=1, largest=False).indices
        neighbor[rows] = first.index_select(0, rows).unsqueeze(1) + nearest
    return neighbor


def _chunk_plan(block_start, recv_sorted, order, group_pos, pairs, chunk_pairs):
    """Cut the receiver-sorted order into chunks of whole receiving blocks (see module doc)."""
    n_blocks = block_start.numel() - 1
    device = recv_sorted.device
    edge_pairs_sorted = pairs.edge_pairs[order]
    per_block = torch.zeros(n_blocks, dtype=torch.long, device=device).index_add_(0, recv_sorted, edge_pairs_sorted)
    groups_per_edge = torch.bincount(group_pos, minlength=order.numel())
    group_ptr = torch.cat([segment_starts(groups_per_edge), groups_per_edge.new_tensor([group_pos.numel()])])
    bounds = chunk_bounds(per_block, chunk_pairs)
    starts = torch.tensor([b for b, _ in bounds] + [n_blocks], device=device)
    edge_at = torch.searchsorted(recv_sorted, starts)
    group_at = group_ptr[edge_at]
    table = torch.stack([starts, block_start[starts], edge_at, group_at, pairs.group_start[group_at]], 1).tolist()
    chunks = []
    for (b0, a0, e0, m0, p0), (b1, a1, e1, m1, p1) in zip(table[:-1], table[1:]):
        if p1 == p0:
            continue
        group_atom = pairs.group_atom[m0:m1] - a0
        index = PairIndex(pairs.pair_group[p0:p1] - m0, pairs.pair_slot[p0:p1], pairs.pair_atom[p0:p1] - a0,
                          group_atom, group_pos[m0:m1] - e0, recv_sorted[e0:e1] - b0, edge_pairs_sorted[e0:e1],
                          a1 - a0, b1 - b0, pairs.width, pairs.group_start[m0:m1 + 1] - p0)
        neighbor = pairs.pair_neighbor[p0:p1]
        senders, sender_local = torch.unique(neighbor, return_inverse=True)
        chunks.append(PairChunk(index, (a0, a1), (p0, p1), order[e0:e1], neighbor, senders, sender_local))
    return chunks


@torch.no_grad()
def sparse_atom_pairs(Z: torch.Tensor, block_id: torch.Tensor, edges: torch.Tensor, k: int | None = 3,
                      n_blocks: int | None = None, chunk_pairs: int = CHUNK_PAIRS) -> AtomPairs:
    """Keep, for every (atom i, block edge (I, J)), the k atoms of J nearest to i.

    Args:
        Z: [N, C, 3] atom coordinates (distance = sum over channels of the Euclidean norm).
        block_id: [N] sorted block of each atom.
        edges: [2, E] block edges, row 0 = receiving block I, row 1 = sending block J.
        k: pairs per group; ``None`` keeps every atom of J (dense).
        n_blocks: number of blocks (default ``block_id.max() + 1``).
        chunk_pairs: target number of pairs per chunk of the plan.
    """
    if edges.size(1) == 0:
        raise ValueError("sparse_atom_pairs: the block graph has no edges")
    Z = Z.unsqueeze(1) if Z.dim() == 2 else Z
    n_blocks = int(block_id.max()) + 1 if n_blocks is None else n_blocks
    block_len = torch.bincount(block_id, minlength=n_blocks)
    block_start = segment_starts(block_len)
    order = torch.argsort(edges[0], stable=True)
    recv, send = edges[0][order], edges[1][order]
    group_pos, group_atom, _ = expand_ranges(block_start[recv], block_len[recv])
    group_n = block_len[send][group_pos]
    width = int(block_len[send].max())
    keep = width if k is None else min(k, width)
    neighbor = _nearest_neighbors(Z, block_start, block_len, group_atom, send[group_pos], group_n, width, keep,
                                  _DIST_CHUNK)
    group_sizes = group_n.clamp(max=keep)
    mask = torch.arange(keep, device=Z.device) < group_sizes.unsqueeze(1)
    pair_group, pair_slot = mask.nonzero(as_tuple=True)
    edge_pairs = block_len[edges[0]] * block_len[edges[1]].clamp(max=keep)
    group_start = torch.cat([segment_starts(group_sizes), group_sizes.new_tensor([pair_group.numel()])])
    pairs = AtomPairs(group_atom, order[group_pos], pair_group, group_atom[pair_group], neighbor[mask], pair_slot,
                      edges[0], edge_pairs, keep, Z.size(0), n_blocks, group_start, [])
    starts = torch.cat([block_start, block_start.new_tensor([Z.size(0)])])
    return pairs._replace(chunks=_chunk_plan(starts, recv, order, group_pos, pairs, chunk_pairs))
