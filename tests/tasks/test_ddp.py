"""``geomol fit`` with ``trainer.strategy=ddp`` on 2 CPU processes (gloo)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from tests.conftest import REPO, shared_path


@pytest.mark.filterwarnings("ignore")
def test_two_process_ddp_shards_data_and_keeps_weights_equal(tmp_path):
    geomol = shutil.which("geomol") or pytest.skip("geomol console script not installed")
    out = tmp_path / "probe"
    cmd = [geomol, "fit", "--config", str(REPO / "configs" / "get_plb.yaml"),
           "--data.root", str(shared_path("plb")), "--data.init_args.targets", "[cdk2, cmet, ptp1b]",
           "--data.init_args.split", "held_out", "--data.init_args.test_proteins", "[cmet]",
           "--data.init_args.valid_proteins", "[ptp1b]", "--data.init_args.max_blocks", "250",
           "--data.init_args.cache_dir", str(tmp_path / "cache"), "--data.init_args.preprocess_workers", "0",
           "--model.init_args.hidden", "16", "--model.init_args.num_layers", "1",
           "--trainer.strategy", "ddp", "--trainer.accelerator", "cpu", "--trainer.devices", "2",
           "--trainer.max_epochs", "1", "--trainer.limit_val_batches", "1", "--trainer.num_sanity_val_steps", "0",
           "--trainer.logger", "false", "--trainer.enable_checkpointing", "false",
           "--trainer.callbacks", "tests.tasks.ddp_probe.SeenItems", "--trainer.callbacks.out_dir", str(out)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PL_DISABLE_FORK": "1"}
    result = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    ranks = [json.loads((out / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [r["world_size"] for r in ranks] == [2, 2]
    assert len(ranks[0]["seen"]) == len(ranks[1]["seen"]) >= 2  # the same number of steps on both ranks
    first = [set(r["seen"][0]) for r in ranks]
    assert not first[0] & first[1], "both ranks trained on the same complexes"
    union = {name for r in ranks for batch in r["seen"] for name in batch}
    assert len(union) == 10 and all(n.startswith("plb/cdk2/") for n in union)  # every training complex was seen
    assert ranks[0]["weights"] == ranks[1]["weights"], "weights diverged between ranks"
