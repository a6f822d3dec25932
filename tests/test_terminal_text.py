"""What geomol prints through Rich is the text it was given: ``[nH]`` of a SMILES, ``[...]`` and ``:name:`` in names and
messages are not read as markup or emoji codes (copying a SMILES from the terminal must give the same molecule)."""
from __future__ import annotations

import shutil
import sys
from types import SimpleNamespace

import pytest

from geomol.cli import main
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
SMILES = "Cc1cc[nH]c1"  # Rich markup would drop "[nH]" and give Cc1ccc1
NAME = "[b]lig-1[/b]:fire:"
REASON = "[red]no common core[/red] with ligand [1]"


def test_screen_prints_smiles_names_and_reasons_as_they_are(tmp_path, capsys, monkeypatch):
    pytest.importorskip("distributed")
    import geomol.screen.run

    summary = {"counts": {"ligands": 2, "scored": 1, "failed": 1, "docked": 0}, "failure_reasons": {REASON: 1},
               "failed_shards": [], "top_written": 1,
               "run": {"shards": 1, "shards_skipped": 0, "wall_seconds": 1.0, "ligands_per_second": 2.0,
                       "worker_threads": 1, "peak_worker_rss_mb": 100.0},
               "top": [{"rank": 1, "name": NAME, "pK": 6.5, "pK_std": 0.2, "pose_method": "core", "core_rmsd": 0.1,
                        "smiles": SMILES}]}
    monkeypatch.setattr(geomol.screen.run, "screen_library", lambda *args, **kwargs: summary)
    library = tmp_path / "library.smi"
    library.write_text(f"{SMILES} x\n")
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["screen", "--receptor", str(EXAMPLE / "tnks2_protein.pdb"), "--reference",
                 str(EXAMPLE / "tnks2_ligands.sdf"), "--library", str(library), "--out", str(tmp_path / "[out]"),
                 "--workers", "1"]) == 0
    printed = capsys.readouterr()
    assert SMILES in printed.out and NAME in printed.out and REASON in printed.out
    assert f"results in {tmp_path / '[out]'}" in printed.err


def test_a_simulation_progress_bar_shows_the_smiles_it_runs(capsys, monkeypatch):
    from geomol.simulate.progress import SimulationProgress

    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    with SimulationProgress(SMILES, 0, 3, 0.5) as bar:
        assert bar.terminal
        bar.update(3)
    assert SMILES in capsys.readouterr().err


def test_inspect_titles_a_complex_whose_name_has_brackets(tmp_path, capsys, monkeypatch):
    receptor = tmp_path / "tnks2[nH]:fire:.pdb"
    shutil.copy(EXAMPLE / "tnks2_protein.pdb", receptor)
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["inspect", str(receptor), str(EXAMPLE / "tnks2_ligands.sdf")]) == 0
    assert "tnks2[nH]:fire:" in capsys.readouterr().out


def test_rollout_report_names_files_as_they_are(tmp_path, capsys, monkeypatch):
    import geomol.api
    import geomol.inference.dynamics.rollout_chemistry as chemistry

    out = tmp_path / "[run]" / "out.xtc"
    result = SimpleNamespace(frames=[0, 1], windows=1, out=out, topology_file=None, summary={"diverged": False},
                             chemistry={}, summary_file=out.with_suffix(".json"), plot_file=None)
    monkeypatch.setattr(geomol.api, "load_model", lambda *args, **kwargs: SimpleNamespace())
    monkeypatch.setattr(geomol.api, "rollout", lambda *args, **kwargs: result)
    monkeypatch.setattr(chemistry, "chemistry_line", lambda record: "chemistry [bonds] kept")
    monkeypatch.setenv("COLUMNS", "300")
    assert main(["rollout", "--topology", str(EXAMPLE / "tnks2_protein.pdb"), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"written to {out}" in printed and "chemistry [bonds] kept" in printed


def test_predict_affinity_names_its_files_as_they_are(tmp_path, capsys, monkeypatch):
    from tests.affinity_fixtures import tiny_model_dir

    monkeypatch.setenv("COLUMNS", "400")
    model = tiny_model_dir(tmp_path / "tiny")
    measured, plot = tmp_path / "measured[1].csv", tmp_path / "fit[1].png"
    shutil.copy(EXAMPLE / "tnks2_measured.csv", measured)
    base = ["predict-affinity", "--receptor", str(EXAMPLE / "tnks2_protein.pdb"), "--ligands",
            str(EXAMPLE / "tnks2_ligands.sdf"), "--model", str(model)]
    assert main([*base, "--measured", str(measured), "--plot", str(plot)]) == 0
    assert f"plot written to {plot}" in capsys.readouterr().err
    unmatched = tmp_path / "other[names].csv"
    unmatched.write_text("name,pK\nnot-in-the-series,6.0\n")
    assert main([*base, "--measured", str(unmatched)]) == 0
    assert f"match a name in {unmatched}: no comparison" in capsys.readouterr().err
