"""Segment reductions in pure PyTorch (no torch-scatter).

Every function reduces ``src`` along dimension 0 into ``dim_size`` segments given by a 1-D
``index`` [n]; trailing dimensions are kept. Empty segments give 0. The semantics match
torch_scatter 2.x, which the official GET and EGNO code use (``specs/GET.md`` §2.1).
"""
from __future__ import annotations

import torch

__all__ = ["scatter_sum", "scatter_mean", "scatter_count", "scatter_softmax", "scatter_log_softmax", "scatter_max"]


def _expand(index: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    return index.view(-1, *([1] * (src.dim() - 1))).expand_as(src)


def scatter_sum(src: torch.Tensor, index: torch.Tensor, dim_size: int) -> torch.Tensor:
    """[dim_size, ...] per-segment sum of ``src`` [n, ...]."""
    out = src.new_zeros((dim_size, *src.shape[1:]))
    return out.index_add_(0, index, src)


def scatter_count(index: torch.Tensor, dim_size: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """[dim_size] number of entries per segment."""
    return torch.zeros(dim_size, dtype=dtype, device=index.device).index_add_(
        0, index, torch.ones_like(index, dtype=dtype))


def scatter_mean(src: torch.Tensor, index: torch.Tensor, dim_size: int) -> torch.Tensor:
    """[dim_size, ...] per-segment mean; the count is clamped to ≥ 1 so empty segments give 0."""
    count = scatter_count(index, dim_size, src.dtype).clamp_(min=1)
    return scatter_sum(src, index, dim_size) / count.view(-1, *([1] * (src.dim() - 1)))


def scatter_max(src: torch.Tensor, index: torch.Tensor, dim_size: int) -> torch.Tensor:
    """[dim_size, ...] per-segment maximum (−inf for empty segments)."""
    out = src.new_full((dim_size, *src.shape[1:]), float("-inf"))
    return out.scatter_reduce_(0, _expand(index, src), src, reduce="amax", include_self=True)


def scatter_softmax(src: torch.Tensor, index: torch.Tensor, dim_size: int) -> torch.Tensor:
    """Softmax of ``src`` [n, ...] within each segment, columns independent, no epsilon."""
    seg_max = scatter_max(src.detach(), index, dim_size)
    exp = (src - seg_max[index]).exp()
    return exp / scatter_sum(exp, index, dim_size)[index]


def scatter_log_softmax(src: torch.Tensor, index: torch.Tensor, dim_size: int) -> torch.Tensor:
    """Log-softmax of ``src`` [n, ...] within each segment, columns independent (no exp/log round trip)."""
    shifted = src - scatter_max(src.detach(), index, dim_size)[index]
    return shifted - scatter_sum(shifted.exp(), index, dim_size).log()[index]
