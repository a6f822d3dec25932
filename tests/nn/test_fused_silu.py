"""Bias, SiLU and dropout passes (geomol.nn.fused_silu) against their PyTorch formulation."""
import pytest
import torch
import torch.nn.functional as F

from geomol.nn import native
from geomol.nn.dropout import keep_bits
from geomol.nn.fused_silu import bias_silu_dropout, silu_dropout_grad

compiled = pytest.mark.skipif(not native.native_available(), reason="no C++ compiler: the PyTorch path runs alone")


def _case(dtype, rows=37, n=45, seed=0):
    gen = torch.Generator().manual_seed(seed)
    x = 4 * torch.randn(rows, n, dtype=dtype, generator=gen)  # wide enough to reach the SiLU's flat ends
    bias = torch.randn(n, dtype=dtype, generator=gen)
    keep, scale = keep_bits((rows, n), 0.3, x.device)
    return x, bias, keep, scale


def _tolerance(dtype):
    return dict(rtol=1e-12, atol=1e-13) if dtype == torch.float64 else dict(rtol=2e-6, atol=2e-6)


@compiled
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("with_bias, with_keep, silu", [(True, True, True), (False, True, True), (True, False, True),
                                                        (True, True, False), (False, False, True)])
def test_forward_pass_matches_pytorch(dtype, with_bias, with_keep, silu):
    x, bias, keep, scale = _case(dtype)
    bias, keep = (bias if with_bias else None), (keep if with_keep else None)
    pre = x + bias if with_bias else x.clone()
    want = F.silu(pre) if silu else pre.clone()
    want = want * keep * scale if with_keep else want
    given = x.clone()
    got = bias_silu_dropout(given, bias, keep, scale, silu=silu)
    torch.testing.assert_close(got, want, **_tolerance(dtype))
    torch.testing.assert_close(given, pre)  # the input now holds the pre-activation
    if with_keep:
        assert (got[~keep] == 0).all() and (got[keep] != 0).any()


@compiled
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("with_pre, with_keep", [(True, True), (True, False), (False, True)])
def test_gradient_pass_matches_autograd(dtype, with_pre, with_keep):
    x, _, keep, scale = _case(dtype, seed=1)
    grad = torch.randn(x.shape, dtype=dtype, generator=torch.Generator().manual_seed(2))
    leaf = x.clone().requires_grad_()
    out = F.silu(leaf) if with_pre else leaf
    out = out * keep * scale if with_keep else out
    (want,) = torch.autograd.grad(out, leaf, grad)
    got = silu_dropout_grad(grad, x if with_pre else None, keep if with_keep else None, scale)
    torch.testing.assert_close(got, want, **_tolerance(dtype))


@compiled
def test_column_slices_of_a_wider_product_are_read_and_written_in_place():
    wide = torch.randn(20, 80, dtype=torch.float64)
    bias = torch.randn(33, dtype=torch.float64)
    before = wide.clone()
    part = wide[:, 40:73]  # row stride 80, not contiguous
    got = bias_silu_dropout(part, bias)
    torch.testing.assert_close(got, F.silu(before[:, 40:73] + bias))
    torch.testing.assert_close(wide[:, 40:73], before[:, 40:73] + bias)
    torch.testing.assert_close(wide[:, :40], before[:, :40])  # the other columns untouched
    torch.testing.assert_close(wide[:, 73:], before[:, 73:])
    grad = torch.randn(20, 33, dtype=torch.float64)
    torch.testing.assert_close(silu_dropout_grad(grad, part), torch.ops.aten.silu_backward(grad, part.contiguous()))


@pytest.mark.parametrize("path", ["compiled", "pytorch"])
def test_gradient_written_into_a_column_slice(path, monkeypatch):
    if path == "pytorch":
        monkeypatch.setenv(native.NATIVE_ENV, "0")
    elif not native.native_available():
        pytest.skip("no C++ compiler")
    x, _, keep, scale = _case(torch.float64, seed=3)
    grad = torch.randn(x.shape, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    wide = torch.full((x.size(0), x.size(1) + 10), 7.0, dtype=torch.float64)
    got = silu_dropout_grad(grad, x, keep, scale, out=wide[:, 4:4 + x.size(1)])
    assert got.data_ptr() == wide[:, 4:].data_ptr()
    torch.testing.assert_close(wide[:, 4:4 + x.size(1)], silu_dropout_grad(grad, x, keep, scale))
    assert (wide[:, :4] == 7).all() and (wide[:, 4 + x.size(1):] == 7).all()  # the other columns untouched
    with pytest.raises(ValueError, match="out has shape"):
        silu_dropout_grad(grad, x, keep, scale, out=wide)


def test_under_autograd_the_pytorch_formulation_runs_and_is_differentiable():
    x, bias, keep, scale = _case(torch.float64, rows=6, n=5)
    bias.requires_grad_()
    out = bias_silu_dropout(x.clone(), bias, keep, scale)
    (got,) = torch.autograd.grad(out.sum(), bias)
    want = torch.ops.aten.silu_backward(keep * scale * torch.ones_like(x), x + bias.detach()).sum(0)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("path", ["compiled", "pytorch"])
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("with_keep", [True, False])
def test_gradient_pass_also_writes_the_activation(path, dtype, with_keep, monkeypatch):
    """``act_out``: dropout(SiLU(pre)) from the gradient's pass, equal to the forward pass's; the gradient may
    overwrite its input (``out=grad``), the activation lands in a column slice."""
    if path == "pytorch":
        monkeypatch.setenv(native.NATIVE_ENV, "0")
    elif not native.native_available():
        pytest.skip("no C++ compiler")
    x, _, keep, scale = _case(dtype, seed=5)
    keep = keep if with_keep else None
    grad = torch.randn(x.shape, dtype=dtype, generator=torch.Generator().manual_seed(6))
    want_grad = silu_dropout_grad(grad, x, keep, scale)
    want_act = bias_silu_dropout(x.clone(), None, keep, scale)
    wide = torch.full((x.size(0), x.size(1) + 3), 7.0, dtype=dtype)
    got = silu_dropout_grad(grad, x, keep, scale, out=grad, act_out=wide[:, 3:])
    assert got.data_ptr() == grad.data_ptr()
    torch.testing.assert_close(got, want_grad, **_tolerance(dtype))
    torch.testing.assert_close(wide[:, 3:], want_act, **_tolerance(dtype))
    assert (wide[:, :3] == 7).all()
    with pytest.raises(ValueError, match="act_out needs"):
        silu_dropout_grad(grad, None, keep, scale, act_out=wide[:, 3:])
    with pytest.raises(ValueError, match="act_out has shape"):
        silu_dropout_grad(grad, x, keep, scale, act_out=wide)
