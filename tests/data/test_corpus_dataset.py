"""The corpus as graphs: SMILES posed on the series reference (cached by content), MOL2 receptors and poses,
bad items reported as skipped, and the data module's checked, printed split."""
from __future__ import annotations

import csv
import dataclasses

import numpy as np
import pytest
import torch
import yaml

from geomol.cli import main
from geomol.data.blocks import ligand_atom_mask
from geomol.data.splits.corpus import item_clusters, leave_cluster_out_folds
from geomol.data.datasets.corpus_dataset import CorpusDataset, build_smiles_complex
from geomol.data.datasets.corpus_items import Corpus
from geomol.data.datasets.ddg_bindingdb import read_ddg_corpus
from geomol.data.datasets.uni_fep import read_uni_fep_corpus
from geomol.data.io import read_ligand
from geomol.data.posing.poses import PoseParameters
from geomol.data.splits.protein_clusters import cluster_receptors
from geomol.errors import InvalidSmilesError
from geomol.tasks.corpus_data import CorpusDataModule
from tests.conftest import REPO, shared_path

UNI_PNP = "ChEMBL__PNP__CHEMBL951777"  # 3 ligands, posed in ~0.15 s each
DDG_UNSANITISABLE = "2E9N"  # CHEK1: 7 docked poses, RDKit cannot kekulise 4 of them


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("corpus_cache")


@pytest.fixture(scope="module")
def pnp():
    """The three ligands of one Uni-FEP series (SMILES only) and their clusters."""
    corpus = read_uni_fep_corpus(shared_path("uni_fep"), [UNI_PNP])
    assert len(corpus.items) == 3
    return corpus, cluster_receptors(corpus.receptors)


def test_smiles_are_posed_in_the_reference_pocket_once_then_read_from_the_store(pnp, cache):
    corpus, clusters = pnp
    first = CorpusDataset(corpus, clusters, cache_dir=cache, progress=False)
    assert len(first) == 3 and first.report.built == 3 and not first.skipped
    reference = read_ligand(shared_path("uni_fep", UNI_PNP, "ref_ligand.sdf"), 0)
    heavy = [atom.GetIdx() for atom in reference.GetAtoms() if atom.GetAtomicNum() > 1]
    reference_xyz = reference.GetConformer().GetPositions()[heavy]
    for index in range(3):
        info, graph = first.info(index), first[index]
        assert info.source == "uni_fep" and info.series == f"uni_fep/{UNI_PNP}" and info.protein == "pnp"
        assert info.extra["protein_group"] == "pnp" and info.extra["smiles"] == corpus.items[index].smiles
        assert info.extra["core_atoms"] >= 5 and info.extra["core_rmsd"] < 1.0
        assert info.extra["min_receptor_distance"] > 1.2 and info.extra["inchikey"]
        ligand = graph.X[ligand_atom_mask(graph)].numpy()
        # the posed analogue lies where the reference lies: most reference atoms have a ligand atom on them
        nearest = np.linalg.norm(reference_xyz[:, None] - ligand[None], axis=-1).min(axis=1)
        assert (nearest < 1.0).mean() > 0.6
        assert graph.y.item() == pytest.approx(corpus.items[index].label)
        assert (graph.segment == 0).sum() > 10  # a pocket around the pose
    again = CorpusDataset(corpus, clusters, cache_dir=cache, progress=False)
    assert again.report.built == 0 and again.report.reused == 3 and again._keys == first._keys


def test_the_store_key_follows_the_pose_parameters(pnp, cache):
    corpus, clusters = pnp
    one = Corpus(corpus.items[:1], corpus.receptors)
    default = CorpusDataset(one, clusters, cache_dir=cache, progress=False)
    other = CorpusDataset(one, clusters, cache_dir=cache, progress=False, pose_parameters=PoseParameters(seed=1))
    assert other.report.built == 1 and other._keys != default._keys


def test_a_bad_smiles_in_the_middle_is_a_reported_skip(pnp, cache):
    corpus, clusters = pnp
    items = list(corpus.items)
    items[1] = dataclasses.replace(items[1], smiles="c1ccc(")
    dataset = CorpusDataset(Corpus(items, corpus.receptors), clusters, cache_dir=cache, progress=False, name="bad")
    assert [info.id for info in dataset.infos] == [items[0].id, items[2].id]
    assert [item.id for item in dataset.corpus_items] == [items[0].id, items[2].id]
    (skipped,) = dataset.skipped
    assert skipped.id == items[1].id and skipped.error == "InvalidSmilesError" and "invalid SMILES" in skipped.reason
    rows = list(csv.DictReader(open(cache / "reports" / "bad.skipped.csv")))
    assert [row["id"] for row in rows] == [items[1].id]
    with pytest.raises(InvalidSmilesError):
        build_smiles_complex({"receptor": items[0].receptor, "reference": items[0].reference}, smiles="c1ccc(",
                             pose=PoseParameters().to_dict(), pocket_cutoff=10.0, keep_hydrogens=False)


