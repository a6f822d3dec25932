"""``geomol screen`` from the command line: a run on the test cluster, and errors as one line."""
from __future__ import annotations

import argparse
import gzip
import json
import re
import shlex

import pytest

from geomol.cli import main
from tests.conftest import REPO


def _arguments(jnk1, library, out):
    return ["screen", "--receptor", str(jnk1.receptor), "--reference", str(jnk1.reference), "--library", str(library),
            "--out", str(out)]


def test_the_command_screens_on_an_existing_cluster_and_prints_the_summary(jnk1, library_300, cluster, tmp_path,
                                                                            capsys):
    library = tmp_path / "ten.smi"
    library.write_text("".join(gzip.open(library_300, "rt").readlines()[:10]))
    argv = _arguments(jnk1, library, tmp_path / "out") + ["--scheduler", cluster.scheduler.address, "--conformers", "1",
                                                          "--shard-size", "4", "--top", "3", "--no-plot"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "screen summary" in printed.out and "top 3 by predicted pK" in printed.out
    assert "10 ligands:" in printed.err
    assert "screened 10/10 ligands (0 from an earlier run)" in printed.err  # progress: a plain line off a terminal
    assert "ligands/s" in printed.err and "failed, ETA" in printed.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"]["ligands"] == 10 and summary["run"]["shards"] == 3
    assert len((tmp_path / "out" / "top.csv").read_text().splitlines()) == 4
    assert not (tmp_path / "out" / "screen.png").exists()
    assert main(argv) == 0  # rerun: every shard done before, the same merged result
    assert json.loads((tmp_path / "out" / "summary.json").read_text())["run"]["shards_skipped"] == 3


@pytest.mark.parametrize("change, message", [
    (lambda a: a[:6] + ["missing.smi"] + a[7:], "missing.smi: file not found (given as --library)"),
    (lambda a: a + ["--workers", "2", "--scheduler", "tcp://localhost:1"], "give one of --workers, --scheduler"),
    (lambda a: a + ["--shard-size", "0"], "--shard-size must be ≥ 1"),
])
def test_bad_options_end_with_one_line(jnk1, library_300, tmp_path, capsys, change, message):
    assert main(change(_arguments(jnk1, library_300, tmp_path / "out"))) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_a_library_of_another_format_is_refused_before_any_worker_starts(jnk1, tmp_path, capsys):
    library = tmp_path / "library.txt"
    library.write_text("CCO\n")
    assert main(_arguments(jnk1, library, tmp_path / "out") + ["--workers", "1"]) == 1
    assert "library.txt: a library is a SMILES list" in capsys.readouterr().err


def _documented(option: str) -> list[str]:
    """The arguments of the ``geomol screen`` command in the bash block of docs/screen.md that holds ``option``."""
    text = (REPO / "docs" / "screen.md").read_text(encoding="utf-8")
    for block in re.findall(r"```bash\n(.*?)```", text, re.S):
        line = block.replace("\\\n", " ")
        if option in line:
            words = shlex.split(line)
            assert words[:2] == ["geomol", "screen"]
            return words[2:]
    raise AssertionError(f"no command with {option} in docs/screen.md")


def test_the_documented_slurm_command_is_the_laptop_command_with_batch_workers(monkeypatch):
    """docs/screen.md's SLURM command (not run: no SLURM here) parses, and its workers' job script says what it asks."""
    pytest.importorskip("dask_jobqueue")
    from geomol.commands import screen as command

    parser = argparse.ArgumentParser()
    command.add_arguments(parser)
    laptop, slurm = parser.parse_args(_documented("--workers")), parser.parse_args(_documented("--cluster slurm"))
    for option in ("receptor", "reference", "library", "out"):
        assert getattr(slurm, option) == getattr(laptop, option)
    monkeypatch.chdir(REPO)
    command.check_inputs(slurm)
    with command._jobqueue(slurm).cluster() as cluster:
        script = cluster.job_script()
    for text in ("#SBATCH -p cpu", "#SBATCH -t 02:00:00", "#SBATCH --mem=", "--nworkers 32", "--nthreads 1",
                 "export OMP_NUM_THREADS=1", "source ~/envs/geomol/bin/activate"):
        assert text in script, text
