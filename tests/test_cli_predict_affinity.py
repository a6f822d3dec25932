"""``geomol predict-affinity`` end to end: files in, tables out, re-read and checked."""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import geomol
from geomol.cli import main
from geomol.data import ligand_names
from geomol.units import dg_from_pk
from geomol.inference.affinity import COLUMNS
from geomol.inference.tables import read_measured, read_predictions
from tests.affinity_fixtures import one_torch_thread, tiny_model_dir, transformed_pdb  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, shared_path

EXAMPLE = REPO / "data" / "example"
RECEPTOR, LIGANDS, MEASURED = (EXAMPLE / n for n in ("tnks2_protein.pdb", "tnks2_ligands.sdf", "tnks2_measured.csv"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model_dir(tmp_path_factory.mktemp("models") / "tiny")


def predict(*args: str, model: Path) -> int:
    return main(["predict-affinity", *args, "--model", str(model)])


def test_csv_table_plot_and_measured_comparison(model_dir, tmp_path, capsys):
    out, png = tmp_path / "results.csv", tmp_path / "fit.png"
    assert predict("--receptor", str(RECEPTOR), "--ligands", str(LIGANDS), "--out", str(out),
                   "--measured", str(MEASURED), "--plot", str(png), model=model_dir) == 0
    with open(out, newline="") as handle:
        assert tuple(csv.DictReader(handle).fieldnames) == COLUMNS
    rows = read_predictions(out)
    expected = geomol.predict_affinity(RECEPTOR, LIGANDS, model=model_dir)
    assert [r["name"] for r in rows] == ligand_names(LIGANDS) == [e.name for e in expected]
    np.testing.assert_allclose([r["pK"] for r in rows], [e.pK for e in expected], atol=1e-4)
    np.testing.assert_allclose([r["dG_kcal_mol"] for r in rows], [dg_from_pk(r["pK"]) for r in rows], rtol=1e-4)
    np.testing.assert_allclose([r["Kd_M"] for r in rows], [10 ** -r["pK"] for r in rows], rtol=1e-3)
    assert all(r["pK_std"] > 0 and r["n_pocket_blocks"] > 0 and r["error"] == "" for r in rows)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    captured = capsys.readouterr()
    assert "lig_1a" in captured.out and "pK" in captured.out and "±" in captured.out
    assert "6 predicted" in captured.err and "0 failed" in captured.err and "Spearman" in captured.err


def test_json_output_reports_the_bad_record(model_dir, tmp_path):
    records = LIGANDS.read_text().split("$$$$\n")
    records[2] = "\n".join(records[2].splitlines()[:3]) + "\nnot a counts line\n"
    mixed = tmp_path / "mixed.sdf"
    mixed.write_text("$$$$\n".join(records))
    out = tmp_path / "results.json"
    with pytest.warns(UserWarning, match="unreadable"):
        assert predict("--receptor", str(RECEPTOR), "--ligands", str(mixed), "--out", str(out), "--quiet",
                       model=model_dir) == 0
    rows = read_predictions(out)
    assert set(json.loads(out.read_text())[2]) == set(COLUMNS)
    assert [bool(r["error"]) for r in rows] == [False, False, True, False, False, False]
    assert rows[2]["name"] == "lig_5a" and "molecule 2" in rows[2]["error"] and math.isnan(rows[2]["pK"])


def test_nothing_predicted_exits_non_zero_with_the_reason(model_dir, tmp_path, capsys):
    far = transformed_pdb(RECEPTOR, tmp_path / "far.pdb", np.eye(3), np.array([0.0, 90.0, 0.0]))
    out = tmp_path / "results.csv"
    assert predict("--receptor", str(far), "--ligands", str(LIGANDS), "--out", str(out), model=model_dir) == 1
    err = capsys.readouterr().err
    assert "nothing could be predicted" in err and "not in a pocket" in err
    assert all("not in a pocket" in r["error"] for r in read_predictions(out))


@pytest.mark.parametrize("args, message", [
    (["--receptor", "missing.pdb", "--ligands", str(LIGANDS)], "missing.pdb: file not found"),
    (["--receptor", str(RECEPTOR), "--ligands", str(LIGANDS), "--out", "results.txt"], "must end in .csv or .json"),
    (["--receptor", str(RECEPTOR), "--ligands", str(LIGANDS), "--plot", "fit.png"], "--plot needs --measured"),
    (["--receptor", str(RECEPTOR)], "--receptor needs --ligands"),
    (["--receptor", str(RECEPTOR), "--ligands", str(LIGANDS), "--measured", str(LIGANDS)], "lacks column"),
])
def test_unusable_inputs_are_named(model_dir, capsys, args, message):
    assert predict(*args, model=model_dir) == 1
    assert message in capsys.readouterr().err


def test_pairs_screen_with_relative_paths(model_dir, tmp_path):
    (tmp_path / "inputs").mkdir()
    (tmp_path / "inputs" / "tnks2.pdb").write_bytes(RECEPTOR.read_bytes())
    (tmp_path / "inputs" / "ligs.sdf").write_bytes(LIGANDS.read_bytes())
    dna = shared_path("nucleic", "dna_ligand", "1D30_complex_ref.pdb")
    pairs = tmp_path / "pairs.csv"
    pairs.write_text("receptor,ligands,ligand,name\n"
                     "inputs/tnks2.pdb,inputs/ligs.sdf,,\n"
                     "inputs/tnks2.pdb,inputs/ligs.sdf,lig_7,seven\n"
                     f"{dna},UNK,,dna drug\n"
                     "inputs/absent.pdb,inputs/ligs.sdf,0,\n")
    out = tmp_path / "screen.csv"
    assert main(["predict-affinity", "--pairs", str(pairs), "--out", str(out), "--model", str(model_dir),
                 "--quiet"]) == 0
    rows = read_predictions(out)
    assert [r["name"] for r in rows] == ligand_names(LIGANDS) + ["seven", "dna drug", "lig_1a"]
    assert [Path(r["receptor"]).name for r in rows] == ["tnks2.pdb"] * 7 + [dna.name, "absent.pdb"]
    assert rows[6]["pK"] == pytest.approx(rows[5]["pK"], abs=1e-4)  # lig_7 again, by title
    assert rows[7]["error"] == "" and rows[7]["n_pocket_blocks"] > 0
    assert "absent.pdb: file not found" in rows[8]["error"]


def test_measured_values_as_free_energies(tmp_path):
    path = tmp_path / "measured.csv"
    path.write_text("name,dG_kcal_mol\na,-9.55\nb,-6.0\n")
    measured = read_measured(path)
    assert measured["a"] == pytest.approx(7.0, abs=0.01) and measured["b"] == pytest.approx(4.398, abs=0.01)


@pytest.mark.parametrize("args, message", [
    (["--receptor", "missing.pdb", "--ligands", "x.sdf"], "missing.pdb: file not found (given as --receptor)"),
    (["--receptor", str(RECEPTOR), "--ligands", "a.sdf", "b.sdf"], "a.sdf: file not found (given as --ligands; none"),
    (["--receptor", str(RECEPTOR), "--reference", "ref.sdf", "--ligands", "CCO"], "ref.sdf: file not found"),
    (["--receptor", str(EXAMPLE), "--ligands", "UNK"], "is a folder, not a file"),
    (["--receptor", "EMPTY", "--ligands", "UNK"], "file is empty (given as --receptor)"),
])
def test_missing_input_files_fail_before_torch_is_imported(tmp_path, args, message):
    """The error must come in well under a second: no torch, RDKit or model load before the file check."""
    (tmp_path / "EMPTY").touch()
    script = ("import sys; from geomol.cli import main; rc = main(sys.argv[1:]); "
              "sys.stderr.write('\\nheavy modules: ' + str(sorted({'torch', 'rdkit'} & set(sys.modules))) + '\\n'); "
              "sys.exit(rc)")
    done = subprocess.run([sys.executable, "-c", script, "predict-affinity", *args], cwd=tmp_path, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert done.returncode == 1, done.stderr
    assert message in done.stderr
    assert "heavy modules: []" in done.stderr


def test_a_missing_ligand_file_beside_a_readable_one_is_a_per_ligand_error(model_dir, tmp_path):
    out = tmp_path / "results.csv"
    assert predict("--receptor", str(RECEPTOR), "--ligands", "missing.sdf", str(LIGANDS), "--out", str(out),
                   "--quiet", model=model_dir) == 0
    rows = read_predictions(out)
    assert "missing.sdf" in rows[0]["error"] and all(not r["error"] for r in rows[1:])
