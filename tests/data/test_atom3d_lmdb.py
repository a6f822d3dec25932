"""ATOM3D LBA / LEP LMDB readers, on LMDBs written here in atom3d's format from real PLB atoms."""
from __future__ import annotations

import gzip
import json

import lmdb
import numpy as np
import pytest
import torch
from rdkit import Chem
from torch.utils.data import DataLoader
from torch_geometric.data import Batch

from geomol.data.store.cache import close_environment
from geomol.data.datasets.atom3d_lmdb import Atom3DReader, LBADataset, LEPDataset, atom_table
from geomol.data.batching.sampler import DynamicBatchSampler
from geomol.data.vocab import POS_SMALL_MOLECULE, VOCAB
from geomol.errors import DatasetError, UnknownElementError
from tests.builders import ATOM3D_COLUMNS as COLUMNS
from tests.builders import ligand_rows, pdb_rows, pocket_of, split_frame, write_lmdb
from tests.conftest import shared_path


@pytest.fixture(scope="module")
def cdk2():
    protein = pdb_rows(shared_path("plb", "cdk2", "01_protein", "crd", "protein.pdb"))
    supplier = Chem.SDMolSupplier(str(shared_path("plb", "cdk2", "02_ligands", "ligands.sdf")), removeHs=False)
    ligands = [m for m in supplier][:3]
    return protein, ligands


@pytest.fixture(scope="module")
def lba_lmdb(cdk2, tmp_path_factory):
    protein, ligands = cdk2
    items = []
    for i, mol in enumerate(ligands):
        items.append({"atoms_pocket": split_frame(pocket_of(protein, mol)), "atoms_ligand": split_frame(ligand_rows(mol)),
                      "scores": {"neglog_aff": 5.0 + i}, "id": f"cdk2_{mol.GetProp('_Name')}",
                      "smiles": Chem.MolToSmiles(Chem.RemoveHs(mol)), "types": {"atoms_pocket": "DataFrame"}})
    bad = dict(items[0], id="broken")
    del bad["atoms_ligand"]
    items.append(bad)
    path = tmp_path_factory.mktemp("lba") / "train"
    write_lmdb(path, items)
    return path, items


def test_lba_graphs_follow_the_official_preprocessing(lba_lmdb, tmp_path):
    path, items = lba_lmdb
    dataset = LBADataset(path, cache_dir=tmp_path / "cache", progress=False)
    assert len(dataset) == 3
    assert [(s.id, s.error) for s in dataset.skipped] == [("lba:3", "DatasetError")]
    assert "atoms_ligand" in dataset.skipped[0].reason
    for i, graph in enumerate(dataset[j] for j in range(3)):
        item = items[i]
        assert graph.name == item["id"] and graph.y.item() == 5.0 + i and graph.source == "lba"
        pocket = item["atoms_pocket"]["data"]
        heavy = [r for r in pocket if r[COLUMNS.index("element")] != "H" and r[COLUMNS.index("resname")] != "HOH"]
        residues = {(r[3], r[6], r[5]) for r in heavy}
        ligand_heavy = [r for r in item["atoms_ligand"]["data"] if r[COLUMNS.index("element")] != "H"]
        summary = graph.segment_summary()
        assert summary[1]["blocks"] == summary[1]["atoms"] == len(ligand_heavy)
        assert summary[0]["atoms"] == len([r for r in heavy if r[COLUMNS.index("resname")] not in ("ACE", "NME")]) + \
            sum(1 for r in heavy if r[COLUMNS.index("resname")] in ("ACE", "NME"))
        assert summary[0]["blocks"] >= len(residues) - 2  # caps become single-atom blocks
        lig = graph.segment[graph.block_id] == 1
        assert (graph.atom_pos[lig & (graph.B[graph.block_id] != 3)] == POS_SMALL_MOLECULE).all()
        assert VOCAB.index("c") in graph.B.tolist()
        assert dataset.info(i).extra["smiles"] == item["smiles"]
    with_h = LBADataset(path, cache_dir=tmp_path / "cache", progress=False, ligand_hydrogens=True)
    assert with_h[0].segment_summary()[1]["atoms"] == len(items[0]["atoms_ligand"]["data"])


