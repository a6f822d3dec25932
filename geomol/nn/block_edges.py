"""Block-level edges of GET: KNN by minimum atom–atom distance, plus global edges.

Edge types (rows of the edge embedding, ``specs/GET.md`` §11.4):

* 0 intra — non-global blocks of the same segment: each receiving block keeps its
  ``min(k, candidates)`` nearest blocks, itself included (distance 0);
* 1 inter — non-global blocks of different segments, same KNN rule;
* 2 global–normal — every pair of one segment with at least one global end, both
  directions, the global self loop included;
* 3 global–global — every pair of global blocks of one graph, self loops included (so a
  global self loop appears twice, as type 2 and as type 3, like upstream).

Edges are directed ``(receiver, sender)``: row 0 receives messages from row 1.

Cost. The block distance is the minimum over atom pairs. Instead of all block pairs × all
atom pairs, a cheap bound prunes candidates first: with block centroids c and radii r
(largest atom–centroid distance), ``max(|c_I − c_J| − r_I − r_J, 0)`` is a lower bound and the
distance between two representative atoms an upper bound. For each receiving block and edge
type, the k candidates with the smallest upper bounds get exact distances; the largest of
those bounds the k-th nearest distance, and only the few other pairs whose lower bound is below
it are measured too. Exact distances are therefore computed for O(k) block pairs per block
(linear in the number of edges). The bound pass evaluates a few flops per block pair of a
graph, in chunks of receiving blocks (memory ∝ chunk size, never N_block × N_block at once);
it is the only part that grows with the square of a graph's size, and stays a small share of
the cost even for 3,200-block complexes.
"""
from __future__ import annotations

import torch

from geomol.nn import native
from geomol.nn.ranges import chunk_bounds, expand_ranges, padded_blocks_rows, segment_starts
from geomol.nn.scatter import scatter_max, scatter_mean

__all__ = ["EDGE_INTRA", "EDGE_INTER", "EDGE_GLOBAL_NORMAL", "EDGE_GLOBAL_GLOBAL", "NUM_EDGE_TYPES",
           "block_knn_edges", "global_edges", "build_block_edges", "block_min_distance", "padded_blocks"]

EDGE_INTRA, EDGE_INTER, EDGE_GLOBAL_NORMAL, EDGE_GLOBAL_GLOBAL = 0, 1, 2, 3
NUM_EDGE_TYPES = 4
_CHUNK = 1 << 20  # entries of a temporary pair matrix (~4 MB of float32 per tensor)
_PAD_WIDTH = 32  # blocks up to this many atoms get padded distance matrices
_SLACK = 1e-5  # relative slack on the pruning test, so rounding never drops a true neighbour


def _as_channels(Z: torch.Tensor) -> torch.Tensor:
    return Z.unsqueeze(1) if Z.dim() == 2 else Z


def _block_geometry(Z: torch.Tensor, block_id: torch.Tensor, n_blocks: int):
    """Per block: centroid [Nb, C, 3], radius [Nb, C] and a representative atom index [Nb]."""
    centroid = scatter_mean(Z, block_id, n_blocks)
    spread = torch.linalg.vector_norm(Z - centroid[block_id], dim=-1)  # [N, C]
    radius = scatter_max(spread, block_id, n_blocks)
    score = spread.sum(-1)
    best = torch.full((n_blocks,), float("inf"), dtype=Z.dtype, device=Z.device)
    best = best.scatter_reduce(0, block_id, score, reduce="amin")
    atom = torch.arange(Z.size(0), device=Z.device)
    candidate = torch.where(score == best[block_id], atom, Z.size(0))
    rep = torch.full((n_blocks,), Z.size(0), dtype=torch.long, device=Z.device)
    rep = rep.scatter_reduce(0, block_id, candidate, reduce="amin")
    return centroid, radius, rep


