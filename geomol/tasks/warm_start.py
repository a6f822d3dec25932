"""Start a fit from the weights of an earlier checkpoint, with a fresh optimizer and learning-rate schedule.

``--ckpt_path`` resumes a run: weights, optimizer, schedule, epoch and step, so a finished run's decayed learning
rate stays decayed. :class:`WarmStart` only copies the weights (``state_dict``) of a checkpoint of the same model
into the new run, whose optimizer and schedule then start from the config's values (a warm restart, or
fine-tuning on other data)::

    geomol fit --config ... --trainer.callbacks+=geomol.tasks.warm_start.WarmStart \\
        --trainer.callbacks.checkpoint runs/.../best-epoch=21.ckpt

The checkpoint may also be a shipped model (a name such as ``get-plb`` or a model directory): the weights of its
member ``member`` are copied, e.g. to start a protein–protein model from the protein–ligand one::

    geomol fit --config configs/get_protein_affinity.yaml --trainer.callbacks+=geomol.tasks.warm_start.WarmStart \
        --trainer.callbacks.checkpoint get-plb

The weights are loaded at setup, before Lightning restores a ``--ckpt_path``, so a resumed warm-started run keeps
the weights it has trained since. The file is read with ``weights_only=True``.
"""
from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback

from geomol.errors import ModelLoadError
from geomol.inference.model_files import read_lightning_checkpoint
from geomol.inference.loading import load_model
from geomol.inference.shipped import load_weights

__all__ = ["WarmStart"]


class WarmStart(Callback):
    """Load ``checkpoint``'s weights into the module when a fit sets up.

    Args:
        checkpoint: a Lightning ``.ckpt`` file, or a shipped model (name or directory).
        member: which member of a shipped ensemble gives its weights (0 = the first).

    Raises:
        ModelLoadError: the file or model is missing, is not a checkpoint or model, has no such member, or holds
            weights of another model (other names or shapes: e.g. another hidden size).
    """

    def __init__(self, checkpoint: str, member: int = 0):
        self.checkpoint, self.member = Path(checkpoint), member

    def _weights(self) -> dict:
        if self.checkpoint.suffix == ".ckpt" or (self.checkpoint.is_file() and self.checkpoint.suffix != ".json"):
            if not self.checkpoint.is_file():
                raise ModelLoadError("no such checkpoint to warm-start from", source=self.checkpoint)
            return read_lightning_checkpoint(self.checkpoint).state_dict  # the model's, "model." prefix removed
        members = load_model(str(self.checkpoint)).members
        if not 0 <= self.member < len(members):
            raise ModelLoadError(f"no member {self.member}: the model has {len(members)}", source=self.checkpoint)
        return members[self.member].state_dict()

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        weights = self._weights()
        model = getattr(pl_module.model, "_orig_mod", pl_module.model)  # under torch.compile, the compiled module
        load_weights(model, weights, "this model (another model's checkpoint?)", self.checkpoint)
