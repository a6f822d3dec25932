"""GETAffinity on real PLB pockets: E(3) symmetry, permutations, batching, edge cases, training."""
import numpy as np
import pytest
import torch
from torch_geometric.data import Batch

from geomol.data import Block, BlockGraph, complex_from_structure, read_structure
from geomol.models.get import GETAffinity, GETModel, GETPairClassifier
from geomol.testing import apply_e3, assert_equivariant
from tests.conftest import shared_path
from tests.models.get_reference import one_thread  # noqa: F401 (autouse fixture)

SMALL = dict(d_hidden=32, d_radial=16, n_rbf=16, d_edge=16, n_layers=2, n_head=4)


def _plb(target, ligands, cutoff=10.0):
    plb = shared_path("plb", target)
    receptor = read_structure(plb / "01_protein/crd/protein.pdb")
    return [complex_from_structure(receptor, plb / "02_ligands/ligands.sdf", ligand_index=i, pocket_cutoff=cutoff,
                                   y=5.0 + 0.5 * i) for i in ligands]


@pytest.fixture(scope="module")
def pockets():
    return _plb("cdk2", [0]) + _plb("tnks2", [1])


def _with_coords(graph, X):
    g = graph.clone()
    g.X = X
    return g


def test_e3_equivariance_on_real_pockets(pockets):
    torch.manual_seed(0)
    model = GETAffinity().double().eval()
    for graph, grad in zip(pockets, (False, True)):  # chunked inference path, then plain autograd path
        graph = _with_coords(graph, graph.X.double())

        def fn(coords):
            with torch.set_grad_enabled(grad):
                out = model.embed(_with_coords(graph, coords))
                return [out.X], [out.H, out.block_repr, out.graph_repr, -model.energy(out)]

        assert_equivariant(fn, graph.X, atol=1e-8, trials=2)


def _permuted(graph, seed):
    """The same complex with atoms shuffled inside blocks and blocks shuffled inside segments."""
    rng = np.random.default_rng(seed)
    order = []
    for seg in graph.segment.unique().tolist():
        blocks = (graph.segment == seg).nonzero().flatten().numpy()
        order += rng.permutation(blocks).tolist()
    order = torch.tensor(order)
    start = torch.cumsum(graph.block_len, 0) - graph.block_len
    atoms = torch.cat([start[b] + torch.from_numpy(rng.permutation(int(graph.block_len[b]))) for b in order])
    block_len = graph.block_len[order]
    return BlockGraph(X=graph.X[atoms], A=graph.A[atoms], atom_pos=graph.atom_pos[atoms],
                      block_id=torch.repeat_interleave(torch.arange(len(order)), block_len), B=graph.B[order],
                      block_len=block_len, segment=graph.segment[order], y=graph.y)


def test_permutations_batching_and_shape(pockets):
    torch.manual_seed(1)
    model = GETAffinity().double().eval()
    graphs = [_with_coords(g, g.X.double()) for g in pockets]
    with torch.no_grad():
        single = torch.cat([model(g) for g in graphs])
        batched = model(graphs)
        permuted = torch.cat([model(_permuted(g, seed)) for seed, g in enumerate(graphs)])
        from_batch = model(Batch.from_data_list(graphs[::-1]))
    assert batched.shape == (2,) and batched.dtype == torch.float64
    assert torch.allclose(batched, single, rtol=0, atol=1e-10)
    assert torch.allclose(from_batch, single.flip(0), rtol=0, atol=1e-10)
    assert torch.allclose(permuted, single, rtol=0, atol=1e-9)


def _degenerate_graphs():
    rng = np.random.default_rng(0)
    residue = lambda xyz: Block("A", ("N", "C", "C", "O", "C"), ("", "A", "", "", "B"), xyz)
    atom = lambda xyz, e="C": Block(e.lower(), (e,), ("sm",), np.asarray(xyz, float).reshape(1, 3))
    base = rng.normal(scale=2.0, size=(5, 3))
    return [
        BlockGraph.from_blocks([[residue(base)], [atom([0.5, 0.0, 0.0])]], y=5.0),  # one block per segment
        BlockGraph.from_blocks([[residue(np.zeros((5, 3)))], [atom([0, 0, 0]), atom([0, 0, 0], "N")]], y=4.0),  # all coincident
        BlockGraph.from_blocks([[atom([1.0, 2.0, 3.0], "Zn")]], y=3.0),  # a single atom
        BlockGraph.from_blocks([[residue(base), residue(base + 4.0)], [atom(rng.normal(size=3)) for _ in range(3)]], y=6.0),
    ]


@pytest.mark.parametrize("chunked", [None, True])
def test_degenerate_inputs_stay_finite_with_finite_gradients(chunked):
    torch.manual_seed(2)
    model = GETAffinity(**SMALL).train()
    for layer in model.encoder.layers:
        layer.attention.chunked = chunked
    pk = model(_degenerate_graphs())
    assert pk.shape == (4,) and torch.isfinite(pk).all()
    GETAffinity.loss(pk, torch.tensor([5.0, 4.0, 3.0, 6.0])).backward()
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(torch.isfinite(g).all() for g in grads)
    assert model.encoder.layers[-1].ffn.mlp_z[0].weight.grad is None  # frozen, as upstream


def test_embeddings_and_pair_classifier(pockets):
    torch.manual_seed(3)
    out = GETModel(**SMALL).eval().embed(pockets)
    n_blocks = sum(g.num_blocks for g in pockets)
    assert out.block_repr.shape == (n_blocks, 32) and out.graph_repr.shape == (2, 32)
    assert torch.allclose(out.graph_repr.norm(dim=1), torch.ones(2))
    assert out.X.shape == (sum(g.num_atoms for g in pockets), 3)
    logits = GETPairClassifier(**{**SMALL, "d_hidden": 32}).eval()(pockets)
    assert logits.shape == (1, 2)


def test_training_lowers_the_loss():
    torch.manual_seed(0)
    graphs = _plb("cdk2", range(4), cutoff=6.0) + _plb("eg5", range(4), cutoff=6.0)
    batch = Batch.from_data_list(graphs)
    target = torch.tensor([7.5, 6.0, 5.0, 8.0, 4.5, 6.5, 7.0, 5.5])
    model = GETAffinity(**{**SMALL, "n_layers": 1}).train()
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        optimiser.zero_grad()
        loss = GETAffinity.loss(model(batch), target)
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    assert np.mean(losses[-5:]) < 0.5 * np.mean(losses[:5])
