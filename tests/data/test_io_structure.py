"""PDB / mmCIF reading: altlocs, insertion codes, waters, hydrogens, modified and unknown residues."""
import bz2
import gzip
import warnings

import numpy as np
import pytest

from geomol.data import StructureWarning, read_structure
from geomol.data.io import detect_format
from geomol.errors import StructureReadError, UnknownElementError
from tests.conftest import shared_path
from tests.data.pdb_text import atom_line, residue_lines

ALA = [("N", "N", (0, 0, 0)), ("CA", "C", (1.5, 0, 0)), ("C", "C", (2, 1.4, 0)), ("O", "O", (1.4, 2.4, 0)),
       ("CB", "C", (2, -0.8, 1.2)), ("H", "H", (-0.5, -0.8, 0)), ("HA", "H", (1.8, -0.5, -0.9))]


def _write(tmp_path, lines, name="small.pdb"):
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\nEND\n")
    return path


@pytest.fixture
def small_pdb(tmp_path):
    """A protein fragment that exercises every reader rule once."""
    lines = residue_lines(1, "ALA", "A", 1, ALA)
    lines += residue_lines(10, "SER", "A", 2, [("N", "N", (3, 2, 0)), ("CA", "C", (4, 2, 0)), ("C", "C", (5, 2, 0)),
                                              ("O", "O", (6, 2, 0)), ("CB", "C", (4, 3, 0))])
    lines += [atom_line(15, "OG", "SER", "A", 2, (4, 4, 0), "O", altloc="A", occupancy=0.4),
              atom_line(16, "OG", "SER", "A", 2, (9, 9, 9), "O", altloc="B", occupancy=0.6)]
    lines += residue_lines(20, "GLY", "A", 2, [("N", "N", (7, 2, 0)), ("CA", "C", (8, 2, 0))], icode="A")
    lines += residue_lines(30, "MSE", "A", 3, [("N", "N", (9, 2, 0)), ("CA", "C", (10, 2, 0)), ("SE", "SE", (11, 3, 0))])
    lines += residue_lines(40, "DA", "B", 1, [("P", "P", (0, 5, 0)), ("C1'", "C", (1, 5, 0)), ("N9", "N", (2, 5, 0))])
    lines += residue_lines(50, "HOH", "A", 100, [("O", "O", (3, 5, 5))], record="HETATM")
    lines += residue_lines(51, "ZN", "A", 101, [("ZN", "ZN", (4, 5, 5))], record="HETATM")
    lines += residue_lines(52, "ACE", "A", 0, [("CH3", "C", (-2, 0, 0)), ("C", "C", (-1, 0, 0))], record="HETATM")
    return _write(tmp_path, lines)


def test_blocks_follow_reader_rules(small_pdb):
    structure = read_structure(small_pdb)
    blocks = structure.blocks()
    assert [b.label for b in blocks] == ["A:1:ALA", "A:2:SER", "A:2A:GLY", "A:3:MSE", "A:101:ZN:ZN", "A:0:ACE:CH3",
                                         "A:0:ACE:C", "B:1:DA"]
    assert [b.symbol for b in blocks] == ["A", "S", "G", "M", "zn", "c", "c", "DA"]
    ala, ser, _, mse, zn, *_ = blocks
    assert ala.elements == ("N", "C", "C", "O", "C")  # hydrogens dropped by default
    assert ala.positions == ("", "A", "", "", "B")
    np.testing.assert_allclose(ser.coords[-1], [9, 9, 9])  # altloc B has the higher occupancy
    assert mse.elements[-1] == "Se" and zn.elements == ("Zn",) and zn.positions == ("",)
    assert blocks[-1].positions == ("", "'", "")
    assert "HOH" not in {r for r in structure.resnames}


