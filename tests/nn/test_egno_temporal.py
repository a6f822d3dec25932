"""Temporal pieces of EGNO: slice embedding and the Fourier convolutions against explicit DFT sums."""
import math

import pytest
import torch

from geomol.nn.temporal import (
    ScalarTimeConv,
    VectorTimeConv,
    circular_kernel,
    kept_modes,
    spectral_time_conv,
    timestep_embedding,
)
from geomol.testing import POSITION, VECTOR, assert_equivariant


def dft_conv(u: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """Spec §2.2 by hand: forward DFT sums over t, keep K' bins, mix, explicit inverse. u [N, P, C]."""
    p = u.size(1)
    kept = kept_modes(weight.size(2), p)
    w = torch.complex(weight[..., 0].double(), weight[..., 1].double())
    t = torch.arange(p, dtype=torch.float64)
    y = torch.zeros(u.size(0), p, weight.size(1), dtype=torch.float64)
    for k in range(kept):
        phase = torch.exp(-2j * math.pi * k * t / p)  # [P]
        U = torch.einsum("t,ntc->nc", phase, u.double().to(torch.complex128))
        Y = U @ w[:, :, k]
        alpha = 1.0 if k == 0 or 2 * k == p else 2.0
        y += alpha * (Y[:, None, :] * torch.exp(2j * math.pi * k * t / p)[None, :, None]).real
    return y / p


def test_time_embedding_formula():
    emb = timestep_embedding(5, 32)
    half = 16
    freqs = torch.exp(-torch.arange(half, dtype=torch.float64) * math.log(10000) / (half - 1))
    angles = torch.arange(5, dtype=torch.float64)[:, None] * freqs
    expected = torch.cat([angles.sin(), angles.cos()], -1)
    assert emb.shape == (5, 32) and emb.dtype == torch.float32
    assert torch.allclose(emb.double(), expected, atol=2e-6)
    assert torch.equal(emb[0], torch.cat([torch.zeros(16), torch.ones(16)]))
    odd = timestep_embedding(3, 31)
    assert odd.shape == (3, 31) and torch.all(odd[:, -1] == 0)


@pytest.mark.parametrize("p,k", [(5, 2), (4, 3), (7, 4), (8, 2), (1, 2), (2, 2), (6, 4)])
def test_spectral_conv_equals_dft(p, k):
    gen = torch.Generator().manual_seed(p * 10 + k)
    u = torch.randn(3, p, 6, dtype=torch.float64, generator=gen)
    w = torch.randn(6, 4, k, 2, dtype=torch.float64, generator=gen)
    expected = dft_conv(u, w)
    assert torch.allclose(spectral_time_conv(u, w), expected, atol=1e-12)
    dense = (u.reshape(3, -1) @ circular_kernel(w, p)).view(3, p, 4)
    assert torch.allclose(dense, expected, atol=1e-12)


def test_discarded_imaginary_parts_have_no_effect():
    u = torch.randn(2, 4, 3, dtype=torch.float64)
    w = torch.randn(3, 3, 3, 2, dtype=torch.float64)
    w2 = w.clone()
    w2[:, :, 0, 1] += 5.0  # DC imaginary part
    w2[:, :, 2, 1] -= 3.0  # Nyquist (2k = P) imaginary part
    assert torch.allclose(spectral_time_conv(u, w), spectral_time_conv(u, w2), atol=1e-12)


def test_scalar_time_conv_residual_leaky_relu():
    conv = ScalarTimeConv(5, 2).double()
    h = torch.randn(4, 5, 5, dtype=torch.float64)
    y = dft_conv(h, conv.weight.detach())
    assert torch.allclose(conv(h), h + torch.nn.functional.leaky_relu(y, 0.01), atol=1e-12)


def test_vector_time_conv_is_e3_equivariant():
    conv = VectorTimeConv(2).double()
    with torch.no_grad():
        conv.weight.normal_()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(6, 5, 3, dtype=torch.float64, generator=gen)
    v = torch.randn(6, 5, 3, dtype=torch.float64, generator=gen)
    center = x[:, :1].mean(0, keepdim=True).expand(6, 1, 3)
    x_out, v_out = conv(x, v, center)
    # channels: the x̃ and v outputs are the DFT conv of the stacked [x − x̄, v] per Cartesian axis
    z = torch.stack([x - center, v], -1).permute(0, 2, 1, 3).reshape(18, 5, 2)
    y = dft_conv(z, conv.weight.detach()).view(6, 3, 5, 2).permute(0, 2, 1, 3)
    assert torch.allclose(x_out, x + y[..., 0], atol=1e-12) and torch.allclose(v_out, v + y[..., 1], atol=1e-12)
    assert_equivariant(lambda x, v, center: dict(zip("xv", conv(x, v, center))),
                       {"x": (x, POSITION), "v": (v, VECTOR), "center": (center, POSITION)},
                       {"x": POSITION, "v": VECTOR}, atol=1e-10)


def test_training_works_after_an_inference_mode_call():
    """The Fourier tables are cached; built first under inference mode (a rollout), they must still serve
    autograd afterwards (training in the same process)."""
    conv = ScalarTimeConv(4, num_modes=3).double()
    h = torch.randn(6, 13, 4, dtype=torch.float64)  # 13 slices: a table no other test builds first
    with torch.inference_mode():
        conv(h)
    conv(h).sum().backward()
    weight = conv.weight.detach().clone().requires_grad_()
    (h + torch.nn.functional.leaky_relu(dft_conv(h, weight), 0.01)).sum().backward()  # explicit DFT sums
    assert conv.weight.grad is not None
    assert torch.allclose(conv.weight.grad, weight.grad, atol=1e-10) and weight.grad.abs().sum() > 0


def test_vector_conv_keeps_its_kernel_in_inference_mode_until_the_weights_change():
    """A sampler calls the layer many times per window: under inference mode the kernel is built once, gives the
    same numbers as building it afresh, and is rebuilt after the weights change."""
    torch.manual_seed(0)
    conv = VectorTimeConv(num_modes=3)
    x, v, center = torch.randn(5, 8, 3), torch.randn(5, 8, 3), torch.zeros(5, 1, 3)
    fresh = conv(x, v, center)
    with torch.inference_mode():
        first = conv(x, v, center)
        kept = conv.kernel(8)
        assert conv.kernel(8) is kept
    for a, b in zip(fresh, first):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    with torch.no_grad():
        conv.weight.mul_(2.0)
    with torch.inference_mode():
        assert conv.kernel(8) is not kept
        after = conv(x, v, center)
    torch.testing.assert_close(after[0], conv(x, v, center)[0].detach(), rtol=0, atol=0)
