"""The protein–protein affinity folder: reader, interface graphs, leave-cluster-out folds, interface descriptors,
PRODIGY through its package, and a tiny GET fit on real complexes whose loss falls."""
from __future__ import annotations

import collections
import csv
import importlib.util
import math
import shutil

import numpy as np
import pytest
import torch

from geomol.data.chemistry.interface_features import interface_features
from geomol.data.datasets.protein_affinity import (CATEGORIES, ProteinAffinityDataset, cluster_folds,
                                                   ppab_difficulty, read_protein_affinity)
from geomol.errors import DatasetError, EmptySelectionError, LigandNotFoundError
from geomol.models.get import GETAffinity, as_batch
from geomol.tasks import ProteinAffinityDataModule
from geomol.units import KCAL_PER_PK
from tests.conftest import shared_path

# small interfaces, one per sequence cluster (a quick slice of real complexes)
SLICE = ["3Q8D", "3UIH", "3UII", "1KNE", "1M27", "5TAR", "2KSO", "1KTZ", "3LNZ", "2B12", "4M76", "5VNW"]


@pytest.fixture(scope="module")
def root():
    return shared_path("protein_affinity")


@pytest.fixture(scope="module")
def complexes(root):
    return read_protein_affinity(root)


def test_reader_reads_every_complex_of_the_folder(complexes):
    assert len(complexes) == 484
    counts = collections.Counter(c.category for c in complexes)
    assert counts == {"enzyme-inhibitor": 104, "antibody-antigen": 93, "TCR-pMHC": 92, "other": 195}
    assert len({c.cluster for c in complexes}) == 208
    assert all(c.structure.is_file() and c.dg_kcal_mol < 0 and c.category in CATEGORIES for c in complexes)
    by_id = {c.id: c for c in complexes}
    assert by_id["1AHW"].chains_a == ("A", "B") and by_id["1AHW"].chains_b == ("C",)
    assert by_id["1AHW"].partners == "A,B:C"
    assert by_id["1ACB"].interface_rmsd == pytest.approx(1.08) and by_id["1ACB"].difficulty == "medium"
    assert by_id["1A22"].difficulty == ""  # a SKEMPI label: no PPAB difficulty
    difficulty = collections.Counter(c.difficulty for c in complexes if c.difficulty)
    assert sum(difficulty.values()) == 114  # every PPAB-labelled complex has its interface RMSD
    assert by_id["1ACB"].pk == pytest.approx(13.1 / KCAL_PER_PK)  # the label is the ΔG, as a pK


def test_difficulty_classes_follow_gets_ppab_split():
    assert [ppab_difficulty(v) for v in (0.2, 0.5, 1.49, 1.5, 4.0, None)] == \
           ["rigid", "medium", "medium", "flexible", "flexible", ""]


def test_interface_graph_holds_each_partner_in_its_segment(root, tmp_path):
    dataset = ProteinAffinityDataset(root, ids=["1AHW"], progress=False, cache_dir=tmp_path)
    graph = dataset[0]
    real = ~graph.is_global
    assert set(graph.segment[real].tolist()) == {0, 1}
    atoms = graph.X.double()
    segment_of_atom = graph.segment[graph.block_id]
    a = atoms[(segment_of_atom == 0) & real[graph.block_id]]
    b = atoms[(segment_of_atom == 1) & real[graph.block_id]]
    # every interface block has an atom within 6 Å of the other partner (GET's protein–protein recipe)
    for side, other, seg in ((a, b, 0), (b, a, 1)):
        blocks = graph.block_id[(segment_of_atom == seg) & real[graph.block_id]]
        nearest = torch.cdist(side, other).min(1).values
        per_block = torch.full((graph.num_blocks,), math.inf, dtype=torch.float64).scatter_reduce(
            0, blocks, nearest, "amin")
        assert per_block[blocks.unique()].max() < 6.0
    assert float(graph.y) == pytest.approx(11.6 / KCAL_PER_PK)
    assert dataset.column("category") == ["antibody-antigen"] and dataset.column("protein") == ["PPC032"]


