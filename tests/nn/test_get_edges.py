"""GET block edges and sparse atom pairs against plain dense re-computations."""
import pytest
import torch

from geomol.data import read_structure, complex_from_structure
from geomol.nn.atom_pairs import sparse_atom_pairs
from geomol.nn.block_edges import build_block_edges, global_edges
from tests.conftest import shared_path
from tests.models.get_reference import one_thread  # noqa: F401 (autouse fixture)


def _synthetic(seed, n_graphs=3, segments=(0, 1, 2), max_atoms=9):
    """Random multi-graph layout: blocks of 1–``max_atoms`` atoms, a global block starting each segment."""
    gen = torch.Generator().manual_seed(seed)
    block_len, block_batch, segment, is_global = [], [], [], []
    for g in range(n_graphs):
        for s in segments:
            n = int(torch.randint(1, 12, (1,), generator=gen))
            block_len += [1] + torch.randint(1, max_atoms + 1, (n,), generator=gen).tolist()
            block_batch += [g] * (n + 1)
            segment += [s] * (n + 1)
            is_global += [True] + [False] * n
    block_len = torch.tensor(block_len)
    block_id = torch.repeat_interleave(torch.arange(len(block_len)), block_len)
    centres = 4 * torch.randn(len(block_len), 3, generator=gen)
    Z = (centres[block_id] + torch.randn(len(block_id), 3, generator=gen)).unsqueeze(1).double()
    return Z, block_id, torch.tensor(block_batch), torch.tensor(segment), torch.tensor(is_global)


def _dense_knn(Z, block_id, block_batch, segment, is_global, k):
    """(type, receiver, sender) of the intra/inter KNN, by brute force."""
    n_blocks = block_batch.numel()
    dist = torch.cdist(Z[:, 0], Z[:, 0])  # [N, N] atom distances
    per_atom = torch.full((len(block_id), n_blocks), float("inf"), dtype=Z.dtype)
    per_atom = per_atom.scatter_reduce(1, block_id.expand_as(dist), dist, "amin")
    block_dist = torch.full((n_blocks, n_blocks), float("inf"), dtype=Z.dtype)
    block_dist = block_dist.scatter_reduce(0, block_id[:, None].expand_as(per_atom), per_atom, "amin").tolist()
    expected = set()
    for I in range(n_blocks):
        if is_global[I]:
            continue
        cands = {0: [], 1: []}
        for J in range(n_blocks):
            if not is_global[J] and block_batch[J] == block_batch[I]:
                cands[int(segment[I] != segment[J])].append((block_dist[I][J], J))
        for etype, items in cands.items():
            expected |= {(etype, I, J) for _, J in sorted(items)[:k]}
    return expected


def _as_set(edges, etype):
    return {(int(t), int(i), int(j)) for t, (i, j) in zip(etype, edges.T)}


@pytest.mark.parametrize("seed,k,chunk,max_atoms", [(0, 9, 1 << 20, 9), (1, 3, 64, 9), (2, 5, 7, 9), (5, 4, 4096, 45)])
def test_knn_edges_match_dense(seed, k, chunk, max_atoms):
    Z, block_id, block_batch, segment, is_global = _synthetic(seed, n_graphs=2, max_atoms=max_atoms)
    edges, etype = build_block_edges(Z, block_id, block_batch, segment, is_global, k=k, chunk=chunk)
    knn = etype < 2
    assert _as_set(edges[:, knn], etype[knn]) == _dense_knn(Z, block_id, block_batch, segment, is_global, k)
    assert torch.all(etype[1:] >= etype[:-1])  # types in order 0, 1, 2, 3
    for I in (~is_global).nonzero().flatten().tolist():  # each block is its own nearest intra neighbour
        assert (0, I, I) in _as_set(edges, etype)


def test_global_edges_structure():
    Z, block_id, block_batch, segment, is_global = _synthetic(3, n_graphs=2, segments=(0, 1))
    edges, etype = global_edges(block_batch, segment, is_global)
    got = _as_set(edges, etype)
    expected = set()
    glob = is_global.nonzero().flatten().tolist()
    for G in glob:
        same = ((segment == segment[G]) & (block_batch == block_batch[G])).nonzero().flatten().tolist()
        expected |= {(2, G, b) for b in same} | {(2, b, G) for b in same}
        expected |= {(3, G, H) for H in glob if block_batch[H] == block_batch[G]}
    assert got == expected and len(got) == edges.size(1)  # no duplicates within a type
    loops = [(int(i), int(t)) for t, (i, j) in zip(etype, edges.T) if i == j]
    assert sorted(loops) == sorted([(G, 2) for G in glob] + [(G, 3) for G in glob])


