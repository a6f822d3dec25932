"""Neighbour search in pure PyTorch: radius and k-nearest-neighbour graphs, batch-aware.

Points are sorted into cubic grid cells (a cell list); each query point only looks at the
27 cells around its own, so the work and memory are O(N·k) instead of O(N²). Queries are
processed in chunks whose candidate-pair count is bounded (``max_pairs_per_chunk``), so a
dense region never allocates an N×N block. No neighbour is ever dropped silently: the radius
search returns every pair within the cutoff, and the kNN search widens its radius until each
query has ``k`` neighbours or has seen every point of its graph.

Conventions: ``edge_index[0]`` is the query / receiving node i, ``edge_index[1]`` the
neighbour j (the EGNN convention: messages j → i are aggregated on i). Edges are sorted by
i, then by j (radius) or by distance (kNN). Coordinates are in Å, distances too.
"""
from __future__ import annotations

import torch

__all__ = ["radius_search", "radius_graph", "knn_search", "knn_graph"]

_NEIGHBOUR_OFFSETS = torch.stack(torch.meshgrid(*[torch.arange(-1, 2)] * 3, indexing="ij"), -1).view(-1, 3)
_MAX_KEY = 2 ** 62


def _batch_or_zeros(batch: torch.Tensor | None, n: int, device) -> torch.Tensor:
    return torch.zeros(n, dtype=torch.long, device=device) if batch is None else batch.long()


