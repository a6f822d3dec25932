"""EGNO's compiled EGNN edge loop (geomol.nn.egnn_compiled) against the PyTorch formulation of edge_sums."""
import pytest
import torch

from geomol.nn import egnn_compiled, native
from geomol.nn.egnn import EdgeWeights, EGNNLayer, edge_sums

pytestmark = pytest.mark.skipif(not native.native_available(), reason="no C++ compiler: the PyTorch path runs alone")

NAMES = ("x", "h_row", "h_col", "edge_term") + EdgeWeights._fields


def _case(dtype, H, n=9, m=40, P=3, seed=0):
    """Inputs of edge_sums that need grad, and fixed output gradients (self-loops and repeated edges included)."""
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape, scale=1.0: (scale * torch.randn(*shape, dtype=dtype, generator=gen)).requires_grad_()  # noqa
    inputs = [rand(n, P, 3), rand(n, P, H), rand(n, P, H), rand(m, H)]
    weights = [rand(H, scale=0.3), rand(H, H, scale=0.3), rand(H), rand(H, H, scale=0.3), rand(H), rand(1, H),
               rand(1)]
    edges = torch.randint(0, n, (2, m), generator=gen)
    edges[:, :3] = torch.tensor([[0, 0, 4], [0, 0, 4]])
    out_grads = (torch.randn(n, P, 3, dtype=dtype, generator=gen), torch.randn(n, P, H, dtype=dtype, generator=gen))
    return inputs, weights, edges, out_grads


def _sums_and_grads(inputs, weights, edges, out_grads, **options):
    force, agg = edge_sums(*inputs, edges, EdgeWeights(*weights), **options)
    grads = torch.autograd.grad((force * out_grads[0]).sum() + (agg * out_grads[1]).sum(), inputs + weights)
    return (force, agg), dict(zip(NAMES, grads))


@pytest.mark.parametrize("dtype, H", [(torch.float64, 16), (torch.float64, 64), (torch.float32, 64),
                                      (torch.float32, 128), (torch.float32, 16)])
@pytest.mark.parametrize("store_limit", [1 << 25, 0])
def test_compiled_edge_loop_matches_pytorch(dtype, H, store_limit, monkeypatch):
    inputs, weights, edges, out_grads = _case(dtype, H)
    assert egnn_compiled.fused_supported(inputs[1], *inputs, *weights)
    calls = []
    real = egnn_compiled.run_edge_ranges
    monkeypatch.setattr(egnn_compiled, "run_edge_ranges", lambda name, *a: calls.append(name) or real(name, *a))
    got_sums, got = _sums_and_grads(inputs, weights, edges, out_grads, store_limit=store_limit)
    assert [name.rsplit("_", 1)[0] for name in calls] == ["geomol_egnn_fused_forward", "geomol_egnn_fused_backward"]
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    want_sums, want = _sums_and_grads(inputs, weights, edges, out_grads)
    tol = 1e-12 if dtype == torch.float64 else 1e-5  # of the largest magnitude (float32: sums of H products)
    for a, b in zip(got_sums, want_sums):
        assert _relative_error(a, b) < tol
    for name in NAMES:
        assert want[name].abs().max() > 1e-3, name  # every gradient is exercised
        assert _relative_error(got[name], want[name]) < tol, name
    with torch.no_grad():  # inference: the forward loop alone, same sums
        for a, b in zip(edge_sums(*inputs, edges, EdgeWeights(*weights)), want_sums):
            assert _relative_error(a, b) < tol


def _relative_error(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest absolute difference over the largest magnitude of b."""
    return float(((a - b).abs().max() / b.abs().max()).detach())


@pytest.mark.parametrize("openmp", [True, False])
def test_compiled_edge_loop_splits_edges_over_threads(openmp, monkeypatch):
    """Ranges of edges at once: on an OpenMP team (parallel.cpp) or, in a library built without OpenMP, on
    Python threads; each range has its own accumulators and the sums equal one range's."""
    if not openmp:
        monkeypatch.setattr(native._library, "geomol_openmp", lambda: 0)
    elif not native._library.geomol_openmp():
        pytest.skip("the compiler here builds without OpenMP")
    inputs, weights, edges, out_grads = _case(torch.float64, 16, n=30, m=200, seed=2)
    ranges = []
    real = egnn_compiled.run_edge_ranges
    monkeypatch.setattr(egnn_compiled, "run_edge_ranges", lambda *a: ranges.append(real(*a)) or ranges[-1])
    monkeypatch.setattr(native, "MIN_ELEMENTS_PER_THREAD", 1)
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = _sums_and_grads(inputs, weights, edges, out_grads)
        torch.set_num_threads(3)
        many = _sums_and_grads(inputs, weights, edges, out_grads)
    finally:
        torch.set_num_threads(threads)
    assert ranges == [1, 1, 3, 3]  # forward and backward, each range with its own accumulators
    for a, b in zip(one[0], many[0]):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)
    for name in NAMES:
        assert torch.allclose(one[1][name], many[1][name], rtol=1e-12, atol=1e-12), name


