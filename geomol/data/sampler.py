"""Dynamic batching: batches formed by a budget of blocks, not by a fixed number of complexes.

GET's cost grows with the number of blocks, so the reference training forms each batch by
adding shuffled complexes while the total stays within 2000 blocks. :class:`DynamicBatchSampler`
does that deterministically from ``seed + epoch`` and shards the batches over distributed
replicas so that every rank gets the same number of batches (a rank that would run out
repeats batches from the start of the epoch's list, as ``DistributedSampler`` pads indices).

A complex larger than the budget is never dropped silently: it forms a batch of its own (the
model sees it, at a memory cost the user was warned about); :attr:`oversized` lists such items
and a warning counts them when the sampler is built.
"""
from __future__ import annotations

import math
import warnings
from typing import Iterator, Sequence

import torch
from torch.utils.data import Sampler

from geomol.errors import ConfigError

__all__ = ["DynamicBatchSampler"]


def _distributed_defaults(num_replicas: int | None, rank: int | None) -> tuple[int, int]:
    if num_replicas is None or rank is None:
        ready = torch.distributed.is_available() and torch.distributed.is_initialized()
        if num_replicas is None:
            num_replicas = torch.distributed.get_world_size() if ready else 1
        if rank is None:
            rank = torch.distributed.get_rank() if ready else 0
    if num_replicas < 1 or not 0 <= rank < num_replicas:
        raise ConfigError(f"invalid rank {rank} for {num_replicas} replicas")
    return num_replicas, rank


class DynamicBatchSampler(Sampler[list[int]]):
    """Yield lists of dataset indices whose total size fits ``max_blocks``.

    Args:
        sizes: size of each item (blocks, global blocks included: ``ProcessedDataset.sizes``).
        max_blocks: budget per batch (reference: 2000). An item above it gets a batch of its own.
        shuffle: reshuffle items each epoch (call :meth:`set_epoch`); otherwise keep index order.
        seed: base seed; the order of epoch ``e`` depends only on ``seed + e``.
        num_replicas, rank: distributed sharding (default: from ``torch.distributed`` if it is
            initialised, else a single replica). Every rank yields the same number of batches.
        drop_last: with several replicas, drop the trailing batches that do not fill a round
            over all ranks instead of repeating batches to fill it.

    Example:
        >>> sampler = DynamicBatchSampler([120, 80, 300], max_blocks=400, seed=12)
        >>> loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=Batch.from_data_list)
        >>> for epoch in range(10):
        ...     sampler.set_epoch(epoch)
    """

    def __init__(self, sizes: Sequence[int], max_blocks: int = 2000, *, shuffle: bool = True, seed: int = 0,
                 num_replicas: int | None = None, rank: int | None = None, drop_last: bool = False):
        if max_blocks < 1:
            raise ConfigError(f"max_blocks must be positive, got {max_blocks}")
        self.sizes = torch.as_tensor(list(sizes), dtype=torch.long)
        if self.sizes.numel() and int(self.sizes.min()) < 0:
            raise ConfigError("item sizes must be non-negative")
        self.max_blocks = int(max_blocks)
        self.shuffle, self.seed, self.drop_last = shuffle, int(seed), drop_last
        self.num_replicas, self.rank = _distributed_defaults(num_replicas, rank)
        self.epoch = 0
        self.oversized: list[int] = torch.nonzero(self.sizes > self.max_blocks).flatten().tolist()
        if self.oversized:
            warnings.warn(
                f"{len(self.oversized)} item(s) exceed the budget of {self.max_blocks} blocks "
                f"(largest {int(self.sizes.max())}); each gets a batch of its own", RuntimeWarning, stacklevel=2)
        self._cache: tuple[int, list[list[int]]] | None = None

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle of ``epoch`` (call before iterating, on every rank)."""
        self.epoch = int(epoch)

    def _order(self) -> list[int]:
        if not self.shuffle:
            return list(range(len(self.sizes)))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(len(self.sizes), generator=generator).tolist()

    def _all_batches(self) -> list[list[int]]:
        """Every batch of the current epoch, before sharding (identical on every rank)."""
        if self._cache is not None and self._cache[0] == self.epoch:
            return self._cache[1]
        sizes = self.sizes.tolist()
        batches: list[list[int]] = []
        current: list[int] = []
        total = 0
        for index in self._order():
            size = sizes[index]
            if size > self.max_blocks:
                batches.append([index])
                continue
            if current and total + size > self.max_blocks:
                batches.append(current)
                current, total = [], 0
            current.append(index)
            total += size
        if current:
            batches.append(current)
        self._cache = (self.epoch, batches)
        return batches

    def _num_batches_per_rank(self, total: int) -> int:
        if self.num_replicas == 1:
            return total
        if self.drop_last:
            return total // self.num_replicas
        return math.ceil(total / self.num_replicas)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._all_batches()
        per_rank = self._num_batches_per_rank(len(batches))
        needed = per_rank * self.num_replicas
        if needed > len(batches) and batches:  # pad by repeating from the start (DistributedSampler rule)
            batches = batches + (batches * math.ceil(needed / len(batches)))[: needed - len(batches)]
        for position in range(self.rank, needed, self.num_replicas):
            yield list(batches[position])

    def __len__(self) -> int:
        return self._num_batches_per_rank(len(self._all_batches()))
