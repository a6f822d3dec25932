"""Complex builders on nucleic-acid, MDAnalysisTests and protein–protein inputs, and their errors."""
import gzip
import re

import numpy as np
import pytest
import torch
from rdkit import Chem
from scipy.spatial import cKDTree

from geomol.data import (
    BlockGraph,
    complex_from_blocks,
    complex_from_files,
    complex_from_pdb,
    complex_from_structure,
    ligand_blocks,
    read_ligand,
    read_ligands,
    read_structure,
)
from geomol.data.vocab import VOCAB
from geomol.errors import (
    ConfigError,
    EmptySelectionError,
    GeomolError,
    LigandNotFoundError,
    StructureReadError,
)
from tests.conftest import shared_path


def _heavy_records(path, resname):
    """(coords, count) of the heavy ATOM/HETATM records with a residue name, read from the text."""
    rows = [line for line in open(path) if line.startswith(("ATOM", "HETATM")) and line[17:20].strip() == resname
            and line[76:78].strip() not in ("H", "D")]
    return np.array([[float(line[30 + 8 * k:38 + 8 * k]) for k in range(3)] for line in rows])


def _pocket_labels(graph_blocks_source, ligand_xyz, cutoff):
    structure, exclude = graph_blocks_source
    keep = [i for i, b in enumerate(structure.blocks()) if exclude not in b.label]
    blocks = [structure.blocks()[i] for i in keep]
    tree = cKDTree(ligand_xyz)
    return {b.label for b in blocks if any(tree.query_ball_point(b.coords, cutoff))}


@pytest.mark.parametrize("code", ["1D30", "102D", "2DND"])
def test_dna_ligand_written_as_atom_records(code):
    path = shared_path("nucleic", "dna_ligand", f"{code}_complex_ref.pdb")
    graph = complex_from_pdb(path, ligand_resname="UNK", pocket_cutoff=10.0)
    ligand_xyz = _heavy_records(path, "UNK")
    pocket, ligand = graph.segment_summary()
    assert ligand == {"segment": 1, "blocks": len(ligand_xyz), "atoms": len(ligand_xyz)}
    expected = _pocket_labels((read_structure(path), ":UNK"), ligand_xyz, 10.0)
    assert pocket["blocks"] == len(expected)
    nucleotides = {VOCAB.index(s) for s in ("DA", "DC", "DG", "DT")}
    assert set(graph.B[(graph.segment == 0) & ~graph.is_global].tolist()) <= nucleotides
    torch.testing.assert_close(graph.X[graph.atom_segment == 1][1:], torch.tensor(ligand_xyz, dtype=torch.float32))


def test_hiv_protease_with_inhibitor_xk2():
    from MDAnalysisTests.datafiles import CONECT

    graph = complex_from_pdb(CONECT, ligand_resname="xk2", pocket_cutoff=8.0)
    assert graph.segment_summary()[1]["blocks"] == 46
    assert graph.segment_summary()[0]["blocks"] > 20
    with pytest.raises(LigandNotFoundError, match=r"no residue named 'LIG'.*XK2"):
        complex_from_pdb(CONECT, ligand_resname="LIG")


def test_protein_file_plus_ligand_pdb_file():
    from MDAnalysisTests.datafiles import merge_ligand, merge_protein

    graph = complex_from_files(merge_protein, merge_ligand, pocket_cutoff=10.0)
    ligand_atoms = read_structure(merge_ligand).num_atoms
    assert graph.segment_summary()[1] == {"segment": 1, "blocks": ligand_atoms, "atoms": ligand_atoms}
    with pytest.raises(ConfigError, match="bond orders"):
        complex_from_files(merge_protein, merge_ligand, fragments=object())


def test_protein_protein_interface_by_chains():
    from MDAnalysisTests.datafiles import MMCIF

    path = f"{MMCIF}/1BD2.pdb.gz"
    graph = complex_from_pdb(path, receptor_chains=["A", "B", "C"], ligand_chains=["D", "E"], pocket_cutoff=6.0)
    structure = read_structure(path)
    sides = [[b for b in structure.blocks() if b.label[0] in chains] for chains in ("ABC", "DE")]
    trees = [cKDTree(np.concatenate([b.coords for b in side])) for side in sides]
    for seg, (mine, other) in enumerate(((sides[0], trees[1]), (sides[1], trees[0]))):
        expected = sum(any(other.query_ball_point(b.coords, 6.0)) for b in mine)
        assert graph.segment_summary()[seg]["blocks"] == expected > 10
    with pytest.raises(LigandNotFoundError, match=r"partner chain\(s\) Z not in the file \(chains present: A, B, C, D, E"):
        complex_from_pdb(path, ligand_chains=["Z"])
    with pytest.raises(LigandNotFoundError, match=r"receptor chain\(s\) Y not in the file"):
        complex_from_pdb(path, receptor_chains=["A", "Y"], ligand_chains=["D"])
    with pytest.raises(ConfigError):
        complex_from_pdb(path)


