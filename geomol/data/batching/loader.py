"""A DataLoader of BlockGraphs that Lightning can checkpoint and resume mid-epoch.

Lightning saves ``state_dict()`` of any training loader that has one (and restores it with
``load_state_dict``) in its checkpoints. :class:`ResumableLoader` reports the epoch and the
number of batches already handed out by its :class:`~geomol.data.batching.sampler.EpochBatchSampler`, so
a resumed run continues with exactly the batches the interrupted one had not seen. It also
owns a private random generator, so that creating iterators never consumes the global torch
random stream (which drives dropout): a resumed run draws the same dropout masks.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, Sequence

import torch
from torch.utils.data import DataLoader, Dataset
from torch_geometric.data import Batch

from geomol.data.batching.sampler import EpochBatchSampler

__all__ = ["ResumableLoader", "PredictionBatches", "collate_graphs"]


def collate_graphs(items: Sequence[Any]) -> Batch:
    """PyG batch of a list of BlockGraphs; tuples (e.g. LEP pairs) are flattened in order."""
    graphs = [g for item in items for g in (item if isinstance(item, tuple) else (item,))]
    return Batch.from_data_list(graphs)


class _DeferredIterator:
    """Creates the DataLoader iterator at the first ``next``, not at ``iter``.

    Lightning calls ``iter(loader)`` before it sets the epoch of the sampler and before it
    restores a checkpoint; a multi-process iterator would fetch its first indices right then.
    Deferring the creation lets both take effect.
    """

    def __init__(self, make: Callable[[], Iterator]):
        self._make, self._it = make, None

    def __iter__(self) -> "_DeferredIterator":
        return self

    def __next__(self):
        if self._it is None:
            self._it = self._make()
        return next(self._it)


class ResumableLoader(DataLoader):
    """``DataLoader(dataset, batch_sampler=sampler, collate_fn=collate_graphs)`` with a resumable state.

    Args:
        dataset: a map-style dataset of BlockGraphs (or tuples of them).
        batch_sampler: an :class:`~geomol.data.batching.sampler.EpochBatchSampler`.
        num_workers, **kwargs: as for :class:`torch.utils.data.DataLoader`.
    """

    def __init__(self, dataset: Dataset, batch_sampler: EpochBatchSampler, num_workers: int = 0, **kwargs):
        kwargs.setdefault("collate_fn", collate_graphs)
        kwargs.setdefault("generator", torch.Generator().manual_seed(batch_sampler.seed))
        kwargs.setdefault("persistent_workers", num_workers > 0)
        super().__init__(dataset, batch_sampler=batch_sampler, num_workers=num_workers, **kwargs)

    def __iter__(self) -> _DeferredIterator:
        return _DeferredIterator(super().__iter__)

    def state_dict(self) -> dict[str, int]:
        return self.batch_sampler.state_dict()

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.batch_sampler.load_state_dict(state)


class PredictionBatches:
    """The batches of a loader, in order, as a plain iterable (what ``predict_dataloader`` returns).

    For prediction Lightning rebuilds any ``DataLoader`` it is given around a sampler of its own,
    which a batch sampler with its own arguments (block budgets, sharding) cannot survive; an
    iterable that is not a ``DataLoader`` is used as it is. Batches keep the items' ``name``, so
    predictions are matched to items by name, not by Lightning's batch indices.
    """

    def __init__(self, loader: ResumableLoader):
        self.loader = loader

    def __iter__(self) -> Iterator:
        return iter(self.loader)

    def __len__(self) -> int:
        return len(self.loader)
