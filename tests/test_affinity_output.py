"""Issue 43, items 4 and 7: output that reads well at 80 columns, a plot named by target and model, correct help,
and a quick start that shows a series and says how far the cross-validation trusts the model on it."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from rdkit import Chem

from geomol.cli import main
from geomol.errors import DatasetError
from geomol.evaluation.target_trust import trust_sentence
from tests.affinity_fixtures import one_torch_thread, write_sdf  # noqa: F401 (autouse fixture)
from tests.conftest import REPO
from tests.data.test_checks import with_coords

EXAMPLE = REPO / "data" / "example"
RECEPTOR, SERIES, MEASURED = (EXAMPLE / n for n in ("tnks2_protein.pdb", "tnks2_series.sdf",
                                                    "tnks2_series_measured.csv"))


@pytest.fixture(scope="module")
def twenty(tmp_path_factory):
    """18 tnks2 ligands as they are, one flattened to 2D (an error) and one repeated name (a warning)."""
    mols = [m for m in Chem.SDMolSupplier(str(SERIES), removeHs=False)]
    flat = with_coords(mols[18], mols[18].GetConformer().GetPositions() * [1.0, 1.0, 0.0])
    return write_sdf(mols[:18] + [flat, mols[0]], tmp_path_factory.mktemp("twenty") / "twenty.sdf")


def test_twenty_ligands_fit_80_columns_one_line_each(twenty, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    out, png = tmp_path / "r.csv", tmp_path / "plot.svg"
    assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--ligands", str(twenty), "--out", str(out),
                 "--measured", str(MEASURED), "--plot", str(png)]) == 0
    captured = capsys.readouterr()
    table = captured.out.splitlines()
    assert max(len(line) for line in table) <= 80
    assert table[0] == "binding affinity · tnks2 · contact-corpus"
    names = [m.GetProp("_Name") for m in Chem.SDMolSupplier(str(twenty))]
    rows = [line for line in table if line.split(" ")[0] in names or line.startswith(names[0] + " (2)")]
    assert len(rows) == 20 and len(table) <= 24  # title, header, rule, 20 ligands
    assert re.search(r"^lig_\w+ +– +– +error: .*not 3D *$", "\n".join(table), re.M)
    assert [line for line in table if line.startswith(names[0] + " (2)")][0].rstrip().endswith("duplicate name")
    err = " ".join(captured.err.split())  # rich wraps long lines at 80 columns
    assert "20 ligand(s): 19 predicted (1 with warnings: duplicate name ×1), 1 failed (" in err
    assert err.count("error: not 3D —") == 1 and err.count("warning: duplicate name —") == 1
    svg = png.read_text()
    assert "tnks2 · contact-corpus" in svg and all(f"<!-- {n} -->" in svg for n in names[1:18])


def test_problem_lines_name_the_receptor_file_for_a_receptor_problem(tmp_path, capsys):
    ca = tmp_path / "ca_only.pdb"
    ca.write_text("\n".join(line for line in RECEPTOR.read_text().splitlines()
                            if line.startswith("ATOM") and line[12:16].strip() == "CA") + "\nEND\n")
    assert main(["predict-affinity", "--receptor", str(ca), "--ligands", str(EXAMPLE / "tnks2_ligands.sdf")]) == 1
    err = " ".join(capsys.readouterr().err.split())
    assert f"error: no side chains — 6 ligands (lig_1a, lig_3a, lig_5a, lig_5f, …): {ca}: the receptor is" in err
    assert "nothing could be predicted (see the errors above)" in err


def test_help_names_the_default_model():
    done = subprocess.run([sys.executable, "-m", "geomol", "--help"], capture_output=True, text=True, check=True,
                          env={"COLUMNS": "200", "PATH": ""})
    text = " ".join(done.stdout.split())
    line = text[text.index("predict-affinity"):text.index("finetune")]
    assert "contact-corpus" in line and "GET model" not in line and "PDBQT" in line


def test_quick_start_shows_a_series_and_what_the_cross_validation_measured():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    first = re.search(r"```bash\n(.*?)```", readme.split("## Quick start", 1)[1], re.S).group(1)
    ligands = REPO / re.search(r"--ligands (\S+)", first).group(1)
    assert len([m for m in Chem.SDMolSupplier(str(ligands))]) >= 20
    cv = json.loads((REPO / "benchmarks" / "results" / "affinity_corpus_cv.json").read_text(encoding="utf-8"))
    manifest = json.loads((REPO / "models" / "contact-corpus" / "manifest.json").read_text(encoding="utf-8"))
    sentence = trust_sentence(cv, manifest, "tnks2")
    assert "fold 2" in sentence and "Spearman 0.28" in sentence and "heavy-atom count: 0.37" in sentence
    assert f"\n{sentence}\n" in readme
    check = subprocess.run([sys.executable, "scripts/quick_start.py", "readme", "--check"], cwd=REPO, timeout=120,
                           capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert check.returncode == 0, check.stderr  # the README's sentence is the one written from the results
    with pytest.raises(DatasetError, match="plb/no_such_target is not a scored target"):
        trust_sentence(cv, manifest, "no_such_target")
    other = {"metrics": {"cross_validation": {"expert_pose": {"targets": 1, "spearman": 0.99}}}}
    with pytest.raises(DatasetError, match="no cross-validation row matches"):
        trust_sentence(cv, other, "tnks2")
