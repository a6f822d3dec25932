"""Neighbour search (radius and kNN) against brute force, batches, chunking, edge cases."""
import pytest
import torch

from geomol.nn.neighbors import knn_graph, knn_search, radius_graph, radius_search


def _brute_radius(query, ref, r, bq, br):
    d = torch.cdist(query.double(), ref.double())
    return ((d < r) & (bq[:, None] == br[None])).nonzero().T


def _clouds(seed, n, graphs=3, scale=5.0):
    gen = torch.Generator().manual_seed(seed)
    pos = torch.randn(n, 3, generator=gen) * scale
    batch = torch.sort(torch.randint(0, graphs, (n,), generator=gen)).values
    return pos, batch


@pytest.mark.parametrize("n,r", [(1, 1.0), (2, 50.0), (60, 0.7), (300, 2.5), (300, 40.0)])
def test_radius_graph_matches_brute_force(n, r):
    pos, batch = _clouds(n, n)
    expected = _brute_radius(pos, pos, r, batch, batch)
    expected = expected[:, expected[0] != expected[1]]
    assert torch.equal(radius_graph(pos, r, batch), expected)
    # tiny chunks give the same answer: chunking bounds memory, never the result
    assert torch.equal(radius_graph(pos, r, batch, max_pairs_per_chunk=300), expected)
    with_loops = radius_graph(pos, r, batch, loop=True)
    assert with_loops.size(1) == expected.size(1) + n


def test_radius_search_bipartite_and_strict_cutoff():
    ref = torch.tensor([[0.0, 0, 0], [8.0, 0, 0], [0, 4.0, 0]])
    query = torch.tensor([[0.0, 0, 0], [100.0, 0, 0]])
    edges = radius_search(query, ref, 8.0)
    assert edges.tolist() == [[0, 0], [0, 2]]  # the pair at exactly 8 Å is excluded (d < r)
    q2, r2 = _clouds(3, 80)[0], _clouds(4, 120)[0]
    bq, br = torch.zeros(80, dtype=torch.long), torch.zeros(120, dtype=torch.long)
    assert torch.equal(radius_search(q2, r2, 3.0), _brute_radius(q2, r2, 3.0, bq, br))


def test_far_apart_coordinates_and_float64():
    pos = torch.cat([torch.randn(50, 3, dtype=torch.float64), torch.randn(50, 3, dtype=torch.float64) + 1e4])
    edges = radius_graph(pos, 1.5)
    brute = _brute_radius(pos, pos, 1.5, torch.zeros(100, dtype=torch.long), torch.zeros(100, dtype=torch.long))
    assert torch.equal(edges, brute[:, brute[0] != brute[1]])


@pytest.mark.parametrize("k", [1, 4, 12])
def test_knn_graph_matches_brute_force(k):
    pos, batch = _clouds(10 + k, 200, graphs=4)
    edges = knn_graph(pos, k, batch)
    d = torch.cdist(pos.double(), pos.double())
    d[batch[:, None] != batch[None]] = float("inf")
    d.fill_diagonal_(float("inf"))
    counts = torch.bincount(edges[0], minlength=200)
    available = (torch.bincount(batch)[batch] - 1).clamp(max=k)
    assert torch.equal(counts, available)  # a graph smaller than k gives all its nodes, nothing else is capped
    for i in range(0, 200, 7):
        js = edges[1][edges[0] == i]
        assert torch.allclose(d[i, js], torch.sort(d[i]).values[: len(js)])  # nearest first


def test_knn_small_graph_and_self():
    pos = torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [3.0, 0, 0]])
    assert knn_graph(pos, 5).tolist() == [[0, 0, 1, 1, 2, 2], [1, 2, 0, 2, 1, 0]]
    assert knn_search(pos, pos, 1).tolist() == [[0, 1, 2], [0, 1, 2]]  # without exclude_self a point finds itself


def test_bad_input():
    with pytest.raises(ValueError):
        radius_graph(torch.zeros(3, 2), 1.0)
    with pytest.raises(ValueError):
        radius_graph(torch.tensor([[0.0, 0, float("nan")]]), 1.0)
    with pytest.raises(ValueError):
        knn_graph(torch.zeros(3, 3), 0)
    assert radius_graph(torch.zeros(0, 3), 1.0).shape == (2, 0)
