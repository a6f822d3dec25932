"""Wrong affinity inputs come back as errors or warnings, never as plain confident numbers (shipped model)."""
from __future__ import annotations

import json
import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rdkit import Chem
from rdkit.Chem import AllChem

import geomol
from geomol.cli import main
from geomol.data import read_ligands, read_structure
from geomol.inference.affinity import AffinityPrediction
from geomol.inference.domain import PHYSICAL_PK_RANGE, ApplicabilityDomain
from geomol.inference.tables import read_predictions, write_predictions
from geomol.testing import random_orthogonal
from tests.affinity_fixtures import one_torch_thread, write_sdf  # noqa: F401 (autouse fixture)
from tests.conftest import REPO, shared_path
from tests.data.test_checks import GAFF_MOL2, with_coords

EXAMPLE = REPO / "data" / "example"
RECEPTOR, LIGANDS = EXAMPLE / "tnks2_protein.pdb", EXAMPLE / "tnks2_ligands.sdf"


@pytest.fixture(scope="module")
def model():
    return geomol.load_model("default")


@pytest.fixture(scope="module")
def receptor():
    return read_structure(RECEPTOR)  # parsed once, reused by every prediction


@pytest.fixture(scope="module")
def pose() -> Chem.Mol:
    return read_ligands(LIGANDS)[1]  # lig_3a: a tert-butyl group, tetrahedral centres a 2D drawing flattens


def flat_in_pocket(pose: Chem.Mol, rotate: bool) -> Chem.Mol:
    """The ligand drawn in 2D (z = 0), its centre moved onto the real pose's centre (and turned)."""
    flat = Chem.Mol(pose)
    AllChem.Compute2DCoords(flat)
    coords = flat.GetConformer().GetPositions()
    coords -= coords.mean(0)
    if rotate:
        coords = coords @ random_orthogonal(False).numpy().T
    moved = with_coords(flat, coords + pose.GetConformer().GetPositions().mean(0))
    moved.GetConformer().Set3D(rotate)  # a turned drawing has no 2D flag left: the geometry must tell
    moved.SetProp("_Name", f"flat{'_turned' if rotate else ''}")
    return moved


def test_shipped_manifest_records_its_domain_and_loads_without_warning(model):
    manifest = json.loads((REPO / "models" / "contact-corpus" / "manifest.json").read_text())
    domain = manifest["domain"]
    assert domain["pk_std_limit"] == pytest.approx(2 * domain["pk_std_q99"], abs=1e-3)
    assert 0 < domain["pk_std_median"] < domain["pk_std_q99"] < domain["pk_std_limit"]
    assert {"C", "N", "O"} <= set(domain["ligand_elements"]) and domain["pk_physical_range"] == [0.0, 15.0]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert geomol.load_model("default").domain == model.domain == ApplicabilityDomain.from_dict(domain)


def test_manifest_without_a_domain_loads_with_defaults_and_a_warning(tmp_path):
    source = REPO / "models" / "get-plb"
    old = tmp_path / "old"
    shutil.copytree(source, old)
    manifest = json.loads((old / "manifest.json").read_text())
    del manifest["domain"]
    (old / "manifest.json").write_text(json.dumps(manifest))
    with pytest.warns(UserWarning, match="no applicability domain"):
        assert geomol.load_model(old).domain == ApplicabilityDomain.defaults()


def test_protein_given_as_ligand_is_refused_with_the_protein_protein_hint(model, receptor):
    protein = shared_path("plb", "tnks2", "01_protein", "crd", "protein.pdb")  # as data/example's receptor
    (record,) = geomol.predict_affinity(receptor, protein, model=model)
    assert not record.ok and math.isnan(record.pK)
    assert "tnks2/01_protein/crd/protein.pdb" in record.error and "not a drug-sized molecule" in record.error
    assert "chain:B" in record.error


def test_broken_poses_fail_alone_and_good_ligands_are_predicted(model, receptor, pose, tmp_path):
    coords = pose.GetConformer().GetPositions()
    zero = with_coords(pose, np.zeros_like(coords))
    collapsed = with_coords(pose, np.tile(coords.mean(0), (len(coords), 1)))
    at_origin = Chem.Mol(pose)
    AllChem.Compute2DCoords(at_origin)
    for mol, name in ((zero, "zero"), (collapsed, "collapsed"), (at_origin, "2d_at_origin")):
        mol.SetProp("_Name", name)
    sdf = write_sdf([flat_in_pocket(pose, False), flat_in_pocket(pose, True), zero, collapsed, at_origin, pose],
                    tmp_path / "mixed.sdf")
    records = geomol.predict_affinity(receptor, sdf, model=model)
    flat, turned, zero_r, collapsed_r, origin_r, good = records
    assert "2D" in flat.error and "tetrahedral centre" in turned.error and "2D" in origin_r.error
    assert "all atom coordinates are zero" in zero_r.error and "one point" in collapsed_r.error
    assert all("mixed.sdf [molecule" in r.error for r in records[:5])
    assert not any(r.ok for r in records[:5]) and all(math.isnan(r.pK) for r in records[:5])
    assert "pocket is empty" not in origin_r.error + zero_r.error
    assert good.ok and good.warnings == [] and PHYSICAL_PK_RANGE[0] < good.pK < PHYSICAL_PK_RANGE[1]


