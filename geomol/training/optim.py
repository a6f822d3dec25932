"""Optimiser and learning-rate schedule shared by the Lightning tasks and the Lightning-free trainers.

The reference recipes (GET: Adam, weight decay, learning rate decayed exponentially *per step*
from ``lr`` to ``final_lr``; EGNO: Adam with a constant rate) are both expressed by
:func:`adam_with_decay`; gradient clipping is a Trainer option (``gradient_clip_val``).
"""
from __future__ import annotations

from typing import Iterable

import torch

__all__ = ["adam_with_decay", "decay_gamma"]


def decay_gamma(lr: float, final_lr: float | None, total_steps: int) -> float:
    """Per-step factor γ with ``lr · γ^total_steps = final_lr`` (1.0 when no decay is asked for)."""
    if final_lr is None or final_lr >= lr or total_steps <= 0:
        return 1.0
    return (final_lr / lr) ** (1.0 / total_steps)


def adam_with_decay(params: Iterable[torch.nn.Parameter], lr: float, weight_decay: float,
                    final_lr: float | None, total_steps: int) -> dict:
    """Adam + per-step exponential decay, as Lightning's ``configure_optimizers`` returns them (the plain loops read
    ``["optimizer"]`` and ``["lr_scheduler"]["scheduler"]``)."""
    optimizer = torch.optim.Adam([p for p in params if p.requires_grad], lr=lr, weight_decay=weight_decay)
    gamma = decay_gamma(lr, final_lr, total_steps)
    scheduler = torch.optim.lr_scheduler.ExponentialLR(optimizer, gamma=gamma)
    return {"optimizer": optimizer, "lr_scheduler": {"scheduler": scheduler, "interval": "step", "frequency": 1}}
