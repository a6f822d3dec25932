"""Interaction roles of ligand and receptor atoms, and the role-aware contact features built on them."""
from __future__ import annotations

import math

import numpy as np
import pytest
from rdkit import Chem
from rdkit.Chem import AllChem

from geomol.data import complex_from_files
from geomol.data.chemistry.atom_roles import (LIGAND_CHEMISTRY, RECEPTOR_ROLES, graph_ligand_chemistry,
                                        ligand_atom_chemistry, receptor_atom_roles)
from geomol.data.chemistry.contact_features import (ATOM_CONTACT_FEATURES, CHEMISTRY_CONTACT_FEATURES,
                                          chemistry_contact_features, graph_atom_contacts, ligand_heavy_atoms)
from geomol.data.vocab import VOCAB, position_index
from geomol.errors import ConfigError
from tests.builders import plb_target

ROLE = {name: k for k, name in enumerate(LIGAND_CHEMISTRY)}
RECEPTOR = {name: k for k, name in enumerate(RECEPTOR_ROLES)}
PAIR = {name: k for k, name in enumerate(CHEMISTRY_CONTACT_FEATURES)}


def _posed(smiles: str) -> Chem.Mol:
    mol = Chem.AddHs(Chem.MolFromSmiles(smiles))
    AllChem.EmbedMolecule(mol, randomSeed=7)
    return mol


def _roles(smiles: str) -> dict[str, list[str]]:
    """Heavy atom ``'<symbol><index>'`` -> the names of its set flags."""
    rows, _ = ligand_atom_chemistry(_posed(smiles))
    atoms = Chem.RemoveHs(_posed(smiles)).GetAtoms()
    return {f"{a.GetSymbol()}{a.GetIdx()}": [n for n in LIGAND_CHEMISTRY[:-1] if row[ROLE[n]]] for a, row in zip(atoms, rows)}


@pytest.mark.parametrize("smiles, atom, expected", [
    ("CCN(C)C", "N2", ["donor", "cation", "sp3"]),  # tertiary aliphatic amine: protonated at pH 7
    ("c1ccncc1", "N3", ["acceptor", "aromatic", "ring"]),
    ("CC(=O)Nc1ccccc1", "N3", ["donor"]),  # amide N: neither acceptor nor charged
    ("CC(=O)Nc1ccccc1", "O2", ["acceptor"]),
    ("CC(=O)O", "O3", ["donor", "acceptor", "anion"]),  # a carboxylic acid drawn neutral is an anion
    ("CC(=O)[O-]", "O2", ["acceptor", "anion"]),
    ("Cc1nn[nH]n1", "N4", ["donor", "acceptor", "aromatic", "anion", "ring"]),  # tetrazole
    ("[O-][N+](=O)c1ccccc1", "N1", []),  # nitro: charges drawn, none real
    ("NC(=N)c1ccccc1", "N0", ["donor", "cation"]),  # amidine
    ("C1CCN(c2ccccc2)CC1", "N3", ["ring"]),  # aniline-type N: not basic
    ("CC#N", "N2", ["acceptor"]),
])
def test_ligand_roles(smiles, atom, expected):
    assert _roles(smiles)[atom] == expected


def test_hydrogen_counts_and_positions():
    mol = _posed("OCCN")
    rows, xyz = ligand_atom_chemistry(mol)
    assert rows[:, ROLE["hydrogens"]].tolist() == [1, 2, 2, 2]
    np.testing.assert_allclose(xyz, mol.GetConformer().GetPositions()[:4])


def test_graph_rows_follow_graph_order_not_molecule_order():
    mol = _posed("OCc1ccncc1")
    rows, xyz = ligand_atom_chemistry(mol)
    order = np.random.default_rng(0).permutation(len(xyz))
    np.testing.assert_array_equal(graph_ligand_chemistry(xyz[order].astype(np.float32), mol), rows[order])
    assert not graph_ligand_chemistry(xyz + 0.5, mol).any()  # not the molecule's atoms: no roles, not wrong ones
    assert not graph_ligand_chemistry(xyz, None).any() and graph_ligand_chemistry(xyz, None).shape == rows.shape