def test_int32_edge_indices_give_the_same_sums():
    inputs, weights, edges, out_grads = _case(torch.float64, 16)
    want = _sums_and_grads(inputs, weights, edges, out_grads)
    got = _sums_and_grads(inputs, weights, edges.int(), out_grads)
    for a, b in zip(got[0], want[0]):
        assert torch.equal(a, b)
    for name in NAMES:
        assert torch.equal(got[1][name], want[1][name]), name


@pytest.mark.parametrize("bad", [-1, 9])
def test_edges_to_missing_nodes_raise_instead_of_reading_past_the_arrays(bad):
    inputs, weights, edges, _ = _case(torch.float32, 16)  # 9 nodes
    edges[1, 5] = bad
    with pytest.raises(IndexError, match="outside 0 … 8"):
        edge_sums(*inputs, edges, EdgeWeights(*weights))


def test_other_widths_and_switched_off_take_the_pytorch_formulation(monkeypatch):
    inputs, weights, _, _ = _case(torch.float32, 24)  # 24 float32 channels: not whole 64-byte vectors
    assert not egnn_compiled.fused_supported(inputs[1], *inputs, *weights)
    inputs, weights, _, _ = _case(torch.float32, 32)
    assert egnn_compiled.fused_supported(inputs[1], *inputs, *weights)
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    assert not egnn_compiled.fused_supported(inputs[1], *inputs, *weights)


def test_layer_equivariant_through_the_compiled_loop():
    gen = torch.Generator().manual_seed(5)
    layer = EGNNLayer(16, 2).double()
    n, P = 12, 2
    x, v = torch.randn(n, P, 3, generator=gen, dtype=torch.float64), torch.randn(n, P, 3, generator=gen,
                                                                                dtype=torch.float64)
    h = torch.randn(n, P, 16, generator=gen, dtype=torch.float64)
    edges = torch.randint(0, n, (2, 50), generator=gen)
    attr = torch.randn(50, 2, generator=gen, dtype=torch.float64)
    degree = torch.bincount(edges[0], minlength=n).clamp(min=1).double().view(-1, 1, 1)
    q, _ = torch.linalg.qr(torch.randn(3, 3, generator=gen, dtype=torch.float64))
    q[:, 0] *= -1 if torch.det(q) > 0 else 1  # a reflection too
    shift = torch.randn(3, generator=gen, dtype=torch.float64)
    x1, h1 = layer(x, h, v, edges, attr, degree)
    x2, h2 = layer(x @ q.T + shift, h, v @ q.T, edges, attr, degree)
    assert torch.allclose(x2, x1 @ q.T + shift, atol=1e-10)
    assert torch.allclose(h2, h1, atol=1e-10)


def test_compiled_loop_reports_its_products_like_the_profiler_counts_pytorchs(monkeypatch):
    from torch.profiler import ProfilerActivity, profile

    inputs, weights, edges, _ = _case(torch.float32, 32)
    with torch.no_grad(), native.counting_products() as count:
        edge_sums(*inputs, edges, EdgeWeights(*weights))
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    with torch.no_grad(), profile(activities=[ProfilerActivity.CPU], with_flops=True) as prof:
        edge_sums(*inputs, edges, EdgeWeights(*weights))
    profiled = sum(e.flops for e in prof.key_averages() if e.key in ("aten::mm", "aten::addmm") and e.flops)
    rows = edges.size(1) * inputs[1].size(1)
    assert count[0] == profiled == rows * (2 * 2 * 32 * 32 + 2 * 32)
