"""``--threads`` and its default (item 7 of issue 14): never more threads than free physical cores."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from geomol.cli import main
from geomol.commands.threads import (default_threads, physical_cores, resolve_threads, take_threads_option,
                                     wait_policy)
from tests.conftest import REPO

# 4 logical CPUs: two cores with two hyper-threads each
CPUINFO = "".join(f"processor\t: {cpu}\nphysical id\t: 0\ncore id\t\t: {cpu // 2}\n\n" for cpu in range(4))


def test_physical_cores_count_hyperthreads_once():
    assert physical_cores([0, 1, 2, 3], CPUINFO) == 2
    assert physical_cores([0, 2], CPUINFO) == 2
    assert physical_cores([0, 1], CPUINFO) == 1
    assert physical_cores([0, 1, 2], "no core ids here") == 3


@pytest.mark.parametrize("load, expected", [(0.0, 2), (2.6, 1), (3.9, 1), (40.0, 1)])
def test_default_is_the_free_physical_cores(load, expected):
    assert default_threads([0, 1, 2, 3], load=load, cpuinfo=CPUINFO) == expected


def test_option_beats_environment_beats_default():
    assert resolve_threads(3, {"OMP_NUM_THREADS": "2"}) == 3
    assert resolve_threads(None, {"OMP_NUM_THREADS": "2"}) == 2
    assert resolve_threads(None, {"OMP_NUM_THREADS": "junk"}) == default_threads()


def test_threads_option_is_taken_out_for_lightning_and_kept_for_argparse_commands():
    argv = ["fit", "--config", "c.yaml", "--threads", "3", "--trainer.max_steps", "2"]
    assert take_threads_option(argv, remove=True) == (3, ["fit", "--config", "c.yaml", "--trainer.max_steps", "2"])
    assert take_threads_option(["rollout", "--threads=2"], remove=False) == (2, ["rollout", "--threads=2"])
    with pytest.raises(ValueError, match="positive integer"):
        take_threads_option(["fit", "--threads", "0"], remove=True)


def test_the_command_applies_the_threads_before_running(capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    example = REPO / "data" / "example"
    try:
        assert main(["inspect", str(example / "tnks2_protein.pdb"), str(example / "tnks2_ligands.sdf"),
                     "--threads", "2"]) == 0
        assert torch.get_num_threads() == 2
        assert main(["inspect", str(example / "tnks2_protein.pdb"), str(example / "tnks2_ligands.sdf")]) == 0
        assert torch.get_num_threads() == 1  # OMP_NUM_THREADS
    finally:
        torch.set_num_threads(1)
    capsys.readouterr()
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--threads N" in capsys.readouterr().out


@pytest.mark.parametrize("threads, free, environ, expected", [
    (1, 0, {}, None),  # one thread: no team to wait for
    (2, 2, {}, None),  # as many threads as free cores: the runtime's default
    (2, 1, {}, "PASSIVE"),  # more threads than free cores: waiting threads sleep
    (4, -3, {}, "PASSIVE"),
    (2, 1, {"OMP_WAIT_POLICY": "ACTIVE"}, None),  # the user's choice stands
    (2, 1, {"GOMP_SPINCOUNT": "100000"}, None),
])
def test_threads_beyond_the_free_cores_wait_passively(threads, free, environ, expected):
    assert wait_policy(threads, free, environ) == expected


def test_the_wait_policy_is_set_before_torch_loads():
    """In a fresh interpreter (torch not loaded yet), asking for more threads than there are CPUs sets it."""
    code = ("import os, sys\nfrom geomol.commands.threads import apply_threads\n"
            "assert 'torch' not in sys.modules\napply_threads(64)\n"
            "import torch\nprint(os.environ.get('OMP_WAIT_POLICY'), torch.get_num_threads())")
    environ = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environ, check=True)
    assert out.stdout.split() == ["PASSIVE", "64"]