def test_a_ddg_folder_builds_from_mol2_and_unsanitisable_poses_are_reported(cache):
    corpus = read_ddg_corpus(shared_path("ddg_bindingdb"), ["11GS", DDG_UNSANITISABLE])
    dataset = CorpusDataset(corpus, cluster_receptors(corpus.receptors), cache_dir=cache, progress=False)
    built = {info.series: 0 for info in dataset.infos}
    for info in dataset.infos:
        built[info.series] += 1
    assert built["ddg_bindingdb/11GS"] == 10
    skipped = dataset.skipped
    assert {s.id.split("/")[1] for s in skipped} == {DDG_UNSANITISABLE}
    assert len(skipped) == 4 and all("cannot sanitise" in s.reason and "ligands.mol2.gz" in s.file for s in skipped)
    assert len(dataset) + len(skipped) == len(corpus.items)
    graph = dataset[0]
    assert (graph.segment == 0).sum() > 10 and (graph.segment == 1).sum() > 1 and torch.isfinite(graph.atom_pos).all()


def test_the_data_module_prints_checked_counts_on_a_slice(cache, capsys):
    series = [f"uni_fep/{UNI_PNP}", "ddg_bindingdb/11GS", "ddg_bindingdb/1PXN", "ddg_bindingdb/1ETS"]
    module = CorpusDataModule(root=str(shared_path()), series=series, n_folds=4, valid_fraction=0.4,
                              cache_dir=str(cache), preprocess_workers=0)
    module.prepare_data()
    sizes = module.split_sizes()
    out = capsys.readouterr().out
    assert "checked: no protein cluster or ligand-protein pair in two parts" in out
    assert out.count("uni_fep") >= 1 and "ddg_bindingdb" in out and "clusters" in out and "series" in out
    assert sum(sizes.values()) == len(module.corpus.items) == 3 + 10 + 1 + 11
    proteins = {stage: set(split.column("protein")) for stage, split in module.splits.items()}
    assert all(proteins.values()) and not (proteins["train"] & proteins["test"]) \
        and not (proteins["train"] & proteins["valid"]) and not (proteins["valid"] & proteins["test"])
    assert module.preprocess_reports[0].name == "corpus-slice"


def test_the_data_module_folds_are_the_protocol_folds_despite_skipped_items(cache):
    """Fold k of the data module is fold k of the cross-validation protocol (drawn over all records)."""
    series = [f"uni_fep/{UNI_PNP}", "ddg_bindingdb/11GS", "ddg_bindingdb/1PXN", "ddg_bindingdb/1ETS",
              f"ddg_bindingdb/{DDG_UNSANITISABLE}"]
    for fold in range(3):
        module = CorpusDataModule(root=str(shared_path()), series=series, n_folds=3, fold=fold, valid_fraction=0.0,
                                  cache_dir=str(cache), preprocess_workers=0)
        module.split_sizes()
        records = module.corpus.items
        record_clusters = item_clusters(records, module.clusters)
        protocol_test = {record_clusters[i] for i in leave_cluster_out_folds(record_clusters, 3, valid_fraction=0.0,
                                                                              seed=0)[fold]["test"]}
        dataset_clusters = set(module.splits["test"].column("protein"))
        assert dataset_clusters == protocol_test
        assert len(module.load_dataset().skipped) == 4  # the split was drawn before these were dropped


def test_geomol_preprocess_reports_speed_skips_and_store_size(cache, tmp_path, capsys):
    config = yaml.safe_load((REPO / "configs" / "get_affinity_corpus.yaml").read_text())
    config["data"]["init_args"].update(root=str(shared_path()), cache_dir=str(cache), n_folds=4,
                                       series=[f"uni_fep/{UNI_PNP}", "ddg_bindingdb/11GS", "ddg_bindingdb/1PXN",
                                               f"ddg_bindingdb/{DDG_UNSANITISABLE}"])
    path = tmp_path / "corpus_slice.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["preprocess", "--config", str(path), "--workers", "0"]) == 0
    out = capsys.readouterr().out
    assert "corpus-slice: 21 items" in out and "skipped 4" in out and "items/s built" in out
    assert out.count("cannot sanitise") == 4 and "corpus-slice.skipped.csv" in out
    assert "MiB on disk" in out and "processed: train" in out
