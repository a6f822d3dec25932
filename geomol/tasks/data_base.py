"""The base LightningDataModule of geomol: splits in, resumable sharded loaders out.

Subclasses implement :meth:`GraphDataModule.build_splits` (``{'train': ds, 'valid': ds, 'test': ds}``)
and :meth:`GraphDataModule.batch_sampler`. Loaders shard over DDP ranks themselves (so run the
Trainer with ``use_distributed_sampler=False``, the default of ``geomol fit``) and can be resumed
mid-epoch (:class:`~geomol.data.batching.loader.ResumableLoader`): the data module's own ``state_dict``
records where the training loader is, and ``load_state_dict`` hands that to the loader. (Lightning's
loop-level loader state is not enough: the loader it restores is created before the checkpoint is
read when the optimiser schedule asks for the number of steps.)
"""
from __future__ import annotations

from typing import Any

import lightning.pytorch as pl
from torch.utils.data import Dataset

from geomol.data.batching.loader import PredictionBatches, ResumableLoader
from geomol.data.batching.sampler import EpochBatchSampler
from geomol.errors import ConfigError

__all__ = ["GraphDataModule", "STAGES"]

STAGES = ("train", "valid", "test")


class GraphDataModule(pl.LightningDataModule):
    """Loaders for train / valid / test (and predict = test) splits.

    Args:
        num_workers: DataLoader worker processes.
        seed: seed of the shuffling (epoch e uses seed + e).
    """

    def __init__(self, num_workers: int = 0, seed: int = 0):
        super().__init__()
        self.num_workers, self.seed = num_workers, seed
        self.splits: dict[str, Dataset] = {}
        self._train_loader: ResumableLoader | None = None
        self._train_state: dict[str, int] | None = None

    def build_splits(self) -> dict[str, Dataset]:
        raise NotImplementedError

    @property
    def graph_recipe(self):
        """How this data module builds graphs (a ComplexRecipe or TrajectoryProtocol; None if it has no such
        record). The task stores it with the model."""
        return None

    def batch_sampler(self, dataset: Dataset, train: bool, num_replicas: int, rank: int) -> EpochBatchSampler:
        raise NotImplementedError

    def setup(self, stage: str | None = None) -> None:
        if not self.splits:
            self.splits = self.build_splits()
            missing = [s for s in STAGES if s not in self.splits]
            if missing:
                raise ConfigError(f"{type(self).__name__} produced no {missing} split")

    def _replicas(self) -> tuple[int, int]:
        trainer = getattr(self, "trainer", None)
        if trainer is None:
            return 1, 0
        return trainer.world_size, trainer.global_rank

    def _loader(self, stage: str, train: bool) -> ResumableLoader:
        self.setup()
        dataset = self.splits[stage]
        if len(dataset) == 0:
            raise ConfigError(f"the {stage} split is empty")
        replicas, rank = self._replicas()
        return ResumableLoader(dataset, self.batch_sampler(dataset, train, replicas, rank), num_workers=self.num_workers)

    def train_dataloader(self) -> ResumableLoader:
        self._train_loader = self._loader("train", train=True)
        if self._train_state is not None:
            self._train_loader.load_state_dict(self._train_state)
        return self._train_loader

    def state_dict(self) -> dict[str, Any]:
        return {} if self._train_loader is None else {"train_loader": self._train_loader.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._train_state = state_dict.get("train_loader")
        if self._train_loader is not None and self._train_state is not None:
            self._train_loader.load_state_dict(self._train_state)

    def val_dataloader(self) -> ResumableLoader:
        return self._loader("valid", train=False)

    def test_dataloader(self) -> ResumableLoader:
        return self._loader("test", train=False)

    def predict_dataloader(self) -> PredictionBatches:
        return PredictionBatches(self._loader("test", train=False))

    def split_sizes(self) -> dict[str, Any]:
        """Number of items per split (for logs and model cards)."""
        self.setup()
        return {name: len(ds) for name, ds in self.splits.items()}
