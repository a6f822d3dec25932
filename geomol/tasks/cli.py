"""``geomol fit|validate|test|predict``: Lightning's ``LightningCLI`` over the geomol tasks.

A config names a LightningModule and a LightningDataModule by class path (``model.class_path``,
``data.class_path``) with their arguments, plus Trainer settings; any key can be overridden on
the command line (``--trainer.max_epochs 5``, ``--data.init_args.fold 2``). Our loaders shard
over DDP ranks themselves, so ``trainer.use_distributed_sampler`` defaults to False.
"""
from __future__ import annotations

import sys

import lightning.pytorch as pl
from lightning.pytorch.cli import LightningCLI

from geomol.data.vocab import VOCAB

__all__ = ["GeomolCLI", "run_lightning"]


def _block_types(data_init_args) -> int:
    """Rows of the block embedding a data module's graphs need (base vocabulary + fragments)."""
    fragments = data_init_args.get("fragments") if data_init_args is not None else None
    if not fragments:
        return len(VOCAB)
    from geomol.data.fragment import FragmentVocab

    return len(FragmentVocab.load(fragments).block_vocab())


class GeomolCLI(LightningCLI):
    """LightningCLI with geomol's defaults (task and data classes in subclass mode).

    GET tasks get ``n_block_types`` from the data section (150 plus the fragment types of its
    vocabulary) before they are built, so the model exists when callbacks that copy it (weight
    averaging) are set up.
    """

    def before_instantiate_classes(self) -> None:
        config = self.config.get(str(self.subcommand), self.config) if self.subcommand else self.config
        model = config.get("model")
        init_args = model.get("init_args") if model is not None else None
        if init_args is not None and "n_block_types" in init_args and init_args.get("n_block_types") is None:
            data = config.get("data")
            init_args["n_block_types"] = _block_types(data.get("init_args") if data is not None else None)


def run_lightning(argv: list[str]) -> int:
    """Run ``argv`` (``['fit', '--config', ...]``) through :class:`GeomolCLI`; returns 0 on success.

    The arguments go through ``sys.argv``: Lightning's DDP launcher starts the other ranks by
    re-running this process's command line.
    """
    saved = sys.argv
    sys.argv = [saved[0], *argv]
    try:
        GeomolCLI(
            pl.LightningModule,
            pl.LightningDataModule,
            subclass_mode_model=True,
            subclass_mode_data=True,
            trainer_defaults={"use_distributed_sampler": False},
            save_config_kwargs={"overwrite": True},
            parser_kwargs={"prog": "geomol"},
        )
    finally:
        sys.argv = saved
    return 0
