"""The receptor file is parsed once per prediction, on every path: ligand files, SMILES posed on a reference (the
Python API, the command line, the web service's jobs), ligands named inside the receptor file, and fine-tuning.
Every parse of a structure file goes through :func:`geomol.data.io.pdb.read_text`; the tests count the calls that
read the receptor."""
from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

import geomol
from geomol.data.io import pdb
from geomol.data.io.molecule import read_ligands
from tests.affinity_fixtures import one_torch_thread  # noqa: F401 (autouse fixture)
from tests.conftest import REPO

pytest.importorskip("rdkit")
EXAMPLE = REPO / "data" / "example"
RECEPTOR = EXAMPLE / "tnks2_protein.pdb"
SMILES = ["CC(C)(C)c1ccc(-c2nc3ccccc3c(=O)[nH]2)cc1", ("lig_5a", "CC(C)(O)c1ccc(-c2nc3ccccc3c(=O)[nH]2)cc1")]


@pytest.fixture
def reads(monkeypatch) -> Counter:
    """File name → how many times a structure file of that name was parsed."""
    counted, read_text = Counter(), pdb.read_text

    def counting(path, *args, **kwargs):
        counted[Path(path).name] += 1
        return read_text(path, *args, **kwargs)

    monkeypatch.setattr(pdb, "read_text", counting)
    return counted


@pytest.fixture(scope="module")
def model():
    return geomol.load_model("default")


def test_ligand_files(reads, model):
    records = geomol.predict_affinity(RECEPTOR, EXAMPLE / "tnks2_ligands.sdf", model=model)
    assert len(records) > 3 and all(r.ok for r in records)
    assert reads[RECEPTOR.name] == 1


def test_smiles_on_a_reference(reads, model, tmp_path):
    records = geomol.predict_affinity(RECEPTOR, SMILES, model=model, reference=EXAMPLE / "tnks2_ligands.sdf",
                                      write_poses=tmp_path / "poses.sdf")
    assert [r.name for r in records] == ["#0", "lig_5a"] and all(r.ok for r in records)
    assert reads[RECEPTOR.name] == 1


def test_smiles_on_a_reference_from_the_command_line(reads, tmp_path):
    from geomol.cli import main

    out = tmp_path / "results.csv"
    assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--reference", str(EXAMPLE / "tnks2_ligands.sdf"),
                 "--ligands", str(EXAMPLE / "tnks2_analogues.smi"), "--out", str(out), "--quiet"]) == 0
    assert out.read_text().count("\n") > 3
    assert reads[RECEPTOR.name] == 1


def test_smiles_job_of_the_web_service(reads, model, tmp_path):
    from geomol.serve.predict_job import run_job

    inputs = tmp_path / "job" / "inputs"
    inputs.mkdir(parents=True)
    for name in ("tnks2_protein.pdb", "tnks2_analogues.smi", "tnks2_ligands.sdf"):
        shutil.copy(EXAMPLE / name, inputs / name)
    spec = {"id": "job", "dir": str(tmp_path / "job"), "model": "default", "pocket_cutoff": None, "smiles": True,
            "files": {"receptor": "tnks2_protein.pdb", "ligands": "tnks2_analogues.smi",
                      "reference": "tnks2_ligands.sdf"}}
    summary = run_job(spec, model, lambda done, total: None)
    assert summary["counts"]["predicted"] > 3
    assert reads["tnks2_protein.pdb"] == 1


def test_a_ligand_named_inside_the_receptor_file(reads, tmp_path):
    """A ligand residue of a complex file is cut from the one reading of it that the input checks use too (GET reads
    a residue ligand)."""
    from rdkit import Chem

    ligand = read_ligands(EXAMPLE / "tnks2_ligands.sdf")[0]
    lines = [line for line in RECEPTOR.read_text().splitlines() if line.startswith("ATOM")]
    lines += [line for line in Chem.MolToPDBBlock(ligand).replace("UNL", "LGA").splitlines()
              if line.startswith("HETATM")]
    complex_file = tmp_path / "complex.pdb"
    complex_file.write_text("\n".join(lines) + "\nEND\n")
    (record,) = geomol.predict_affinity(complex_file, "LGA", model="get-plb")
    assert record.name == "LGA" and record.ok and record.n_pocket_blocks > 10
    assert reads[complex_file.name] == 1


def test_finetuning(reads, model):
    sdf = EXAMPLE / "tnks2_ligands.sdf"
    names = [m.GetProp("_Name") for m in read_ligands(sdf)[:4]]
    geomol.finetune_affinity(RECEPTOR, sdf, {name: 6.0 + 0.5 * i for i, name in enumerate(names)}, model=model,
                             steps=2)
    assert reads[RECEPTOR.name] == 1
