"""``geomol screen`` on an RNA pocket: purine analogues posed on the purine riboswitch's ligand and scored by the
model trained on nucleic acids, chosen from the receptor's kind."""
from __future__ import annotations

import csv
import json

import pytest

from geomol.cli import main
from tests.conftest import REPO, shared_path

PURINES = {"hypoxanthine": "O=c1[nH]cnc2[nH]cnc12", "guanine": "Nc1nc2[nH]cnc2c(=O)[nH]1",
           "N2-methyl-diaminopurine": "CNc1nc(N)c2nc[nH]c2n1", "8-methyl-diaminopurine": "Nc1nc(N)c2nc(C)[nH]c2n1",
           "adenine": "Nc1ncnc2[nH]cnc12"}


@pytest.mark.skipif(not (REPO / "models" / "na-affinity" / "manifest.json").exists(), reason="na-affinity not shipped")
def test_a_riboswitch_screen_uses_the_nucleic_acid_model(cluster, tmp_path, capsys):
    folder = shared_path("nucleic_affinity", "2B57")  # guanine riboswitch with a diaminopurine
    library = tmp_path / "purines.smi"
    library.write_text("".join(f"{smiles} {name}\n" for name, smiles in PURINES.items()))
    argv = ["screen", "--receptor", str(folder / "receptor.pdb"), "--reference", str(folder / "ligand.sdf"),
            "--library", str(library), "--out", str(tmp_path / "out"), "--scheduler", cluster.scheduler.address,
            "--conformers", "1", "--shard-size", "3", "--top", "5", "--no-plot"]
    assert main(argv) == 0
    printed = capsys.readouterr()
    assert "RNA receptor: using na-affinity" in printed.err
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["counts"]["ligands"] == 5 and summary["counts"]["scored"] >= 3
    with open(tmp_path / "out" / "top.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert rows and all(3.0 < float(r["pK"]) < 10.0 for r in rows)
    assert not any("never saw one like it" in r["warnings"] for r in rows)  # the model saw RNA pockets
    manifest = json.loads((tmp_path / "out" / "manifest.json").read_text())
    assert manifest["screen"]["settings"]["model"] == "na-affinity"
