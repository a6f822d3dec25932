"""The EGNN layer with velocity: literal spec formula (§2.4), equivariance, permutation."""
import pytest
import torch
import torch.nn.functional as F

from geomol.nn.egnn import EdgeWeights, EGNNLayer, _autograd_sums, edge_sums, in_degree
from geomol.testing import INVARIANT, POSITION, VECTOR, assert_equivariant


def literal_layer(layer, x, h, v, edge_index, e):
    """Spec §2.4 on one slice: concatenation [s, h_i, h_j, e], MLPs, mean force, clamp, sum messages."""
    row, col = edge_index
    r = x[row] - x[col]
    inp = torch.cat([r.pow(2).sum(-1, keepdim=True), h[row], h[col], e], -1)
    m = F.silu(layer.message_out(F.silu(layer.message_in(inp))))
    w = layer.coord_out(F.silu(layer.coord_hidden(m)))
    count = torch.zeros(len(x), 1, dtype=x.dtype).index_add_(0, row, torch.ones_like(w)).clamp(min=1)
    force = (torch.zeros_like(x).index_add_(0, row, r * w) / count).clamp(-100, 100)
    x_new = x + layer.velocity_out(F.silu(layer.velocity_hidden(h))) * v + force
    agg = torch.zeros_like(h).index_add_(0, row, m)
    return x_new, layer.node_out(F.silu(layer.node_hidden(torch.cat([h, agg], -1))))


def _graph(n=7, m=20, hidden=8, e=3, p=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    row = torch.randint(0, n - 1, (m,), generator=gen)  # node n−1 receives nothing: its force is 0
    col = torch.randint(0, n, (m,), generator=gen)
    keep = row != col
    ei = torch.stack([row[keep], col[keep]])
    kw = dict(dtype=torch.float64, generator=gen)
    return (torch.randn(n, p, 3, **kw), torch.randn(n, p, hidden, **kw), torch.randn(n, p, 3, **kw), ei,
            torch.randn(ei.size(1), e, **kw))


def test_layer_equals_literal_formula_per_slice():
    layer = EGNNLayer(8, 3).double()
    x, h, v, ei, e = _graph()
    x_out, h_out = layer(x, h, v, ei, e, in_degree(ei[0], len(x), x.dtype))
    for t in range(x.size(1)):
        xr, hr = literal_layer(layer, x[:, t], h[:, t], v[:, t], ei, e)
        assert torch.allclose(x_out[:, t], xr, atol=1e-12) and torch.allclose(h_out[:, t], hr, atol=1e-12)


def test_layer_equivariance_and_permutation():
    layer = EGNNLayer(8, 3).double()
    x, h, v, ei, e = _graph(seed=1)
    deg = in_degree(ei[0], len(x), x.dtype)
    n = len(x)

    def fn(x, v):
        x_out, h_out = layer(x, h, v, ei, e, deg)
        return {"x": x_out, "h": h_out}

    assert_equivariant(fn, {"x": (x, POSITION), "v": (v, VECTOR)}, {"x": POSITION, "h": INVARIANT}, atol=1e-9)
    perm = torch.randperm(n)
    inv = torch.argsort(perm)
    x_out, h_out = layer(x, h, v, ei, e, deg)
    xp, hp = layer(x[perm], h[perm], v[perm], inv[ei], e, deg[perm])
    assert torch.allclose(xp, x_out[perm], atol=1e-12) and torch.allclose(hp, h_out[perm], atol=1e-12)


def test_chunked_checkpointed_edges_give_the_same_values_and_gradients():
    x, h, v, ei, e = _graph(n=9, m=40, seed=2)
    whole = EGNNLayer(8, 3).double()
    chunked = EGNNLayer(8, 3, edge_chunk_elements=5 * 3 * 8).double()  # 5 edges per chunk
    chunked.load_state_dict(whole.state_dict())
    deg = in_degree(ei[0], len(x), x.dtype)
    outs = []
    for layer in (whole, chunked):
        xg, hg = x.clone().requires_grad_(), h.clone().requires_grad_()
        x_out, h_out = layer(xg, hg, v, ei, e, deg)
        (x_out.pow(2).sum() + h_out.sin().sum()).backward()
        outs.append((x_out, h_out, xg.grad, hg.grad, layer.message_out.weight.grad))
        with torch.no_grad():
            no_grad = layer(x, h, v, ei, e, deg)
        assert torch.allclose(no_grad[0], x_out, atol=1e-12)
    for a, b in zip(*outs):
        assert torch.allclose(a, b, atol=1e-10)


def test_float32_fast_path_matches_float64_values_and_gradients():
    """Float32 runs the oneDNN products and the shared backward of the node maps; float64 the plain ones."""
    x, h, v, ei, e = _graph(n=9, m=40, seed=3)
    layer64 = EGNNLayer(8, 3).double()
    layer32 = EGNNLayer(8, 3)
    layer32.load_state_dict(layer64.state_dict())
    outs = []
    for layer, dtype in ((layer64, torch.float64), (layer32, torch.float32)):
        xg, hg = x.to(dtype).detach().requires_grad_(), h.to(dtype).detach().requires_grad_()
        x_out, h_out = layer(xg, hg, v.to(dtype), ei, e.to(dtype), in_degree(ei[0], len(x), dtype))
        (x_out.pow(2).sum() + h_out.sin().sum()).backward()
        outs.append([x_out, h_out, xg.grad, hg.grad] + [p.grad for p in layer.parameters()])
    for a, b in zip(*outs):
        assert torch.allclose(b.double(), a, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("store_limit", [1 << 25, 0])
def test_edge_sums_backward_matches_finite_differences_and_autograd(store_limit):
    """The hand-written backward of the edge MLPs, activations stored or recomputed, 4 edges per chunk."""
    x, h, _, ei, e = _graph(n=6, m=16, seed=4)
    layer = EGNNLayer(8, 3).double()
    w = layer.message_in.weight
    gen = torch.Generator().manual_seed(5)
    node_terms = [torch.randn(h.shape, dtype=h.dtype, generator=gen) for _ in range(2)]
    tensors = [x, *node_terms,
               F.linear(e, w[:, 17:], layer.message_in.bias), *layer.edge_weights()]
    tensors = [t.detach().clone().requires_grad_() for t in tensors]

    def fast(*t):
        return edge_sums(*t[:4], ei, EdgeWeights(*t[4:]), chunk=4 * 3 * 8, store_limit=store_limit)

    assert torch.autograd.gradcheck(fast, tensors)
    cotangents = [torch.randn_like(o) for o in fast(*tensors)]
    got = torch.autograd.grad(fast(*tensors), tensors, cotangents)
    want = torch.autograd.grad(_autograd_sums(*tensors[:4], ei[0], ei[1], EdgeWeights(*tensors[4:])), tensors,
                               cotangents)
    for a, b in zip(got, want):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
