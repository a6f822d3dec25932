"""The affinity corpus on small real slices of its four sources: labels, sequences, clusters, splits."""
from __future__ import annotations

import csv
import dataclasses
import math
from pathlib import Path

import pytest

from geomol.data.splits.corpus import check_corpus_split, corpus_split, item_clusters, leave_cluster_out_folds
from geomol.units import pk_from_dg
from geomol.data.datasets.corpus_items import canonical_smiles, join_corpora, read_fep_corpus, read_plb_corpus
from geomol.data.datasets.ddg_bindingdb import pk_from_ki_nm, read_ddg_corpus
from geomol.data.datasets.uni_fep import read_uni_fep_corpus
from geomol.data.splits.protein_clusters import (
    cluster_receptors,
    identity_of_shorter,
    load_protein_clusters,
    receptor_sequence,
)
from geomol.data.io.sequences import mol2_chain_sequences, pdb_chain_sequences
from geomol.errors import DatasetError, StructureReadError
from tests.conftest import shared_path

UNI_PTPN1 = "ChEMBL__PTPN1__CHEMBL768521"
UNI_THROMBIN = "WaterSet__Thrombin"


@pytest.fixture(scope="module")
def corpus():
    """plb CDK2 and PTP1B, fep_benchmark's PTP1B series, a Uni-FEP PTPN1 and a thrombin series, and
    ddg_bindingdb CDK2 (1PXN), PTPN1 (1NNY), glutathione S-transferase (11GS) and thrombin (1ETS)."""
    return join_corpora([
        read_plb_corpus(shared_path("plb"), ["cdk2", "ptp1b"]),
        read_fep_corpus(shared_path("fep_benchmark"), ["jacs_set/ptp1b"]),
        read_uni_fep_corpus(shared_path("uni_fep"), [UNI_PTPN1, UNI_THROMBIN]),
        read_ddg_corpus(shared_path("ddg_bindingdb"), ["1PXN", "1NNY", "11GS", "1ETS"]),
    ])


@pytest.fixture(scope="module")
def unnamed_clusters(corpus):
    """Clusters from sequences alone: every source name removed, so only alignments can link receptors."""
    return cluster_receptors([dataclasses.replace(r, names=()) for r in corpus.receptors])


def _receptor(corpus, fragment: str):
    return next(r for r in corpus.receptors if fragment in r.path)


def test_uni_fep_labels_are_measured_dg_not_predictions(corpus):
    rows = list(csv.DictReader(open(shared_path("uni_fep", UNI_PTPN1, "result_dG.csv"))))
    items = [i for i in corpus.items if i.series == f"uni_fep/{UNI_PTPN1}"]
    assert len(items) == len(rows) == 7
    for item, row in zip(items, rows):
        assert item.label == pytest.approx(-float(row["exp_dG (kcal/mol)"]) / 1.364247, abs=1e-4)  # R T ln 10 at 298.15 K
        assert item.label != pytest.approx(pk_from_dg(float(row["fep_dG (kcal/mol)"])), abs=1e-3)
        assert item.ligand == row["ligand_name"] and item.pose == "" and item.reference.endswith("ref_ligand.sdf")
        assert item.smiles == canonical_smiles(row["ligand_smiles"]) and "[H]" not in item.smiles


def test_ddg_labels_match_ki_and_the_files_pk_column(corpus):
    rows = [r for r in csv.DictReader(open(shared_path("ddg_bindingdb", "labels.csv"))) if r["pdb_id"] == "11GS"]
    items = [i for i in corpus.items if i.series == "ddg_bindingdb/11GS"]
    assert [i.pose_index for i in items] == [int(r["pose_index"]) for r in rows]
    for item, row in zip(items, rows):
        assert item.label == pytest.approx(pk_from_ki_nm(float(row["ki_nM"])))
        assert item.label == pytest.approx(float(row["pK"]), abs=1e-3)
        assert item.receptor.endswith("receptor.mol2.gz") and item.pose.endswith("ligands.mol2.gz")
    assert pk_from_ki_nm(1.0) == 9.0 and pk_from_ki_nm(1e3) == pytest.approx(6.0)


