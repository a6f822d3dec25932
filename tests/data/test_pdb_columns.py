"""The fixed-column PDB reader gives exactly what the Biopython path gives, or declines."""
from __future__ import annotations

import warnings

import numpy as np
import pytest

from geomol.data import read_structure
from geomol.data.io import pdb
from geomol.data.io._source import read_text
from geomol.data.io.pdb_columns import read_clean_records
from tests.conftest import shared_path
from tests.data.pdb_text import atom_line, residue_lines

FIELDS = ("elements", "names", "chains", "numbers", "icodes", "resnames")


def both_paths(path, keep_hydrogens=False):
    """(fixed-column structure or None, Biopython structure) of one file's first model."""
    text = read_text(path)
    records = pdb._coordinate_records(text, path, 0, keep_hydrogens)
    fast = read_clean_records(records[0], path, pdb._CANONICAL, keep_hydrogens)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        slow = pdb._read_with_biopython(text, path, 0, keep_hydrogens, records)
    return fast, slow


def assert_same(fast, slow):
    assert fast is not None
    assert fast.coords.dtype == slow.coords.dtype and np.array_equal(fast.coords, slow.coords)
    assert np.array_equal(fast.residue_start, slow.residue_start)
    for field in FIELDS:
        assert getattr(fast, field) == getattr(slow, field), field


@pytest.mark.parametrize("parts, keep_hydrogens", [
    (("plb", "cdk2", "01_protein", "crd", "protein.pdb"), False),
    (("plb", "cdk2", "01_protein", "crd", "protein.pdb"), True),
    (("fep_benchmark", "charge_annhil", "dlk_protein.pdb"), False),  # alternative locations
    (("fep_benchmark", "jacs_set", "bace_protein.pdb"), False),
    (("uni_fep", "ChEMBL__PNP__CHEMBL951777", "protein.pdb.gz"), False),
])
def test_real_receptors_read_the_same_as_with_biopython(parts, keep_hydrogens):
    assert_same(*both_paths(shared_path(*parts), keep_hydrogens))


def write(tmp_path, lines):
    path = tmp_path / "t.pdb"
    path.write_text("\n".join(lines) + "\nEND\n")
    return path


def test_a_chain_that_comes_back_keeps_its_residues_together(tmp_path):
    lines = (residue_lines(1, "ALA", "A", 1, [("N", "N", (0, 0, 0)), ("CA", "C", (1.4, 0, 0))])
             + residue_lines(3, "GLY", "B", 1, [("N", "N", (0, 3, 0)), ("CA", "C", (1.4, 3, 0))])
             + [atom_line(5, "ZN", "ZN", "A", 1, (5, 5, 5), "ZN", record="HETATM")])  # same number, HETATM
    fast, slow = both_paths(write(tmp_path, lines))
    assert_same(fast, slow)
    assert fast.chains == ["A", "A", "B"] and fast.resnames == ["ALA", "ZN", "GLY"]


def test_alternative_locations_take_the_highest_occupancy_then_the_first(tmp_path):
    lines = [atom_line(1, "N", "SER", "A", 1, (0, 0, 0), "N"),
             atom_line(2, "OG", "SER", "A", 1, (1, 0, 0), "O", altloc="A", occupancy=0.4),
             atom_line(3, "OG", "SER", "A", 1, (2, 0, 0), "O", altloc="B", occupancy=0.6),
             atom_line(4, "CB", "SER", "A", 1, (3, 0, 0), "C", altloc="A", occupancy=0.5),
             atom_line(5, "CB", "SER", "A", 1, (4, 0, 0), "C", altloc="B", occupancy=0.5)]
    fast, slow = both_paths(write(tmp_path, lines))
    assert_same(fast, slow)
    assert fast.names == ["N", "OG", "CB"] and fast.coords[:, 0].tolist() == [0.0, 2.0, 3.0]


@pytest.mark.parametrize("case", ["blank element", "point mutation", "atom twice", "altloc after blank"])
def test_records_that_are_not_clean_are_left_to_biopython(tmp_path, case):
    base = residue_lines(1, "ALA", "A", 1, [("N", "N", (0, 0, 0)), ("CA", "C", (1.4, 0, 0))])
    extra = {
        "blank element": [atom_line(3, "CB", "ALA", "A", 1, (2, 1, 0), "")],
        "point mutation": [atom_line(3, "N", "GLY", "A", 1, (0, 0, 1), "N")],
        "atom twice": [atom_line(3, "CA", "ALA", "A", 1, (2, 1, 0), "C")],
        "altloc after blank": [atom_line(3, "CA", "ALA", "A", 1, (2, 1, 0), "C", altloc="B")],
    }[case]
    path = write(tmp_path, base + extra)
    fast, _ = both_paths(path)
    assert fast is None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert read_structure(path).num_atoms >= 2  # read, by Biopython's rules
