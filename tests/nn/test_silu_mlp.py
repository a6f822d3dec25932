"""paired_mlp3: the same outputs and gradients as the layer-by-layer MLPs, with less kept for backward."""
import pytest
import torch

from geomol.nn.equivariant_ffn import _mlp3
from geomol.nn.silu_mlp import paired_mlp3


def _mlps(dtype=torch.float64, p=0.1):
    torch.manual_seed(0)
    return [_mlp3(12, 16, 12, p).to(dtype), _mlp3(12, 16, 2, p).to(dtype)]


def _grads(outputs, tensors, weights):
    loss = sum((out * w).sum() for out, w in zip(outputs, weights))
    return torch.autograd.grad(loss, tensors, allow_unused=True)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("training", [True, False])
def test_matches_layer_by_layer_autograd(dtype, training):
    mlps = _mlps(dtype)
    x = torch.randn(30, 12, dtype=dtype, requires_grad=True)
    weights = [torch.randn(30, 12, dtype=dtype), torch.randn(30, 2, dtype=dtype)]
    params = [x] + [t for mlp in mlps for t in mlp.parameters()]
    for mlp in mlps:
        mlp.train(training)
    torch.manual_seed(5)
    expected = [mlp(x) for mlp in mlps]  # draws its masks in the same order
    expected_grads = _grads(expected, params, weights)
    torch.manual_seed(5)
    got = paired_mlp3(x, mlps, 0.1, training)
    got_grads = _grads(got, params, weights)
    tol = {"rtol": 1e-12, "atol": 1e-12} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-5}
    for e, g in zip(expected + list(expected_grads), list(got) + list(got_grads)):
        torch.testing.assert_close(g, e, **tol)
    if training:  # dropout really applied: some hidden units of the first MLP were dropped
        torch.manual_seed(5)
        assert not torch.allclose(paired_mlp3(x, mlps, 0.1, False)[0], got[0])


def test_gradcheck_without_dropout():
    mlps = _mlps(p=0.0)
    x = torch.randn(6, 12, dtype=torch.float64, requires_grad=True)
    params = [t for mlp in mlps for t in mlp.parameters()]
    assert torch.autograd.gradcheck(lambda x, *_: paired_mlp3(x, mlps, 0.0, False), (x, *params))


def test_frozen_second_mlp_and_unused_output():
    mlps = _mlps()
    mlps[1].requires_grad_(False)  # as GET freezes the last layer's coordinate MLP
    x = torch.randn(10, 12, dtype=torch.float64, requires_grad=True)
    out_h, _ = paired_mlp3(x, mlps, 0.1, False)
    out_h.sum().backward()  # the second output takes no part in the loss
    assert all(p.grad is None for p in mlps[1].parameters())
    reference = x.detach().clone().requires_grad_()
    mlps[0].eval()(reference).sum().backward()
    torch.testing.assert_close(x.grad, reference.grad, rtol=1e-12, atol=1e-12)
