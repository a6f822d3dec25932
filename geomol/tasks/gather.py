"""Per-item values of an evaluation epoch, collected on every DDP rank and gathered once at its end.

Every task computes its metrics over all items of an epoch (correlations are not averages of per-batch
values); the callbacks that write prediction tables gather their rows the same way.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

__all__ = ["EpochCollector", "gather_objects"]


def gather_objects(values: list[Any]) -> list[Any]:
    """Concatenate a Python list over all DDP ranks (the list itself on a single process)."""
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return values
    parts: list[list[Any]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(parts, values)
    return [v for part in parts for v in part]


class EpochCollector:
    """Accumulate named columns of per-item values over an epoch, then hand them out once."""

    def __init__(self):
        self._columns: dict[str, list[Any]] = {}

    def add(self, **columns: Any) -> None:
        for name, values in columns.items():
            if isinstance(values, torch.Tensor):
                values = values.detach().float().cpu().reshape(-1).tolist()
            self._columns.setdefault(name, []).extend(values)

    def pop(self) -> dict[str, list[Any]]:
        """All columns gathered over ranks; the collector is emptied."""
        out = {name: gather_objects(values) for name, values in self._columns.items()}
        self._columns = {}
        return out
