"""Property tests: real files, corrupted at random, give a GeomolError or a valid graph -- nothing else."""
import gzip
import warnings

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from geomol.data import BlockGraph, complex_from_files, complex_from_pdb, read_ligands, read_structure
from geomol.errors import GeomolError
from tests.conftest import shared_path

SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def dna_pdb() -> bytes:
    return shared_path("nucleic", "dna_ligand", "1D30_complex_ref.pdb").read_bytes()


@pytest.fixture(scope="module")
def syk():
    """(receptor path, the first two SDF records of the target as bytes)."""
    sdf = shared_path("plb", "syk", "02_ligands", "ligands.sdf").read_text()
    two = "$$$$\n".join(sdf.split("$$$$\n")[:2]) + "$$$$\n"
    return shared_path("plb", "syk", "01_protein", "crd", "protein.pdb"), two.encode()


def _assert_valid(graph: BlockGraph) -> None:
    assert torch.isfinite(graph.X).all()
    assert torch.equal(torch.bincount(graph.block_id, minlength=graph.num_blocks), graph.block_len)
    assert torch.all(graph.block_len > 0) and torch.all(graph.block_id[1:] >= graph.block_id[:-1])
    assert graph.segment.tolist() == sorted(graph.segment.tolist()) and set(graph.segment.tolist()) == {0, 1}


def _outcome(build, check=_assert_valid) -> None:
    """Run ``build``: a GeomolError is a fine answer, anything else it returns must pass ``check``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            result = build()
        except GeomolError:
            return
    check(result)


def _pdb_complex(tmp_path, data: bytes, name="complex.pdb"):
    path = tmp_path / name
    path.write_bytes(data)
    return lambda: complex_from_pdb(path, ligand_resname="UNK")


def _delete_columns(data: bytes, start: int, width: int) -> bytes:
    return b"\n".join(line[:start] + line[start + width:] for line in data.split(b"\n"))


@SETTINGS
@given(cut=st.floats(0, 1))
def test_truncated_pdb(tmp_path, dna_pdb, cut):
    _outcome(_pdb_complex(tmp_path, dna_pdb[: int(cut * len(dna_pdb))]))


@SETTINGS
@given(start=st.integers(0, 80), width=st.integers(1, 12))
def test_pdb_with_deleted_columns(tmp_path, dna_pdb, start, width):
    _outcome(_pdb_complex(tmp_path, _delete_columns(dna_pdb, start, width)))


@SETTINGS
@given(where=st.floats(0, 1), garbage=st.binary(min_size=1, max_size=24))
def test_pdb_with_garbage_bytes(tmp_path, dna_pdb, where, garbage):
    at = int(where * len(dna_pdb))
    _outcome(_pdb_complex(tmp_path, dna_pdb[:at] + garbage + dna_pdb[at:]))


@SETTINGS
@given(cut=st.floats(0, 1))
def test_truncated_gzip_pdb(tmp_path, dna_pdb, cut):
    packed = gzip.compress(dna_pdb)
    _outcome(_pdb_complex(tmp_path, packed[: int(cut * len(packed))], name="complex.pdb.gz"))


def _sdf_complex(tmp_path, receptor, data: bytes, which=0):
    path = tmp_path / "ligands.sdf"
    path.write_bytes(data)
    return lambda: complex_from_files(receptor, path, ligand_index=which)


@SETTINGS
@given(counts=st.text(alphabet=" 0123456789-xV.", max_size=45), which=st.integers(0, 1))
def test_sdf_with_corrupt_counts_line(tmp_path, syk, counts, which):
    receptor, sdf = syk
    lines = sdf.split(b"\n")
    lines[3] = counts.encode()
    _outcome(_sdf_complex(tmp_path, receptor, b"\n".join(lines), which))


@SETTINGS
@given(cut=st.floats(0, 1), where=st.floats(0, 1), garbage=st.binary(max_size=16))
def test_sdf_truncated_or_with_garbage(tmp_path, syk, cut, where, garbage):
    receptor, sdf = syk
    at = int(where * len(sdf))
    corrupted = (sdf[:at] + garbage + sdf[at:])[: max(1, int(cut * (len(sdf) + len(garbage))))]
    _outcome(_sdf_complex(tmp_path, receptor, corrupted))


@SETTINGS
@given(start=st.integers(0, 70), width=st.integers(1, 10))
def test_mol2_with_deleted_columns(tmp_path, start, width):
    from MDAnalysisTests.datafiles import mol2_molecules

    text = open(mol2_molecules, "rb").read()
    first = text[: text.index(b"@<TRIPOS>MOLECULE", 10)]
    path = tmp_path / "ligand.mol2"
    path.write_bytes(_delete_columns(first, start, width))
    _outcome(lambda: read_ligands(path), _assert_valid_molecules)


def _assert_valid_molecules(mols) -> None:
    assert mols and all(np.isfinite(m.GetConformer().GetPositions()).all() for m in mols)


@SETTINGS
@given(where=st.floats(0, 1), garbage=st.binary(min_size=1, max_size=24))
def test_mmcif_with_garbage_bytes(tmp_path, where, garbage):
    from MDAnalysisTests.datafiles import MMCIF

    data = open(f"{MMCIF}/1YJP.cif", "rb").read()
    at = int(where * len(data))
    path = tmp_path / "small.cif"
    path.write_bytes(data[:at] + garbage + data[at:])
    _outcome(lambda: read_structure(path), _assert_valid_structure)


def _assert_valid_structure(structure) -> None:
    assert structure.num_atoms > 0 and np.isfinite(structure.coords).all()
    assert structure.residue_start[-1] == structure.num_atoms == len(structure.elements)
