"""Issue 43, items 2 and 3: inputs people have, and checks that name what a chemist would reject.

Docking output (PDBQT, several poses, bond orders from meeko's REMARK SMILES or a SMILES template), CSV SMILES
columns by their common names, SMILES without a reference, a receptor without side chains (an error for the
contact model, a warning for GET), repeated ligand names, and messages naming each molecule by its title.
PDBQT files are written here, at test time, by meeko from the shared tnks2 ligands.
"""
from __future__ import annotations

import csv
import warnings
from pathlib import Path

import numpy as np
import pytest
from rdkit import Chem

import geomol
from geomol.cli import main
from geomol.data.chemistry.checks import ERROR, WARNING
from geomol.data.io.pdbqt import read_pdbqt_poses
from geomol.errors import ConfigError, StructureReadError
from geomol.inference.ligand_inputs import ligand_inputs
from geomol.inference.names import DuplicateNameWarning
from tests.affinity_fixtures import one_torch_thread, write_sdf  # noqa: F401 (autouse fixture)
from tests.conftest import REPO
from tests.data.test_checks import with_coords

EXAMPLE = REPO / "data" / "example"
RECEPTOR, SERIES = EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_series.sdf"


@pytest.fixture(scope="module")
def model():
    return geomol.load_model("default")


@pytest.fixture(scope="module")
def series() -> list[Chem.Mol]:
    return [m for m in Chem.SDMolSupplier(str(SERIES), removeHs=False)]


def _shifted(text: str, dx: float) -> str:
    out = []
    for line in text.splitlines():
        if line.startswith(("ATOM", "HETATM")):
            line = f"{line[:30]}{float(line[30:38]) + dx:8.3f}{line[38:]}"
        out.append(line)
    return "\n".join(out)


@pytest.fixture(scope="module")
def docked(series, tmp_path_factory) -> dict[str, Path]:
    """Vina-style output for lig_8c: three MODELs (the crystal pose, then shifted by 0.2 and 0.4 Å) with meeko's
    REMARK SMILES lines, and the same without them (as ligands prepared by other tools are)."""
    meeko = pytest.importorskip("meeko")
    setup = meeko.MoleculePreparation().prepare(series[0])[0]
    text, ok, problem = meeko.PDBQTWriterLegacy.write_string(setup)
    assert ok, problem
    models = "".join(f"MODEL {k + 1}\nREMARK VINA RESULT:    {-9.0 + k:.1f}      0.000      0.000\n"
                     f"{_shifted(text, 0.2 * k)}\nENDMDL\n" for k in range(3))
    folder = tmp_path_factory.mktemp("docked")
    with_smiles, bare = folder / "lig_8c_out.pdbqt", folder / "plain_out.pdbqt"
    with_smiles.write_text(models)
    bare.write_text("\n".join(line for line in models.splitlines() if not line.startswith("REMARK SMILES")
                              and not line.startswith("REMARK H PARENT")) + "\n")
    return {"meeko": with_smiles, "bare": bare, "smiles": Chem.MolToSmiles(Chem.RemoveHs(series[0]))}


# ---------------------------------------------------------------------- PDBQT docking poses
def test_pdbqt_poses_read_with_bond_orders_from_meeko_or_a_template(docked, series):
    from_remarks = read_pdbqt_poses(docked["meeko"])
    from_template = read_pdbqt_poses(docked["bare"], docked["smiles"])
    reference = Chem.RemoveHs(series[0])
    for poses in (from_remarks, from_template):
        assert [m.GetProp("_Name").split(" pose ")[1] for m in poses] == ["1", "2", "3"]
        assert [m.GetDoubleProp("docking_score") for m in poses] == [-9.0, -8.0, -7.0]
        heavy = Chem.RemoveHs(poses[0])
        assert Chem.MolToSmiles(heavy) == Chem.MolToSmiles(reference)  # bond orders and charges restored
        np.testing.assert_allclose(np.sort(heavy.GetConformer().GetPositions(), axis=0),
                                   np.sort(reference.GetConformer().GetPositions(), axis=0), atol=1e-3)
    shift = from_template[1].GetConformer().GetPositions() - from_template[0].GetConformer().GetPositions()
    assert np.allclose(shift[:, 0], 0.2, atol=1e-3)  # pose 2 is pose 1 moved 0.2 Å along x: poses kept apart


