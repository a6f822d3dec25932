"""``geomol predict-affinity`` on RNA and DNA receptors: without ``--model`` it uses the shipped model trained on
nucleic acids (and says so); with a protein-only model every row carries the unseen-kind warning, never silently;
a protein receptor keeps the default model. The input checks are those of proteins."""
from __future__ import annotations

import csv

import pytest

from geomol.cli import main
from geomol.data.io import read_ligand
from geomol.inference.model_choice import model_for_receptor, models_for_kind
from tests.affinity_fixtures import one_torch_thread, write_sdf  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, shared_path

SHIPPED = (REPO / "models" / "na-affinity" / "manifest.json").exists()


def _rows(path):
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.skipif(not SHIPPED, reason="na-affinity not shipped")
def test_the_default_command_on_rna_uses_the_nucleic_acid_model(tmp_path, capsys):
    folder = shared_path("nucleic_affinity", "3E5C")  # SAM on a SAM riboswitch, pK 9.2
    out = tmp_path / "rna.csv"
    assert main(["predict-affinity", "--receptor", str(folder / "receptor.pdb"), "--ligands",
                 str(folder / "ligand.sdf"), "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "RNA receptor: using na-affinity" in printed.err and "na-affinity" in printed.out
    row = _rows(out)[0]
    assert 3.0 < float(row["pK"]) < 12.0 and "receptor kind" not in row["warnings"]
    assert models_for_kind("RNA")[0] == "na-affinity" == model_for_receptor("DNA")
    assert model_for_receptor("protein") == "default" and models_for_kind("protein")[0] == "contact-corpus"


def test_a_protein_model_on_rna_warns_on_every_row(tmp_path, capsys):
    folder = shared_path("nucleic_affinity", "454D")  # a DNA duplex
    out = tmp_path / "dna.csv"
    assert main(["predict-affinity", "--receptor", str(folder / "receptor.pdb"), "--ligands",
                 str(folder / "ligand.sdf"), "--model", "contact-corpus", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    row = _rows(out)[0]
    assert "the pocket is DNA" in row["warnings"] and "trained on protein pockets only" in row["warnings"]
    assert "receptor kind unseen" in printed.err
    if SHIPPED:
        assert "--model na-affinity" in row["warnings"]


def test_a_protein_receptor_keeps_the_default_model(capsys):
    example = REPO / "data" / "example"
    assert main(["predict-affinity", "--receptor", str(example / "tnks2_protein.pdb"), "--ligands",
                 str(example / "tnks2_ligands.sdf"), "--quiet"]) == 0
    assert "receptor: using" not in capsys.readouterr().err


def test_nucleic_acid_inputs_get_the_same_checks(tmp_path, capsys):
    folder = shared_path("nucleic_affinity", "1QMS")  # its ligand file has a 3.1 Å bond
    assert main(["predict-affinity", "--receptor", str(folder / "receptor.pdb"), "--ligands",
                 str(folder / "ligand.sdf"), "--model", "get-plb"]) == 1
    assert "bond lengths" in capsys.readouterr().err
    mol = read_ligand(shared_path("nucleic_affinity", "3E5C") / "ligand.sdf")
    conformer = mol.GetConformer()
    for i in range(mol.GetNumAtoms()):  # 60 Å away from the riboswitch
        position = conformer.GetAtomPosition(i)
        conformer.SetAtomPosition(i, (position.x + 60.0, position.y, position.z))
    far = write_sdf([mol], tmp_path / "far.sdf")
    assert main(["predict-affinity", "--receptor", str(shared_path("nucleic_affinity", "3E5C") / "receptor.pdb"),
                 "--ligands", str(far), "--model", "get-plb"]) == 1
    assert "not in a pocket" in capsys.readouterr().err
