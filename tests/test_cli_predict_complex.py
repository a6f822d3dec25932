"""Protein–protein complexes in ``geomol predict-affinity`` and ``geomol.predict_complex_affinity``: the shipped
``ppa-affinity`` model on real complexes, one or many (CSV), and the input checks (missing chains, a ligand-sized
partner, no interface) as errors of that complex."""
from __future__ import annotations

import csv
import gzip
import math

import pytest

from geomol.api import load_model, predict_complex_affinity
from geomol.cli import main
from geomol.errors import ConfigError
from geomol.inference.complex_inputs import Partners
from geomol.units import KCAL_PER_PK
from tests.conftest import shared_path


@pytest.fixture(scope="module")
def model():
    return load_model("ppa-affinity")


def _lines(name: str) -> list[str]:
    with gzip.open(shared_path("protein_affinity", name, "complex.pdb.gz"), "rt") as handle:
        return [line for line in handle if line.startswith(("ATOM", "HETATM", "TER", "END"))]


def _write(path, lines):
    path.write_text("".join(lines))
    return path


@pytest.fixture
def files(tmp_path):
    """1ACB (chymotrypsin E – eglin c I) as it is, with eglin c cut to two residues, and with eglin c 100 Å away."""
    lines = _lines("1ACB")
    atoms = [line for line in lines if line.startswith(("ATOM", "HETATM"))]
    residues_i = list(dict.fromkeys(line[22:27] for line in atoms if line[21] == "I"))
    short = [line for line in atoms if line[21] != "I" or line[22:27] in residues_i[:2]]
    far = [line[:30] + f"{float(line[30:38]) + 100:8.3f}" + line[38:] if line[21] == "I" else line for line in atoms]
    return {"whole": _write(tmp_path / "1acb.pdb", lines), "short": _write(tmp_path / "short.pdb", short),
            "far": _write(tmp_path / "far.pdb", far)}


def test_partners_are_two_disjoint_chain_groups():
    assert Partners.parse("A,B:C") == Partners(("A", "B"), ("C",)) == Partners.parse("AB:C")
    assert Partners.parse("HL:AB").a == ("H", "L") and str(Partners.parse("HL:AB")) == "H,L:A,B"
    for bad in ("A", "A:B:C", ":C", "A,B:B"):
        with pytest.raises(ConfigError, match="partners"):
            Partners.parse(bad)


def test_command_scores_one_complex_with_dg_kd_and_spread(files, tmp_path, capsys):
    out = tmp_path / "out.csv"
    assert main(["predict-affinity", "--complex", str(files["whole"]), "--partners", "E:I", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert "ppa-affinity" in printed.out and "ΔG" in printed.out and "1acb.pdb" in printed.out
    assert "RMSE" in printed.err  # the held-out error of the model is stated beside the spread
    [row] = list(csv.DictReader(out.open()))
    dg, pk, std = float(row["dG_kcal_mol"]), float(row["pK"]), float(row["pK_std"])
    assert -20 < dg < -4 and dg == pytest.approx(-KCAL_PER_PK * pk, rel=1e-4)  # the CSV rounds
    assert float(row["Kd_M"]) == pytest.approx(10 ** -pk, rel=1e-3)
    assert 0 < std < 2 and row["error"] == ""
    api = predict_complex_affinity(files["whole"], "E:I")
    assert api[0].dG_kcal_mol == pytest.approx(dg, abs=1e-3) and api[0].extra["partners"] == "E:I"


def test_input_checks_fail_their_complex_and_name_the_reason(files, model):
    records = predict_complex_affinity([(files["whole"], "E:Z"), (files["short"], "E:I"), (files["far"], "E:I"),
                                        (files["whole"], "E:I", "eglin")], model=model)
    missing, short, far, good = records
    assert "chain(s) Z not in the file (chains present: E, I)" in missing.error
    assert "ligand-sized" in short.error and "--ligands" in short.error  # points to the small-molecule path
    assert "no interface" in far.error
    assert all(math.isnan(r.dG_kcal_mol) for r in (missing, short, far))
    assert good.ok and good.name == "eglin" and math.isfinite(good.dG_kcal_mol)


def test_many_complexes_from_a_csv(files, tmp_path, capsys):
    table = tmp_path / "complexes.csv"
    table.write_text(f"complex,partners,name\n{files['whole'].name},E:I,eglin\nfar.pdb,E:I,apart\n")
    out = tmp_path / "out.json"
    assert main(["predict-affinity", "--complexes", str(table), "--out", str(out), "--quiet"]) == 0
    assert "2 complex(es): 1 predicted" in capsys.readouterr().err
    assert out.is_file()


def test_command_refuses_half_given_complexes(files, capsys):
    assert main(["predict-affinity", "--complex", str(files["whole"])]) == 1
    assert "--complex and --partners go together" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="partners"):
        predict_complex_affinity(files["whole"])
