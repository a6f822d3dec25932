"""EGNO's scalar temporal convolution with compiled passes (geomol.nn.time_conv) against its PyTorch formulation."""
import pytest
import torch
import torch.nn.functional as F

from geomol.nn import native
from geomol.nn.temporal import ScalarTimeConv, _fourier_tables, spectral_time_conv
from geomol.nn.time_conv import residual_time_conv, residual_time_conv_ready

pytestmark = pytest.mark.skipif(not native.native_available(), reason="no C++ compiler: the PyTorch path runs alone")


def _case(dtype, nodes, slices, channels, modes, seed=0):
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(nodes, slices, channels, dtype=dtype, generator=gen)
    weight = 0.3 * torch.randn(channels, channels, modes, 2, dtype=dtype, generator=gen)  # signed: both sides
    return h, weight


def _reference(h, weight):
    return h + F.leaky_relu(spectral_time_conv(h, weight), 0.01)


def _compiled(h, weight):
    return residual_time_conv(h, weight, _fourier_tables(weight.size(2), h.size(1), h.dtype, h.device))


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("slices, modes", [(5, 2), (6, 3), (4, 3), (8, 2), (1, 1)])  # (6, 3), (4, 3): Nyquist bins
def test_values_and_gradients_match_the_pytorch_formulation(dtype, slices, modes):
    h, weight = _case(dtype, 37, slices, 16, modes)
    leaves = [h.clone().requires_grad_(), weight.clone().requires_grad_()]
    want = _reference(*leaves)
    cotangent = torch.randn(want.shape, dtype=dtype, generator=torch.Generator().manual_seed(1))
    want_grads = torch.autograd.grad(want, leaves, cotangent)
    got_leaves = [h.clone().requires_grad_(), weight.clone().requires_grad_()]
    assert residual_time_conv_ready(*got_leaves)
    got = _compiled(*got_leaves)
    got_grads = torch.autograd.grad(got, got_leaves, cotangent)
    tol = dict(rtol=1e-12, atol=1e-12) if dtype == torch.float64 else dict(rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(got, want, **tol)
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, **tol)


def test_gradcheck():
    h, weight = _case(torch.float64, 5, 5, 4, 2, seed=2)
    assert torch.autograd.gradcheck(_compiled, (h.requires_grad_(), weight.requires_grad_()))


def test_nodes_split_over_threads_give_the_same():
    h, weight = _case(torch.float64, 1100, 5, 16, 2, seed=3)
    threads = torch.get_num_threads()
    results = []
    try:
        for n in (1, 3):
            torch.set_num_threads(n)
            leaves = [h.clone().requires_grad_(), weight.clone().requires_grad_()]
            out = _compiled(*leaves)
            results.append((out, *torch.autograd.grad(out.square().sum(), leaves)))
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(*results):
        torch.testing.assert_close(a, b, rtol=1e-12, atol=1e-12)


def test_the_layer_takes_the_compiled_path_only_where_it_can(monkeypatch):
    conv = ScalarTimeConv(8, 2).double()
    h = torch.randn(6, 5, 8, dtype=torch.float64)
    compiled = conv(h)
    assert residual_time_conv_ready(h, conv.weight)
    assert not residual_time_conv_ready(h.float(), conv.weight)  # mixed dtypes
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert not residual_time_conv_ready(h, conv.weight)
    monkeypatch.setenv(native.NATIVE_ENV, "0")
    assert not residual_time_conv_ready(h, conv.weight)
    torch.testing.assert_close(conv(h), compiled, rtol=1e-12, atol=1e-12)  # the PyTorch formulation, same function
