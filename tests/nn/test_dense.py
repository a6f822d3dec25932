"""Linear layers on either CPU kernel (oneDNN or BLAS): the same values and gradients as ``F.linear``, any layout
of the operands; the kernel choice itself."""
import pytest
import torch
import torch.nn.functional as F

from geomol.errors import ConfigError
from geomol.nn import dense as dense_module
from geomol.nn.dense import (KERNEL_ENV, dense, linear, linear_kernel, linears, onednn_available, outer,
                             set_linear_kernel, silu_linear)

HAS_ONEDNN = dense_module._ONEDNN_LINEAR is not None


@pytest.fixture(params=["blas"] + (["onednn"] if HAS_ONEDNN else []))
def kernel(request):
    """Run a test on each kernel this torch has, then restore the process' choice."""
    before = linear_kernel()
    assert set_linear_kernel(request.param) == request.param
    yield request.param
    set_linear_kernel(before)


def _operands(seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(300, 4, 24, generator=gen)
    weights = [torch.randn(24, 24, generator=gen), torch.randn(7, 24, generator=gen)]
    biases = [torch.randn(24, generator=gen), None]
    return x, weights, biases


def test_dense_and_fused_silu_match_f_linear_for_any_layout(kernel):
    x, (w, _), (b, _) = _operands()
    wide = torch.randn(48, 40)
    column_block = wide[:24, 8:32]  # a strided weight: copied to a plain layout first
    for weight in (w, w.t().contiguous().t(), column_block):
        torch.testing.assert_close(dense(x, weight, b), F.linear(x, weight, b), rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(dense(x, weight, b, activation="silu"), F.silu(F.linear(x, weight, b)),
                                   rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(outer(x, x[..., :7]), x.reshape(-1, 24).T @ x[..., :7].reshape(-1, 7),
                               rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("with_grad", [True, False])
def test_linears_values_and_gradients_match_autograd(with_grad, kernel):
    x, weights, biases = _operands(1)
    leaves = [t.clone().requires_grad_() for t in [x, *weights, biases[0]]]
    xs, ws, b0 = leaves[0], leaves[1:3], leaves[3]
    outs = linears(xs, ws, [b0, None]) + [silu_linear(xs, ws[0], b0)]
    refs = [F.linear(xs, ws[0], b0), F.linear(xs, ws[1]), F.silu(F.linear(xs, ws[0], b0))]
    for got, want in zip(outs, refs):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    if not with_grad:
        with torch.no_grad():
            torch.testing.assert_close(linear(x, weights[0], biases[0]), refs[0].detach(), rtol=1e-5, atol=1e-5)
        return
    cotangents = [torch.randn_like(o) for o in outs]
    got = torch.autograd.grad(outs, leaves, cotangents)
    want = torch.autograd.grad(refs, leaves, cotangents)
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, rtol=1e-4, atol=1e-3)


@pytest.mark.skipif(not HAS_ONEDNN, reason="this torch has no oneDNN Linear kernel")
@pytest.mark.parametrize("kernel", ["onednn"], indirect=True)
def test_second_derivatives_are_refused_not_silently_zero(kernel):
    assert onednn_available()
    x, (w, _), (b, _) = _operands(2)
    w = w.requires_grad_()
    (g,) = torch.autograd.grad(linear(x, w, b).square().sum(), w, create_graph=True)
    with pytest.raises(RuntimeError):
        g.sum().backward()


def test_float64_takes_f_linear_with_higher_derivatives():
    x = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    w = torch.randn(4, 3, dtype=torch.float64)
    (g,) = torch.autograd.grad(silu_linear(x, w).sum(), x, create_graph=True)
    (gg,) = torch.autograd.grad(g.sum(), x)
    assert gg.abs().sum() > 0


def test_kernel_choice_is_measured_once_and_can_be_pinned(monkeypatch):
    before = linear_kernel()
    try:
        chosen = set_linear_kernel("auto")
        assert chosen in ("onednn", "blas") and linear_kernel() == chosen
        assert onednn_available() == (chosen == "onednn" and torch.backends.mkldnn.enabled)
        monkeypatch.setattr(dense_module, "_chosen_kernel", None)
        monkeypatch.setenv(KERNEL_ENV, "blas")
        assert linear_kernel() == "blas" and not onednn_available()  # decided from the environment on first use
        monkeypatch.setenv(KERNEL_ENV, "onednn")
        assert linear_kernel() == "blas"  # already decided: the environment is read once
    finally:
        set_linear_kernel(before)


def test_unknown_kernel_names_the_setting():
    with pytest.raises(ConfigError, match=KERNEL_ENV):
        set_linear_kernel("mkl")
