"""What a newcomer meets running ``geomol screen``: progress from the first ligand, the rate of a resumed run, the
top hits printed and drawn as written, shards sized for the workers, a warning for a ligand of another series,
and Ctrl-C as one line."""
from __future__ import annotations

import dataclasses
import gzip
import io
import json
import os
import re
import signal
import subprocess
import sys
import time

from rich.console import Console

from geomol.cli import main
from geomol.data.posing.poses import PoseParameters
from geomol.screen.progress import ScreenProgress
from geomol.screen.run import screen_library
from tests.screen.conftest import FAST


def _first(library_300, count: int, folder) -> "os.PathLike":
    path = folder / f"first{count}.smi"
    path.write_text("\n".join(gzip.open(library_300, "rt").read().splitlines()[:count]) + "\n")
    return path


def test_progress_moves_while_a_shard_is_still_running(jnk1, library_300, cluster, tmp_path, monkeypatch):
    seen = []
    original = ScreenProgress.partial

    def recording(self, shard, posed):
        seen.append(posed)
        original(self, shard, posed)

    monkeypatch.setattr(ScreenProgress, "partial", recording)
    screen_library(_first(library_300, 12, tmp_path), jnk1.receptor, jnk1.reference, tmp_path / "out",
                   dataclasses.replace(FAST, shard_size=12), scheduler=cluster.scheduler.address, quiet=True,
                   plot=False)
    assert any(0 < posed < 12 for posed in seen), seen  # before the one shard came back


def test_a_resumed_screen_shows_the_rate_of_this_run_not_zero():
    text = io.StringIO()
    progress = ScreenProgress(100, Console(file=text, width=200), interval=0.0)
    progress.skip(50)  # shards of an earlier run
    assert progress.rate is None and "no rate yet" in text.getvalue() and "0.0 ligands/s" not in text.getvalue()
    time.sleep(0.05)
    progress.partial(3, 5)  # a running shard has posed 5 ligands
    assert progress.rate > 0 and progress.screened == 5
    assert re.search(r"screened 55/100 ligands \(50 from an earlier run\), [\d.]+ ligands/s", text.getvalue())
    progress.advance(25, 1, shard=3)  # that shard finished: its 25 replace its 5 posed
    progress.partial(3, 7)  # a progress event that arrives after its shard's result changes nothing
    assert progress.done == 75 and progress.screened == 25


def test_top_n_is_printed_and_drawn_as_written(jnk1, library_300, cluster, tmp_path, capsys, monkeypatch):
    import geomol.screen.run as run

    drawn = []
    original = run.plot_screen
    monkeypatch.setattr(run, "plot_screen", lambda path, histogram, top, *a, **k: (drawn.append(len(top)),
                                                                                   original(path, histogram, top, *a,
                                                                                            **k)))
    out = tmp_path / "out"
    argv = ["screen", "--receptor", str(jnk1.receptor), "--reference", str(jnk1.reference), "--library",
            str(_first(library_300, 16, tmp_path)), "--out", str(out), "--scheduler", cluster.scheduler.address,
            "--conformers", "1", "--shard-size", "8", "--top", "12"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "top 12 by predicted pK" in printed
    assert [int(rank) for rank in re.findall(r"^│\s+(\d+) │", printed, re.M)] == list(range(1, 13))
    assert drawn == [12] and len((out / "top.csv").read_text().splitlines()) == 13
    assert len(json.loads((out / "summary.json").read_text())["top"]) == 12


def test_shards_are_sized_from_the_library_and_the_workers(jnk1, library_300, cluster, tmp_path):
    from geomol.screen.run import auto_shard_size

    assert auto_shard_size(1500, 2) == 188  # 8 shards on 2 workers, not 3 of 500 (one worker idle for a third)
    assert auto_shard_size(100_000, 8) == 500 and auto_shard_size(40, 2) == 25
    library = _first(library_300, 50, tmp_path)
    settings = dataclasses.replace(FAST, shard_size=None)
    summary = screen_library(library, jnk1.receptor, jnk1.reference, tmp_path / "out", settings,
                             scheduler=cluster.scheduler.address, quiet=True, plot=False)
    assert summary["run"]["shards"] == 2 and len(summary["run"]["workers"]) == 2  # both workers had a shard
    again = screen_library(library, jnk1.receptor, jnk1.reference, tmp_path / "out", settings, workers=None,
                           scheduler=cluster.scheduler.address, quiet=True, plot=False)
    assert again["run"]["shards_skipped"] == 2  # resumed with the size it was started with


def test_a_ligand_of_another_series_is_warned_about_or_refused_by_its_core_share(jnk1):
    from geomol.inference.smiles_inputs import posed_inputs

    entries = [jnk1.parents[1], "CC(C)Cc1ccc(cc1)C(C)C(=O)O"]  # an analogue of the series, ibuprofen
    fast = PoseParameters(conformers=1, refinement=None)
    inputs, posed = posed_inputs(jnk1.receptor, entries, jnk1.reference, parameters=fast)
    assert [[f.code for f in item.findings] for item in inputs] == [[], ["small_core"]]
    assert "little shared structure" in inputs[1].findings[0].message
    assert posed[1].core_share < 0.4 < posed[0].core_share
    inputs, posed = posed_inputs(jnk1.receptor, entries, jnk1.reference,
                                 parameters=dataclasses.replace(fast, min_core_fraction=0.5))
    assert posed[0].error == "" and posed[1].error_kind == "NoCommonCoreError"
    assert "at least 50% asked" in posed[1].error


def test_ctrl_c_prints_one_line_saying_how_to_resume(jnk1, library_300, tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the whole process group, Dask's workers included)."""
    out = tmp_path / "out"
    command = [sys.executable, "-m", "geomol", "screen", "--receptor", str(jnk1.receptor), "--reference",
               str(jnk1.reference), "--library", str(library_300), "--out", str(out), "--workers", "2",
               "--conformers", "1", "--shard-size", "25"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 240
    while not ((out / "shards.jsonl").exists() and (out / "shards.jsonl").read_text().strip()):
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    err = err.decode()
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("screened ")]
    assert process.returncode == 130, err
    assert lines == [f"geomol screen: interrupted; completed shards are recorded in {out}: rerun the same command "
                     "to resume"], err
