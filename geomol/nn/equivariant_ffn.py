"""Equivariant feed-forward block of GET (``specs/GET.md`` §7).

Each atom sees its features, the mean features of its block and an RBF of its distance to the
block centroid; one MLP updates the features (residual), another gives a per-channel factor
that scales the atom's offset from the block centroid: ``Z_a ← c_b + f_a · (Z_a − c_b)``.
Scaling around the centroid keeps the update E(3)-equivariant.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from geomol.nn.dense import dense, linear, linears, silu_linear
from geomol.nn.dropout import FastDropout
from geomol.nn.radial import RadialBasis
from geomol.nn.silu_mlp import paired_mlp3
from geomol.nn.scatter import scatter_mean

__all__ = ["EquivariantFFN", "FFN_CUTOFF"]

FFN_CUTOFF = 7.0  # hard-coded upstream, whatever the model's cutoff (quirk Q7)


def _mlp3(d_in: int, d_hidden: int, d_out: int, dropout: float) -> nn.Sequential:
    """Linear → SiLU → Dropout → Linear → SiLU → Dropout → Linear → Dropout (keys 0, 3, 6).

    The dropouts are :class:`~geomol.nn.dropout.FastDropout` (same function, a cheaper mask)."""
    return nn.Sequential(
        nn.Linear(d_in, d_hidden), nn.SiLU(), FastDropout(dropout),
        nn.Linear(d_hidden, d_hidden), nn.SiLU(), FastDropout(dropout),
        nn.Linear(d_hidden, d_out), FastDropout(dropout))


class EquivariantFFN(nn.Module):
    """Feature MLP plus centroid-relative coordinate scaling.

    Args:
        d_in: feature size d (also the output size: the update is residual).
        d_hidden: MLP width (4d in GET).
        n_channel: C, coordinates per atom.
        n_rbf: R, basis functions of the centroid distance (cutoff 7.0).
        dropout: dropout probability inside both MLPs (train mode only).

    Shapes (``forward``): H [N, d], Z [N, C, 3], block_id [N] → H [N, d], Z [N, C, 3].

    Both MLPs read the same input [H_a ‖ mean_block(H) ‖ RBF(|Z_a − c_b|)]; their products run through
    :mod:`geomol.nn.dense` (oneDNN or BLAS, whichever is faster here; on oneDNN the SiLUs are fused into them
    when no gradient is needed); with gradients (outside autocast) both MLPs run as one
    :func:`~geomol.nn.silu_mlp.paired_mlp3`, which keeps only pre-activations and boolean dropout masks for
    the backward pass.
    """

    def __init__(self, d_in: int, d_hidden: int, n_channel: int, n_rbf: int, dropout: float = 0.1):
        super().__init__()
        d_input = 2 * d_in + n_channel * n_rbf
        self.mlp_h = _mlp3(d_input, d_hidden, d_in, dropout)
        self.mlp_z = _mlp3(d_input, d_hidden, n_channel, dropout)
        self.rbf = RadialBasis(n_rbf, FFN_CUTOFF)

    def _first_layers(self, inputs: torch.Tensor) -> list[torch.Tensor]:
        """SiLU of both MLPs' first layers [N, d_hidden] each (h, z), one fused pass each without autograd on oneDNN."""
        maps = (self.mlp_h[0], self.mlp_z[0])
        if torch.is_grad_enabled():
            return [F.silu(t) for t in linears(inputs, [m.weight for m in maps], [m.bias for m in maps])]
        return [dense(inputs, m.weight, m.bias, activation="silu") for m in maps]

    @staticmethod
    def _rest(mlp: nn.Sequential, hidden: torch.Tensor) -> torch.Tensor:
        """Dropout → Linear → SiLU → Dropout → Linear → Dropout (layers 2–7 of :func:`_mlp3`)."""
        hidden = mlp[5](silu_linear(mlp[2](hidden), mlp[3].weight, mlp[3].bias))
        return mlp[7](linear(hidden, mlp[6].weight, mlp[6].bias))

    def forward(self, H: torch.Tensor, Z: torch.Tensor, block_id: torch.Tensor, n_blocks: int):
        centroid = scatter_mean(Z, block_id, n_blocks).index_select(0, block_id)
        offset = Z - centroid
        radial = self.rbf(torch.linalg.vector_norm(offset, dim=-1)).flatten(1)  # [N, C·R]
        block_mean = scatter_mean(H, block_id, n_blocks).index_select(0, block_id)
        inputs = torch.cat([H, block_mean, radial], 1)
        p = self.mlp_h[2].p
        # training: keep pre-activations and masks only; under autocast the layers run through autograd, so
        # that every product takes autocast's dtype and the gradients match it
        if torch.is_grad_enabled() and p < 1.0 and not torch.is_autocast_enabled(inputs.device.type):
            out_h, out_z = paired_mlp3(inputs, (self.mlp_h, self.mlp_z), p, self.training)
        else:
            hidden_h, hidden_z = self._first_layers(inputs)
            out_h = self._rest(self.mlp_h, hidden_h)
            out_z = self._rest(self.mlp_z, hidden_z)
        return H + out_h, centroid + out_z.unsqueeze(-1) * offset