def test_pdbqt_without_bond_orders_or_meeko_says_what_to_give(docked, monkeypatch):
    with pytest.raises(StructureReadError, match="--smiles"):
        read_pdbqt_poses(docked["bare"])
    with pytest.raises(StructureReadError, match="not the same molecule"):
        read_pdbqt_poses(docked["bare"], "c1ccccc1CCN")
    monkeypatch.setitem(__import__("sys").modules, "meeko", None)  # as if meeko were not installed
    with pytest.raises(StructureReadError, match="pip install meeko"):
        read_pdbqt_poses(docked["meeko"])


def test_docked_poses_predicted_like_the_same_pose_from_sdf(docked, model, tmp_path):
    out = tmp_path / "docked.csv"
    assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--ligands", str(docked["bare"]), "--smiles",
                 docked["smiles"], "--out", str(out), "--quiet"]) == 0
    rows = list(csv.DictReader(open(out, newline="")))
    assert [r["name"] for r in rows] == ["plain_out pose 1", "plain_out pose 2", "plain_out pose 3"]
    assert [float(r["docking_score"]) for r in rows] == [-9.0, -8.0, -7.0]
    sdf = geomol.predict_affinity(RECEPTOR, write_sdf([Chem.Mol(m) for m in _first(SERIES)], tmp_path / "one.sdf"),
                                  model=model)
    remarks = geomol.predict_affinity(RECEPTOR, docked["meeko"], model=model)
    assert remarks[0].pK == pytest.approx(sdf[0].pK, abs=2e-3) == pytest.approx(float(rows[0]["pK"]), abs=2e-3)


def _first(path: Path) -> list[Chem.Mol]:
    return [next(iter(Chem.SDMolSupplier(str(path), removeHs=False)))]


# ---------------------------------------------------------------------- SMILES lists
def test_csv_smiles_columns_by_common_names_or_given(tmp_path, monkeypatch):
    from geomol.data.io.smiles import read_smiles_file

    unifep = tmp_path / "result_dG.csv"  # the Uni-FEP layout
    unifep.write_text("ligand_smiles,ligand_name,exp_dG (kcal/mol)\nCCO,lig_a,-7.1\nc1ccccc1O,lig_b,-8.0\n")
    assert [(e.name, e.smiles) for e in read_smiles_file(unifep)] == [("lig_a", "CCO"), ("lig_b", "c1ccccc1O")]
    custom = tmp_path / "custom.csv"
    custom.write_text("Compound ID,Structure (SMILES)\nx1,CCN\n")
    with pytest.raises(StructureReadError, match="--smiles-column"):
        read_smiles_file(custom)
    entries = read_smiles_file(custom, smiles_column="structure (smiles)", name_column="Compound ID")
    assert [(e.name, e.smiles) for e in entries] == [("x1", "CCN")]
    assert entries[0].source.endswith("[line 2 'x1']")


def test_smiles_without_a_reference_says_to_add_one(tmp_path, capsys):
    smi = tmp_path / "series.smi"
    smi.write_text("CCOc1ccccc1 lig_1\n")
    assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--ligands", str(smi)]) == 1
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error.startswith("geomol predict-affinity: error:") and "--reference" in error and "SMILES" in error
    with pytest.raises(ConfigError, match="reference="):
        ligand_inputs([str(smi)])
    text = ligand_inputs("CC(=O)Nc1ccc(O)cc1")[0]
    assert text.error and "--reference" in text.error and text.findings[0].code == "smiles_without_reference"


# ---------------------------------------------------------------------- receptor without side chains
def _backbone_only(path: Path, keep: set[str]) -> Path:
    lines = [line for line in RECEPTOR.read_text().splitlines()
             if line.startswith(("ATOM", "HETATM")) and line[12:16].strip() in keep]
    path.write_text("\n".join(lines) + "\nEND\n")
    return path