def _flat_min_distance(Z, block_start, block_len, rows, cols, chunk):
    """Minimum distance by enumerating every atom pair (any block sizes)."""
    out = torch.full((rows.numel(),), float("inf"), dtype=Z.dtype, device=Z.device)
    counts = block_len[rows] * block_len[cols]
    for begin, end in chunk_bounds(counts, chunk):
        r, c = rows[begin:end], cols[begin:end]
        pair, _, local = expand_ranges(torch.zeros_like(r), counts[begin:end])
        n_col = block_len[c][pair]
        a = block_start[r][pair] + torch.div(local, n_col, rounding_mode="floor")
        b = block_start[c][pair] + local % n_col
        dist = torch.linalg.vector_norm(Z.index_select(0, a) - Z.index_select(0, b), dim=-1).amin(-1)
        out[begin:end] = out[begin:end].scatter_reduce(0, pair, dist, reduce="amin")
    return out


def padded_blocks(Z: torch.Tensor, block_start: torch.Tensor, block_len: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Receiving and sending copies [Nb, C, W, 3] of every block's atoms, padded to W = the largest block
    of at most ``_PAD_WIDTH`` atoms (larger blocks keep their first W atoms; they are never read from here).

    Padding atoms sit at +1e6 on the receiving side and −1e6 on the sending side, so they never win a
    minimum distance (real coordinates are far smaller). Built once per graph and shared by every
    :func:`block_min_distance` call on it.
    """
    Z = _as_channels(Z)
    n_blocks = block_len.numel()
    small = block_len[block_len <= _PAD_WIDTH]
    width = int(small.max()) if small.numel() else 1
    padded, valid = padded_blocks_rows(Z, block_start, block_len, width)  # [Nb, W, C, 3]
    padded = padded.transpose(1, 2)  # [Nb, C, W, 3]
    hidden = ~valid.view(n_blocks, 1, width, 1)
    return padded.masked_fill(hidden, 1e6), padded.masked_fill(hidden, -1e6)


def _padded_min_distance(padded, rows, cols, width, chunk):
    """Minimum distance via [pairs, width, width] distance matrices of padded blocks (:func:`padded_blocks`),
    cut to the ``width`` of the largest block among ``rows`` and ``cols``."""
    receivers, senders = (t[:, :, :width] for t in padded)
    C = receivers.size(1)
    out = torch.empty(rows.numel(), dtype=receivers.dtype, device=receivers.device)
    for begin, end in chunk_bounds(torch.full_like(rows, width * width * C), chunk):
        a = receivers[rows[begin:end]].flatten(0, 1)
        b = senders[cols[begin:end]].flatten(0, 1)
        dist = torch.cdist(a, b, compute_mode="donot_use_mm_for_euclid_dist")  # [pairs·C, width, width]
        out[begin:end] = dist.view(end - begin, -1).amin(1)
    return out


def block_min_distance(Z, block_start, block_len, rows, cols, chunk: int = _CHUNK, padded=None) -> torch.Tensor:
    """[P] minimum atom–atom distance between blocks ``rows[p]`` and ``cols[p]``.

    The atom distance is the minimum over channels of the per-channel Euclidean distance.
    Where the compiled library is available (:mod:`geomol.nn.native`) one loop measures every atom pair of
    every block pair (values equal to float rounding). Otherwise pairs of blocks with at most ``_PAD_WIDTH``
    atoms use padded distance matrices (fast, no per-atom-pair index arithmetic); pairs involving a larger
    block enumerate their atom pairs.
    Args: Z [N, C, 3]; block_start, block_len [Nb]; rows, cols [P] block indices; padded: the
    :func:`padded_blocks` of these blocks when the caller has them (built here otherwise).
    """
    Z = _as_channels(Z)
    if native.native_ready(Z, block_start, rows) and not (Z.requires_grad and torch.is_grad_enabled()):
        return native.block_min_distance(Z, block_start, block_len, rows, cols)  # one compiled loop, same values
    small = (block_len[rows] <= _PAD_WIDTH) & (block_len[cols] <= _PAD_WIDTH)
    out = torch.empty(rows.numel(), dtype=Z.dtype, device=Z.device)
    if small.any():
        width = int(torch.maximum(block_len[rows[small]], block_len[cols[small]]).max())
        padded = padded_blocks(Z, block_start, block_len) if padded is None else padded
        out[small] = _padded_min_distance(padded, rows[small], cols[small], width, chunk)
    if not small.all():
        out[~small] = _flat_min_distance(Z, block_start, block_len, rows[~small], cols[~small], chunk)
    return out


def _prune_type(Z, blocks, rows, cols, mask, lower, upper, k, chunk):
    """Candidates of one edge type for receivers ``rows`` [R] among ``cols`` [W], with exact distances.

    Two passes: the k candidates with the smallest upper bounds get exact distances first; their
    largest is a tight bound on the k-th nearest distance, so only pairs whose lower bound is
    below it are measured in the second pass. ``blocks``: (block_start, block_len, :func:`padded_blocks`).
    Returns (rows, cols, dist) of both passes.
    """
    bound = upper.masked_fill(~mask, float("inf"))
    first = bound.topk(min(k, bound.size(1)), dim=1, largest=False).indices
    real = torch.isfinite(bound.gather(1, first))
    first_rows = rows.unsqueeze(1).expand_as(first)[real]
    first_cols = cols[first][real]
    exact = torch.full(first.shape, float("inf"), dtype=Z.dtype, device=Z.device)
    start, length, padded = blocks
    exact[real] = block_min_distance(Z, start, length, first_rows, first_cols, chunk, padded)
    kth = exact.amax(1, keepdim=True)  # inf when a receiver has fewer than k candidates
    keep = mask & (lower <= kth * (1 + _SLACK) + _SLACK)
    keep.scatter_(1, first, False)
    i, j = keep.nonzero(as_tuple=True)
    more_rows, more_cols = rows[i], cols[j]
    more = block_min_distance(Z, start, length, more_rows, more_cols, chunk, padded)
    return torch.cat([first_rows, more_rows]), torch.cat([first_cols, more_cols]), torch.cat([exact[real], more])


def _channel_cdist(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """[R, W, C] Euclidean distances between a [R, C, 3] and b [W, C, 3], channel by channel."""
    dist = torch.cdist(a.transpose(0, 1), b.transpose(0, 1), compute_mode="donot_use_mm_for_euclid_dist")
    return dist.permute(1, 2, 0)


def _knn_candidates(Z, blocks, block_batch, segment, is_global, geometry, k, chunk):
    """(rows, cols, type, dist) of every block pair that can be among the k nearest (types 0, 1).

    Graph by graph, receivers in chunks: the candidate senders of a graph are one contiguous
    range of blocks, so the bounds are plain distance matrices of the chunk against that range.
    """
    centroid, radius, rep = geometry
    rep_xyz = Z[rep]
    sizes = torch.bincount(block_batch).tolist()
    found, g_start = [], 0
    for size in sizes:
        cols = torch.arange(g_start, g_start + size, device=Z.device)
        for r0 in range(g_start, g_start + size, max(1, chunk // size)):
            rows = torch.arange(r0, min(r0 + max(1, chunk // size), g_start + size), device=Z.device)
            gap = _channel_cdist(centroid[rows], centroid[cols])
            lower = (gap - radius[rows].unsqueeze(1) - radius[cols]).amin(-1).clamp_min(0)
            upper = _channel_cdist(rep_xyz[rows], rep_xyz[cols]).amin(-1)
            normal = ~is_global[rows].unsqueeze(1) & ~is_global[cols]
            same = segment[rows].unsqueeze(1) == segment[cols]
            for etype, mask in ((EDGE_INTRA, normal & same), (EDGE_INTER, normal & ~same)):
                r, c, d = _prune_type(Z, blocks, rows, cols, mask, lower, upper, k, chunk)
                found.append((r, c, torch.full_like(r, etype), d))
        g_start += size
    return (torch.cat(parts) for parts in zip(*found))


def block_knn_edges(Z: torch.Tensor, block_id: torch.Tensor, block_batch: torch.Tensor, segment: torch.Tensor,
                    is_global: torch.Tensor, k: int = 9, chunk: int = _CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """Intra- and inter-segment KNN edges between non-global blocks (types 0 and 1).

    Args:
        Z: [N, C, 3] (or [N, 3]) atom coordinates.
        block_id: [N] sorted block of each atom; every block owns ≥ 1 atom.
        block_batch: [Nb] sorted graph of each block.
        segment: [Nb] segment of each block.
        is_global: [Nb] bool, global blocks (they get no KNN edges).
        k: neighbours per receiving block and type.
        chunk: size bound of the temporary pair matrices.

    Returns:
        ``edges`` [2, E] (receiver, sender) and ``edge_type`` [E] in {0, 1}, ordered by type,
        then receiver, then increasing distance.
    """
    Z = _as_channels(Z)
    n_blocks = block_batch.numel()
    block_len = torch.bincount(block_id, minlength=n_blocks)
    block_start = segment_starts(block_len)
    blocks = (block_start, block_len, padded_blocks(Z, block_start, block_len))
    geometry = _block_geometry(Z, block_id, n_blocks)
    rows, cols, etype, dist = _knn_candidates(Z, blocks, block_batch, segment, is_global, geometry, k, chunk)
    return _select_nearest(rows, cols, etype, dist, n_blocks, k)


def _select_nearest(rows, cols, etype, dist, n_blocks, k):
    """Keep the k nearest candidates per (type, receiver); order by type, receiver, distance."""
    order = torch.argsort(dist, stable=True)
    key = etype[order] * n_blocks + rows[order]
    order = order[torch.argsort(key, stable=True)]
    key = etype[order] * n_blocks + rows[order]
    _, counts = torch.unique_consecutive(key, return_counts=True)
    rank = torch.arange(key.numel(), device=key.device) - torch.repeat_interleave(segment_starts(counts), counts)
    order = order[rank < k]
    return torch.stack([rows[order], cols[order]]), etype[order]


def global_edges(block_batch: torch.Tensor, segment: torch.Tensor, is_global: torch.Tensor):
    """Edges of global blocks (types 2 and 3), each type in row-major (receiver, sender) order.

    Type 2 joins every global block with every block of its segment (both directions, its own
    self loop once); type 3 joins every pair of global blocks of one graph (self loops included).

    Args: block_batch, segment [Nb] (blocks sorted by graph, then segment); is_global [Nb] bool.
    Returns: ``edges`` [2, E] and ``edge_type`` [E] in {2, 3}.
    """
    n_blocks = block_batch.numel()
    device = block_batch.device
    change = torch.ones(n_blocks, dtype=torch.bool, device=device)
    change[1:] = (block_batch[1:] != block_batch[:-1]) | (segment[1:] != segment[:-1])
    seg_group = torch.cumsum(change.long(), 0) - 1
    group_size = torch.bincount(seg_group)
    group_start = segment_starts(group_size)

    glob = is_global.nonzero(as_tuple=True)[0]
    owner, member, _ = expand_ranges(group_start[seg_group[glob]], group_size[seg_group[glob]])
    out_row, out_col = glob[owner], member  # global -> every block of its segment
    back = ~is_global[member]  # normal -> global (global pairs come from their own rows)
    rows2 = torch.cat([out_row, member[back]])
    cols2 = torch.cat([out_col, out_row[back]])
    order = torch.argsort(rows2 * n_blocks + cols2)
    rows2, cols2 = rows2[order], cols2[order]

    per_graph = torch.bincount(block_batch[glob], minlength=int(block_batch.max()) + 1 if n_blocks else 0)
    first = segment_starts(per_graph)
    g = block_batch[glob]
    owner, member, _ = expand_ranges(first[g], per_graph[g])
    rows3, cols3 = glob[owner], glob[member]

    edges = torch.stack([torch.cat([rows2, rows3]), torch.cat([cols2, cols3])])
    etype = torch.cat([torch.full_like(rows2, EDGE_GLOBAL_NORMAL), torch.full_like(rows3, EDGE_GLOBAL_GLOBAL)])
    return edges, etype


@torch.no_grad()
def build_block_edges(Z: torch.Tensor, block_id: torch.Tensor, block_batch: torch.Tensor, segment: torch.Tensor,
                      is_global: torch.Tensor, k: int = 9, chunk: int = _CHUNK) -> tuple[torch.Tensor, torch.Tensor]:
    """All GET block edges: ``[intra KNN, inter KNN, global–normal, global–global]``.

    Shapes as in :func:`block_knn_edges`; returns ``edges`` [2, E] (row 0 receives) and
    ``edge_type`` [E] in 0..3. Computed without gradients.
    """
    knn, knn_type = block_knn_edges(Z, block_id, block_batch, segment, is_global, k, chunk)
    glob, glob_type = global_edges(block_batch, segment, is_global)
    return torch.cat([knn, glob], 1), torch.cat([knn_type, glob_type])
