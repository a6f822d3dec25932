"""GET (affinity, pair classifier, encoder outputs) on real PLB pockets: the model contract, degenerate inputs, shapes."""
import numpy as np
import pytest
import torch

from geomol.data import Block, BlockGraph, complex_from_structure, read_structure
from geomol.models.get import GETAffinity, GETModel, GETPairClassifier
from geomol.testing import INVARIANT, POSITION
from tests.conftest import shared_path
from tests.models.get_reference import one_thread  # noqa: F401 (autouse fixture)
from geomol.testing.affinity_members import permuted_complex as _permuted
from geomol.testing.model_contract import ModelContract

TINY = dict(hidden=16, radial_dim=8, num_rbf=8, edge_embedding_dim=8, num_layers=2, num_heads=2)


def _plb(target, ligands, cutoff=6.0):
    plb = shared_path("plb", target)
    receptor = read_structure(plb / "01_protein/crd/protein.pdb")
    return [complex_from_structure(receptor, plb / "02_ligands/ligands.sdf", ligand_index=i, pocket_cutoff=cutoff,
                                   y=5.0 + 0.5 * i) for i in ligands]


def _double(graph):
    g = graph.clone()
    g.X = g.X.double()
    return g


class GETContract(ModelContract):
    """Shared pieces of the GET models: BlockGraphs whose geometry is the atom coordinates X."""

    model_class = GETAffinity

    def make_model(self, seed):
        torch.manual_seed(seed)
        return self.model_class(**TINY).double().eval()

    def geometry(self, graph):
        return {"X": (graph.X, POSITION)}

    def with_geometry(self, graph, X):
        g = graph.clone()
        g.X = X
        return g


class TestGETAffinity(GETContract):
    outputs = {"pK": INVARIANT, "X": POSITION, "H": INVARIANT, "block_repr": INVARIANT, "graph_repr": INVARIANT}
    train_steps, lr, loss_drop, train_dtype = 6, 1e-2, 0.5, torch.float32

    def make_graphs(self):
        return [_double(g) for g in _plb("cdk2", [0]) + _plb("tnks2", [1])]

    def training_graphs(self):
        return _plb("cdk2", [0], cutoff=4.0) + _plb("eg5", [1], cutoff=4.0)

    def run(self, model, graphs):
        out = model.embed(graphs)
        return {"pK": -model.energy(out), "X": out.X, "H": out.H, "block_repr": out.block_repr,
                "graph_repr": out.graph_repr}

    def permuted(self, graph, generator):
        moved, index = _permuted(graph, generator)
        return moved, {"pK": None, "X": index["atoms"], "H": index["atoms"], "block_repr": index["blocks"],
                       "graph_repr": None}

    def loss(self, model, graphs):
        return GETAffinity.loss(model(graphs), torch.cat([g.y for g in graphs]))


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


class TestGETAffinityOnDegenerateGraphs(TestGETAffinity):
    """Lone blocks, coincident atoms and a single atom keep the contract (no NaN leaks into the batch)."""

    loss_drop = 0.75

    def make_graphs(self):
        # not the all-coincident graph: its exact distance ties make the atom-pair choice order-dependent
        return [_double(g) for i, g in enumerate(_degenerate_graphs()) if i != 1]

    def training_graphs(self):
        return _degenerate_graphs()


