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

from geomol.data.cache import close_environment
from geomol.data.datasets.atom3d_lmdb import Atom3DReader, LBADataset, LEPDataset, atom_table
from geomol.data.sampler import DynamicBatchSampler
from geomol.data.vocab import POS_SMALL_MOLECULE, VOCAB
from geomol.errors import DatasetError, UnknownElementError
from tests.conftest import shared_path

COLUMNS = ["ensemble", "subunit", "model", "chain", "hetero", "insertion_code", "residue", "segid", "resname",
           "name", "element", "x", "y", "z", "fullname", "serial"]


def pdb_rows(path, keep=lambda row: True):
    """Atom rows (dicts with the ATOM3D columns) of a PDB file, read by fixed columns."""
    rows = []
    for line in open(path):
        if not line.startswith(("ATOM", "HETATM")):
            continue
        name = line[12:16].strip()
        row = {"ensemble": "x.pdb", "subunit": 0, "model": 0, "chain": line[21], "hetero": " " if line[0] == "A" else "H",
               "insertion_code": line[26].strip(), "residue": int(line[22:26]), "segid": "", "resname": line[17:20].strip(),
               "name": name, "element": line[76:78].strip() or name[0], "x": float(line[30:38]), "y": float(line[38:46]),
               "z": float(line[46:54]), "fullname": line[12:16], "serial": int(line[6:11])}
        if keep(row):
            rows.append(row)
    return rows


def ligand_rows(mol, resname="LIG", chain="L", residue=900):
    pos = mol.GetConformer().GetPositions()
    return [{"ensemble": "l.sdf", "subunit": 0, "model": 0, "chain": chain, "hetero": "H", "insertion_code": " ",
             "residue": residue, "segid": "", "resname": resname, "name": f"{a.GetSymbol()}{i}",
             "element": a.GetSymbol().upper(), "x": p[0], "y": p[1], "z": p[2], "fullname": f"{a.GetSymbol()}{i}",
             "serial": i} for i, (a, p) in enumerate(zip(mol.GetAtoms(), pos))]


def split_frame(rows):
    """pandas ``to_json(orient='split')`` form, as atom3d writes it."""
    return {"columns": COLUMNS, "index": list(range(len(rows))), "data": [[r[c] for c in COLUMNS] for r in rows]}


def write_lmdb(path, items, subdir=True):
    env = lmdb.open(str(path), map_size=1 << 28, subdir=subdir)
    with env.begin(write=True) as txn:
        for i, item in enumerate(items):
            txn.put(str(i).encode(), gzip.compress(json.dumps(item).encode()))
        txn.put(b"num_examples", str(len(items)).encode())
        txn.put(b"serialization_format", b"json")
    env.close()


@pytest.fixture(scope="module")
def cdk2():
    protein = pdb_rows(shared_path("plb", "cdk2", "01_protein", "crd", "protein.pdb"))
    supplier = Chem.SDMolSupplier(str(shared_path("plb", "cdk2", "02_ligands", "ligands.sdf")), removeHs=False)
    ligands = [m for m in supplier][:3]
    return protein, ligands


def pocket_of(protein, mol, cutoff=8.0):
    lig = mol.GetConformer().GetPositions()
    xyz = np.array([[r["x"], r["y"], r["z"]] for r in protein])
    close = np.linalg.norm(xyz[:, None] - lig[None], axis=-1).min(1) < cutoff
    keys = {(r["chain"], r["residue"], r["insertion_code"]) for r, c in zip(protein, close) if c}
    return [r for r in protein if (r["chain"], r["residue"], r["insertion_code"]) in keys]


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
