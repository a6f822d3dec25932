"""Affinity from SMILES and a reference ligand (``geomol.predict_affinity(..., reference=)``, the command), and
from MOL2 receptors with docked MOL2 poses."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import numpy as np
import pytest

import geomol
from geomol.cli import main
from geomol.data import read_ligand, read_ligands
from geomol.data.posing.poses import POSE_COLUMNS
from geomol.errors import ConfigError
from geomol.inference.affinity import COLUMNS
from geomol.inference.tables import read_predictions
from tests.affinity_fixtures import one_torch_thread, tiny_model_dir  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, shared_path

EXAMPLE = REPO / "data" / "example"
RECEPTOR, REFERENCE, ANALOGUES = (EXAMPLE / n for n in ("tnks2_protein.pdb", "tnks2_ligands.sdf",
                                                         "tnks2_analogues.smi"))


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return tiny_model_dir(tmp_path_factory.mktemp("models") / "tiny")


@pytest.fixture(scope="module")
def series_csv(tmp_path_factory) -> Path:
    """Three analogues as CSV (smiles, name, an unrelated column), a broken SMILES in the middle."""
    rows = [line.split() for line in ANALOGUES.read_text().splitlines()[1:4]]
    path = tmp_path_factory.mktemp("series") / "series.csv"
    with open(path, "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["name", "smiles", "dG"])
        writer.writerow([rows[0][1], rows[0][0], -9.0])
        writer.writerow(["broken", "CC(C)(C)c1ccc(-c2nc3ccccc3c(=O)[nH]2", -8.0])
        writer.writerows([[name, smiles, -8.5] for smiles, name in rows[1:]])
    return path


def test_command_from_smiles_csv_with_a_bad_line(model_dir, series_csv, tmp_path, capsys):
    out, poses = tmp_path / "results.csv", tmp_path / "poses.sdf"
    assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--reference", str(REFERENCE), "--ligands",
                 str(series_csv), "--write-poses", str(poses), "--out", str(out), "--model", str(model_dir)]) == 0
    with open(out, newline="") as handle:
        assert tuple(csv.DictReader(handle).fieldnames) == COLUMNS + POSE_COLUMNS
    rows = read_predictions(out)
    assert [r["name"] for r in rows] == ["lig_3a", "broken", "lig_5a", "lig_5f"]
    bad = rows[1]
    assert "invalid SMILES" in bad["error"] and "series.csv [line 3 'broken']" in bad["error"] and math.isnan(bad["pK"])
    good = [r for r in rows if not r["error"]]
    assert len(good) == 3 and all(np.isfinite(r["pK"]) and r["n_pocket_blocks"] > 0 for r in good)
    assert all(r["core_atoms"] >= 15 and r["core_rmsd"] < 0.3 and r["min_receptor_distance"] > 1.0 for r in good)
    err = " ".join(capsys.readouterr().err.split())  # the summary is wrapped at the terminal's width
    assert "4 ligand(s): 3 predicted (3 with warnings" in err and "1 failed (invalid SMILES ×1)" in err
    # the written poses are what was predicted: predicting them as ordinary ligands gives the same numbers
    assert [m.GetProp("_Name") for m in read_ligands(poses)] == [r["name"] for r in good]
    again = geomol.predict_affinity(RECEPTOR, poses, model=model_dir)
    np.testing.assert_allclose([a.pK for a in again], [r["pK"] for r in good], atol=1e-4)


def test_api_from_smiles_strings_and_pairs(model_dir):
    smiles, name = ANALOGUES.read_text().splitlines()[1].split()
    results = geomol.predict_affinity(RECEPTOR, [smiles, (name, smiles), ("ethanol", "CCO")], reference=REFERENCE,
                                      model=model_dir)
    assert [r.name for r in results] == ["#0", name, "ethanol"]
    assert results[0].pK == pytest.approx(results[1].pK) and results[0].extra == results[1].extra
    assert "common core" in results[2].error and results[2].extra["core_atoms"] is None
    with pytest.raises(ConfigError, match="need a reference"):
        geomol.predict_affinity(RECEPTOR, REFERENCE, model=model_dir, write_poses="poses.sdf")


@pytest.mark.parametrize("args, message", [
    (["--pairs", "pairs.csv", "--reference", "ref.sdf"], "--reference needs --receptor"),
    (["--receptor", "r.pdb", "--ligands", "l.sdf", "--write-poses", "p.sdf"], "--write-poses needs --reference"),
    (["--receptor", "r.pdb", "--ligands", "l.sdf", "--no-refine"], "--no-refine needs --reference"),
])
def test_option_misuse_is_named(model_dir, capsys, args, message):
    assert main(["predict-affinity", *args, "--model", str(model_dir)]) == 1
    assert message in capsys.readouterr().err


def test_mol2_receptor_with_docked_mol2_poses(model_dir):
    folder = shared_path("ddg_bindingdb", "11GS")
    poses = [read_ligand(folder / "ligands.mol2.gz", i) for i in (0, 1)]
    results = geomol.predict_affinity(folder / "receptor.mol2.gz", poses, model=model_dir)
    assert [r.name for r in results] == ["BindingDB_50186226", "BindingDB_50186228"]
    assert all(r.ok and np.isfinite(r.pK) and r.n_pocket_blocks > 10 for r in results)


def test_no_refine_keeps_the_embedded_poses(model_dir, tmp_path):
    """--no-refine (predict-affinity and screen) poses as before refinement existed; the default refines."""
    import argparse

    from geomol.commands import screen
    from geomol.data.posing.poses import PoseParameters, PoseTemplate

    smiles, name = ANALOGUES.read_text().splitlines()[1].split()
    (tmp_path / "one.smi").write_text(f"{smiles} {name}\n")
    written = {}
    for flag in ([], ["--no-refine"]):
        poses = tmp_path / f"poses{len(flag)}.sdf"
        assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--reference", str(REFERENCE), "--ligands",
                     str(tmp_path / "one.smi"), "--write-poses", str(poses), "--model", str(model_dir), "--quiet",
                     *flag]) == 0
        written[bool(flag)] = read_ligands(poses)[0].GetConformer().GetPositions()
    receptor = geomol.data.read_structure(RECEPTOR)
    embedded = PoseTemplate(read_ligand(REFERENCE), receptor, PoseParameters(refinement=None)).pose(smiles, name)
    np.testing.assert_allclose(written[True], embedded.molecule.GetConformer().GetPositions(), atol=1e-3)
    assert not np.allclose(written[False], written[True], atol=1e-2)
    parser = argparse.ArgumentParser()
    screen.add_arguments(parser)
    common = ["--receptor", "r.pdb", "--reference", "ref.sdf", "--library", "lib.smi", "--out", "out"]
    assert screen._settings(parser.parse_args([*common, "--no-refine"]), "default").pose.refinement is None
    assert screen._settings(parser.parse_args(common), "default").pose.refinement is not None
