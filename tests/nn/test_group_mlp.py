"""GET's group MLPs compiled (geomol.nn.group_mlp) against autograd on their PyTorch formulation."""
import pytest
import torch
import torch.nn.functional as F

from geomol.nn import native
from geomol.nn.group_mlp import group_mlp, group_mlp_backward, group_mlp_ready

pytestmark = pytest.mark.skipif(not native.native_available(), reason="no C++ compiler: the PyTorch path runs alone")


def _case(dtype, rows, K, D, O, seed=0):
    gen = torch.Generator().manual_seed(seed)
    rand = lambda *shape: torch.randn(*shape, dtype=dtype, generator=gen)  # noqa: E731
    return rand(rows, K), 0.3 * rand(D, K), 0.2 * rand(D), 0.3 * rand(O, D), 0.2 * rand(O), rand(rows, O)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rows, K, D, O", [(2113, 32, 64, 64), (101, 32, 64, 4), (37, 20, 48, 24), (5, 16, 32, 3)])
def test_forward_and_backward_match_autograd(dtype, rows, K, D, O):
    x, w1, b1, w2, b2, g_y = _case(dtype, rows, K, D, O)
    leaves = [t.clone().requires_grad_() for t in (x, w1, b1, w2, b2)]
    pre1 = F.linear(leaves[0], leaves[1], leaves[2])
    pre2 = F.linear(F.silu(pre1), leaves[3], leaves[4])
    want_y = F.silu(pre2)
    want = torch.autograd.grad(want_y, leaves, g_y)
    assert group_mlp_ready(x, w1, b1, w2, b2)
    y, kept1, kept2 = group_mlp(x, w1, b1, w2, b2, keep=True)
    assert group_mlp(x, w1, b1, w2, b2)[1:] == (None, None)  # nothing kept unless asked
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    for got, ref in ((y, want_y), (kept1, pre1), (kept2, pre2)):
        torch.testing.assert_close(got, ref.detach(), **tol)
    grads = group_mlp_backward(g_y, x, kept1, kept2, w1, w2)
    for k, (got, ref) in enumerate(zip(grads, want)):
        assert got.shape == ref.shape, k
        torch.testing.assert_close(got / ref.abs().max(), ref / ref.abs().max(), **tol, msg=f"gradient {k}")


def test_rows_split_over_threads_give_the_same(monkeypatch):
    x, w1, b1, w2, b2, g_y = _case(torch.float64, 1000, 32, 64, 64, seed=1)
    monkeypatch.setattr("geomol.nn.group_mlp.MIN_ROWS_PER_THREAD", 10)
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, 3):
            torch.set_num_threads(n)
            y, pre1, pre2 = group_mlp(x, w1, b1, w2, b2, keep=True)
            results.append((y, *group_mlp_backward(g_y, x, pre1, pre2, w1, w2)))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_not_taken_under_autograd():
    x, w1, b1, w2, b2, _ = _case(torch.float32, 10, 32, 64, 64)
    assert not group_mlp_ready(x, w1.requires_grad_(), b1, w2, b2)
    with torch.no_grad():
        assert group_mlp_ready(x, w1, b1, w2, b2)
    assert not group_mlp_ready(x.to(torch.float16), w1.detach(), b1, w2, b2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_input_rows_with_a_stride_give_the_same(dtype):
    """The group rows are a column slice of the pair stage's sums: x and g_x with row strides of 2K."""
    x, w1, b1, w2, b2, g_y = _case(dtype, 1003, 32, 64, 64, seed=2)
    wide = torch.cat([x, torch.full_like(x, float("nan"))], 1)
    strided = wide[:, :32]
    g_wide = torch.zeros(1003, 64, dtype=dtype)
    y, pre1, pre2 = group_mlp(x, w1, b1, w2, b2, keep=True)
    y_s, pre1_s, pre2_s = group_mlp(strided, w1, b1, w2, b2, keep=True)
    assert torch.equal(y, y_s) and torch.equal(pre1, pre1_s) and torch.equal(pre2, pre2_s)
    want = group_mlp_backward(g_y, x, pre1, pre2, w1, w2)
    got = group_mlp_backward(g_y, strided, pre1, pre2, w1, w2, g_x=g_wide[:, 32:])
    assert got[0].data_ptr() == g_wide[:, 32:].data_ptr()  # written where asked
    assert not g_wide[:, :32].any()  # and nowhere else
    for a, b in zip(want, got):
        assert torch.equal(a, b)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("rows, K, D, O", [(2113, 32, 64, 64), (101, 32, 64, 4), (37, 20, 48, 24), (5, 16, 32, 3)])
def test_backward_recomputing_the_pre_activations_gives_the_same(dtype, rows, K, D, O):
    x, w1, b1, w2, b2, g_y = _case(dtype, rows, K, D, O, seed=3)
    _, pre1, pre2 = group_mlp(x, w1, b1, w2, b2, keep=True)
    want = group_mlp_backward(g_y, x, pre1, pre2, w1, w2)
    got = group_mlp_backward(g_y, x, None, None, w1, w2, b1=b1, b2=b2)
    for a, b in zip(want, got):
        torch.testing.assert_close(a, b, rtol=1e-12 if dtype == torch.float64 else 1e-6, atol=1e-12)
    with pytest.raises(ValueError, match="neither and both biases"):
        group_mlp_backward(g_y, x, None, None, w1, w2)
    with pytest.raises(ValueError, match="neither and both biases"):
        group_mlp_backward(g_y, x, pre1, None, w1, w2, b1=b1, b2=b2)
