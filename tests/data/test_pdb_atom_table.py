"""The column-wise sifting of PDB coordinate records gives what the line-by-line loop gives, errors included."""
from __future__ import annotations

import random

import pytest

from geomol.data.io import pdb
from geomol.data.io._source import read_text
from tests.conftest import shared_path


def _outcome(text, keep_hydrogens, sift):
    try:
        return sift(text, "t.pdb", 0, keep_hydrogens)
    except Exception as exc:  # noqa: BLE001 - the error is part of what must be the same
        return type(exc).__name__, str(exc)


@pytest.mark.parametrize("parts", [("plb", "cdk2", "01_protein", "crd", "protein.pdb"),
                                   ("fep_benchmark", "charge_annhil", "dlk_protein.pdb")])
@pytest.mark.parametrize("keep_hydrogens", [False, True])
def test_real_receptors(parts, keep_hydrogens):
    text = read_text(shared_path(*parts))
    assert pdb.single_model_atom_table(text) is not None
    assert (pdb._coordinate_records(text, "t.pdb", 0, keep_hydrogens)
            == pdb._coordinate_records_by_line(text, "t.pdb", 0, keep_hydrogens))


_ODD_LINES = [
    "HETATM 9999  O   HOH W   1      1.000   2.000   3.000  1.00  0.00           O",
    "HETATM 9998  O   WAT W   2      1.000   2.000   3.000  1.00  0.00           Q",  # a water of no element
    "HETATM 1234  CA  TIP3W  10      1.000   2.000   3.000  1.00  0.00           O",
    "ATOM", "ATOM  ", "HETAT", "REMARK ATOM", "TER", "END", "", "  ",
    "HETATM    1 POT  POT I   1      0.000   0.000   0.000  1.00  0.00",  # blank element, force-field ion
    "ATOM   1234  HD21ASN A  10      1.000   2.000   3.000  1.00  0.00            ",  # blank element, hydrogen
    "HETATM    1  X   UNX X   1      0.000   0.000   0.000  1.00  0.00           X",  # marked unknown
    "ATOM   1234  CA  ALA A  10      1.000   2.000   3.000  1.00  0.00          Zz",  # not an element
    "ATOM   1234 DCA  ALA A  10      1.000   2.000   3.000  1.00  0.00           D",  # deuterium
    "ATOM   1234  CA  ALA A  10      1.000   2.000   3.000  1.00  0.00          \xa0C",
    "ATOM   1234  CA  ALA A  10      1.000   2.000   3.000  1.00  0.00           C\x00",
]
_ELEMENTS = ["C", "N", "H", "D", "X", "", " ", "Q", "ZN", "Cl", "cl", "XX", "1", "h"]


def _mutated(lines: list[str], rng: random.Random) -> str:
    """A few of ``lines`` with odd lines, changed element columns, cut lines and ends."""
    picked = rng.sample(lines, rng.randint(0, 30))
    for _ in range(rng.randint(0, 6)):
        picked.insert(rng.randint(0, len(picked)), rng.choice(_ODD_LINES))
    for _ in range(rng.randint(0, 4)):
        if picked:
            k = rng.randrange(len(picked))
            line, element = picked[k], rng.choice(_ELEMENTS)
            picked[k] = rng.choice([f"{line[:76]:<76}{element:>2}{line[78:]}", line[:rng.randint(0, 80)], line[:76] + element])
    text = "\n".join(picked) + rng.choice(["\n", "", "\n\n", "\nEND\n"])
    if rng.random() < 0.2:
        text = text[:rng.randint(0, len(text))]  # truncated
    if rng.random() < 0.05:
        text = text.replace("\n", "\r\n")  # read line by line by both
    return text


def test_mutated_records_sift_the_same():
    lines = read_text(shared_path("plb", "cdk2", "01_protein", "crd", "protein.pdb")).splitlines()[:400]
    rng = random.Random(0)
    for _ in range(1500):
        text = _mutated(lines, rng)
        for keep_hydrogens in (False, True):
            assert (_outcome(text, keep_hydrogens, pdb._coordinate_records)
                    == _outcome(text, keep_hydrogens, pdb._coordinate_records_by_line)), repr(text)


def test_models_and_other_line_ends_are_read_line_by_line():
    atom = "ATOM      1  CA  ALA A   1       0.000   0.000   0.000  1.00  0.00           C"
    assert pdb.single_model_atom_table(f"MODEL        1\n{atom}\nENDMDL\n") is None
    assert pdb.single_model_atom_table(f"{atom}\r\n") is None
    assert pdb.single_model_atom_table(f"{atom}\n").num_atoms == 1