def test_ligand_inputs_mol_blocks_and_hydrogens():
    protein = shared_path("plb", "ptp1b", "01_protein", "crd", "protein.pdb")
    sdf = shared_path("plb", "ptp1b", "02_ligands", "ligands.sdf")
    mol = read_ligand(sdf, 2)
    from_mol = complex_from_files(protein, mol)
    from_blocks = complex_from_blocks(read_structure(protein).blocks(), ligand_blocks(mol))
    for key in ("X", "A", "atom_pos", "B", "block_len", "segment"):
        assert torch.equal(from_mol[key], from_blocks[key]), key
    with_h = complex_from_files(protein, sdf, ligand_index=2, keep_hydrogens=True)
    heavy = with_h.A != 3
    assert (~heavy).any() and int(heavy.sum()) == from_mol.num_atoms  # same heavy atoms, same pocket
    assert with_h.segment_summary()[1]["atoms"] == mol.GetNumAtoms()
    with pytest.raises(ConfigError, match="read without hydrogens"):
        complex_from_structure(read_structure(protein), mol, keep_hydrogens=True)


def test_fragment_vocabulary_extends_block_types():
    fragment = pytest.importorskip("geomol.data.complexes.fragment")
    sdf = shared_path("plb", "cdk2", "02_ligands", "ligands.sdf")
    mols = read_ligands(sdf)
    vocab = fragment.FragmentVocab.learn(mols, size=10)
    receptor = read_structure(shared_path("plb", "cdk2", "01_protein", "crd", "protein.pdb"))
    graph = complex_from_structure(receptor, mols[0], fragments=vocab)
    ligand_types = graph.B[graph.segment == 1][1:]
    assert (ligand_types >= len(VOCAB)).any() and graph.segment_summary()[1]["atoms"] == Chem.RemoveHs(mols[0]).GetNumAtoms()


# ---------------------------------------------------------------------- errors
@pytest.fixture
def plb_files():
    return (shared_path("plb", "syk", "01_protein", "crd", "protein.pdb"),
            shared_path("plb", "syk", "02_ligands", "ligands.sdf"))


def test_truncated_protein(tmp_path, plb_files):
    protein, sdf = plb_files
    data = protein.read_bytes()
    cut = data.index(b"\nATOM", len(data) // 2) + 40  # inside the coordinates of an ATOM record
    truncated = tmp_path / "protein.pdb"
    truncated.write_bytes(data[:cut])
    with pytest.raises(StructureReadError, match=r"protein.pdb.*line \d+.*truncated"):
        complex_from_files(truncated, sdf)
    packed = gzip.compress(data)
    (tmp_path / "protein2.pdb.gz").write_bytes(packed[: len(packed) // 2])
    with pytest.raises(StructureReadError, match="truncated gzip"):
        complex_from_files(tmp_path / "protein2.pdb.gz", sdf)


def test_corrupt_sdf_counts_line(tmp_path, plb_files):
    protein, sdf = plb_files
    lines = sdf.read_text().split("\n")
    lines[3] = re.sub(r"^\s*\d+", "abc", lines[3])
    bad = tmp_path / "ligands.sdf"
    bad.write_text("\n".join(lines))
    with pytest.raises(StructureReadError, match=r"ligands.sdf \[molecule 0 .*RDKit cannot read"):
        complex_from_files(protein, bad)


@pytest.mark.parametrize("which", ["receptor", "ligand"])
@pytest.mark.parametrize("problem", ["empty", "missing"])
def test_empty_or_missing_inputs(tmp_path, plb_files, which, problem):
    files = dict(zip(("receptor", "ligand"), plb_files))
    files[which] = tmp_path / ("x.pdb" if which == "receptor" else "x.sdf")
    if problem == "empty":
        files[which].write_text("")
    with pytest.raises(StructureReadError, match=rf"x\.(pdb|sdf): {'file is empty' if problem == 'empty' else 'file not found'}"):
        complex_from_files(files["receptor"], files["ligand"])


def test_far_away_ligand_gives_empty_pocket(plb_files):
    protein, sdf = plb_files
    mol = read_ligand(sdf, 0)
    conf = mol.GetConformer()
    for i in range(mol.GetNumAtoms()):
        p = conf.GetAtomPosition(i)
        conf.SetAtomPosition(i, (p.x + 1000.0, p.y, p.z))
    with pytest.raises(EmptySelectionError, match=r"protein.pdb \+ .*ligands.sdf \[molecule 0 .*pocket is empty"):
        complex_from_files(protein, mol)


def test_file_without_atoms_and_wrong_kinds(tmp_path, plb_files):
    protein, sdf = plb_files
    header_only = tmp_path / "header.pdb"
    header_only.write_text("HEADER    NOTHING HERE\nEND\n")
    with pytest.raises(StructureReadError, match="no ATOM/HETATM records"):
        complex_from_files(header_only, sdf)
    with pytest.raises(StructureReadError, match="expected a PDB or mmCIF"):
        complex_from_files(sdf, sdf)
    with pytest.raises(GeomolError):
        complex_from_pdb(protein, ligand_resname="LIG")


def test_graph_is_a_blockgraph_with_label(plb_files):
    graph = complex_from_files(*plb_files, ligand_index="lig_CHEMBL3265000", y=8.1)
    assert isinstance(graph, BlockGraph) and graph.name == "protein.pdb:lig_CHEMBL3265000"
    assert graph.y.item() == pytest.approx(8.1)
