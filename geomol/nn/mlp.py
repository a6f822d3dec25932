"""Small MLP builders shared by the GET modules."""
from __future__ import annotations

from torch import nn

__all__ = ["mlp2"]


def mlp2(d_in: int, d_mid: int, d_out: int) -> nn.Sequential:
    """Linear → SiLU → Linear → SiLU: GET's two-layer MLP, with an activation after the last
    layer too (upstream quirk Q8, kept for faithfulness). Keys ``0.*`` and ``2.*``."""
    return nn.Sequential(nn.Linear(d_in, d_mid), nn.SiLU(), nn.Linear(d_mid, d_out), nn.SiLU())