def test_expert_pose_sources_keep_their_labels_and_tags(corpus):
    plb = [i for i in corpus.items if i.source == "plb"]
    fep = [i for i in corpus.items if i.source == "fep_benchmark"]
    assert {i.series for i in plb} == {"plb/cdk2", "plb/ptp1b"} and {i.protein_group for i in fep} == {"ptp1b"}
    assert all(math.isfinite(i.label) and 2 < i.label < 12 and i.smiles for i in plb + fep)
    assert len({i.id for i in corpus.items}) == len(corpus.items)


def test_canonical_smiles_ignores_hydrogens_and_survives_unsanitisable_input():
    assert canonical_smiles("[H]OC([H])([H])C([H])([H])[H]") == canonical_smiles("OCC") == "CCO"
    assert canonical_smiles("c1ccn(C)cc1") != ""  # aromatic N with a missing charge: written from the raw graph
    assert canonical_smiles("not a smiles") == ""


def test_sequences_from_mol2_and_pdb_receptors():
    thrombin = mol2_chain_sequences(shared_path("ddg_bindingdb", "1ETS", "receptor.mol2.gz"))
    # Light chain 1H..15 written with insertion codes that share one SUBSTRUCTURE entry: read from CA atoms.
    assert thrombin["L"].startswith("TFGAGEADCGLRPLF") and len(thrombin["L"]) == 36
    adk = pdb_chain_sequences(shared_path("uni_fep", "ChEMBL__ADK__CHEMBL642224", "protein.pdb.gz"))
    assert list(adk) == ["D"] and len(adk["D"]) == 343
    with pytest.raises(StructureReadError, match="no amino-acid"):
        mol2_chain_sequences(shared_path("ddg_bindingdb", "11GS", "ligands.mol2.gz"))


def test_same_protein_across_sources_aligns_above_threshold(corpus):
    sequence = {name: receptor_sequence(_receptor(corpus, name)) for name in ("plb/cdk2", "1PXN", "plb/ptp1b", "11GS")}
    assert identity_of_shorter(sequence["plb/cdk2"], sequence["1PXN"]) >= 0.9
    assert identity_of_shorter(sequence["plb/ptp1b"], sequence["plb/cdk2"]) < 0.5
    assert identity_of_shorter(sequence["11GS"], sequence["1PXN"]) < 0.5


def test_sequence_clusters_join_sources_and_keep_unrelated_apart(corpus, unnamed_clusters):
    of = {name: unnamed_clusters.of(_receptor(corpus, name).path)
          for name in ("plb/cdk2", "1PXN", "plb/ptp1b", "jacs_set/ptp1b", UNI_PTPN1, "1NNY", "11GS", UNI_THROMBIN, "1ETS")}
    assert of["plb/cdk2"] == of["1PXN"]
    assert of["plb/ptp1b"] == of["jacs_set/ptp1b"] == of[UNI_PTPN1] == of["1NNY"]
    # 1ETS's thrombin heavy chain is 87 % identical to the Uni-FEP (human) one: another species, below the
    # rule, and the manifests keep it apart too.
    assert of[UNI_THROMBIN] != of["1ETS"]
    assert len({of["plb/cdk2"], of["plb/ptp1b"], of["11GS"], of["1ETS"]}) == 4


def test_clusters_are_cached_by_content(corpus, tmp_path):
    receptors = [r for r in corpus.receptors if "11GS" in r.path or "1PXN" in r.path]
    built, path = load_protein_clusters(receptors, cache_dir=tmp_path)
    again, same_path = load_protein_clusters(receptors, cache_dir=tmp_path)
    assert path == same_path and path.parent == tmp_path / "protein_clusters" and again.cluster_of == built.cluster_of
    renamed, other_path = load_protein_clusters([dataclasses.replace(r, names=("x",)) for r in receptors],
                                                cache_dir=tmp_path)
    assert other_path != path and set(renamed.cluster_of.values()) == {"x"}  # a shared name joins them


