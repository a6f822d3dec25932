"""Batch samplers: deterministic per epoch, sharded over replicas, resumable mid-epoch.

:class:`EpochBatchSampler` is the common machinery: the batches of epoch ``e`` depend only on
``seed + e``; they are sharded over distributed replicas so that every rank gets the same number
(a rank that would run out repeats batches from the start of the epoch's list, as
``DistributedSampler`` pads indices); and :meth:`~EpochBatchSampler.state_dict` /
:meth:`~EpochBatchSampler.load_state_dict` let a run stopped mid-epoch continue with exactly the
batches it had not seen (used by :class:`geomol.data.batching.loader.ResumableLoader`).

Dynamic batching (:class:`DynamicBatchSampler`): batches formed by a budget of blocks, not by a
fixed number of complexes.

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
from typing import Hashable, Iterator, Sequence

import torch
from torch.utils.data import Sampler

from geomol.errors import ConfigError

__all__ = ["EpochBatchSampler", "DynamicBatchSampler", "FixedBatchSampler"]


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


class EpochBatchSampler(Sampler[list[int]]):
    """Base class: subclasses implement :meth:`_epoch_batches` (all batches of ``self.epoch``).

    Args:
        num_items: dataset length.
        shuffle: reshuffle items each epoch (call :meth:`set_epoch`); otherwise keep index order.
        seed: base seed; the order of epoch ``e`` depends only on ``seed + e``.
        num_replicas, rank: distributed sharding (default: from ``torch.distributed`` if it is
            initialised, else a single replica). Every rank yields the same number of batches.
        drop_last: with several replicas, drop the trailing batches that do not fill a round
            over all ranks instead of repeating batches to fill it.
        pad: with several replicas and ``drop_last=False``, repeat batches so that every rank
            gets the same number (training); ``False`` gives every batch exactly once, the
            last ranks possibly one batch fewer (evaluation, where duplicates would bias metrics).

    Lightning calls ``set_epoch`` on ``batch_sampler.sampler``, which is the sampler itself.
    """

    def __init__(self, num_items: int, *, shuffle: bool = True, seed: int = 0, num_replicas: int | None = None,
                 rank: int | None = None, drop_last: bool = False, pad: bool = True):
        self.num_items = int(num_items)
        self.shuffle, self.seed, self.drop_last, self.pad = shuffle, int(seed), drop_last, pad
        self.num_replicas, self.rank = _distributed_defaults(num_replicas, rank)
        self.epoch = 0
        self.yielded = 0  # batches handed out in the current pass
        self._resume: tuple[int, int] | None = None  # (epoch, batches to skip)
        self._cache: tuple[int, list[list[int]]] | None = None

    @property
    def sampler(self) -> "EpochBatchSampler":
        return self

    def set_epoch(self, epoch: int) -> None:
        """Select the shuffle of ``epoch`` (call before iterating, on every rank)."""
        self.epoch = int(epoch)

    def _order(self) -> list[int]:
        if not self.shuffle:
            return list(range(self.num_items))
        generator = torch.Generator().manual_seed(self.seed + self.epoch)
        return torch.randperm(self.num_items, generator=generator).tolist()

    def _epoch_batches(self) -> list[list[int]]:
        raise NotImplementedError

    def _all_batches(self) -> list[list[int]]:
        """Every batch of the current epoch, before sharding (identical on every rank)."""
        if self._cache is None or self._cache[0] != self.epoch:
            self._cache = (self.epoch, self._epoch_batches())
        return self._cache[1]

    def _num_batches_per_rank(self, total: int) -> int:
        if self.num_replicas == 1:
            return total
        if not self.pad and not self.drop_last:
            return len(range(self.rank, total, self.num_replicas))
        if self.drop_last:
            return total // self.num_replicas
        return math.ceil(total / self.num_replicas)

    def __iter__(self) -> Iterator[list[int]]:
        batches = self._all_batches()
        per_rank = self._num_batches_per_rank(len(batches))
        needed = per_rank * self.num_replicas if self.pad or self.drop_last else len(batches)
        if needed > len(batches) and batches:  # pad by repeating from the start (DistributedSampler rule)
            batches = batches + (batches * math.ceil(needed / len(batches)))[: needed - len(batches)]
        skip = 0
        if self._resume is not None and self._resume[0] == self.epoch:
            skip = self._resume[1]
        self._resume = None
        self.yielded = skip
        for position in range(self.rank + skip * self.num_replicas, needed, self.num_replicas):
            self.yielded += 1
            yield list(batches[position])

    def __len__(self) -> int:
        return self._num_batches_per_rank(len(self._all_batches()))

    def state_dict(self) -> dict[str, int]:
        """Where the current pass is: epoch and batches already handed out."""
        return {"epoch": self.epoch, "batches": self.yielded}

    def load_state_dict(self, state: dict[str, int]) -> None:
        """Select epoch ``state['epoch']`` and make its next pass skip the batches already seen.

        The epoch is selected here, not left to a later :meth:`set_epoch`, because Lightning fetches the first
        batch of a resumed run (and reads the loader's length) before it sets the sampler's epoch.
        """
        self._resume = (int(state["epoch"]), int(state["batches"]))
        self.epoch = self._resume[0]


class DynamicBatchSampler(EpochBatchSampler):
    """Yield lists of dataset indices whose total size fits ``max_blocks``.

    Args:
        sizes: size of each item (blocks, global blocks included: ``ProcessedDataset.sizes``).
        max_blocks: budget per batch (reference: 2000). An item above it gets a batch of its own.
        groups: optional group of each item (e.g. its protein); a batch then never mixes groups,
            so that a loss can compare the items of one batch (ranking within a target). The
            batches are shuffled as a whole after packing.
        shuffle, seed, num_replicas, rank, drop_last: see :class:`EpochBatchSampler`.

    Example:
        >>> sampler = DynamicBatchSampler([120, 80, 300], max_blocks=400, seed=12)
        >>> loader = ResumableLoader(dataset, batch_sampler=sampler)
    """

    def __init__(self, sizes: Sequence[int], max_blocks: int = 2000, *, groups: Sequence[Hashable] | None = None,
                 shuffle: bool = True, seed: int = 0, num_replicas: int | None = None, rank: int | None = None,
                 drop_last: bool = False, pad: bool = True):
        if max_blocks < 1:
            raise ConfigError(f"max_blocks must be positive, got {max_blocks}")
        self.sizes = torch.as_tensor(list(sizes), dtype=torch.long)
        if self.sizes.numel() and int(self.sizes.min()) < 0:
            raise ConfigError("item sizes must be non-negative")
        super().__init__(len(self.sizes), shuffle=shuffle, seed=seed, num_replicas=num_replicas, rank=rank,
                         drop_last=drop_last, pad=pad)
        self.max_blocks = int(max_blocks)
        if groups is not None and len(groups) != len(self.sizes):
            raise ConfigError(f"{len(groups)} groups for {len(self.sizes)} items")
        self.groups = None if groups is None else list(groups)
        self.oversized: list[int] = torch.nonzero(self.sizes > self.max_blocks).flatten().tolist()
        if self.oversized:
            warnings.warn(
                f"{len(self.oversized)} item(s) exceed the budget of {self.max_blocks} blocks "
                f"(largest {int(self.sizes.max())}); each gets a batch of its own", RuntimeWarning, stacklevel=2)

    def _pack(self, order: Sequence[int]) -> list[list[int]]:
        """Greedy packing of items, in order, into batches within the budget."""
        sizes = self.sizes.tolist()
        batches: list[list[int]] = []
        current: list[int] = []
        total = 0
        for index in order:
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
        return batches

    def _epoch_batches(self) -> list[list[int]]:
        order = self._order()
        if self.groups is None:
            return self._pack(order)
        members: dict[Hashable, list[int]] = {}
        for index in order:
            members.setdefault(self.groups[index], []).append(index)
        batches = [batch for group in members.values() for batch in self._pack(group)]
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch + 1)
            batches = [batches[i] for i in torch.randperm(len(batches), generator=generator).tolist()]
        return batches


class FixedBatchSampler(EpochBatchSampler):
    """Batches of ``batch_size`` items (the last one smaller unless ``drop_incomplete``).

    ``drop_incomplete`` drops the last, smaller batch of the epoch (the reference trajectory
    trainers use ``drop_last=True`` for training); see :class:`EpochBatchSampler` for the rest.
    """

    def __init__(self, num_items: int, batch_size: int, *, drop_incomplete: bool = False, **kwargs):
        if batch_size < 1:
            raise ConfigError(f"batch_size must be positive, got {batch_size}")
        super().__init__(num_items, **kwargs)
        self.batch_size, self.drop_incomplete = int(batch_size), drop_incomplete

    def _epoch_batches(self) -> list[list[int]]:
        order = self._order()
        stop = len(order) - len(order) % self.batch_size if self.drop_incomplete else len(order)
        return [order[i:i + self.batch_size] for i in range(0, stop, self.batch_size)]
