"""Shared inputs of the screen tests: the JNK1 series of the FEP+ benchmark, analogue libraries, one 2-worker cluster."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

pytest.importorskip("distributed")
pytest.importorskip("pyarrow")

from rdkit import Chem  # noqa: E402

from geomol.data.posing.poses import PoseParameters  # noqa: E402
from geomol.screen.settings import ScreenSettings  # noqa: E402
from tests.conftest import shared_path  # noqa: E402

FAST = ScreenSettings(pose=PoseParameters(conformers=1), shard_size=25, top=20)
"""One conformer per ligand and small shards: the tests check bookkeeping, not pose quality."""


@dataclass(frozen=True)
class Series:
    receptor: Path
    reference: Path
    parents: tuple[str, ...]


@pytest.fixture(scope="session")
def jnk1(tmp_path_factory) -> Series:
    """JNK1 receptor, its first ligand as the reference pose, and five ligands' SMILES as parents."""
    folder = shared_path("fep_benchmark", "jacs_set")
    ligands = [m for m in Chem.SDMolSupplier(str(folder / "jnk1_manual_flips_ligands.sdf"), removeHs=False) if m]
    reference = tmp_path_factory.mktemp("jnk1") / "reference.sdf"
    Chem.MolToMolFile(ligands[0], str(reference))
    parents = tuple(Chem.MolToSmiles(Chem.RemoveHs(m)) for m in ligands[:5])
    return Series(folder / "jnk1_manual_flips_protein.pdb", reference, parents)


@pytest.fixture(scope="session")
def library_300(jnk1, tmp_path_factory) -> Path:
    """300 R-group analogues of the series, as a gzipped .smi file."""
    from geomol.screen.analogues import enumerate_analogues, write_smiles_library

    path = tmp_path_factory.mktemp("library") / "analogues.smi.gz"
    assert write_smiles_library(path, enumerate_analogues(jnk1.parents, limit=300)) == 300
    return path


@pytest.fixture(scope="session")
def cluster():
    """A local Dask cluster of 2 single-threaded worker processes (geomol's own local-cluster path); its address."""
    from geomol.screen.engine import dask_client

    with dask_client(workers=2) as client:
        client.wait_for_workers(2)
        yield client
