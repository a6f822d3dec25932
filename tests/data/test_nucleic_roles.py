"""Nucleotide atoms recovered from geometry (base templates), their roles, the nucleic contact columns and the
receptor kind of a pocket."""
from __future__ import annotations

import numpy as np
import pytest
from e3nn import o3

from geomol.data.chemistry.contact_features import graph_atom_contacts
from geomol.data.chemistry.contact_recipe import ContactRecipe
from geomol.data.chemistry.nucleic_contacts import NUCLEIC_CONTACT_FEATURES
from geomol.data.chemistry.nucleic_roles import NUCLEIC_ATOM_ROLES, base_atom_names, nucleic_atom_roles
from geomol.data.chemistry.receptor_kind import graph_receptor_kind, kind_of_counts, structure_receptor_kind
from geomol.data.complexes.build import complex_from_files
from geomol.data.io import read_structure
from geomol.data.vocab import atomic_number
from geomol.errors import ConfigError
from tests.conftest import REPO, shared_path

NUCLEOTIDES = {"DA", "DG", "DC", "DT", "RA", "RG", "RC", "RU"}


def _complex(pdb_id: str):
    folder = shared_path("nucleic_affinity", pdb_id)
    return complex_from_files(folder / "receptor.pdb", folder / "ligand.sdf")


@pytest.mark.parametrize("pdb_id", ["1Y27", "1QMS"])  # an RNA riboswitch, a DNA duplex
def test_base_atoms_are_named_as_in_the_file(pdb_id):
    structure = read_structure(shared_path("nucleic_affinity", pdb_id, "receptor.pdb"))
    matched = 0
    for block in structure.blocks(list(range(structure.num_blocks))):
        if block.symbol not in NUCLEOTIDES:
            continue
        z = np.array([atomic_number(e) for e in block.elements])
        names = base_atom_names(block.symbol[1], z, block.coords)
        assert names, f"{block.label}: the base template did not fit"
        for row, name in names.items():
            assert block.atom_names[row].strip().replace("*", "'") == name, block.label
        matched += 1
    assert matched >= 10


def test_a_base_that_lost_atoms_keeps_element_roles():
    structure = read_structure(shared_path("nucleic_affinity", "1Y27", "receptor.pdb"))
    block = next(b for b in structure.blocks(list(range(structure.num_blocks))) if b.symbol == "RG")
    z = np.array([atomic_number(e) for e in block.elements])
    keep = np.array([name.strip() != "N7" for name in block.atom_names])
    assert base_atom_names("G", z[keep], block.coords[keep]) == {}
    assert base_atom_names("A", z, block.coords) == {}  # a guanine is no adenine


def test_roles_of_a_guanine():
    graph = _complex("1Y27")
    receptor = (graph.segment[graph.block_id] == 0).numpy() & (graph.A.numpy() > 3)
    z = graph.A.numpy()[receptor] - 2
    nucleotide, roles, normals = nucleic_atom_roles(graph.B[graph.block_id].numpy()[receptor],
                                                    graph.block_id.numpy()[receptor], z,
                                                    graph.atom_pos.numpy()[receptor], graph.X.double().numpy()[receptor])
    assert nucleotide.all()
    nucleic = {name: roles[:, 5 + k] for k, name in enumerate(NUCLEIC_ATOM_ROLES)}
    assert nucleic["phosphate"].sum() > 0 and (z[nucleic["phosphate"]] == 8).all()
    assert nucleic["ribose_2oh"].sum() >= 0.8 * len(np.unique(graph.block_id.numpy()[receptor]))  # one per RNA residue
    ring = nucleic["base_ring"]
    assert np.allclose(np.linalg.norm(normals[ring], axis=1), 1.0) and np.all(normals[~ring] == 0)
    assert (roles[nucleic["phosphate"], 3]).all()  # anion
    assert not roles[nucleic["ribose_2oh"] & ~roles[:, 0]].any()  # every 2'-OH donates


def _nucleic_sums(graph) -> dict[str, float]:
    raw = graph_atom_contacts(graph, chemistry=True, nucleic=True)[:, -len(NUCLEIC_CONTACT_FEATURES):]
    assert (raw >= 0).all()
    return dict(zip(NUCLEIC_CONTACT_FEATURES, raw.sum(0)))


def test_nucleic_columns_are_invariant_and_respond_to_contacts():
    graph = _complex("1QMS")  # a minor-groove binder: backbone and sugar-edge contacts, no stacking
    recipe = ContactRecipe(roles=True, nucleic=True)
    rows = recipe.views(graph)[0]
    assert rows.shape[1] == recipe.width == ContactRecipe(roles=True).width + len(NUCLEIC_CONTACT_FEATURES)
    groove, stacked = _nucleic_sums(graph), _nucleic_sums(_complex("454D"))  # 454D: an intercalated drug
    assert groove["backbone_contacts"] > groove["base_contacts"] and groove["sugar_edge_hbond"] > 0
    assert groove["base_stacking"] < 1 < 10 < stacked["base_stacking"]
    with_ion = _complex("7EOI")  # 7EOI keeps a Mn2+ by the ligand: the pocket holds it as a single-atom block
    assert 25 + 2 in with_ion.A[with_ion.segment[with_ion.block_id] == 0].tolist()
    assert _nucleic_sums(with_ion)["metal_near"] > 0 == groove["metal_near"]
    rotation = o3.rand_matrix(dtype=graph.X.dtype) @ np.diag([1.0, 1.0, -1.0]).astype(np.float32)
    moved = graph.clone()
    moved.X = graph.X @ rotation.T + 3.0
    assert np.allclose(graph_atom_contacts(moved, chemistry=True, nucleic=True), graph_atom_contacts(
        graph, chemistry=True, nucleic=True), atol=1e-3)
    with pytest.raises(ConfigError, match="nucleic needs roles"):
        ContactRecipe(nucleic=True)


def test_receptor_kinds():
    assert kind_of_counts(100, 0, 0) == "protein" and kind_of_counts(0, 3, 20) == "RNA"
    assert kind_of_counts(0, 12, 0) == "DNA" and kind_of_counts(30, 0, 10) == "mixed"
    assert kind_of_counts(100, 0, 2) == "protein" and kind_of_counts(0, 0, 0) == "other"
    assert graph_receptor_kind(_complex("1Y27")) == "RNA" and graph_receptor_kind(_complex("1QMS")) == "DNA"
    protein = read_structure(REPO / "data" / "example" / "tnks2_protein.pdb")
    assert structure_receptor_kind(protein) == "protein"