class TestGETPairClassifier(GETContract):
    """Pairs (inactive, active): logits per pair are invariant; permuting inside either member changes nothing."""

    model_class = GETPairClassifier
    outputs = {"logits": INVARIANT}
    graphs_per_sample = 2
    train_steps, lr, loss_drop, train_dtype = 8, 1e-2, 0.8, torch.float32

    def make_graphs(self):
        return [_double(g) for g in _plb("cdk2", [0, 1]) + _plb("tnks2", [1, 2])]

    def training_graphs(self):
        return _plb("cdk2", [0, 1], cutoff=4.0)

    def run(self, model, graphs):
        return {"logits": model(graphs)}

    def permuted(self, graph, generator):
        return _permuted(graph, generator)[0], {"logits": None}

    def loss(self, model, graphs):
        labels = torch.arange(len(graphs) // 2) % 2  # pairs alternately (active, inactive), (inactive, active)
        return GETPairClassifier.loss(model(graphs), labels)


@pytest.mark.parametrize("chunked", [None, True])
def test_degenerate_inputs_train_with_finite_gradients(chunked):
    torch.manual_seed(2)
    model = GETAffinity(**TINY).train()
    for layer in model.encoder.layers:
        layer.attention.chunked = chunked
    pk = model(_degenerate_graphs())
    assert pk.shape == (4,) and torch.isfinite(pk).all()
    GETAffinity.loss(pk, torch.tensor([5.0, 4.0, 3.0, 6.0])).backward()
    grads = {name: p.grad for name, p in model.named_parameters() if p.grad is not None}
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert grads["energy_ffn.3.weight"].abs().sum() > 0  # the read-out learns from these graphs
    assert model.encoder.layers[-1].ffn.mlp_z[0].weight.grad is None  # frozen, as upstream


def test_embedding_shapes_and_unit_norms():
    pockets = _plb("cdk2", [0]) + _plb("tnks2", [1])
    torch.manual_seed(3)
    out = GETModel(**TINY).eval().embed(pockets)
    n_blocks = sum(g.num_blocks for g in pockets)
    assert out.H.shape == (sum(g.num_atoms for g in pockets), 16) and out.X.shape == (out.H.size(0), 3)
    assert out.block_repr.shape == (n_blocks, 16) and out.graph_repr.shape == (2, 16)
    assert torch.allclose(out.block_repr.norm(dim=1), torch.ones(n_blocks))
    assert torch.allclose(out.graph_repr.norm(dim=1), torch.ones(2))
    with pytest.raises(ValueError, match="even number"):
        GETPairClassifier(**TINY)(pockets[:1])


def test_inference_cuts_the_pair_plan_into_larger_chunks_with_the_same_prediction(monkeypatch):
    """Without autograd the atom pairs are cut into INFERENCE_CHUNK_PAIRS-sized chunks (fewer, larger), with
    autograd into CHUNK_PAIRS-sized ones; the prediction does not depend on the plan."""
    import geomol.models.get_core as get_core
    monkeypatch.setattr(get_core, "CHUNK_PAIRS", 64)
    monkeypatch.setattr(get_core, "INFERENCE_CHUNK_PAIRS", 512)
    graphs = [_double(g) for g in _plb("cdk2", [0, 1])]
    model = GETAffinity(**TINY).double().eval()
    with torch.enable_grad():
        small = model.prepare(graphs)
        trained_plan = model(small).detach()
    with torch.no_grad():
        large = model.prepare(graphs)
        inferred = model(large)
    assert small.pairs.num_pairs == large.pairs.num_pairs > 512
    assert len(large.pairs.chunks) < len(small.pairs.chunks)
    assert max(c.pairs[1] - c.pairs[0] for c in small.pairs.chunks) < 512
    torch.testing.assert_close(inferred, trained_plan, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("config", [TINY, dict(TINY, radial_dim=16, num_rbf=16, num_heads=2)])
def test_compiled_attention_gives_the_pytorch_model(config, monkeypatch):
    """A training step (chunked forward, saved pair stage, hand-written backward) and a prediction with GET's compiled
    loops (geomol.nn.native) equal those of the PyTorch formulation in float64, on real pockets (TINY: generic
    loops; rh = nr = 8: the float32 vector path's sizes, its float64 twin)."""
    from geomol.nn import native
    if not native.native_available():
        pytest.skip("no C++ compiler: the PyTorch path runs alone")
    import geomol.models.get_core as get_core
    monkeypatch.setattr(get_core, "CHUNK_PAIRS", 256)  # several chunks per layer
    graphs = [_double(g) for g in _plb("cdk2", [0, 1])]
    target = torch.tensor([6.0, 7.0], dtype=torch.float64)
    results = {}
    for compiled in ("1", "0"):
        monkeypatch.setenv(native.NATIVE_ENV, compiled)
        torch.manual_seed(0)
        model = GETAffinity(**config, dropout=0.0).double()
        model.train()
        GETAffinity.loss(model(graphs), target).backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        with torch.no_grad():
            results[compiled] = (model.eval()(graphs), grads)
    (pk, grads), (pk_torch, grads_torch) = results["1"], results["0"]
    torch.testing.assert_close(pk, pk_torch, rtol=1e-10, atol=1e-10)
    assert grads.keys() == grads_torch.keys() and len(grads) > 20
    for name in grads:
        torch.testing.assert_close(grads[name], grads_torch[name], rtol=1e-8, atol=1e-11, msg=name)