def test_receptor_roles():
    cases = {  # (residue, element, atom name's position code) -> roles
        ("K", 7, "Z"): {"donor", "cation"}, ("R", 7, "H"): {"donor", "cation"}, ("D", 8, "D"): {"acceptor", "anion"},
        ("E", 8, "E"): {"acceptor", "anion"}, ("S", 8, "G"): {"acceptor", "donor"}, ("Y", 8, "H"): {"acceptor", "donor"},
        ("H", 7, "E"): {"acceptor", "donor"}, ("F", 6, "Z"): {"aromatic"}, ("F", 6, "B"): set(),
        ("A", 7, ""): {"donor"}, ("P", 7, ""): set(), ("G", 8, ""): {"acceptor"}, ("G", 8, "XT"): {"acceptor", "anion"},
        ("N", 7, "D"): {"donor"}, ("zn", 30, ""): set(), ("o", 8, ""): {"acceptor"},
    }
    keys = list(cases)
    roles = receptor_atom_roles([VOCAB.index(b) for b, _, _ in keys], [z for _, z, _ in keys],
                                [position_index(p) for _, _, p in keys])
    assert [{RECEPTOR_ROLES[k] for k in np.flatnonzero(row)} for row in roles] == [cases[k] for k in keys]


def test_hand_computed_role_terms():
    # ligand: a protonated amine N at the origin; receptor: an Asp carboxylate O at 2.9 Å, a Lys NZ at 5.5 Å
    chemistry = np.zeros((1, len(LIGAND_CHEMISTRY)))
    chemistry[0, [ROLE["donor"], ROLE["cation"]]] = 1
    roles = np.zeros((3, len(RECEPTOR_ROLES)), dtype=bool)
    roles[0, [RECEPTOR["acceptor"], RECEPTOR["anion"]]] = True
    roles[1, [RECEPTOR["donor"], RECEPTOR["cation"]]] = True
    receptor_xyz = np.array([[0.0, 2.9, 0], [5.5, 0, 0], [0, 0, 3.6]])
    row = chemistry_contact_features(roles, np.array([8, 7, 6]), receptor_xyz, chemistry, np.array([7]), np.zeros((1, 3)))[0]
    assert row[ROLE["cation"]] == 1 and row[ROLE["acceptor"]] == 0
    assert row[PAIR["hbond_donated"]] == pytest.approx((1.8 + 1.7 - 2.9) / 0.7)
    assert row[PAIR["hbond_accepted"]] == 0
    assert row[PAIR["salt_bridge"]] == 1.0  # 2.9 Å: a full salt bridge
    assert row[PAIR["like_charges"]] == pytest.approx((6.0 - 5.5) / 2.0)
    assert row[PAIR["polar_on_carbon"]] == pytest.approx(np.clip(1.5 - (3.6 - 1.8 - 1.9), 0, 1))
    assert row[PAIR["aromatic_contacts"]] == 0 and row[PAIR["metal"]] == 0


@pytest.fixture(scope="module")
def cdk2_graph():
    protein, mols = plb_target("cdk2", 1)
    graph = complex_from_files(protein, mols[0], pocket_cutoff=10.0)
    graph.X = graph.X.double()
    return graph, mols[0]


def test_real_complex_rows(cdk2_graph):
    graph, mol = cdk2_graph
    rows = graph_atom_contacts(graph, chemistry=True)
    base = len(ATOM_CONTACT_FEATURES)
    assert rows.shape == (mol.GetNumHeavyAtoms(), base + len(CHEMISTRY_CONTACT_FEATURES))
    np.testing.assert_array_equal(rows[:, :base], graph_atom_contacts(graph))
    expected, _ = ligand_atom_chemistry(mol)  # one atom per block: graph order is the molecule's heavy-atom order
    np.testing.assert_array_equal(rows[:, base:base + len(LIGAND_CHEMISTRY)], expected)
    assert rows[:, base + PAIR["hbond_donated"]].sum() > 0.5  # the hinge hydrogen bonds of a CDK2 inhibitor
    assert ligand_heavy_atoms(graph).sum() == len(rows)


def test_graph_without_roles_is_refused_by_name(cdk2_graph):
    graph, _ = cdk2_graph
    old = graph.clone()
    del old.ligand_chemistry
    with pytest.raises(ConfigError, match="no ligand_chemistry"):
        graph_atom_contacts(old, chemistry=True)
    assert not math.isnan(graph_atom_contacts(old).sum())  # the element-only rows need no roles
