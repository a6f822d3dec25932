"""``geomol simulate``: both kinds through the command line, and clean errors."""
from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

from geomol.cli import main
from tests.conftest import shared_path


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
                 "--equilibration", "0.02", "--platform", "Reference", "--quiet"]) == 0
    assert {p.name for p in out.iterdir()} >= {"trajectory.dcd", "topology.pdb", "topology.pqr", "trajectory.json"}


def test_missing_structure_is_one_error_line(tmp_path, capsys):
    assert main(["simulate", "protein", str(tmp_path / "nope.pdb"), "--out", str(tmp_path), "--ns", "1"]) == 1
    assert "nope.pdb: file not found" in capsys.readouterr().err
