"""TRIPOS MOL2 receptors through ``read_structure``: real DDG/BindingDB receptors and small hand-written files."""
from __future__ import annotations

import gzip
import warnings

import numpy as np
import pytest

from geomol.data import complex_from_structure, read_ligand, read_structure
from geomol.data.io import StructureWarning, read_text
from geomol.data.io.mol2 import sybyl_element
from geomol.errors import StructureReadError, UnknownElementError
from tests.conftest import shared_path

SAMPLE = 12  # receptors, evenly spaced in sorted order (benchmarks/mol2_receptors.py checks all 669)


def ddg_sample() -> list:
    folder = shared_path("ddg_bindingdb")
    ids = sorted(p.name for p in folder.iterdir() if (p / "receptor.mol2.gz").exists())
    return [folder / ids[i * len(ids) // SAMPLE] / "receptor.mol2.gz" for i in range(SAMPLE)]


def section_lines(text: str, name: str) -> list[list[str]]:
    """Split lines of one ``@<TRIPOS>`` section of the first molecule (counted without the reader)."""
    lines = text.split(f"@<TRIPOS>{name}\n", 1)[1].split("@<TRIPOS>", 1)[0].splitlines()
    return [line.split() for line in lines if line.strip()]


def test_ddg_receptors_keep_every_atom_and_residue_of_the_file():
    for path in ddg_sample():
        text = read_text(path)
        atoms = section_lines(text, "ATOM")
        with warnings.catch_warnings():  # lost insertion codes are reported (3N3M); checked by the counts below
            warnings.simplefilter("ignore", StructureWarning)
            with_h = read_structure(path, keep_hydrogens=True)
        assert with_h.num_atoms == len(atoms), path
        assert int(with_h.is_heavy.sum()) == sum(a[5] != "H" for a in atoms), path
        assert with_h.num_residues == len({(a[6], a[7]) for a in atoms}), path
        assert {c for c in with_h.chains} == {s[5] for s in section_lines(text, "SUBSTRUCTURE")}, path
        assert "X" not in with_h.elements
        np.testing.assert_allclose(with_h.coords[0], [float(x) for x in atoms[0][2:5]])


def test_residue_names_chains_and_blocks_of_a_ddg_receptor():
    path = shared_path("ddg_bindingdb", "11GS", "receptor.mol2.gz")
    structure = read_structure(path)
    assert structure.residue_label(0) == "A:2:PRO"
    assert structure.residue_label(structure.num_residues - 1) == "B:209:GLN"
    assert structure.num_residues == 416 and sorted(set(structure.chains)) == ["A", "B"]
    first = structure.blocks([0])[0]
    assert first.symbol == "P" and first.atom_names[:2] == ("N", "CA") and first.positions[:2] == ("", "A")
    ligand = read_ligand(path.with_name("ligands.mol2.gz"), 0)
    graph = complex_from_structure(structure, ligand, pocket_cutoff=10.0)
    assert 10 < int((graph.segment == 0).sum()) < 100 and int((graph.segment == 1).sum()) > 10


def test_a_small_molecule_mol2_is_not_taken_for_a_protein():
    with pytest.raises(StructureReadError, match="no amino-acid or nucleotide residue"):
        read_structure(shared_path("ddg_bindingdb", "11GS", "ligands.mol2.gz"))


TINY = """@<TRIPOS>MOLECULE
tiny
 9 0 4
PROTEIN
NO_CHARGES

@<TRIPOS>ATOM
 1 N   0.000 0.000 0.000 N.am 1 ALA12
 2 CA  1.450 0.000 0.000 C.3  1 ALA12
 3 C   2.000 1.400 0.000 C.2  1 ALA12
 4 HA  1.800 -0.500 0.900 H  1 ALA12
 5 LP1 0.500 0.500 0.500 LP 1 ALA12
 6 N   3.300 1.500 0.000 N.am 2 GLY13A
 7 CA  4.000 2.700 0.000 C.3 2 GLY13A
 8 O   9.000 9.000 9.000 O.3 3 HOH301
 9 ZN  6.000 6.000 6.000 Zn 4 ZN
@<TRIPOS>SUBSTRUCTURE
 1 ALA12 1 RESIDUE 1 B ALA 1 ROOT
 2 GLY13A 6 RESIDUE 1 B GLY 1
 3 HOH301 8 GROUP 1 B HOH
 4 ZN 9 GROUP 1 B ZN
"""


def test_hand_written_mol2_residues_lone_pairs_waters_and_gzip(tmp_path):
    path = tmp_path / "tiny.mol2.gz"
    path.write_bytes(gzip.compress(TINY.encode()))
    with pytest.warns(StructureWarning, match="1 × lone pairs or dummy atoms"):
        structure = read_structure(path, keep_hydrogens=True)
    assert [structure.residue_label(r) for r in range(structure.num_residues)] == ["B:12:ALA", "B:13A:GLY", "B:4:ZN"]
    assert structure.names == ["N", "CA", "C", "HA", "N", "CA", "ZN"]
    assert structure.elements == ["N", "C", "C", "H", "N", "C", "Zn"]
    with pytest.warns(StructureWarning):
        assert "H" not in read_structure(path).elements


def test_unknown_atom_types_are_named(tmp_path):
    path = tmp_path / "bad.mol2"
    path.write_text(TINY.replace("C.2  1 ALA12", "Any  1 ALA12"))
    with pytest.raises(UnknownElementError, match="atom type 'Any' of atom 'C'"):
        read_structure(path)


@pytest.mark.parametrize("atom_type, element", [("C.ar", "C"), ("N.pl3", "N"), ("O.co2", "O"), ("CL", "Cl"),
                                                ("Du.C", "C"), ("H.spc", "H"), ("Co.oh", "Co"), ("LP", None),
                                                ("Du", None), ("Hal", None)])
def test_sybyl_types_to_elements(atom_type, element):
    assert sybyl_element(atom_type) == element