def test_hydrogens_kept_on_request(small_pdb):
    with_h = read_structure(small_pdb, keep_hydrogens=True)
    assert with_h.blocks()[0].elements == ("N", "C", "C", "O", "C", "H", "H")
    assert with_h.blocks()[0].positions[-2:] == ("", "A")
    assert with_h.num_atoms == read_structure(small_pdb).num_atoms + 2
    assert with_h.blocks(keep_hydrogens=False)[0].elements == ("N", "C", "C", "O", "C")


def test_altloc_tie_takes_first_listed(tmp_path):
    lines = [atom_line(1, "CA", "GLY", "A", 1, (0, 0, 0), "C", altloc="A", occupancy=0.5),
             atom_line(2, "CA", "GLY", "A", 1, (5, 5, 5), "C", altloc="B", occupancy=0.5)]
    np.testing.assert_allclose(read_structure(_write(tmp_path, lines)).coords, [[0, 0, 0]])


@pytest.mark.parametrize("occupancies,expected", [((0.3, 0.7), "CYS"), ((0.7, 0.3), "SER")])
def test_point_mutation_takes_higher_occupancy(tmp_path, occupancies, expected):
    lines = [atom_line(1, "CA", "SER", "A", 1, (0, 0, 0), "C", altloc="A", occupancy=occupancies[0]),
             atom_line(2, "CA", "CYS", "A", 1, (5, 5, 5), "C", altloc="B", occupancy=occupancies[1])]
    with pytest.warns(StructureWarning, match="redefined"):  # Biopython's notice, counted once
        structure = read_structure(_write(tmp_path, lines))
    assert structure.resnames == [expected]


def test_first_model_only_and_model_choice(tmp_path):
    one = residue_lines(1, "GLY", "A", 1, [("CA", "C", (0, 0, 0))])
    two = residue_lines(1, "GLY", "A", 1, [("CA", "C", (7, 7, 7))])
    path = _write(tmp_path, ["MODEL        1", *one, "ENDMDL", "MODEL        2", *two, "ENDMDL"])
    np.testing.assert_allclose(read_structure(path).coords, [[0, 0, 0]])
    np.testing.assert_allclose(read_structure(path, model=1).coords, [[7, 7, 7]])
    with pytest.raises(StructureReadError, match="model 2"):
        read_structure(path, model=2)


def test_element_inferred_when_column_blank(tmp_path):
    lines = residue_lines(1, "ALA", "A", 1, [("CA", "", (0, 0, 0)), ("HB1", "", (1, 0, 0)), ("2HB", "", (2, 0, 0))])
    lines += residue_lines(4, "POT", "I", 1, [("POT", "", (5, 5, 5))], record="HETATM")
    lines += residue_lines(5, "FE", "I", 2, [("FE  ", "", (6, 6, 6))], record="HETATM")
    structure = read_structure(_write(tmp_path, lines), keep_hydrogens=True)
    assert structure.elements == ["C", "H", "H", "K", "Fe"]


def test_non_element_raises_with_line(tmp_path):
    lines = residue_lines(1, "ALA", "A", 1, [("CA", "C", (0, 0, 0)), ("CB", "QQ", (1, 0, 0))])
    with pytest.raises(UnknownElementError, match=r"line 2.*'QQ'"):
        read_structure(_write(tmp_path, lines))


def test_non_element_type_symbol_in_mmcif(tmp_path):
    from MDAnalysisTests.datafiles import MMCIF

    text = open(f"{MMCIF}/1YJP.cif").read()
    assert "ATOM   2  C CA " in text
    path = tmp_path / "bad.cif"
    path.write_text(text.replace("ATOM   2  C CA ", "ATOM   2  QQ CA "))
    with pytest.raises(UnknownElementError, match=r"bad.cif: element 'QQ' of atom 'CA'"):
        read_structure(path)


