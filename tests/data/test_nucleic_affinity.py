"""The nucleic-acid affinity folder: its reader on the real files, its leave-cluster-out folds, and bad tables."""
from __future__ import annotations

import csv
import shutil

import numpy as np
import pytest

from geomol.data.blocks import ligand_atom_mask
from geomol.data.datasets.nucleic_affinity import NucleicAffinityDataset, read_nucleic_labels
from geomol.data.splits.nucleic import nucleic_cluster_folds
from geomol.errors import ConfigError, DatasetError
from tests.conftest import shared_path


def _folder():
    return shared_path("nucleic_affinity")


def test_reader_reads_every_complex_of_the_real_folder():
    rows = read_nucleic_labels(_folder())
    assert len(rows) == 130 and sum(r.tier == "A" for r in rows) == 84
    assert {r.na_type for r in rows} == {"RNA", "DNA"} and len({r.cluster for r in rows}) == 50
    assert all(r.receptor.is_file() and r.ligand_file.is_file() for r in rows)
    tier_a = read_nucleic_labels(_folder(), tiers=["A"])
    assert [r.pdb_id for r in tier_a] == [r.pdb_id for r in rows if r.tier == "A"]
    arj = {r.pdb_id: r for r in rows}["1ARJ"]  # 1 mM argininamide on HIV TAR
    assert (arj.pk, arj.tier, arj.cluster, arj.heavy_atoms) == (3.0, "A", "hiv_tar", 12)


def _copy_subset(tmp_path, ids):
    source = _folder()
    with open(source / "labels.csv", newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [row for row in reader if row["pdb_id"] in ids]
        fields = reader.fieldnames
    with open(tmp_path / "labels.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fields)
        writer.writeheader()
        writer.writerows(rows)
    for pdb_id in ids:
        shutil.copytree(source / pdb_id, tmp_path / pdb_id)
    return rows


def test_dataset_builds_rna_and_dna_complexes_with_their_labels(tmp_path):
    (tmp_path / "data").mkdir()
    _copy_subset(tmp_path / "data", ["1ARJ", "1QMS"])
    dataset = NucleicAffinityDataset(tmp_path / "data", cache_dir=tmp_path / "cache", progress=False)
    assert len(dataset) == 2 and not dataset.skipped
    by_id = {dataset[i].name: dataset[i] for i in range(2)}
    rna, dna = by_id["nucleic_affinity/1ARJ"], by_id["nucleic_affinity/1QMS"]
    assert float(rna.y) == 3.0 and rna.protein == "hiv_tar"
    assert dataset.column("na_type") == ["RNA", "DNA"] and dataset.column("tier") == ["A", "A"]
    pocket = rna.B[(rna.segment == 0)].tolist()
    assert set(range(28, 32)) & set(pocket)  # RNA nucleotide blocks (vocabulary RA..RU: 28-31) in the pocket
    assert int(ligand_atom_mask(rna).sum()) == 12  # the ligand's 12 heavy atoms


def test_bad_tables_are_named_errors(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    rows = _copy_subset(folder, ["1ARJ"])
    with pytest.raises(DatasetError, match="no labels.csv"):
        read_nucleic_labels(tmp_path)
    table = folder / "labels.csv"
    text = table.read_text()
    table.write_text(text.replace("cluster", "family"))
    with pytest.raises(DatasetError, match=r"lacks column\(s\) \['cluster'\]"):
        read_nucleic_labels(folder)
    table.write_text(text + text.splitlines()[1] + "\n")
    with pytest.raises(DatasetError, match="listed twice"):
        read_nucleic_labels(folder)
    table.write_text(text.replace(",A,", ",C,", 1))
    with pytest.raises(DatasetError, match=r"labels.csv \[line 2\].*tier"):
        read_nucleic_labels(folder)
    table.write_text(text)
    (folder / "1ARJ" / "ligand.sdf").unlink()
    with pytest.raises(DatasetError, match="file of complex 1ARJ not found"):
        read_nucleic_labels(folder)
    assert rows[0]["pdb_id"] == "1ARJ"
    with pytest.raises(ConfigError, match="unknown tier"):
        read_nucleic_labels(folder, tiers=["C"])


def test_cluster_folds_of_the_real_set_never_share_a_cluster():
    rows = read_nucleic_labels(_folder())
    clusters, tiers = [r.cluster for r in rows], [r.tier for r in rows]
    folds = nucleic_cluster_folds(clusters, tiers, n_folds=5, seed=0, valid_fraction=0.2)
    tested = []
    for fold in folds:
        sides = {part: {clusters[i] for i in idx} for part, idx in fold.items()}
        held = sides["test"] | sides["test_b"]
        assert not (held & sides["train"]) and not (held & sides["valid"]) and not (sides["train"] & sides["valid"])
        assert all(tiers[i] == "A" for i in fold["test"] + fold["valid"]) and all(tiers[i] == "B" for i in fold["test_b"])
        assert fold["valid"], "every fold has an inner validation slice"
        tested += fold["test"]
    assert sorted(tested) == [i for i, t in enumerate(tiers) if t == "A"]  # each tier-A complex tested once
    counts = [len(f["test"]) for f in folds]
    assert max(counts) - min(counts) <= 3  # balanced (the largest cluster holds 18)
    assert folds == nucleic_cluster_folds(clusters, tiers, n_folds=5, seed=0, valid_fraction=0.2)


def test_cluster_folds_refuse_impossible_requests():
    clusters, tiers = ["a", "a", "b", "c"], ["A", "B", "A", "B"]
    with pytest.raises(ConfigError, match="n_folds"):
        nucleic_cluster_folds(clusters, tiers, n_folds=3)
    with pytest.raises(ConfigError, match="tiers"):
        nucleic_cluster_folds(clusters, ["A", "A", "X", "A"], n_folds=2)
    folds = nucleic_cluster_folds(clusters, tiers, n_folds=2, valid_fraction=0.0)
    assert all(f["valid"] == [] for f in folds) and sorted(f["test"][0] for f in folds) == [0, 2]
    assert all(3 in f["train"] for f in folds)  # a tier-B-only cluster is never tested: always training data
    assert np.all([1 not in f["train"] for f in folds if 0 in f["test"]])  # tier B of a tested cluster stays out
