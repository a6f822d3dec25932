"""Principal-subgraph ligand fragmentation (geomol.data.complexes.fragment) on real PLB and FEP ligands."""
from __future__ import annotations

import json
import random
from collections import Counter

import pytest
from rdkit import Chem

from geomol.data.complexes.fragment import FragmentVocab, per_atom_groups
from geomol.data.vocab import VOCAB
from geomol.errors import ConfigError, DatasetError, GeomolError, StructureReadError
from tests.conftest import shared_path


def _read(path, **kwargs) -> list[Chem.Mol]:
    mols = list(Chem.SDMolSupplier(str(path), **kwargs))
    assert mols and all(m is not None for m in mols), path
    return mols


def _plb_ligands(**kwargs) -> list[Chem.Mol]:
    return [m for p in sorted(shared_path("plb").glob("*/02_ligands/ligands.sdf")) for m in _read(p, **kwargs)]


@pytest.fixture(scope="module")
def plb() -> list[Chem.Mol]:
    """All PLB ligands as deposited: docked poses with explicit hydrogens."""
    return _plb_ligands(removeHs=False)


@pytest.fixture(scope="module")
def vocab(plb) -> FragmentVocab:
    return FragmentVocab.learn(plb, size=300)


@pytest.fixture(scope="module")
def fep_sample() -> list[Chem.Mol]:
    """The first three ligands of every FEP-benchmark series (unseen chemistry for the PLB vocabulary)."""
    files = sorted(shared_path("fep_benchmark").glob("*/*_ligands.sdf"))
    return [m for p in files for m in _read(p, removeHs=False)[:3]]


def _connected(mol: Chem.Mol, atoms: tuple[int, ...]) -> bool:
    members, seen, stack = set(atoms), {atoms[0]}, [atoms[0]]
    while stack:
        for n in mol.GetAtomWithIdx(stack.pop()).GetNeighbors():
            if n.GetIdx() in members and n.GetIdx() not in seen:
                seen.add(n.GetIdx())
                stack.append(n.GetIdx())
    return seen == members


def _assert_partition(mol: Chem.Mol, groups, block_vocab) -> None:
    covered = Counter(i for atoms, _ in groups for i in atoms)
    assert covered == Counter(range(mol.GetNumAtoms())), "every atom exactly once"
    for atoms, symbol in groups:
        assert _connected(mol, atoms), (atoms, symbol)
        assert symbol in block_vocab, symbol
        heavy = [i for i in atoms if mol.GetAtomWithIdx(i).GetAtomicNum() != 1]
        assert symbol.startswith("@") == (len(heavy) > 1), (atoms, symbol)


def test_learned_vocabulary_has_common_fragments(vocab):
    assert 0 < len(vocab) <= 300
    assert len(set(vocab.fragments)) == len(vocab)
    assert "c1ccccc1" in vocab.fragments  # benzene ring
    assert "NC=O" in vocab.fragments  # amide
    assert vocab.counts[0] >= vocab.counts[-1] >= 2
    block_vocab = vocab.block_vocab()
    assert len(block_vocab) == len(VOCAB) + len(vocab)
    assert block_vocab.index("@c1ccccc1") >= len(VOCAB)


def test_every_ligand_is_partitioned(vocab, plb, fep_sample):
    block_vocab = vocab.block_vocab()
    fragment_blocks = 0
    for mol in plb + fep_sample:
        groups = vocab.fragment(mol)
        _assert_partition(mol, groups, block_vocab)
        fragment_blocks += sum(s.startswith("@") for _, s in groups)
    assert fragment_blocks > len(plb)  # the vocabulary is actually used


def test_symbol_is_canonical_smiles_of_the_group(vocab):
    """Symbols match an independent canonical SMILES computed on a renumbered heavy-atom molecule."""
    rng = random.Random(0)
    for mol in _plb_ligands()[::7]:  # hydrogens removed by RDKit
        order = list(range(mol.GetNumAtoms()))
        rng.shuffle(order)
        renumbered = Chem.RenumberAtoms(mol, order)
        new_index = {old: new for new, old in enumerate(order)}
        for atoms, symbol in vocab.fragment(mol):
            if len(atoms) > 1:
                smiles = Chem.MolFragmentToSmiles(renumbered, [new_index[i] for i in atoms], isomericSmiles=False)
                assert symbol == "@" + smiles


def test_hydrogens_join_their_heavy_atom(vocab, plb):
    without_h = _plb_ligands()
    unsanitized = _plb_ligands(removeHs=False, sanitize=False)
    for mol, heavy_only, raw in list(zip(plb, without_h, unsanitized))[::5]:
        assert any(a.GetAtomicNum() == 1 for a in mol.GetAtoms())
        groups = vocab.fragment(mol)
        owner = {i: symbol for atoms, symbol in groups for i in atoms}
        group_of = {i: atoms for atoms, _ in groups for i in atoms}
        for atom in mol.GetAtoms():
            if atom.GetAtomicNum() == 1:
                assert group_of[atom.GetIdx()] == group_of[atom.GetNeighbors()[0].GetIdx()]
        # the same fragmentation whether hydrogens are explicit, removed, or the file is unsanitized
        assert sorted(s for _, s in vocab.fragment(heavy_only)) == sorted(s for _, s in groups)
        assert vocab.fragment(raw) == groups
        assert len(owner) == mol.GetNumAtoms()