def test_receptor_without_side_chains_an_error_for_the_contact_model_a_warning_for_get(tmp_path, model, series):
    import torch

    from geomol.data.complexes.recipe import ComplexRecipe
    from geomol.inference import AffinityModel
    from geomol.models.get import GETAffinity, GETConfig

    ca_only = _backbone_only(tmp_path / "ca.pdb", {"CA"})
    backbone = _backbone_only(tmp_path / "backbone.pdb", {"N", "CA", "C", "O"})
    ligands = write_sdf(series[:2], tmp_path / "two.sdf")
    for receptor in (ca_only, backbone):
        records = geomol.predict_affinity(receptor, ligands, model=model)
        assert all(not r.ok and [(f.severity, f.code) for f in r.findings] == [(ERROR, "no_side_chains")]
                   for r in records), [r.error for r in records]
        assert "backbone-only" in records[0].error and "PDBFixer" in records[0].error
    torch.manual_seed(0)
    config = GETConfig(hidden=16, radial_dim=8, num_rbf=8, edge_embedding_dim=8, num_layers=1, num_heads=2, num_block_types=150)
    get = AffinityModel([GETAffinity(config)], config.to_dict(), ComplexRecipe(pocket_cutoff=10.0), name="tiny-get")
    flagged = geomol.predict_affinity(ca_only, ligands, model=get)
    assert all((WARNING, "no_side_chains") in [(f.severity, f.code) for f in r.findings] for r in flagged)
    assert not any(f.code == "no_side_chains" and f.severity == ERROR for r in flagged for f in r.findings)
    assert geomol.predict_affinity(RECEPTOR, ligands, model=model)[0].ok  # the all-atom receptor is fine


# ---------------------------------------------------------------------- names
def test_repeated_names_are_made_unique_in_every_output(tmp_path, model, series):
    ligands = write_sdf(series[:3], tmp_path / "three.sdf")
    out = tmp_path / "results.csv"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--ligands", str(ligands), str(ligands),
                     "--out", str(out), "--quiet"]) == 0
    names = [row["name"] for row in csv.DictReader(open(out, newline=""))]
    first = [m.GetProp("_Name") for m in series[:3]]
    assert names == first + [f"{n} (2)" for n in first]
    assert [w for w in caught if issubclass(w.category, DuplicateNameWarning)]
    rows = list(csv.DictReader(open(out, newline="")))
    assert all("2 ligands are named" in r["warnings"] for r in rows[3:]) and not any(r["warnings"] for r in rows[:3])


def test_repeated_smiles_names_unique_in_the_poses_written(tmp_path):
    smi = tmp_path / "series.smi"
    smiles = Chem.MolToSmiles(Chem.RemoveHs(next(iter(Chem.SDMolSupplier(str(EXAMPLE / "tnks2_ligands.sdf"))))))
    smi.write_text(f"{smiles} lig_x\n{smiles} lig_x\n")
    poses = tmp_path / "poses.sdf"
    with pytest.warns(DuplicateNameWarning):
        geomol.predict_affinity(RECEPTOR, str(smi), reference=EXAMPLE / "tnks2_ligands.sdf", write_poses=poses)
    assert [m.GetProp("_Name") for m in Chem.SDMolSupplier(str(poses))] == ["lig_x", "lig_x (2)"]


def test_messages_name_the_molecule_by_its_title(tmp_path, model, series):
    far = with_coords(series[4], series[4].GetConformer().GetPositions() + [60.0, 0.0, 0.0])
    ligands = write_sdf([series[3], far], tmp_path / "far.sdf")
    records = geomol.predict_affinity(RECEPTOR, ligands, model=model)
    title = far.GetProp("_Name")
    assert not records[1].ok and f"[molecule 1 '{title}']" in records[1].error, records[1].error
    assert records[1].findings[0].code == "not_in_pocket"
