"""Affinity label parsing: every protein-ligand-benchmark measurement type and PDBbind INDEX lines."""
from __future__ import annotations

import math

import pytest
import yaml

from geomol.data.datasets.affinity_labels import (
    parse_pdbbind_affinity,
    parse_pdbbind_index,
    plb_affinities,
    plb_measurement_pk,
)
from geomol.errors import DatasetError
from geomol.units import dg_from_pk, pk_from_concentration, pk_from_dg
from tests.conftest import shared_path

RT_LN10 = 1.98720425864083e-3 * 298.15 * math.log(10)  # kcal/mol per pK unit


@pytest.mark.parametrize("value, unit, pk", [
    (1, "M", 0.0), (0.4, "mM", -math.log10(4e-4)), (2.5, "uM", -math.log10(2.5e-6)), (2.5, "µM", -math.log10(2.5e-6)),
    (180, "nM", -math.log10(1.8e-7)), (3, "pM", -math.log10(3e-12)), (50, "fM", -math.log10(5e-14)),
])
def test_concentration_units(value, unit, pk):
    assert pk_from_concentration(value, unit) == pytest.approx(pk, abs=1e-12)


@pytest.mark.parametrize("value, unit", [(0, "nM"), (-1, "uM"), (1, "mg/L")])
def test_bad_concentrations_raise(value, unit):
    with pytest.raises(DatasetError):
        pk_from_concentration(value, unit)


def test_dg_kcal_and_kj_and_round_trip():
    assert pk_from_dg(-10.0) == pytest.approx(10.0 / RT_LN10)
    assert pk_from_dg(-41.84, "kilojoules / mole") == pytest.approx(10.0 / RT_LN10)
    assert pk_from_dg(-41.84, "kJ/mol") == pytest.approx(pk_from_dg(-10.0, "kcal / mol"))
    assert dg_from_pk(pk_from_dg(-7.3)) == pytest.approx(-7.3)
    with pytest.raises(DatasetError):
        pk_from_dg(-10.0, "eV")


def test_plb_measurement_types_from_the_real_files():
    """ic50 (uM, nM), ki (uM, nM), pic50 (unitless) and thrombin's kJ/mol dg, dh/tds ignored."""
    kinds = set()
    for target in ("cdk2", "cmet", "pde2", "ptp1b", "thrombin"):
        ligands = yaml.safe_load(shared_path("plb", target, "00_data", "ligands.yml").read_text())
        for name, entry in ligands.items():
            measurement = entry["measurement"]
            label = plb_measurement_pk(measurement, source=name)
            kinds.add((label.kind, label.unit))
            assert 2.0 < label.pk < 12.0
            if label.kind == "pic50":
                assert label.pk == measurement["value"]
    assert {("ic50", "uM"), ("ic50", "nM"), ("ki", "uM"), ("ki", "nM"), ("pic50", "")} <= kinds

    thrombin = yaml.safe_load(shared_path("plb", "thrombin", "00_data", "ligands.yml").read_text())
    all_1a = plb_affinities(thrombin["lig_1a"]["measurement"])
    assert [m.kind for m in all_1a] == ["ki", "dg"]  # dh and tds are not affinities
    assert all_1a[0].pk == pytest.approx(-math.log10(3.99e-6))
    assert all_1a[1].pk == pytest.approx(31.3 / 4.184 / RT_LN10)
    # the kJ/mol free energy and the Ki of the same ligand agree within half a log unit
    assert abs(all_1a[0].pk - all_1a[1].pk) < 0.5


def test_plb_dg_only_and_non_affinity():
    dg_only = {"type": "dh", "value": -5.0, "unit": "kcal/mol",
               "additional": [{"type": "dg", "value": -9.0, "unit": "kilojoules / mol"}]}
    assert plb_measurement_pk(dg_only).pk == pytest.approx(9.0 / 4.184 / RT_LN10)
    with pytest.raises(DatasetError, match="no affinity"):
        plb_measurement_pk({"type": "tds", "value": 1.0, "unit": "kcal/mol"})
    with pytest.raises(DatasetError, match="unitless"):
        plb_measurement_pk({"type": "pic50", "value": 7.0, "unit": "nM"})


@pytest.mark.parametrize("token, kind, qualifier, pk", [
    ("Kd=0.4mM", "kd", "=", 3.39794), ("Ki<1nM", "ki", "<", 9.0), ("IC50>=10uM", "ic50", ">=", 5.0),
    ("Kd<=2.5pM", "kd", "<=", 11.60206), ("Ki>5fM", "ki", ">", 14.30103), ("IC50~3M", "ic50", "~", -0.47712),
    ("Kd=1.2e-3uM", "kd", "=", 8.92082),
])
def test_pdbbind_affinity_tokens(token, kind, qualifier, pk):
    m = parse_pdbbind_affinity(token)
    assert (m.kind, m.qualifier) == (kind, qualifier)
    assert m.pk == pytest.approx(pk, abs=1e-4)


INDEX = """\
# ==============================================================================
# List of protein-ligand complexes with known binding data in PDBbind v.2020
# PDB code, resolution, release year, -logKd/Ki, Kd/Ki, reference, ligand name
# ==============================================================================
1a1e  2.20  1998   3.40  Kd=0.4mM      // 1a1e.pdf (3.2-mer)
1a30  2.00  1998   4.30  Ki=50uM       // 1a30.pdf (EDA)
2abc  NMR   2001   9.00  Ki<1nM        // 2abc.pdf (LIG)
3xyz  1.80  2010   5.00  IC50>=10uM    // 3xyz.pdf (XYZ)
4aaa  2.50  2015   7.52  Kd~30nM       // 4aaa.pdf (AAA)
5bbb  1.50  2018  11.00  Ki=10pM       // 5bbb.pdf (BBB)
"""


def test_pdbbind_index_and_qualifier_modes(tmp_path):
    path = tmp_path / "INDEX_general_PL_data.2020"
    path.write_text(INDEX)
    entries = parse_pdbbind_index(path)
    assert list(entries) == ["1a1e", "1a30", "2abc", "3xyz", "4aaa", "5bbb"]
    first = entries["1a1e"]
    assert (first.resolution, first.year, first.ligand) == (2.2, 1998, "3.2-mer")
    assert entries["2abc"].resolution is None
    for entry in entries.values():  # the listed -logK column agrees with the parsed token
        assert entry.measurement.pk == pytest.approx(entry.pk_listed, abs=0.01)
    assert list(parse_pdbbind_index(path, qualifiers="drop")) == ["1a1e", "1a30", "5bbb"]
    assert list(parse_pdbbind_index(path, qualifiers="drop_inequalities")) == ["1a1e", "1a30", "4aaa", "5bbb"]


def test_pdbbind_index_errors(tmp_path):
    path = tmp_path / "INDEX_bad"
    path.write_text(INDEX + "6ccc  2.0  2019  5.0  Kd=5xM  // x\n")
    with pytest.raises(DatasetError, match=r"INDEX_bad:11"):
        parse_pdbbind_index(path)
    with pytest.warns(UserWarning, match="1 malformed"):
        assert len(parse_pdbbind_index(path, strict=False)) == 6
    with pytest.raises(DatasetError, match="cannot read"):
        parse_pdbbind_index(tmp_path / "missing")
    path.write_text(INDEX + "1a1e  2.20  1998   3.40  Kd=0.4mM  // again\n")
    with pytest.raises(DatasetError, match="twice"):
        parse_pdbbind_index(path)