def test_per_atom_groups(plb):
    mol = plb[0]
    groups = per_atom_groups(mol)
    _assert_partition(mol, groups, VOCAB)
    assert len(groups) == mol.GetNumHeavyAtoms()
    for atoms, symbol in groups:
        (heavy,) = [a for a in (mol.GetAtomWithIdx(i) for i in atoms) if a.GetAtomicNum() != 1]
        assert symbol == heavy.GetSymbol().lower()
        assert all(mol.GetAtomWithIdx(i).GetAtomicNum() == 1 for i in atoms if i != heavy.GetIdx())


def test_molecule_without_bonds_falls_back_to_per_atom(vocab):
    """A ligand read without a bond table (atoms only), with a stray hydrogen and a dummy atom."""
    mol = Chem.RWMol()
    for element in ("C", "C", "O", "H", "Cl", "*"):
        mol.AddAtom(Chem.Atom(element))
    mol = mol.GetMol()
    groups = vocab.fragment(mol)
    assert groups == per_atom_groups(mol)
    assert groups == [((0,), "c"), ((1,), "c"), ((2,), "o"), ((3,), "h"), ((4,), "cl"), ((5,), "?")]


def test_save_load_round_trip(vocab, plb, tmp_path):
    path = tmp_path / "fragments.json"
    vocab.save(path)
    data = json.loads(path.read_text())  # human-readable JSON, not pickle
    assert [m["smiles"] for m in data["merges"]] == list(vocab.merges)
    loaded = FragmentVocab.load(path)
    assert loaded == vocab and loaded.fragments == vocab.fragments and loaded.counts == vocab.counts
    for mol in plb[::10]:
        assert loaded.fragment(mol) == vocab.fragment(mol)


def test_learning_is_deterministic(plb):
    first = FragmentVocab.learn(plb[:60], size=40)
    second = FragmentVocab.learn(plb[:60], size=40)
    assert first.merges == second.merges and len(first) == 40


def test_stops_at_min_frequency_and_respects_max_atoms(plb):
    rare = FragmentVocab.learn(plb[:30], size=10_000, min_frequency=5)
    assert 0 < len(rare) < 10_000 and min(rare.counts) >= 5
    small = FragmentVocab.learn(plb[:60], size=60, max_atoms=4)
    assert all(Chem.MolFromSmiles(s, sanitize=False).GetNumAtoms() <= 4 for s in small.fragments)
    heavy = {m: [a for a, _ in small.fragment(Chem.RemoveHs(m))] for m in plb[:10]}
    assert max(len(a) for groups in heavy.values() for a in groups) <= 4


def test_progress_bar_does_not_change_the_result(plb, capsys):
    assert FragmentVocab.learn(plb[:20], size=10, progress=True) == FragmentVocab.learn(plb[:20], size=10)


def test_invalid_molecules_raise(vocab):
    with pytest.raises(StructureReadError, match="None"):
        vocab.fragment(None, source="ligands.sdf")
    with pytest.raises(GeomolError, match="no atoms"):
        vocab.fragment(Chem.Mol())
    with pytest.raises(GeomolError, match="None"):
        per_atom_groups(None)
    with pytest.raises(StructureReadError) as info:
        FragmentVocab.learn([Chem.MolFromSmiles("CCO"), None])
    assert info.value.record == 1
    with pytest.raises(DatasetError, match="no molecules"):
        FragmentVocab.learn([])
    with pytest.raises(ConfigError):
        FragmentVocab.learn([Chem.MolFromSmiles("CCO")], min_frequency=0)


@pytest.mark.parametrize("content, reason", [
    (None, "not found"),
    ("{ not json", "cannot read"),
    ('{"format": "something else"}', "not a fragment vocabulary"),
    ('{"format": "geomol.FragmentVocab", "version": 99, "merges": []}', "version"),
    ('{"format": "geomol.FragmentVocab", "version": 1, "merges": [{"smiles": 3}]}', "merges"),
    ('{"format": "geomol.FragmentVocab", "version": 1, "merges": [{"smiles": "c1cc(("}]}', "invalid fragment SMILES"),
])
def test_bad_vocabulary_file_names_the_file(tmp_path, content, reason):
    path = tmp_path / "vocab.json"
    if content is not None:
        path.write_text(content)
    with pytest.raises(DatasetError, match=reason) as info:
        FragmentVocab.load(path)
    assert "vocab.json" in str(info.value)