def host_guest(tmp_path: Path) -> tuple[Path, Chem.Mol]:
    """An 18-crown-6 host written as a HETATM PDB, and methylammonium placed in its ring."""
    host = Chem.AddHs(Chem.MolFromSmiles("C1COCCOCCOCCOCCOCCO1"))
    AllChem.EmbedMolecule(host, randomSeed=3)
    path = tmp_path / "crown.pdb"
    path.write_text(Chem.MolToPDBBlock(host))
    guest = Chem.AddHs(Chem.MolFromSmiles("C[NH3+]"))
    AllChem.EmbedMolecule(guest, randomSeed=3)
    centre = host.GetConformer().GetPositions().mean(0)
    guest = with_coords(guest, guest.GetConformer().GetPositions() - guest.GetConformer().GetPositions()[1] + centre)
    guest.SetProp("_Name", "methylammonium")
    return path, guest


def test_host_guest_receptor_is_outside_the_domain(model, tmp_path):
    host, guest = host_guest(tmp_path)
    (record,) = geomol.predict_affinity(host, guest, model=model)
    assert not record.ok and "crown.pdb" in record.error
    assert "no amino-acid or nucleotide residue" in record.error and "host–guest" in record.error


def test_gaff_mol2_is_named_with_what_to_do(model, receptor, tmp_path):
    path = tmp_path / "ligand_gaff.mol2"
    path.write_text(GAFF_MOL2)
    (record,) = geomol.predict_affinity(receptor, path, model=model)
    assert "ligand_gaff.mol2" in record.error and "phenol_gaff" in record.error
    assert "GAFF" in record.error and "SYBYL" in record.error and "SDF" in record.error


def test_unphysical_and_disagreeing_predictions_are_flagged():
    domain = ApplicabilityDomain.defaults()
    record = AffinityPrediction("protein")
    record.set_pk(262.0, 28.0, domain)
    assert not record.ok and math.isnan(record.pK) and "outside the physical range" in record.error
    spread = AffinityPrediction("host")
    spread.set_pk(7.4, 3.5, domain)
    assert spread.ok and spread.pK == 7.4 and any("disagree" in w for w in spread.warnings)
    odd = AffinityPrediction("odd")
    odd.set_pk(13.0, 0.1, domain)
    assert odd.ok and any("outside the 2.0–12.0 of the training labels" in w for w in odd.warnings)


def test_warnings_column_round_trips_through_csv_and_json(tmp_path):
    record = AffinityPrediction("x", warnings=["first", "second"])
    record.set_pk(6.0, 0.2)
    for suffix in ("csv", "json"):
        (row,) = read_predictions(write_predictions([record], tmp_path / f"out.{suffix}"))
        assert row["warnings"] == ["first", "second"] and row["pK"] == pytest.approx(6.0)


def test_command_reports_errors_and_warnings_per_ligand(model, pose, tmp_path, capsys):
    sdf = write_sdf([flat_in_pocket(pose, False), pose], tmp_path / "two.sdf")
    out = tmp_path / "out.json"
    assert main(["predict-affinity", "--receptor", str(RECEPTOR), "--ligands", str(sdf), "--out", str(out)]) == 0
    flat, good = json.loads(out.read_text())
    assert "2D" in flat["error"] and flat["pK"] is None and good["error"] == "" and good["warnings"] == []
    assert "1 predicted, 1 failed" in capsys.readouterr().err


# ---------------------------------------------------------------------- random garbage
ELEMENTS = ("C", "C", "N", "O", "S", "Cl", "H", "Fe", "Se", "B", "Xe", "U")


@st.composite
def garbage_molecules(draw) -> Chem.Mol:
    """A random 'molecule': random elements, random bonds, random coordinates around the pocket."""
    n = draw(st.integers(1, 30))
    mol = Chem.RWMol()
    for _ in range(n):
        mol.AddAtom(Chem.Atom(draw(st.sampled_from(ELEMENTS))))
    pairs = draw(st.lists(st.tuples(st.integers(0, n - 1), st.integers(0, n - 1)), max_size=2 * n))
    for i, j in {(min(p), max(p)) for p in pairs if p[0] != p[1]}:
        mol.AddBond(i, j, draw(st.sampled_from([Chem.BondType.SINGLE, Chem.BondType.DOUBLE, Chem.BondType.AROMATIC])))
    scale = draw(st.sampled_from([0.0, 0.01, 0.5, 2.0, 5.0, 50.0]))
    offset = np.array(draw(st.tuples(*[st.floats(-30, 30)] * 3)))
    seed = draw(st.integers(0, 2**16))
    coords = np.random.default_rng(seed).normal(size=(n, 3)) * scale + offset
    conf = Chem.Conformer(n)
    for i, xyz in enumerate(coords):
        conf.SetAtomPosition(i, xyz.tolist())
    conf.Set3D(True)
    mol.AddConformer(conf)
    mol = mol.GetMol()
    mol.UpdatePropertyCache(strict=False)
    mol.SetProp("_Name", "garbage")
    return mol


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mols=st.lists(garbage_molecules(), min_size=1, max_size=3))
def test_random_garbage_never_yields_a_plain_confident_number(model, receptor, pose, mols):
    centre = pose.GetConformer().GetPositions().mean(0)  # garbage placed around the real pocket
    placed = [with_coords(m, m.GetConformer().GetPositions() + centre) for m in mols]
    for record in geomol.predict_affinity(receptor, placed, model=model):
        assert not record.ok or record.warnings, f"garbage predicted as a plain number: {record}"
        if record.ok:
            assert PHYSICAL_PK_RANGE[0] <= record.pK <= PHYSICAL_PK_RANGE[1]