def test_knn_edges_on_real_pocket():
    plb = shared_path("plb", "cdk2")
    graph = complex_from_structure(read_structure(plb / "01_protein/crd/protein.pdb"), plb / "02_ligands/ligands.sdf")
    Z = graph.X.double().unsqueeze(1) / 10
    args = (Z, graph.block_id, graph.block_batch, graph.segment, graph.is_global)
    edges, etype = build_block_edges(*args, k=9, chunk=4096)
    knn = etype < 2
    assert _as_set(edges[:, knn], etype[knn]) == _dense_knn(*args, 9)


def _dense_pairs(Z, block_id, edges, k):
    """(edge, atom, neighbour) of every sparse pair, by brute force (k=None: all atoms of the sending block)."""
    expected = set()
    for e, (I, J) in enumerate(edges.T.tolist()):
        atoms_j = (block_id == J).nonzero().flatten()
        for i in (block_id == I).nonzero().flatten().tolist():
            d = torch.linalg.vector_norm(Z[i] - Z[atoms_j], dim=-1).sum(-1)
            expected |= {(e, i, int(j)) for j in atoms_j[torch.argsort(d)[:k]]}
    return expected


def _pair_set(pairs):
    return {(int(pairs.group_edge[g]), int(a), int(j))
            for g, a, j in zip(pairs.pair_group, pairs.pair_atom, pairs.pair_neighbor)}


def test_sparse_pairs_match_dense_and_chunk_plan_is_consistent():
    Z, block_id, block_batch, segment, is_global = _synthetic(4)
    assert {1, 2} <= set(torch.bincount(block_id).tolist())  # single-atom blocks, and blocks with fewer atoms than k
    edges, _ = build_block_edges(Z, block_id, block_batch, segment, is_global, k=4)
    pairs = sparse_atom_pairs(Z, block_id, edges, k=3, chunk_pairs=50)
    expected = _dense_pairs(Z, block_id, edges, 3)
    got = _pair_set(pairs)
    assert got == expected and pairs.num_pairs == len(expected)
    assert int(pairs.edge_pairs.sum()) == pairs.num_pairs
    # chunks tile the pairs and own whole receiving blocks (all edges into a block in one chunk)
    assert len(pairs.chunks) > 3
    covered = [c.pairs for c in pairs.chunks]
    assert covered[0][0] == 0 and covered[-1][1] == pairs.num_pairs
    assert all(a[1] == b[0] for a, b in zip(covered[:-1], covered[1:]))
    block_starts = set((torch.cumsum(torch.bincount(block_id), 0) - torch.bincount(block_id)).tolist()) | {len(block_id)}
    owner = torch.full((edges.size(1),), -1)
    for n, chunk in enumerate(pairs.chunks):
        owner[chunk.edge_ids] = n
        assert torch.equal(chunk.neighbor, pairs.pair_neighbor[chunk.pairs[0]:chunk.pairs[1]])
        # each chunk's distinct sending atoms, sorted, and every pair's position among them
        assert torch.equal(chunk.senders, chunk.neighbor.unique()) and torch.equal(chunk.senders[chunk.sender_local],
                                                                                   chunk.neighbor)
        assert set(chunk.atoms) <= block_starts
    receivers = edges[0]
    for b in receivers.unique():
        assert owner[receivers == b].unique().numel() == 1


@pytest.mark.parametrize("k,single_atoms", [(None, False), (3, True)])
def test_sparse_pairs_with_two_channels(k, single_atoms):
    """Multi-channel coordinates (distance summed over channels): dense pairs (k=None), and a graph whose blocks
    all have one atom (no distance is measured)."""
    Z, block_id, block_batch, segment, is_global = _synthetic(6, max_atoms=1 if single_atoms else 9)
    Z = torch.cat([Z, Z.flip(0) + 1.0], 1)  # [N, 2, 3]
    edges, _ = build_block_edges(Z, block_id, block_batch, segment, is_global, k=4)
    pairs = sparse_atom_pairs(Z, block_id, edges, k=k, chunk_pairs=40)
    assert _pair_set(pairs) == _dense_pairs(Z, block_id, edges, k) and int(pairs.edge_pairs.sum()) == pairs.num_pairs
