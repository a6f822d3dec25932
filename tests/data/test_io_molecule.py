"""SDF / MOL2 reading with RDKit, the sanitisation fallback, and ligand blocks (per atom or fragments)."""
import gzip

import numpy as np
import pytest
from rdkit import Chem

from geomol.data import StructureWarning, ligand_blocks, ligand_names, read_ligand, read_ligands
from geomol.errors import ConfigError, LigandNotFoundError, StructureReadError, UnknownElementError
from tests.conftest import shared_path


@pytest.fixture(scope="module")
def cdk2_sdf():
    return shared_path("plb", "cdk2", "02_ligands", "ligands.sdf")


def _pentavalent_carbon_sdf(path):
    """An SDF record RDKit reads but cannot sanitise (a carbon with five bonds)."""
    mol = Chem.RWMol()
    conf = Chem.Conformer(6)
    for i, (symbol, xyz) in enumerate([("C", (0, 0, 0)), ("H", (1, 0, 0)), ("H", (-1, 0, 0)), ("H", (0, 1, 0)),
                                       ("H", (0, -1, 0)), ("Cl", (0, 0, 1.8))]):
        mol.AddAtom(Chem.Atom(symbol))
        conf.SetAtomPosition(i, xyz)
        if i:
            mol.AddBond(0, i, Chem.BondType.SINGLE)
    mol.AddConformer(conf)
    mol.SetProp("_Name", "bad_carbon")
    path.write_text(Chem.MolToMolBlock(mol, kekulize=False) + "$$$$\n")
    return path


def test_names_properties_and_selection(cdk2_sdf):
    names = ligand_names(cdk2_sdf)
    assert len(names) == 10 and names[0] == "lig_20"
    by_name, by_index = read_ligand(cdk2_sdf, names[4]), read_ligand(cdk2_sdf, 4)
    assert Chem.MolToSmiles(by_name) == Chem.MolToSmiles(by_index)
    assert by_name.GetProp("_Name") == names[4]
    props = by_name.GetPropsAsDict()
    assert "r_i_docking_score" in props and "_geomol_source" not in props
    assert read_ligand(cdk2_sdf, -1).GetProp("_Name") == names[-1]
    assert [m.GetProp("_Name") for m in read_ligands(cdk2_sdf)] == names


def test_gzip_sdf(tmp_path, cdk2_sdf):
    packed = tmp_path / "ligands.sdf.gz"
    packed.write_bytes(gzip.compress(cdk2_sdf.read_bytes()))
    assert ligand_names(packed) == ligand_names(cdk2_sdf)
    assert Chem.MolToSmiles(read_ligand(packed, 3)) == Chem.MolToSmiles(read_ligand(cdk2_sdf, 3))


def test_missing_molecule(cdk2_sdf):
    with pytest.raises(LigandNotFoundError, match="no molecule titled 'lig_nope'"):
        read_ligand(cdk2_sdf, "lig_nope")
    with pytest.raises(LigandNotFoundError, match="no molecule 10"):
        read_ligand(cdk2_sdf, 10)


def test_mol2_multi_molecule_and_ligand():
    from MDAnalysisTests.datafiles import mol2_ligand, mol2_molecules

    mols = read_ligands(mol2_molecules)
    assert len(mols) == 200 and len(ligand_names(mol2_molecules)) == 200
    assert all(m.GetNumAtoms() == 49 for m in mols)
    assert read_ligand(mol2_molecules, 7).GetConformer().GetPositions().shape == (49, 3)
    ligand = read_ligand(mol2_ligand)
    heavy = sum(a.GetAtomicNum() > 1 for a in ligand.GetAtoms())
    blocks = ligand_blocks(ligand)
    assert len(blocks) == heavy and all(b.positions == ("sm",) for b in blocks)
    first_heavy = next(a for a in ligand.GetAtoms() if a.GetAtomicNum() > 1)
    assert blocks[0].atom_names[0] == first_heavy.GetProp("_TriposAtomName")


def test_broken_mol2_is_a_clear_error():
    from MDAnalysisTests.datafiles import mol2_broken_molecule

    with pytest.raises(StructureReadError, match=r"BrokenMolecule.mol2 \[molecule 0 'FXA101_1'\]"):
        read_ligands(mol2_broken_molecule)


