"""Start a fit from the weights of an earlier checkpoint, with a fresh optimizer and learning-rate schedule.

``--ckpt_path`` resumes a run: weights, optimizer, schedule, epoch and step, so a finished run's decayed learning
rate stays decayed. :class:`WarmStart` only copies the weights (``state_dict``) of a checkpoint of the same model
into the new run, whose optimizer and schedule then start from the config's values (a warm restart, or
fine-tuning on other data)::

    geomol fit --config ... --trainer.callbacks+=geomol.tasks.warm_start.WarmStart \\
        --trainer.callbacks.checkpoint runs/.../best-epoch=21.ckpt

The weights are loaded at setup, before Lightning restores a ``--ckpt_path``, so a resumed warm-started run keeps
the weights it has trained since. The file is read with ``weights_only=True``.

A shipped model (its name, e.g. ``get-plb``, or its directory) with ``member`` starts the fit from that ensemble
member's weights instead (``configs/get_nucleic_affinity_finetune.yaml``: get-plb fine-tuned on nucleic acids)::

    - class_path: geomol.tasks.warm_start.WarmStart
      init_args: {checkpoint: get-plb, member: 0}
"""
from __future__ import annotations

from pathlib import Path

import lightning.pytorch as pl
from lightning.pytorch.callbacks import Callback

from geomol.errors import ModelLoadError
from geomol.inference.model_files import find_model_dir, read_lightning_checkpoint, read_manifest, read_member_weights
from geomol.inference.shipped import load_weights

__all__ = ["WarmStart"]


class WarmStart(Callback):
    """Load ``checkpoint``'s weights into the module when a fit sets up.

    Raises:
        ModelLoadError: the file is missing, is not a Lightning checkpoint (or shipped model with such a member), or
            holds weights of another model (other names or shapes: e.g. another hidden size).
    """

    def __init__(self, checkpoint: str, member: int | None = None):
        self.checkpoint = Path(checkpoint)
        self.member = member

    def _weights(self) -> dict:
        """The weights to start from: a Lightning checkpoint's, or a shipped model's member ``member``."""
        if self.member is None:
            if not self.checkpoint.is_file():
                raise ModelLoadError("no such checkpoint to warm-start from", source=self.checkpoint)
            return read_lightning_checkpoint(self.checkpoint).state_dict  # the model's, "model." prefix removed
        model_dir, manifest = read_manifest(self.checkpoint if self.checkpoint.exists()
                                            else find_model_dir(str(self.checkpoint)))
        members = manifest["members"]
        if not 0 <= self.member < len(members):
            raise ModelLoadError(f"member {self.member} asked for; the model has {len(members)}", source=model_dir)
        return read_member_weights(model_dir, members[self.member])

    def setup(self, trainer: pl.Trainer, pl_module: pl.LightningModule, stage: str) -> None:
        if stage != "fit":
            return
        weights = self._weights()
        model = getattr(pl_module.model, "_orig_mod", pl_module.model)  # under torch.compile, the compiled module
        load_weights(model, weights, "this model (another model's checkpoint?)", self.checkpoint)