def test_unknown_element_x_is_kept_and_counted(tmp_path):
    lines = residue_lines(1, "ALA", "A", 1, [("CA", "C", (0, 0, 0))])
    lines += residue_lines(2, "UNX", "A", 2, [("UNK", "X", (1, 1, 1))], record="HETATM")
    with pytest.warns(StructureWarning, match="1 × atoms of unknown element"):
        structure = read_structure(_write(tmp_path, lines))
    assert structure.elements == ["C", "X"] and structure.blocks()[-1].symbol == "x"


def test_compressed_copies_read_the_same(tmp_path):
    source = shared_path("plb", "ptp1b", "01_protein", "crd", "protein.pdb")
    plain = read_structure(source)
    for name, compress in (("protein.pdb.gz", gzip.compress), ("protein.pdb.bz2", bz2.compress),
                           ("receptor_without_suffix", gzip.compress)):
        copy = tmp_path / name
        copy.write_bytes(compress(source.read_bytes()))
        packed = read_structure(copy)
        assert plain.resnames == packed.resnames and plain.names == packed.names
        np.testing.assert_array_equal(plain.coords, packed.coords)
    assert detect_format(tmp_path / "receptor_without_suffix") == "pdb"


@pytest.mark.parametrize("code", ["1BD2", "3PWP"])
def test_mmcif_and_pdb_give_the_same_blocks(code):
    from MDAnalysisTests.datafiles import MMCIF

    pdb, cif = (read_structure(f"{MMCIF}/{code}.{ext}.gz") for ext in ("pdb", "cif"))
    pdb_blocks, cif_blocks = pdb.blocks(), cif.blocks()
    assert len(pdb_blocks) == len(cif_blocks) > 100
    for a, b in zip(pdb_blocks, cif_blocks):
        assert (a.symbol, a.label, a.elements, a.positions, a.atom_names) == \
               (b.symbol, b.label, b.elements, b.positions, b.atom_names)
        np.testing.assert_allclose(a.coords, b.coords, atol=1e-3)


@pytest.mark.parametrize("name", ["1YJP.cif", "1YJP_invalid.cif.gz", "5PTI.cif.gz", "7ETN.cif.gz", "custom.cif.gz",
                                  "multimodel_warning.cif.gz"])
def test_mmcif_samples(name):
    from MDAnalysisTests.datafiles import MMCIF

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        structure = read_structure(f"{MMCIF}/{name}")
    assert structure.num_atoms > 0 and len(structure.blocks()) > 0
    unknown = structure.elements.count("X")
    assert unknown == sum("unknown element" in str(w.message) for w in caught)  # each one counted, once


def test_rna_with_magnesium_and_free_base():
    structure = read_structure(shared_path("nucleic", "rna", "rna_with_mg.pdb"))
    symbols = [b.symbol for b in structure.blocks()]
    assert {"RA", "RC", "RG", "RU"} <= set(symbols)
    assert symbols.count("mg") == 5
    adenine = [b for b in structure.blocks() if ":ADE:" in b.label]  # free base: one block per atom
    assert len(adenine) == 10 and all(len(b) == 1 for b in adenine)


def test_charmm_rna_from_mdanalysis():
    from MDAnalysisTests.datafiles import RNA_PDB

    with warnings.catch_warnings():
        warnings.simplefilter("error", StructureWarning)  # hydrogens and ions are recognised, nothing to report
        structure = read_structure(RNA_PDB)
    symbols = [b.symbol for b in structure.blocks()]
    assert set(symbols) == {"RA", "RC", "RG", "RU", "k"}
    assert "X" not in structure.elements and "H" not in structure.elements
    assert structure.num_atoms == read_structure(RNA_PDB, keep_hydrogens=True).num_atoms - 252


def test_modified_residue_from_1hvr():
    from MDAnalysisTests.datafiles import CONECT

    structure = read_structure(CONECT)
    cso = [b for b in structure.blocks() if ":CSO" in b.label]
    assert cso and all(b.symbol == "C" for b in cso)
    assert len([b for b in structure.blocks() if ":XK2:" in b.label]) == 46