def test_table_forms_are_equivalent(lba_lmdb):
    _, items = lba_lmdb
    split = items[0]["atoms_ligand"]
    rows = [dict(zip(split["columns"], r)) for r in split["data"]]
    columns = {c: {str(i): r[c] for i, r in enumerate(rows)} for c in split["columns"]}
    a, b, c = atom_table(split, "s"), atom_table(rows, "r"), atom_table(columns, "c")
    assert np.array_equal(a.coords, b.coords) and np.array_equal(a.coords, c.coords)
    assert a.element == b.element == c.element and a.name == c.name
    with pytest.raises(DatasetError, match="lacks column"):
        atom_table([{"x": 1.0}], "bad")
    with pytest.raises(DatasetError, match="not a frame"):
        atom_table("nonsense", "bad")
    with pytest.raises(UnknownElementError, match="unknown element"):
        atom_table([dict(rows[0], element="Xx")], "bad")


def test_lmdb_file_layouts_and_errors(lba_lmdb, tmp_path):
    _, items = lba_lmdb
    single = tmp_path / "single.lmdb"
    write_lmdb(single, items[:1], subdir=False)
    reader = Atom3DReader(single)
    assert len(reader) == 1 and reader[0]["id"] == items[0]["id"] and reader.data_file == single
    with pytest.raises(DatasetError, match="does not exist"):
        Atom3DReader(tmp_path / "absent")
    env = lmdb.open(str(tmp_path / "plain"), map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"0", b"not gzip")
    env.close()
    with pytest.raises(DatasetError, match="num_examples"):
        Atom3DReader(tmp_path / "plain")
    close_environment(tmp_path / "plain")  # the shared read handle, before writing again
    env = lmdb.open(str(tmp_path / "plain"), map_size=1 << 20)
    with env.begin(write=True) as txn:
        txn.put(b"num_examples", b"1")
    env.close()
    with pytest.raises(DatasetError, match=r"\[0\].*gzip"):
        Atom3DReader(tmp_path / "plain")[0]


def test_lep_pairs(cdk2, tmp_path):
    protein, ligands = cdk2
    frames = [split_frame(protein + ligand_rows(m)) for m in ligands[:2]]
    items = [{"atoms_active": frames[0], "atoms_inactive": frames[1], "label": "A", "id": "pairA"},
             {"atoms_active": frames[1], "atoms_inactive": frames[0], "label": "I", "id": "pairI"}]
    write_lmdb(tmp_path / "lep", items)
    dataset = LEPDataset(tmp_path / "lep", cache_dir=tmp_path / "cache", progress=False)
    inactive, active = dataset[0]
    assert active.y.item() == 1.0 and inactive.y.item() == 1.0 and dataset.info(1).y == 0.0
    assert dataset.sizes[0] == inactive.num_blocks + active.num_blocks
    # every kept residue has a heavy atom within 6 Å of the ligand; a residue at 6-8 Å is not kept
    lig_xyz = ligands[0].GetConformer().GetPositions()
    heavy_lig = lig_xyz[[a.GetAtomicNum() > 1 for a in ligands[0].GetAtoms()]]
    receptor = (active.segment[active.block_id] == 0) & (active.B[active.block_id] != 3)
    d = torch.cdist(active.X[receptor].double(), torch.from_numpy(heavy_lig)).min(1).values
    per_block = torch.zeros(active.num_blocks, dtype=torch.float64).fill_(1e9).scatter_reduce(
        0, active.block_id[receptor], d, "amin")
    assert (per_block[per_block < 1e9] < 6.0).all()
    near_8 = pocket_of([r for r in protein if r["element"] != "H"], ligands[0], cutoff=8.0)
    assert active.segment_summary()[0]["blocks"] < len({(r["chain"], r["residue"]) for r in near_8})
    lig = (active.segment[active.block_id] == 1) & (active.B[active.block_id] != 3)
    assert (active.atom_pos[lig] != POS_SMALL_MOLECULE).all()  # LEP ligand codes come from atom names


def test_dataloader_workers_with_dynamic_batches(lba_lmdb, tmp_path):
    path, _ = lba_lmdb
    dataset = LBADataset(path, cache_dir=tmp_path / "cache", progress=False, num_workers=2)
    assert len(dataset) == 3
    sampler = DynamicBatchSampler(dataset.sizes, max_blocks=max(dataset.sizes) + 1, seed=0)
    loader = DataLoader(dataset, batch_sampler=sampler, num_workers=2, collate_fn=Batch.from_data_list)
    seen = {}
    for batch in loader:
        assert int(batch.block_len.numel()) <= max(dataset.sizes) + 1
        for g in batch.to_data_list():
            seen[g.name] = g
    assert sorted(seen) == sorted(dataset.info(i).id for i in range(3))
    for i in range(3):
        direct = dataset[i]
        assert torch.equal(seen[direct.name].X, direct.X) and torch.equal(seen[direct.name].B, direct.B)