def test_no_cluster_or_ligand_protein_pair_straddles_a_split(corpus, unnamed_clusters):
    labels = item_clusters(corpus.items, unnamed_clusters)
    split = corpus_split(labels, (0.5, 0.25, 0.25), seed=1)
    check_corpus_split(split, corpus.items, labels)
    assert all(split.values())
    for part, other in (("train", "valid"), ("valid", "test"), ("train", "test")):
        assert not {labels[i] for i in split[part]} & {labels[i] for i in split[other]}
        assert not ({(labels[i], corpus.items[i].smiles) for i in split[part]}
                    & {(labels[i], corpus.items[i].smiles) for i in split[other]})
    leaky = {**split, "test": split["test"] + [split["train"][0]], "train": split["train"][1:]}
    with pytest.raises(DatasetError, match="both"):
        check_corpus_split(leaky, corpus.items, labels)


def test_leave_cluster_out_folds_partition_items_by_cluster(corpus, unnamed_clusters):
    labels = item_clusters(corpus.items, unnamed_clusters)
    folds = leave_cluster_out_folds(labels, n_splits=3, valid_fraction=0.3)
    assert sorted(i for fold in folds for i in fold["test"]) == list(range(len(labels)))
    check_corpus_split({f"fold{n}": f["test"] for n, f in enumerate(folds)}, corpus.items, labels)
    for fold in folds:
        check_corpus_split(fold, corpus.items, labels)
        assert fold["train"] and fold["test"]


def _copy_rows(source, target, edit=lambda row: row, keep=lambda row: True):
    with open(source, newline="") as handle:
        reader = csv.DictReader(handle)
        rows = [edit(dict(row)) for row in reader if keep(row)]
        header = reader.fieldnames
    with open(target, "w", newline="") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        writer.writerows(rows)


def test_a_pk_column_that_disagrees_with_ki_is_an_error_naming_the_row(tmp_path):
    root = shared_path("ddg_bindingdb")
    (tmp_path / "11GS").symlink_to(root / "11GS")
    _copy_rows(root / "manifest.csv", tmp_path / "manifest.csv", keep=lambda r: r["pdb_id"] == "11GS")
    _copy_rows(root / "labels.csv", tmp_path / "labels.csv", keep=lambda r: r["pdb_id"] == "11GS",
               edit=lambda r: {**r, "pK": "7.5"} if r["pose_index"] == "1" else r)
    with pytest.raises(DatasetError, match=r"labels.csv.*11GS pose 1.*disagrees"):
        read_ddg_corpus(tmp_path)


def test_a_non_numeric_measured_dg_is_an_error_naming_the_file_and_line(tmp_path):
    root = shared_path("uni_fep")
    _copy_rows(root / "manifest.csv", tmp_path / "manifest.csv", keep=lambda r: r["system"] == UNI_PTPN1)
    (tmp_path / UNI_PTPN1).mkdir()
    _copy_rows(root / UNI_PTPN1 / "result_dG.csv", tmp_path / UNI_PTPN1 / "result_dG.csv",
               edit=lambda r: {**r, "exp_dG (kcal/mol)": "n/a"} if r["ligand_name"].startswith("CHEMBL") else r)
    with pytest.raises(DatasetError, match=r"result_dG.csv.*2.*exp_dG is not a number"):
        read_uni_fep_corpus(tmp_path)
    with pytest.raises(DatasetError, match="unknown system"):
        read_uni_fep_corpus(tmp_path, ["no_such_system"])


def test_the_cluster_cache_does_not_depend_on_how_paths_are_spelled(corpus, tmp_path):
    receptors = [r for r in corpus.receptors if "11GS" in r.path or "plb/cdk2" in r.path]
    _, path = load_protein_clusters(receptors, cache_dir=tmp_path)
    absolute = [dataclasses.replace(r, path=str(Path(r.path).resolve())) for r in receptors]
    clusters, same_path = load_protein_clusters(absolute, cache_dir=tmp_path)
    assert same_path == path and set(clusters.cluster_of) == {r.path for r in absolute}
