"""Protein–ligand / protein–protein affinity datasets on real structures: PLB, FEP benchmark,
their combination with protein-grouped splits, a PDBbind-layout folder and a chain-group table."""
from __future__ import annotations

import collections
import math
import shutil

import numpy as np
import pytest
import torch
from rdkit import Chem

from geomol.data.datasets.affinity import affinity_dataset
from geomol.data.datasets.combined import CombinedAffinityDataset
from geomol.data.datasets.fep_benchmark import alternative_state_base, read_fep_edges, read_fep_metadata
from geomol.data.datasets.pdbbind import PDBbindDataset, read_id_list
from geomol.data.datasets.ppa import PPADataset, chain_group, ppa_label
from geomol.data.splits.grouped import check_no_leakage, group_kfold, leave_one_group_out, random_group_split
from geomol.errors import ConfigError, DatasetError
from tests.builders import write_pocket
from tests.conftest import shared_path

RT_LN10 = 1.98720425864083e-3 * 298.15 * math.log(10)
FEP_SERIES = ["jacs_set/cdk2", "charge_annhil/cdk2", "bayer_macrocycles/ftase_extraligs_custcore_stereo",
              "waterset/throm_nozob_hip75", "charge_annhil/egfr"]


@pytest.fixture(scope="module")
def combined(tmp_path_factory):
    cache = tmp_path_factory.mktemp("affinity-cache")
    with pytest.warns(UserWarning):  # thrombin lig_7d has no pose; three FEP ligands have no ΔG
        return CombinedAffinityDataset(shared_path("plb"), shared_path("fep_benchmark"),
                                       plb_targets=["cdk2", "pde2", "thrombin"], fep_series=FEP_SERIES,
                                       cache_dir=cache, progress=False)


def test_combined_items_labels_and_metadata(combined):
    infos = combined.infos
    assert combined.skipped == []
    counts = collections.Counter((i.source, i.series) for i in infos)
    assert counts[("plb", "plb/cdk2")] == 10 and counts[("plb", "plb/thrombin")] == 22
    assert counts[("fep_benchmark", "charge_annhil/egfr")] == 10  # labels from r_fepplus_exp_dg
    by_id = {i.id: i for i in infos}
    assert by_id["plb/pde2/lig_43249674"].y == pytest.approx(8.57)  # pic50 as is
    ligand = next(i for i in infos if i.series == "jacs_set/cdk2")
    assert ligand.y == pytest.approx(-ligand.extra["dg"] / RT_LN10)
    assert {i.protein for i in infos} == {"cdk2", "pde2", "thrombin", "ftase", "egfr"}
    graph = combined[0]
    assert graph.name == infos[0].id and graph.y.item() == pytest.approx(infos[0].y)
    assert graph.segment_summary()[1]["atoms"] == graph.segment_summary()[1]["blocks"]  # one block per atom
    assert combined.sizes[0] == graph.num_blocks


def test_alternative_states_share_a_group(combined):
    by_title = {(i.series, i.ligand): i.group for i in combined.infos}
    assert by_title[("charge_annhil/cdk2", "39neu")] == by_title[("charge_annhil/cdk2", "39charg")]
    assert by_title[("waterset/throm_nozob_hip75", "2d pose 1")] == by_title[("waterset/throm_nozob_hip75", "2d pose 2")]
    assert by_title[("waterset/throm_nozob_hip75", "1a xtal pose")] == by_title[("waterset/throm_nozob_hip75", "1a pose 2")]
    assert by_title[("charge_annhil/egfr", "28neu")] == by_title[("charge_annhil/egfr", "28charg")]
    assert by_title[("waterset/throm_nozob_hip75", "2d pose 1")] != by_title[("waterset/throm_nozob_hip75", "6a pose 1")]
    # the same compound in both sources is one group, and a group never spans two proteins
    members = collections.defaultdict(list)
    for info in combined.infos:
        members[info.group].append(info)
    assert any(len({m.source for m in group}) == 2 for group in members.values())
    assert all(len({m.protein for m in group}) == 1 for group in members.values())
    for title, base in [("lig 2, deprot", "lig 2"), ("30 flip b", "30"), ("27chargR", "27"), ("19a_neu", "19a"),
                        ("CHEMBL3265003 tautomer 2", "chembl3265003"), ("21 (Xtal)", "21"), ("7b", "7b")]:
        assert alternative_state_base(title) == base


