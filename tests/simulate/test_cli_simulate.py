"""``geomol simulate``: both kinds through the command line, and clean errors."""
from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from geomol.cli import main
from tests.conftest import REPO, shared_path


def test_molecule_command_writes_the_npz_and_summary(tmp_path, capsys):
    pytest.importorskip("tblite")
    assert main(["simulate", "molecule", "ethanol", "--out", str(tmp_path), "--frames", "3", "--seed", "5",
                 "--threads", "1"]) == 0
    assert "ethanol: 3 frames" in capsys.readouterr().out
    assert np.load(tmp_path / "md17_ethanol.npz")["R"].shape == (3, 9, 3)
    summary = json.loads((tmp_path / "md17_ethanol.json").read_text())
    assert summary["settings"]["seed"] == 5 and summary["provenance"]["command"]


def test_protein_command_writes_dcd_and_topologies(tmp_path, capsys):
    pytest.importorskip("openmm")
    pytest.importorskip("pdbfixer")
    with gzip.open(shared_path("uni_fep", "Hermite__FKBP12", "protein.pdb.gz"), "rt") as handle:
        lines = [line for line in handle if line.startswith("ATOM") and int(line[22:26]) <= 2]
    pdb = tmp_path / "di.pdb"
    pdb.write_text("".join(lines) + "END\n")
    out = tmp_path / "run"
    assert main(["simulate", "protein", str(pdb), "--out", str(out), "--frames", "2", "--frame-interval", "0.02",
                 "--equilibration", "0.02", "--platform", "Reference"]) == 0
    assert {p.name for p in out.iterdir()} >= {"trajectory.dcd", "topology.pdb", "topology.pqr", "trajectory.json"}
    report = capsys.readouterr().out  # a 20 fs run in units that say so, and no speed made of timer noise
    assert "2 frames (20 fs produced, " in report and "too short to time" in report and "0.000 ns" not in report


def test_missing_structure_is_one_error_line(tmp_path, capsys):
    assert main(["simulate", "protein", str(tmp_path / "nope.pdb"), "--out", str(tmp_path), "--ns", "1"]) == 1
    assert "nope.pdb: file not found" in capsys.readouterr().err


def test_a_misspelt_molecule_name_gets_the_names_it_may_mean(tmp_path, capsys):
    assert main(["simulate", "molecule", "aspirn", "--frames", "3", "--out", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "did you mean aspirin?" in err and "any other molecule as a SMILES" in err
    assert "Traceback" not in err and not any(tmp_path.iterdir())  # refused before anything ran


def test_an_sd_file_given_as_the_protein_says_what_it_is(tmp_path, capsys):
    pytest.importorskip("pdbfixer")
    ligand = REPO / "data" / "example" / "tnks2_ligands.sdf"
    assert main(["simulate", "protein", str(ligand), "--out", str(tmp_path / "run"), "--frames", "2"]) == 1
    err = capsys.readouterr().err
    assert "an SD/MOL file (a small molecule), not a protein structure" in err and "simulate molecule" in err
    assert "list index" not in err and "Traceback" not in err


def test_the_report_gives_the_temperature_after_the_heat_up_or_says_why_there_is_none(tmp_path, capsys):
    """The thermostat takes 5/friction to warm a run to its target: over a 1.5 fs run at 500 K ethanol averages
    ~250 K, which the report must not give as the run's temperature without a word."""
    pytest.importorskip("tblite")
    assert main(["simulate", "molecule", "ethanol", "--out", str(tmp_path / "short"), "--frames", "4",
                 "--threads", "1"]) == 0
    short = capsys.readouterr().out
    assert "shorter than the thermostat's heat-up (2.5 ps = 5/friction)" in short and "(target 500 K)" in short
    assert main(["simulate", "molecule", "ethanol", "--out", str(tmp_path / "warm"), "--frames", "40",
                 "--friction", "2", "--threads", "1"]) == 0  # a heat-up of 2.5 fs: over within the run
    warm = capsys.readouterr().out
    assert "after the thermostat's 2.5 fs heat-up" in warm
    summary = json.loads((tmp_path / "warm" / "md17_ethanol.json").read_text())
    assert summary["heat_up_ps"] == pytest.approx(0.0025) and summary["kinetic_temperature_after_heat_up_K"] > 0


def test_ctrl_c_prints_one_line_saying_how_to_resume(tmp_path):
    """Ctrl-C as a terminal sends it (SIGINT to the process group) during a run: one line, no traceback."""
    pytest.importorskip("tblite")
    command = [sys.executable, "-m", "geomol", "simulate", "molecule", "ethanol", "--frames", "1000000",
               "--checkpoint-every", "20", "--out", str(tmp_path), "--threads", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
                               env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not (tmp_path / "md17_ethanol.work" / "checkpoint.npz").exists() and time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()
        time.sleep(0.2)
    os.killpg(process.pid, signal.SIGINT)
    out, err = process.communicate(timeout=60)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert process.returncode == 130, err.decode()
    assert "Traceback" not in err.decode() and len(lines) == 1, err.decode()
    assert lines[0] == (f"geomol simulate: interrupted; the frames up to the last checkpoint are kept in {tmp_path}: "
                        "the same command continues from there")