class _CellList:
    """Reference points sorted by (graph, cell) key, with the grid that produced the keys."""

    def __init__(self, points: torch.Tensor, batch: torch.Tensor, cell: float, lo: torch.Tensor, hi: torch.Tensor,
                 num_graphs: int):
        # Cells slightly larger than the cutoff, computed in float64: a pair closer than the cutoff
        # in the caller's precision is then never more than one cell apart.
        cell = cell * (1 + 1e-5)
        lo, hi = lo.double(), hi.double()
        span = ((hi - lo) / cell).floor().long() + 1
        volume = int(span.prod()) * num_graphs
        if volume >= _MAX_KEY:  # a coarser grid is still exact, only slower
            cell = cell * (volume / _MAX_KEY) ** (1 / 3) * 1.01
            span = ((hi - lo) / cell).floor().long() + 1
        self.cell, self.lo, self.span = cell, lo, span
        keys = self.keys(self.coords(points), batch)
        self.sorted_keys, self.order = torch.sort(keys)

    def coords(self, points: torch.Tensor) -> torch.Tensor:
        """[n, 3] integer cell coordinates (may fall outside the grid for query points)."""
        return ((points.double() - self.lo) / self.cell).floor().long()

    def keys(self, coords: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        sx, sy, sz = self.span.tolist()
        return ((batch * sx + coords[:, 0]) * sy + coords[:, 1]) * sz + coords[:, 2]

    def ranges(self, query_coords: torch.Tensor, query_batch: torch.Tensor):
        """Per query and neighbouring cell: ``start`` and ``count`` [nq, 27] into the sorted points."""
        near = query_coords.unsqueeze(1) + _NEIGHBOUR_OFFSETS.to(query_coords.device)  # [nq, 27, 3]
        inside = ((near >= 0) & (near < self.span)).all(-1)
        keys = self.keys(near.clamp(min=0).view(-1, 3), query_batch.repeat_interleave(27)).view(-1, 27)
        start = torch.searchsorted(self.sorted_keys, keys, side="left")
        count = torch.searchsorted(self.sorted_keys, keys, side="right") - start
        return start, count * inside


def _candidate_pairs(cells: _CellList, start: torch.Tensor, count: torch.Tensor, first_query: int):
    """Expand cell ranges into (query, reference) index pairs for one chunk of queries."""
    count = count.reshape(-1)
    total = int(count.sum())
    query = torch.arange(start.size(0), device=start.device).repeat_interleave(27)
    query = query.repeat_interleave(count, output_size=total) + first_query
    seg_start = torch.cumsum(count, 0) - count
    within = torch.arange(total, device=start.device) - seg_start.repeat_interleave(count, output_size=total)
    ref = cells.order[start.reshape(-1).repeat_interleave(count, output_size=total) + within]
    return query, ref


def _chunks(count: torch.Tensor, budget: int):
    """Yield (begin, end) query ranges whose candidate count stays near ``budget``."""
    per_query = count.sum(1)
    cumulative = torch.cumsum(per_query, 0)
    begin, n = 0, per_query.numel()
    while begin < n:
        offset = cumulative[begin - 1] if begin > 0 else 0
        end = int(torch.searchsorted(cumulative, offset + budget, side="right"))
        end = min(max(end, begin + 1), n)
        yield begin, end
        begin = end


def _bounds(query: torch.Tensor, ref: torch.Tensor):
    both = torch.cat([query, ref]) if query is not ref else ref
    return both.min(0).values, both.max(0).values


def _radius_pairs(query, ref, r, batch_query, batch_ref, num_graphs, max_pairs_per_chunk):
    lo, hi = _bounds(query, ref)
    cells = _CellList(ref, batch_ref, float(r), lo, hi, num_graphs)
    start, count = cells.ranges(cells.coords(query), batch_query)
    rows, cols, dists = [], [], []
    for begin, end in _chunks(count, max_pairs_per_chunk):
        i, j = _candidate_pairs(cells, start[begin:end], count[begin:end], begin)
        d2 = (query[i] - ref[j]).pow(2).sum(-1)
        keep = d2 < r * r
        rows.append(i[keep]), cols.append(j[keep]), dists.append(d2[keep])
    return torch.cat(rows), torch.cat(cols), torch.cat(dists)


def _check(points: torch.Tensor, name: str):
    if points.dim() != 2 or points.size(1) != 3:
        raise ValueError(f"{name} must have shape [n, 3], got {tuple(points.shape)}")
    if not torch.isfinite(points).all():
        raise ValueError(f"{name} contains NaN or infinite coordinates")


def _prepare(query, ref, batch_query, batch_ref):
    """Validated graph indices (zeros when absent) and the number of graphs; None if a set is empty."""
    _check(query, "query"), _check(ref, "ref")
    if query.size(0) == 0 or ref.size(0) == 0:
        return None
    batch_query = _batch_or_zeros(batch_query, query.size(0), query.device)
    batch_ref = _batch_or_zeros(batch_ref, ref.size(0), ref.device)
    return batch_query, batch_ref, int(max(batch_query.max(), batch_ref.max())) + 1


def _no_edges(device) -> torch.Tensor:
    return torch.empty(2, 0, dtype=torch.long, device=device)


@torch.no_grad()
def radius_search(query: torch.Tensor, ref: torch.Tensor, r: float, batch_query: torch.Tensor | None = None,
                  batch_ref: torch.Tensor | None = None, *, max_pairs_per_chunk: int = 1 << 22) -> torch.Tensor:
    """All pairs (i, j) with ‖query_i − ref_j‖ < r (strict) and the same graph.

    Args:
        query: [nq, 3] query coordinates (Å).
        ref: [nr, 3] reference coordinates (Å).
        r: cutoff radius (Å), > 0.
        batch_query, batch_ref: [nq] / [nr] graph index of each point (``None``: one graph).
        max_pairs_per_chunk: bound on candidate pairs held in memory at once.

    Returns:
        [2, E] long: row 0 query index i, row 1 reference index j, sorted by (i, j).
    """
    if r <= 0:
        raise ValueError(f"radius must be positive, got {r}")
    prepared = _prepare(query, ref, batch_query, batch_ref)
    if prepared is None:
        return _no_edges(query.device)
    batch_query, batch_ref, num_graphs = prepared
    i, j, _ = _radius_pairs(query, ref, r, batch_query, batch_ref, num_graphs, max_pairs_per_chunk)
    order = torch.argsort(i * ref.size(0) + j)
    return torch.stack([i[order], j[order]])


def radius_graph(pos: torch.Tensor, r: float, batch: torch.Tensor | None = None, *, loop: bool = False,
                 max_pairs_per_chunk: int = 1 << 22) -> torch.Tensor:
    """Directed radius graph within each graph of a batch: both (i, j) and (j, i) for ‖x_i − x_j‖ < r.

    Args:
        pos: [N, 3] coordinates (Å); batch: [N] graph index (``None``: one graph).
        r: cutoff (Å). loop: keep self-pairs (i, i).

    Returns:
        [2, E] long edge_index sorted by (i, j).
    """
    edges = radius_search(pos, pos, r, batch, batch, max_pairs_per_chunk=max_pairs_per_chunk)
    return edges if loop else edges[:, edges[0] != edges[1]]


def _nearest_k(i, j, d2, k: int, num_queries: int):
    """Keep the k nearest pairs per query i (ties: lower j first), grouped by i, nearest first."""
    order = torch.argsort(j, stable=True)
    order = order[torch.argsort(d2[order], stable=True)]
    order = order[torch.argsort(i[order], stable=True)]
    i, j = i[order], j[order]
    count = torch.bincount(i, minlength=num_queries)
    rank = torch.arange(i.numel(), device=i.device) - (torch.cumsum(count, 0) - count)[i]
    take = rank < k
    return i[take], j[take]


def _initial_knn_radius(ref: torch.Tensor, batch_ref: torch.Tensor, num_graphs: int, k: int) -> float:
    """A radius that holds about 2k points for a uniform density in each graph's bounding box."""
    counts = torch.bincount(batch_ref, minlength=num_graphs).clamp(min=1).to(ref.dtype)
    lo = torch.full((num_graphs, 3), float("inf"), dtype=ref.dtype, device=ref.device)
    hi = torch.full((num_graphs, 3), float("-inf"), dtype=ref.dtype, device=ref.device)
    index = batch_ref.view(-1, 1).expand(-1, 3)
    lo = lo.scatter_reduce(0, index, ref, "amin")
    hi = hi.scatter_reduce(0, index, ref, "amax")
    extent = (hi - lo).clamp(min=1e-3)
    volume_per_point = extent.prod(-1) / counts
    return float((2 * k * volume_per_point.median() * 3 / (4 * torch.pi)) ** (1 / 3)) + 1e-6


@torch.no_grad()
def knn_search(query: torch.Tensor, ref: torch.Tensor, k: int, batch_query: torch.Tensor | None = None,
               batch_ref: torch.Tensor | None = None, *, exclude_self: bool = False,
               max_pairs_per_chunk: int = 1 << 22) -> torch.Tensor:
    """The k nearest reference points of each query point within its graph.

    A query whose graph holds fewer than k (other) points gets all of them; nothing else
    limits the count. Ties in distance are broken by the lower reference index.

    Args:
        query: [nq, 3], ref: [nr, 3] coordinates (Å); batch_*: graph index per point.
        k: neighbours per query (≥ 1).
        exclude_self: skip pairs with the same index (query and ref are the same set).

    Returns:
        [2, E] long: row 0 query index, row 1 neighbour index; grouped by query, nearest first.
    """
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    prepared = _prepare(query, ref, batch_query, batch_ref)
    if prepared is None:
        return _no_edges(query.device)
    batch_query, batch_ref, num_graphs = prepared
    available = torch.bincount(batch_ref, minlength=num_graphs)[batch_query] - int(exclude_self)
    wanted = available.clamp(max=k)
    lo, hi = _bounds(query, ref)
    diameter = float((hi - lo).norm()) + 1e-6
    r = min(_initial_knn_radius(ref, batch_ref, num_graphs, k), diameter)
    pending = torch.arange(query.size(0), device=query.device)
    rows, cols = [], []
    while pending.numel():
        i, j, d2 = _radius_pairs(query[pending], ref, r, batch_query[pending], batch_ref, num_graphs,
                                 max_pairs_per_chunk)
        i = pending[i]
        if exclude_self:
            keep = i != j
            i, j, d2 = i[keep], j[keep], d2[keep]
        found = torch.bincount(i, minlength=query.size(0))
        done = (found >= wanted)[pending] | (r >= diameter)
        done_mask = torch.zeros(query.size(0), dtype=torch.bool, device=query.device)
        done_mask[pending[done]] = True
        keep = done_mask[i]
        i, j = _nearest_k(i[keep], j[keep], d2[keep], k, query.size(0))
        rows.append(i), cols.append(j)
        pending = pending[~done]
        r = min(2 * r, diameter)
    i, j = torch.cat(rows), torch.cat(cols)
    order = torch.argsort(i, stable=True)
    return torch.stack([i[order], j[order]])


def knn_graph(pos: torch.Tensor, k: int, batch: torch.Tensor | None = None, *, loop: bool = False,
              max_pairs_per_chunk: int = 1 << 22) -> torch.Tensor:
    """Directed kNN graph: each node i receives edges from its k nearest nodes j of the same graph.

    Returns:
        [2, N·k] long edge_index (fewer where a graph has ≤ k nodes), grouped by i, nearest first.
    """
    return knn_search(pos, pos, k, batch, batch, exclude_self=not loop, max_pairs_per_chunk=max_pairs_per_chunk)
