"""Time axis of EGNO: the sinusoidal slice embedding and the temporal Fourier convolutions.

EGNO predicts P future time slices at once and mixes them with a Fourier layer along time
(``specs/EGNO.md`` §1.4, §2.2, §2.3). The official code does ``rfft`` → keep K modes →
complex channel mixing → ``irfft``. For the tiny P used in practice (4–8) FFT calls are pure
overhead; the same operator is a *real circular convolution* over time with a kernel κ built
from the complex weights:

    y[t, o] = Σ_s Σ_c u[s, c] · κ_{c,o}((t − s) mod P),
    κ_{c,o}(τ) = (1/P) Σ_{k<K'} α_k [Re W_{c,o,k} cos(2πkτ/P) − Im W_{c,o,k} sin(2πkτ/P)],

with K' = min(K, ⌊P/2⌋ + 1) kept modes and α_0 = 1, α_k = 2 (1 for the Nyquist bin 2k = P).
The 2-channel vector layer applies κ as one dense [2P, 2P] matrix (:func:`circular_kernel`);
the wide scalar layer uses the factorised form (real analysis onto the kept modes, channel
mixing per mode, synthesis: :func:`spectral_time_conv`), about (4K'−3)·C² multiply-adds per
node instead of the dense kernel's P²·C².

Layout: tensors carry the slice axis right after the node axis, ``[N, P, C]`` (node-major),
so that a graph gather ``h[row]`` fetches all P slices of a node at once.
"""
from __future__ import annotations

import functools
import math

import torch
from torch import nn
import torch.nn.functional as F

from geomol.nn.dense import linear
from geomol.nn.time_conv import residual_time_conv, residual_time_conv_ready

__all__ = ["timestep_embedding", "kept_modes", "circular_kernel", "spectral_time_conv", "ScalarTimeConv",
           "VectorTimeConv"]


def timestep_embedding(num_slices: int, dim: int, max_positions: float = 10000.0,
                       dtype: torch.dtype = torch.float32, device=None) -> torch.Tensor:
    """[P, dim] sinusoidal embedding of the slice indices t = 0..P−1: [sin(tω_0..), cos(tω_0..)].

    ω_k = max_positions^(−k/(half−1)), half = ⌊dim/2⌋; an odd ``dim`` gets a trailing zero column.
    Computed in float32 exactly as the official ``get_timestep_embedding``, then cast to ``dtype``.
    """
    half = dim // 2
    if half < 2:
        raise ValueError(f"time embedding size must be ≥ 4, got {dim}")
    scale = math.log(max_positions) / (half - 1)
    freqs = torch.exp(torch.arange(half, dtype=torch.float32, device=device) * -scale)
    angles = torch.arange(num_slices, dtype=torch.float32, device=device)[:, None] * freqs[None, :]
    emb = torch.cat([torch.sin(angles), torch.cos(angles)], dim=-1)
    if dim % 2 == 1:
        emb = F.pad(emb, (0, 1))
    return emb.to(dtype)