def test_protein_grouped_splits_do_not_leak(combined):
    proteins, groups, n = combined.column("protein"), combined.column("group"), len(combined)
    held = []
    for protein, train, test in leave_one_group_out(proteins):
        parts = combined.split({"train": train, "test": test}, by=("protein", "group"))
        assert {i.protein for i in parts["test"].infos} == {protein}
        held.append(protein)
    assert sorted(held) == sorted(set(proteins))
    folds = group_kfold(proteins, 3, seed=0)
    assert sorted(i for _, test in folds for i in test) == list(range(n))
    for train, test in folds:
        check_no_leakage({"train": train, "test": test}, proteins, groups, num_items=n)
    parts = random_group_split(groups, seed=1)
    check_no_leakage(parts, groups, num_items=n)
    with pytest.raises(DatasetError, match="both"):
        combined.split(parts, by=("protein",))  # a random split puts every protein on both sides
    subsets = combined.split(parts)
    assert sum(len(s) for s in subsets.values()) == n
    test = subsets["test"]
    assert test[0].name == test.info(0).id and test.sizes == [combined.sizes[i] for i in parts["test"]]


def test_fep_edges_agree_with_the_measurements(combined):
    edges = combined.edge_indices()
    assert len(edges) > 50
    for a, b, ddg in edges:
        assert combined.info(a).series == combined.info(b).series
        assert combined.info(b).extra["dg"] - combined.info(a).extra["dg"] == pytest.approx(ddg, abs=1e-3)
    series = {s.id: s for s in read_fep_metadata(shared_path("fep_benchmark"))}
    assert series["merck/hif2a_automap"].protein_key == "hif2a" and len(series) == 83
    raw = read_fep_edges(series["macrocycles/2Q15_lig17to21_alpha05"].path(shared_path("fep_benchmark"), "edges.csv"))
    assert any(math.isnan(e.ddg) for e in raw)  # 'None' edges to the unmeasured intermediate


def test_cached_reload_is_fast_and_identical(combined):
    with pytest.warns(UserWarning, match="without a pose"):
        again = CombinedAffinityDataset(shared_path("plb"), shared_path("fep_benchmark"),
                                        plb_targets=["cdk2", "pde2", "thrombin"], fep_series=FEP_SERIES,
                                        cache_dir=combined.store.root, progress=False)
    assert again.report.built == 0 and again.report.reused == len(combined)
    assert again.infos == combined.infos
    assert torch.equal(again[5].X, combined[5].X)


# ------------------------------------------------------------------------------ PDBbind layout
INDEX = """# PDB code, resolution, release year, -logKd/Ki, Kd/Ki, reference, ligand name
1aaa  2.20  1998   6.40  IC50=0.4uM    // 1aaa.pdf (L20)
2bbb  1.90  2004   7.70  Ki<20nM       // 2bbb.pdf (L22)
3ccc  2.50  2010   5.00  Kd=10uM       // 3ccc.pdf (BAD)
4ddd  2.10  2012   3.00  Kd=1mM        // 4ddd.pdf (NOFOLDER)
"""


@pytest.fixture(scope="module")
def pdbbind_root(tmp_path_factory):
    root = tmp_path_factory.mktemp("pdbbind") / "refined-set"
    protein = shared_path("plb", "cdk2", "01_protein", "crd", "protein.pdb")
    mols = [m for m in Chem.SDMolSupplier(str(shared_path("plb", "cdk2", "02_ligands", "ligands.sdf")), removeHs=False)]
    for code, mol in (("1aaa", mols[0]), ("2bbb", mols[1]), ("3ccc", mols[2])):
        folder = root / code
        folder.mkdir(parents=True)
        shutil.copy(protein, folder / f"{code}_protein.pdb")
        write_pocket(protein, mol, folder / f"{code}_pocket.pdb", cutoff=12.0)
        if code == "3ccc":
            (folder / f"{code}_ligand.sdf").write_text("truncated\n  nothing here\n")
        else:
            Chem.MolToMolFile(mol, str(folder / f"{code}_ligand.sdf"))
    (root / "INDEX_refined_data.2020").write_text(INDEX)
    return root


