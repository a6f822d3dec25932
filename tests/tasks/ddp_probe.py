"""A callback for the DDP test: each rank writes the items it trained on and a digest of its weights."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from lightning.pytorch.callbacks import Callback


class SeenItems(Callback):
    def __init__(self, out_dir: str):
        self.out_dir = Path(out_dir)
        self.seen: list[list[str]] = []

    def on_train_batch_start(self, trainer, module, batch, batch_idx):
        self.seen.append(list(batch.name))

    def on_train_end(self, trainer, module):
        digest = hashlib.sha256()
        for name, tensor in sorted(module.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
        self.out_dir.mkdir(parents=True, exist_ok=True)
        record = {"rank": trainer.global_rank, "world_size": trainer.world_size, "seen": self.seen,
                  "weights": digest.hexdigest(), "threads": torch.get_num_threads()}
        (self.out_dir / f"rank{trainer.global_rank}.json").write_text(json.dumps(record))