def test_sanitisation_fallback_keeps_coordinates(tmp_path):
    path = _pentavalent_carbon_sdf(tmp_path / "bad.sdf")
    with pytest.warns(StructureWarning, match=r"bad.sdf \[molecule 0 'bad_carbon'\]: RDKit sanitisation failed"):
        mol = read_ligand(path)
    assert mol.GetNumAtoms() == 6
    blocks = ligand_blocks(mol)
    assert [b.symbol for b in blocks] == ["c", "cl"]
    np.testing.assert_allclose(blocks[1].coords, [[0, 0, 1.8]])
    assert len(ligand_blocks(mol, keep_hydrogens=True)) == 6


def test_corrupt_counts_line_names_the_record(tmp_path, cdk2_sdf):
    records = cdk2_sdf.read_text().split("$$$$\n")
    lines = records[1].split("\n")
    lines[3] = "xx" + lines[3][2:]
    records[1] = "\n".join(lines)
    path = tmp_path / "corrupt.sdf"
    path.write_text("$$$$\n".join(records))
    with pytest.raises(StructureReadError, match=r"molecule 1 'lig_1oi9'.*RDKit cannot read.*line 4"):
        read_ligand(path, 1)
    assert read_ligand(path, 0).GetProp("_Name") == "lig_20"  # the other records stay readable
    with pytest.warns(StructureWarning, match="skipped 1 unreadable"):
        assert len(read_ligands(path, skip_invalid=True)) == 9


@pytest.mark.parametrize("content", [b"", b"   \n\n", None])
def test_empty_and_missing_files(tmp_path, content):
    path = tmp_path / "ligand.sdf"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(StructureReadError, match="empty" if content is not None else "not found"):
        read_ligands(path)


def test_ligand_blocks_rules(cdk2_sdf):
    mol = read_ligand(cdk2_sdf, 0)
    heavy = [a for a in mol.GetAtoms() if a.GetAtomicNum() > 1]
    blocks = ligand_blocks(mol)
    assert [b.symbol for b in blocks] == [a.GetSymbol().lower() for a in heavy]
    assert blocks[0].label.startswith("lig_20:")
    coords = mol.GetConformer().GetPositions()
    np.testing.assert_allclose(np.concatenate([b.coords for b in blocks]), coords[[a.GetIdx() for a in heavy]])
    assert len(ligand_blocks(mol, keep_hydrogens=True)) == mol.GetNumAtoms()


def test_dummy_atoms_and_missing_coordinates():
    with pytest.raises(UnknownElementError, match="dummy"):
        mol = Chem.AddHs(Chem.MolFromSmiles("*CC"))
        from rdkit.Chem import AllChem

        AllChem.Compute2DCoords(mol)
        ligand_blocks(mol)
    with pytest.raises(StructureReadError, match="no 3D coordinates"):
        ligand_blocks(Chem.MolFromSmiles("CCO"))


class _RingFragmenter:
    """Each ring system is one block, every other heavy atom its own; hydrogens join their atom."""

    def fragment(self, mol):
        owner = list(range(mol.GetNumAtoms()))
        for ring in mol.GetRingInfo().AtomRings():
            for i in ring:
                owner[i] = min(owner[j] for j in ring)
        for atom in mol.GetAtoms():
            if atom.GetAtomicNum() == 1 and atom.GetDegree() == 1:
                owner[atom.GetIdx()] = owner[atom.GetNeighbors()[0].GetIdx()]
        groups = {}
        for i, o in enumerate(owner):
            groups.setdefault(o, []).append(i)
        return [(tuple(g), "@ring" if len(g) > 1 and any(mol.GetAtomWithIdx(i).IsInRing() for i in g)
                 else mol.GetAtomWithIdx(g[0]).GetSymbol().lower()) for g in groups.values()]


def test_fragment_blocks_partition_the_atoms(cdk2_sdf):
    mol = read_ligand(cdk2_sdf, 0)
    blocks = ligand_blocks(mol, fragments=_RingFragmenter())
    heavy = sum(a.GetAtomicNum() > 1 for a in mol.GetAtoms())
    assert sum(len(b) for b in blocks) == heavy
    assert any(b.symbol == "@ring" and len(b) >= 5 for b in blocks)
    assert all(set(b.positions) == {"sm"} and "H" not in b.elements for b in blocks)
    with_h = ligand_blocks(mol, fragments=_RingFragmenter(), keep_hydrogens=True)
    assert sum(len(b) for b in with_h) == mol.GetNumAtoms() and len(with_h) == len(blocks)


def test_fragmenter_that_loses_atoms_is_rejected(cdk2_sdf):
    class Lossy:
        def fragment(self, mol):
            return [((0,), "c")]

    with pytest.raises(ConfigError, match="every atom in exactly one group"):
        ligand_blocks(read_ligand(cdk2_sdf, 0), fragments=Lossy())
