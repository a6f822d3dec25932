"""Lead optimisation from the command line: ``predict-affinity --anchors`` (and ``--anchor-ligands``, ``--next``) and
``geomol finetune --method residual`` on the tankyrase-2 series, with the default model as base model."""
from __future__ import annotations

import json

import numpy as np
import pytest
from rdkit import Chem

import geomol
from geomol.cli import main
from geomol.errors import ConfigError
from geomol.inference.tables import read_measured, read_predictions
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"
RECEPTOR, SERIES, MEASURED = (EXAMPLE / n for n in ("tnks2_protein.pdb", "tnks2_series.sdf", "tnks2_measured.csv"))
POSED = EXAMPLE / "tnks2_ligands.sdf"  # the six measured ligands' poses
ANCHORING = {"kernel": {"level": 1.0, "slope": 0.3, "similarity": 0.6, "noise": 0.5}, "power": 2.0,
             "methods": {"0": "base", "3": "residual"},
             "expected": {"3": {"spearman": 0.5, "base": 0.4, "targets": 30, "coverage": 0.68}}}


@pytest.fixture(scope="module")
def base_dir(tmp_path_factory):
    """The default model with these anchoring settings (independent of what ships)."""
    model = geomol.load_model("default")
    path = tmp_path_factory.mktemp("models") / "base"
    model.save(path, metrics={**model.metrics, "anchoring": ANCHORING})
    return path


@pytest.fixture(scope="module")
def plain(base_dir, tmp_path_factory):
    """The base model's own predictions of the series."""
    out = tmp_path_factory.mktemp("plain") / "plain.csv"
    assert main(["predict-affinity", "--model", str(base_dir), "--receptor", str(RECEPTOR), "--ligands", str(SERIES),
                 "--out", str(out), "--quiet"]) == 0
    return {r["name"]: r for r in read_predictions(out)}


def run(base_dir, out, *args):
    return main(["predict-affinity", "--model", str(base_dir), "--receptor", str(RECEPTOR), "--out", str(out),
                 *args])


def test_anchors_move_predictions_and_each_measured_ligand_is_left_out(base_dir, plain, tmp_path, capsys):
    out = tmp_path / "anchored.csv"
    assert run(base_dir, out, "--ligands", str(SERIES), "--anchors", str(MEASURED), "--next", "3") == 0
    rows = {r["name"]: r for r in read_predictions(out)}
    measured = read_measured(MEASURED)
    assert {n for n, r in rows.items() if r["measured_pK"] == r["measured_pK"]} == set(measured)
    for name, row in rows.items():
        assert row["base_pK"] == pytest.approx(plain[name]["pK"], abs=1e-4)
    # the six measured ligands all bind more tightly than the base model says: the others move up too
    assert np.mean([rows[n]["pK"] - rows[n]["base_pK"] for n in rows if n not in measured]) > 0.5
    # an anchor is predicted from the other five, not from its own measurement
    model = geomol.load_model(base_dir)
    for name in measured:
        others = {n: v for n, v in measured.items() if n != name}
        from geomol.inference.anchor_ligands import anchor_on_ligands
        from geomol.inference.ligand_inputs import ligand_inputs
        alone = anchor_on_ligands(model, str(RECEPTOR), ligand_inputs(str(POSED)), others)
        (expected,) = geomol.predict_affinity(RECEPTOR, [str(POSED)], model=alone)[[*measured].index(name):][:1]
        assert expected.name == name and rows[name]["pK"] == pytest.approx(expected.pK, abs=1e-4)
    captured = capsys.readouterr()
    assert "anchored on 6 measured ligand(s)" in captured.err and "'residual'" in captured.err
    assert "Expected accuracy" in captured.err and "0.50" in captured.err
    listed = [line.split()[1] for line in captured.err.splitlines() if line.strip()[:2] in ("1.", "2.", "3.")]
    assert len(listed) == 3 and not set(listed) & set(measured)


def test_poses_of_the_measured_ligands_may_come_separately(base_dir, tmp_path):
    measured = read_measured(MEASURED)
    rest = tmp_path / "rest.sdf"
    with Chem.SDWriter(str(rest)) as writer:
        for mol in Chem.SDMolSupplier(str(SERIES), removeHs=False):
            if mol.GetProp("_Name") not in measured:
                writer.write(mol)
    together, apart = tmp_path / "together.csv", tmp_path / "apart.csv"
    assert run(base_dir, together, "--ligands", str(SERIES), "--anchors", str(MEASURED), "--quiet") == 0
    assert run(base_dir, apart, "--ligands", str(rest), "--anchors", str(MEASURED), "--anchor-ligands", str(POSED),
               "--quiet") == 0
    joint = {r["name"]: r["pK"] for r in read_predictions(together)}
    separate = read_predictions(apart)
    assert len(separate) == 21 and all(r["pK"] == pytest.approx(joint[r["name"]], abs=1e-4) for r in separate)


def test_a_series_without_usable_measurements_keeps_the_base_model(base_dir, plain, tmp_path, capsys):
    none = tmp_path / "none.csv"
    none.write_text("name,pK\nnot_in_the_series,7.0\n")
    out = tmp_path / "out.csv"
    with pytest.warns(UserWarning, match="not_in_the_series"):
        assert run(base_dir, out, "--ligands", str(SERIES), "--anchors", str(none)) == 0
    assert all(r["pK"] == pytest.approx(plain[r["name"]]["pK"], abs=1e-5) for r in read_predictions(out))
    assert "the predictions are the base model's" in capsys.readouterr().err


def test_finetune_by_anchoring_writes_a_model_that_predicts_as_anchors_do(base_dir, tmp_path):
    out = tmp_path / "tnks2-anchored"
    assert main(["finetune", "--model", str(base_dir), "--receptor", str(RECEPTOR), "--ligands", str(SERIES),
                 "--measured", str(MEASURED), "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["anchors"]["method"] == "residual" and len(manifest["anchors"]["anchors"]) == 6
    assert manifest["metrics"]["finetune"]["method"] == "residual"
    assert "predicted without itself" in (out / "README.md").read_text()
    tuned, anchored = tmp_path / "tuned.csv", tmp_path / "anchored.csv"
    assert main(["predict-affinity", "--model", str(out), "--receptor", str(RECEPTOR), "--ligands", str(SERIES),
                 "--out", str(tuned), "--quiet"]) == 0
    assert run(base_dir, anchored, "--ligands", str(SERIES), "--anchors", str(MEASURED), "--quiet") == 0
    want = {r["name"]: r["pK"] for r in read_predictions(anchored)}
    assert all(r["pK"] == pytest.approx(want[r["name"]], abs=1e-4) for r in read_predictions(tuned))


def test_anchors_need_a_model_measured_for_them_and_consistent_options(tmp_path, capsys):
    bare = tmp_path / "bare"
    model = geomol.load_model("default")
    model.save(bare, metrics={k: v for k, v in model.metrics.items() if k != "anchoring"})
    for args, message in (((("--ligands", str(SERIES), "--anchors", str(MEASURED))), "no anchoring settings"),
                          (("--ligands", str(SERIES), "--anchor-ligands", str(POSED)), "--anchor-ligands needs --anchors"),
                          (("--ligands", str(SERIES), "--next", "0"), "--next must be at least 1")):
        assert run(bare, tmp_path / "x.csv", *args) != 0
        assert message in capsys.readouterr().err
    with pytest.raises(ConfigError, match="not with method"):
        geomol.finetune_affinity(str(RECEPTOR), str(SERIES), read_measured(MEASURED), bare, steps=10,
                                 method="residual")
