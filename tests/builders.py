"""Writers of tiny inputs in real formats (ATOM3D LMDB, PDBbind layout, protein–protein table,
sGDML npz), built at test time from the real structures under ``../shared/data``.

Used by the dataset tests and by the config tests, which point every shipped config at these.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import lmdb
import numpy as np
from rdkit import Chem

from tests.conftest import shared_path

ATOM3D_COLUMNS = ["ensemble", "subunit", "model", "chain", "hetero", "insertion_code", "residue", "segid",
                  "resname", "name", "element", "x", "y", "z", "fullname", "serial"]


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
    return {"columns": ATOM3D_COLUMNS, "index": list(range(len(rows))),
            "data": [[r[c] for c in ATOM3D_COLUMNS] for r in rows]}


def write_lmdb(path, items, subdir=True):
    env = lmdb.open(str(path), map_size=1 << 28, subdir=subdir)
    with env.begin(write=True) as txn:
        for i, item in enumerate(items):
            txn.put(str(i).encode(), gzip.compress(json.dumps(item).encode()))
        txn.put(b"num_examples", str(len(items)).encode())
        txn.put(b"serialization_format", b"json")
    env.close()


def pocket_of(protein, mol, cutoff=8.0):
    """Rows of the residues with any atom within ``cutoff`` Å of the molecule."""
    lig = mol.GetConformer().GetPositions()
    xyz = np.array([[r["x"], r["y"], r["z"]] for r in protein])
    close = np.linalg.norm(xyz[:, None] - lig[None], axis=-1).min(1) < cutoff
    keys = {(r["chain"], r["residue"], r["insertion_code"]) for r, c in zip(protein, close) if c}
    return [r for r in protein if (r["chain"], r["residue"], r["insertion_code"]) in keys]


def write_pocket(protein, mol, out, cutoff):
    """PDBbind-style pocket file: whole residues with any atom within ``cutoff`` Å of the ligand."""
    lig = mol.GetConformer().GetPositions()
    lines = [l for l in open(protein) if l.startswith(("ATOM", "HETATM"))]
    xyz = np.array([[float(l[30:38]), float(l[38:46]), float(l[46:54])] for l in lines])
    near = np.linalg.norm(xyz[:, None] - lig[None], axis=-1).min(1) < cutoff
    keep = {l[17:27] for l, n in zip(lines, near) if n}
    out.write_text("".join(l for l in lines if l[17:27] in keep) + "END\n")


def plb_target(target: str = "cdk2", n: int | None = None):
    """(protein PDB path, first ``n`` ligands as RDKit Mols with H) of a PLB target."""
    protein = shared_path("plb", target, "01_protein", "crd", "protein.pdb")
    mols = [m for m in Chem.SDMolSupplier(str(shared_path("plb", target, "02_ligands", "ligands.sdf")), removeHs=False)]
    return protein, mols[:n]


def lba_items(n: int = 4, offset: float = 5.0):
    """ATOM3D LBA records (8 Å pockets of cdk2 ligands) with labels offset + i."""
    protein, mols = plb_target("cdk2", n)
    rows = pdb_rows(protein)
    return [{"atoms_pocket": split_frame(pocket_of(rows, mol)), "atoms_ligand": split_frame(ligand_rows(mol)),
             "scores": {"neglog_aff": offset + i}, "id": f"cdk2_{mol.GetProp('_Name')}",
             "smiles": Chem.MolToSmiles(Chem.RemoveHs(mol)), "types": {"atoms_pocket": "DataFrame"}}
            for i, mol in enumerate(mols)]


def lep_items(n_pairs: int = 2):
    """ATOM3D LEP records: pairs of cdk2 pocket + ligand frames, labels alternating A / I."""
    protein, mols = plb_target("cdk2", n_pairs + 1)
    rows = pdb_rows(protein)
    frames = [split_frame(pocket_of(rows, m, 12.0) + ligand_rows(m)) for m in mols]
    return [{"atoms_active": frames[i], "atoms_inactive": frames[i + 1], "label": "AI"[i % 2], "id": f"pair{i}"}
            for i in range(n_pairs)]


def write_atom3d_splits(root: Path, kind: str = "lba") -> dict[str, Path]:
    """``root/{train,val,test}`` LMDBs of LBA or LEP records; returns the three paths."""
    paths = {}
    root.mkdir(parents=True, exist_ok=True)
    for split in ("train", "val", "test"):
        paths[split] = root / split
        write_lmdb(paths[split], lba_items(3) if kind == "lba" else lep_items(2))
    return paths


def write_pdbbind(root: Path, codes=("1aaa", "2bbb", "3ccc", "4ddd")) -> Path:
    """A PDBbind-layout folder (cdk2 ligands as complexes) with an INDEX file; returns the index path."""
    protein, mols = plb_target("cdk2", len(codes))
    lines = []
    for i, (code, mol) in enumerate(zip(codes, mols)):
        folder = root / code
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(protein, folder / f"{code}_protein.pdb")
        write_pocket(protein, mol, folder / f"{code}_pocket.pdb", cutoff=12.0)
        Chem.MolToMolFile(mol, str(folder / f"{code}_ligand.sdf"))
        lines.append(f"{code}  2.00  2010   {5 + i:.2f}  Kd={10 ** (3 - i):g}nM  // {code}.pdf")
    index = root / "INDEX_refined_data.2020"
    index.write_text("# tiny index\n" + "\n".join(lines) + "\n")
    return index


def write_ppa(root: Path) -> Path:
    """A protein–protein affinity table over the thrombin heavy/light chains; returns the CSV."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(shared_path("plb", "thrombin", "01_protein", "crd", "protein.pdb"), root / "thr.pdb")
    table = root / "table.csv"
    table.write_text("id,pdb,receptor_chains,ligand_chains,pK,group\n"
                     + "".join(f"c{i},thr.pdb,{'HL'[i % 2]},{'LH'[i % 2]},{6 + 0.5 * i},g{i}\n" for i in range(6)))
    return table


def write_md17(path: Path, frames: int = 400, seed: int = 0) -> Path:
    """A fake ethanol trajectory (C, C, O heavy atoms + 6 H) with small vibrations, sGDML keys."""
    rng = np.random.default_rng(seed)
    z = np.array([6, 6, 8, 1, 1, 1, 1, 1, 1])
    base = np.array([[0, 0, 0], [1.5, 0, 0], [2.0, 1.3, 0], [-0.5, 0.9, 0], [-0.5, -0.5, 0.8],
                     [-0.5, -0.5, -0.8], [2.0, -0.5, 0.8], [2.0, -0.5, -0.8], [2.9, 1.4, 0]], dtype=float)
    R = base + 0.02 * rng.standard_normal((frames, 9, 3))
    np.savez(path, R=R, z=z, E=np.zeros((frames, 1)), F=np.zeros_like(R), name="ethanol")
    return path