def kept_modes(num_modes: int, num_slices: int) -> int:
    """K' = min(K, ⌊P/2⌋ + 1): the Fourier bins a real signal of length P has below K."""
    return min(num_modes, num_slices // 2 + 1)


def _mode_basis(num_modes: int, num_slices: int, dtype, device) -> tuple[torch.Tensor, torch.Tensor]:
    """[K', P] cosine and (−)sine tables of κ, including the α_k/P weights."""
    k = torch.arange(kept_modes(num_modes, num_slices), dtype=torch.float64)
    tau = torch.arange(num_slices, dtype=torch.float64)
    alpha = torch.where((k == 0) | (2 * k == num_slices), 1.0, 2.0).double() / num_slices
    angle = 2 * math.pi * k[:, None] * tau[None, :] / num_slices
    cos, sin = alpha[:, None] * torch.cos(angle), -alpha[:, None] * torch.sin(angle)
    return cos.to(dtype=dtype, device=device), sin.to(dtype=dtype, device=device)


def circular_kernel(weight: torch.Tensor, num_slices: int) -> torch.Tensor:
    """Dense real operator of the temporal Fourier layer.

    Args:
        weight: [C_in, C_out, K, 2] official spectral weight (last axis: real, imaginary).
        num_slices: P.

    Returns:
        [P·C_in, P·C_out] matrix M with M[(s, c), (t, o)] = κ_{c,o}((t − s) mod P), so that
        ``u.reshape(N, P·C_in) @ M`` is the spectral convolution of u [N, P, C_in].
    """
    c_in, c_out, num_modes, _ = weight.shape
    cos, sin = _mode_basis(num_modes, num_slices, weight.dtype, weight.device)
    kept = cos.size(0)
    w_re, w_im = weight[:, :, :kept].unbind(-1)
    kappa = torch.einsum("iok,kt->iot", w_re, cos) + torch.einsum("iok,kt->iot", w_im, sin)  # [C_in, C_out, τ]
    lag = torch.arange(num_slices, device=weight.device)
    lag = (lag[None, :] - lag[:, None]) % num_slices  # [s, t] → (t − s) mod P
    return kappa[:, :, lag].permute(2, 0, 3, 1).reshape(num_slices * c_in, num_slices * c_out)


@functools.lru_cache(maxsize=64)
def _fourier_tables(num_modes: int, num_slices: int, dtype: torch.dtype, device: torch.device):
    """Real Fourier analysis [J, P] and synthesis [P, J] matrices of the kept modes, and the modes.

    Coefficients are ordered Re U_0, then Re U_k, Im U_k for each kept 0 < k < P/2, then Re U_{P/2}
    if the Nyquist bin is kept; the imaginary parts of the DC and Nyquist bins are left out
    because the real inverse transform discards them. Synthesis includes the α_k/P weights.
    """
    with torch.inference_mode(False):  # cached: must stay usable by autograd after an inference-mode call
        cos, sin = _mode_basis(num_modes, num_slices, torch.float64, None)
        tau = torch.arange(num_slices, dtype=torch.float64)
        rows_fwd, rows_inv, modes = [], [], []
        for k in range(cos.size(0)):
            angle = 2 * math.pi * k * tau / num_slices
            rows_fwd.append(torch.cos(angle)), rows_inv.append(cos[k])
            if 0 < 2 * k < num_slices:
                rows_fwd.append(-torch.sin(angle)), rows_inv.append(sin[k])
            modes.append(k)
        analysis = torch.stack(rows_fwd).to(dtype=dtype, device=device)
        synthesis = torch.stack(rows_inv, 1).to(dtype=dtype, device=device)
        return analysis, synthesis, tuple(modes)


def _mode_mixing(coef: torch.Tensor, weight: torch.Tensor, modes: tuple, num_slices: int) -> torch.Tensor:
    """Per-mode complex channel mixing Y_k = U_k W_k in real form, coef [J, N, C_in] → [J, N, C_out].

    A real bin (DC, Nyquist) is one real matrix product; a complex bin is [Re U, Im U] times
    [[Re W, Im W], [−Im W, Re W]]. Mixing each mode separately skips the zero blocks of the full
    J·C × J·C operator.
    """
    out, j = [], 0
    # (unbind, not indexing: the backward pass stacks the parts' gradients into one tensor, where each index
    # would make and add a zero-filled copy of the whole)
    per_mode, coefs = weight.unbind(2), coef.unbind(0)
    for k in modes:
        w_re, w_im = per_mode[k].unbind(-1)
        if 0 < 2 * k < num_slices:
            pair = torch.cat([coefs[j], coefs[j + 1]], 1)  # [N, 2·C_in]: Re U, Im U
            block = torch.cat([torch.cat([w_re, w_im], 1), torch.cat([-w_im, w_re], 1)], 0)
            out.extend(linear(pair, block.t()).chunk(2, 1))  # Re Y, Im Y
            j += 2
        else:
            out.append(linear(coefs[j], w_re.t()))
            j += 1
    return torch.stack(out)


def spectral_time_conv(u: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The official ``SpectralConv1d`` along the slice axis, without FFTs.

    Analysis onto the J = 2K' − 1 real Fourier coefficients, the complex channel mixing per mode
    as real matrix products, synthesis back to P slices: O(N·(2K'−1)·C²) work instead of the dense
    kernel's O(N·P²·C²).

    Args:
        u: [N, P, C_in]; weight: [C_in, C_out, K, 2] (real, imaginary).

    Returns:
        [N, P, C_out].
    """
    p = u.size(1)
    analysis, synthesis, modes = _fourier_tables(weight.size(2), p, u.dtype, u.device)
    coef = torch.einsum("js,nsc->jnc", analysis, u)  # [J, N, C_in]: one contiguous block per coefficient
    return torch.einsum("tj,jno->nto", synthesis, _mode_mixing(coef, weight, modes, p))


class ScalarTimeConv(nn.Module):
    """h ← h + LeakyReLU(spectral_conv(h)) on invariant channels (official ``TimeConv``).

    Args:
        channels: C (input = output width).
        num_modes: K Fourier modes kept.

    Shapes: forward(h [N, P, C]) → [N, P, C].
    """

    def __init__(self, channels: int, num_modes: int):
        super().__init__()
        self.num_modes = num_modes
        # (1/C²)·U[0, 1), multiplied (not divided) as in the official code, so that a seed gives its exact values
        self.weight = nn.Parameter((1 / (channels * channels)) * torch.rand(channels, channels, num_modes, 2))

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        if residual_time_conv_ready(h, self.weight):  # compiled passes around the mixing, backward by hand
            return residual_time_conv(h, self.weight, _fourier_tables(self.num_modes, h.size(1), h.dtype, h.device))
        return h + F.leaky_relu(spectral_time_conv(h, self.weight), 0.01)


class VectorTimeConv(nn.Module):
    """(x, v) ← (x, v) + spectral_conv([x − x̄, v]) on 3D vectors (official ``TimeConv_x``).

    The two channels are the centred position x − x̄ and the velocity v. One real 2×2-channel
    kernel is applied to each Cartesian component alike and there is no nonlinearity, so the
    map commutes with rotations and reflections; centring on x̄ makes it translation-equivariant.

    Shapes: forward(x [N, P, 3], v [N, P, 3], center [N, 1, 3] or [N, P, 3]) → (x, v), each [N, P, 3].
    """

    def __init__(self, num_modes: int):
        super().__init__()
        self.num_modes = num_modes
        self.weight = nn.Parameter(0.1 * torch.rand(2, 2, num_modes, 2))
        self._inference_kernel: tuple[tuple, torch.Tensor] | None = None

    def kernel(self, num_slices: int) -> torch.Tensor:
        """[2P, 2P] :func:`circular_kernel` of the weights. Under ``torch.inference_mode`` it is kept until the
        weights change (a sampler calls the layer many times per window with the same weights); the same numbers."""
        if not torch.is_inference_mode_enabled():
            return circular_kernel(self.weight, num_slices)
        key = (num_slices, self.weight.dtype, self.weight.device, self.weight.data_ptr(), self.weight._version)
        if self._inference_kernel is None or self._inference_kernel[0] != key:
            self._inference_kernel = (key, circular_kernel(self.weight, num_slices))
        return self._inference_kernel[1]

    def forward(self, x: torch.Tensor, v: torch.Tensor, center: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        n, p, _ = x.shape
        z = torch.stack([x - center, v], dim=-1).transpose(1, 2).reshape(n * 3, p * 2)  # [(n, d), (s, c)]
        y = (z @ self.kernel(p)).view(n, 3, p, 2).transpose(1, 2)  # [n, t, d, o]
        y_x, y_v = y.unbind(-1)
        return x + y_x, v + y_v