@pytest.mark.filterwarnings("ignore:.*indexed complex.*have no folder")
def test_pdbbind_layout(pdbbind_root, tmp_path):
    index = pdbbind_root / "INDEX_refined_data.2020"
    ds = PDBbindDataset(pdbbind_root, index, cache_dir=tmp_path, progress=False)
    assert [i.id for i in ds.infos] == ["1aaa", "2bbb"]
    assert ds.info(0).y == pytest.approx(-math.log10(0.4e-6)) and ds.info(1).extra["qualifier"] == "<"
    assert [(s.id, s.error) for s in ds.skipped] == [("3ccc", "StructureReadError")]
    dropped = PDBbindDataset(pdbbind_root, index, cache_dir=tmp_path, progress=False, qualifiers="drop")
    assert [i.id for i in dropped.infos] == ["1aaa"]
    whole = PDBbindDataset(pdbbind_root, index, cache_dir=tmp_path, progress=False, receptor="protein")
    assert torch.equal(whole[0].X, ds[0].X)  # our 10 Å pocket lies inside PDBbind's 12 Å pocket file
    split = tmp_path / "test_ids.txt"
    split.write_text("2bbb\n4ddd\n5eee\n")
    assert read_id_list(split) == ["2bbb", "4ddd", "5eee"]
    chosen = PDBbindDataset([pdbbind_root], index, ids=split, cache_dir=tmp_path, progress=False)
    assert [i.id for i in chosen.infos] == ["2bbb"]
    reasons = {s.id: s.reason for s in chosen.skipped}
    assert "index" in reasons["5eee"] and "missing" in reasons["4ddd"]


# ------------------------------------------------------------------------------ chain groups
def test_preprocess_by_name(tmp_path, capsys):
    report = affinity_dataset("plb", shared_path("plb"), targets=["cdk2"], cache_dir=tmp_path, num_workers=0).report
    assert (report.built, report.skipped) == (10, []) and "preprocessing plb" in capsys.readouterr().out
    assert (tmp_path / "reports" / "plb.json").exists()
    with pytest.raises(ConfigError, match="unknown dataset"):
        affinity_dataset("qm9")


def test_chain_groups_and_labels():
    assert chain_group("AB") == ["A", "B"] and chain_group("AA, B") == ["AA", "B"]
    assert ppa_label({"pk": "7.5"}) == (7.5, "pk")
    assert ppa_label({"kd": "12 nM"})[0] == pytest.approx(-math.log10(12e-9))
    assert ppa_label({"kd": "3e-6", "kd_unit": "M"})[0] == pytest.approx(-math.log10(3e-6))
    assert ppa_label({"dg": "-41.84", "dg_unit": "kJ/mol"})[0] == pytest.approx(10 / RT_LN10)
    with pytest.raises(DatasetError, match="no unit"):
        ppa_label({"kd": "12"})
    with pytest.raises(DatasetError, match="no affinity"):
        ppa_label({"id": "x"})


def test_ppa_interfaces(tmp_path):
    shutil.copy(shared_path("plb", "thrombin", "01_protein", "crd", "protein.pdb"), tmp_path / "thr.pdb")
    (tmp_path / "table.csv").write_text(
        "id,pdb,receptor_chains,ligand_chains,pK,Kd,dG,dG_unit\n"
        "heavy-light,thr.pdb,H,L,6.5,,,\n"
        "light-heavy,thr.pdb,L,H,,20 nM,,\n"
        "kj,thr.pdb,H,L,,,-40,kJ/mol\n"
        "absent,thr.pdb,H,Z,7.0,,,\n")
    ds = PPADataset(tmp_path / "table.csv", cache_dir=tmp_path / "cache", progress=False, interface_cutoff=8.0)
    assert [i.id for i in ds.infos] == ["heavy-light", "light-heavy", "kj"]
    assert [s.id for s in ds.skipped] == ["absent"] and ds.skipped[0].error == "LigandNotFoundError"
    assert ds.info(1).y == pytest.approx(-math.log10(20e-9))
    g = ds[0]
    real = g.B[g.block_id] != 3
    side0, side1 = real & (g.atom_segment == 0), real & (g.atom_segment == 1)
    nearest = torch.cdist(g.X[side1], g.X[side0]).min(1).values
    per_block = torch.full((g.num_blocks,), 1e9).scatter_reduce(0, g.block_id[side1], nearest, "amin")
    assert (per_block[per_block < 1e9] <= 8.0 + 1e-4).all()
    swapped = ds[1].segment_summary()
    assert swapped[0]["blocks"] == g.segment_summary()[1]["blocks"]