def _write_folder(tmp_path, root, rows):
    with open(tmp_path / "labels.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    for row in rows:
        if (root / row["id"]).is_dir():
            shutil.copytree(root / row["id"], tmp_path / row["id"], dirs_exist_ok=True)
    return tmp_path


def test_reader_names_the_file_and_row_of_bad_labels(tmp_path, root):
    with open(root / "labels.csv", newline="") as handle:
        good = next(csv.DictReader(handle))
    folder = _write_folder(tmp_path, root, [{**good, "dG_kcal_mol": "3.1"}])
    with pytest.raises(DatasetError, match=r"labels.csv:2.*negative"):
        read_protein_affinity(folder)
    _write_folder(tmp_path, root, [{**good, "id": "NONE"}])
    with pytest.raises(DatasetError, match="structure file .* of NONE not found"):
        read_protein_affinity(folder)
    _write_folder(tmp_path, root, [{**good, "category": "kinase"}])
    with pytest.raises(DatasetError, match="unknown category 'kinase'"):
        read_protein_affinity(folder)
    with pytest.raises(DatasetError, match="ids not in labels.csv"):
        read_protein_affinity(root, ids=["1AHW", "XXXX"])


def test_no_cluster_is_on_both_sides_of_any_fold(complexes):
    clusters = [c.cluster for c in complexes]
    folds = cluster_folds(clusters, 5, seed=0)
    tested = sorted(i for fold in folds for i in fold["test"])
    assert tested == list(range(len(complexes)))  # the test parts partition the complexes
    for fold in folds:
        sides = {part: {clusters[i] for i in fold[part]} for part in ("train", "valid", "test")}
        assert fold["valid"] and not sides["train"] & sides["test"]
        assert not sides["valid"] & sides["test"] and not sides["train"] & sides["valid"]
        assert len(fold["train"]) + len(fold["valid"]) + len(fold["test"]) == len(complexes)


def test_data_module_splits_leave_clusters_out(root, tmp_path):
    module = ProteinAffinityDataModule(str(root), ids=SLICE, n_folds=3, fold=1, valid_fraction=0.3,
                                       cache_dir=str(tmp_path), preprocess_workers=0)
    module.setup("fit")
    clusters = {part: set(ds.column("protein")) for part, ds in module.splits.items()}
    assert all(clusters.values())
    assert not (clusters["train"] & clusters["test"]) and not (clusters["valid"] & clusters["test"])
    assert not clusters["train"] & clusters["valid"]
    assert sum(module.split_sizes().values()) == len(SLICE)


def test_interface_descriptors_match_the_folders_interface_column(root, complexes):
    with open(root / "labels.csv", newline="") as handle:
        expected = {r["id"]: int(r["interface_residues"]) for r in csv.DictReader(handle)}
    for item in [c for c in complexes if c.id in ("1ACB", "1AHW", "3Q8D", "2C5D_AB_CD")]:
        features = interface_features(item.structure, item.chains_a, item.chains_b, with_sasa=False)
        assert features["interface_residues"] == expected[item.id]
        classes = sum(v for k, v in features.items() if k.startswith("contacts_"))
        assert classes == features["contacts"] > 0


@pytest.mark.skipif(importlib.util.find_spec("freesasa") is None, reason="freesasa not installed (geomol[ppa])")
def test_buried_surface_grows_with_the_interface(complexes):
    small, large = ({c.id: c for c in complexes}[i] for i in ("3Q8D", "2C5D_AB_CD"))
    areas = [interface_features(c.structure, c.chains_a, c.chains_b)["buried_sasa"] for c in (small, large)]
    assert 300 < areas[0] < areas[1] and areas[1] > 4000  # Å²: a peptide vs a two-chain interface


def test_missing_chains_and_no_interface_are_named(complexes):
    item = {c.id: c for c in complexes}["1AHW"]
    with pytest.raises(LigandNotFoundError, match=r"chain\(s\) Z not in the file \(chains present: A, B, C\)"):
        interface_features(item.structure, ["A"], ["Z"])
    with pytest.raises(EmptySelectionError, match="no interface"):
        interface_features(_far_apart(item), ["A"], ["C"])


def _far_apart(item):
    from geomol.data.io import read_structure

    structure = read_structure(item.structure)
    moved = structure.coords.copy()
    residue_of_atom = np.repeat(np.arange(structure.num_residues), np.diff(structure.residue_start))
    moved[np.asarray(structure.chains)[residue_of_atom] == "C"] += 100.0
    structure.coords = moved
    return structure


@pytest.mark.skipif(importlib.util.find_spec("prodigy_prot") is None, reason="prodigy-prot not installed (geomol[ppa])")
def test_prodigy_runs_through_its_package_on_the_same_files(complexes):
    from geomol.evaluation.prodigy import run_prodigy

    item = {c.id: c for c in complexes}["1ACB"]
    result = run_prodigy(item.structure, item.chains_a, item.chains_b)
    ours = interface_features(item.structure, item.chains_a, item.chains_b, with_sasa=False)
    assert result["contacts"] == ours["contacts"]  # the same 5.5 Å residue contacts, counted independently
    assert -20 < result["dG_kcal_mol"] < -5
    assert sum(result[k] for k in ("CC", "CP", "AC", "PP", "AP", "AA")) == result["contacts"]


@pytest.mark.filterwarnings("ignore")
def test_a_tiny_get_fit_on_real_complexes_lowers_its_loss(root, tmp_path):
    torch.manual_seed(0)
    dataset = ProteinAffinityDataset(root, ids=SLICE[:6], cache_dir=tmp_path, progress=False)
    batch = as_batch([dataset[i] for i in range(len(dataset))])
    model = GETAffinity(hidden=16, radial_dim=8, num_rbf=8, num_layers=1)
    optimiser = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(30):
        loss = GETAffinity.loss(model(batch), batch.y)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(float(loss))
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.5 * losses[0]
