"""Library streaming and shards, the resume manifest, analogue enumeration and the SLURM job script (no cluster)."""
from __future__ import annotations

import bz2
import gzip
import json

import pytest
from rdkit import Chem

from geomol.errors import ConfigError, StructureReadError
from geomol.screen.analogues import enumerate_analogues
from geomol.screen.library import count_library, iter_library, iter_shards
from geomol.screen.manifest import Manifest, ShardRecord
from geomol.screen.outputs import OutputFolder

SMILES = ["c1ccccc1O phenol", "CCO", "# a comment", "", "c1ccncc1 pyridine", "CC(=O)O acetic-acid"]


@pytest.mark.parametrize("compress", [None, gzip.compress, bz2.compress])
def test_a_smiles_library_streams_in_order_with_default_names(tmp_path, compress):
    text = "\n".join(SMILES) + "\n"
    path = tmp_path / ("library.smi" + {None: "", gzip.compress: ".gz", bz2.compress: ".bz2"}[compress])
    path.write_bytes(compress(text.encode()) if compress else text.encode())
    entries = list(iter_library(path))
    assert [(e.index, e.name, e.text) for e in entries] == [
        (0, "phenol", "c1ccccc1O"), (1, "#1", "CCO"), (2, "pyridine", "c1ccncc1"), (3, "acetic-acid", "CC(=O)O")]
    assert "[line 5" in entries[2].source
    assert count_library(path) == 4


def test_csv_and_sdf_libraries(tmp_path):
    (tmp_path / "lib.csv").write_text("name,SMILES\nA,CCO\n,c1ccccc1\n")
    assert [(e.name, e.text) for e in iter_library(tmp_path / "lib.csv")] == [("A", "CCO"), ("#1", "c1ccccc1")]
    with Chem.SDWriter(str(tmp_path / "lib.sdf")) as writer:
        for name, smiles in (("first", "CCO"), ("", "CCN")):
            mol = Chem.MolFromSmiles(smiles)
            mol.SetProp("_Name", name)
            writer.write(mol)
    entries = list(iter_library(tmp_path / "lib.sdf"))
    assert [e.name for e in entries] == ["first", "#1"]
    assert Chem.MolToSmiles(Chem.MolFromMolBlock(entries[1].text)) == "CCN"


def test_bad_libraries_raise_naming_the_file(tmp_path):
    with pytest.raises(StructureReadError, match=r"lib\.txt: a library is a SMILES list"):
        list(iter_library(tmp_path / "lib.txt"))
    with pytest.raises(StructureReadError, match=r"missing\.smi: file not found"):
        list(iter_library(tmp_path / "missing.smi"))
    (tmp_path / "no_column.csv").write_text("name,molecule\nA,CCO\n")
    with pytest.raises(StructureReadError, match="no SMILES column"):
        list(iter_library(tmp_path / "no_column.csv"))
    data = gzip.compress("".join(f"C{'O' * (k % 7)}N m{k}\n" for k in range(5000)).encode())
    (tmp_path / "corrupt.smi.gz").write_bytes(data[:len(data) // 2])  # cut short
    with pytest.raises(StructureReadError, match=r"corrupt\.smi\.gz: cannot read file"):
        list(iter_library(tmp_path / "corrupt.smi.gz"))
    (tmp_path / "empty.smi").write_text("# nothing\n")
    with pytest.raises(StructureReadError, match="holds no ligand"):
        count_library(tmp_path / "empty.smi")


def test_shards_are_consecutive_and_their_digests_identify_their_entries(tmp_path):
    path = tmp_path / "lib.smi"
    path.write_text("".join(f"{'C' * (k + 1)} m{k}\n" for k in range(7)))
    shards = list(iter_shards(path, 3))
    assert [[e.index for e in s.entries] for s in shards] == [[0, 1, 2], [3, 4, 5], [6]]
    assert [s.digest for s in shards] == [s.digest for s in iter_shards(path, 3)]
    path.write_text(path.read_text().replace("m4", "changed"))
    changed = list(iter_shards(path, 3))
    assert [a.digest == b.digest for a, b in zip(shards, changed)] == [True, False, True]
    with pytest.raises(ConfigError):
        next(iter_shards(path, 0))


def _description(fingerprint="f" * 64):
    return {"fingerprint": fingerprint, "settings": {"shard_size": 3}, "receptor_sha256": "r", "reference_sha256": "x",
            "model_sha256": "m", "library": {"name": "lib.smi", "ligands": 7, "shard_size": 3}}


def _record(number):
    return ShardRecord(number, f"d{number}", 3, 2, 1, 0, {"pose": 0.1}, "host:1", 300.0)


def test_the_manifest_resumes_complete_shards_and_ignores_a_cut_line(tmp_path):
    folder = OutputFolder(tmp_path / "out")
    manifest = Manifest(folder, _description())
    for number in (0, 1):
        folder.shard_table(number).parent.mkdir(parents=True, exist_ok=True)
        folder.shard_poses(number).parent.mkdir(parents=True, exist_ok=True)
        folder.shard_table(number).write_bytes(b"table")
        folder.shard_poses(number).write_bytes(b"poses")
        manifest.add(_record(number))
    with open(folder.shard_log, "a") as handle:  # an interruption in the middle of a line
        handle.write('{"number": 2, "dig')
    reopened = Manifest(folder, _description())
    assert sorted(reopened.completed) == [0, 1]
    assert reopened.is_done(0, "d0") and not reopened.is_done(0, "other") and not reopened.is_done(2, "d2")
    folder.shard_poses(1).unlink()
    assert not reopened.is_done(1, "d1")  # a record without its files is redone
    reopened.add(_record(2))
    assert sorted(Manifest(folder, _description()).completed) == [0, 1, 2]
    assert json.loads(folder.manifest.read_text())["screen"]["fingerprint"] == "f" * 64


def test_the_manifest_refuses_another_screen_in_the_same_folder(tmp_path):
    folder = OutputFolder(tmp_path / "out")
    Manifest(folder, _description())
    other = {**_description("0" * 64), "model_sha256": "another model"}
    with pytest.raises(ConfigError, match="other inputs or settings .*model_sha256"):
        Manifest(folder, other)


def test_analogues_are_r_group_swaps_of_the_parents_each_once():
    parents = ["c1ccccc1C(=O)N", "c1ccncc1C"]
    first = list(enumerate_analogues(parents, max_sites=1, limit=30))
    assert len(first) == len(set(first)) == 30
    assert first == list(enumerate_analogues(parents, max_sites=1, limit=30))  # a fixed order
    core = Chem.MolFromSmarts("c1ccccc1C(=O)N")
    assert all(Chem.MolFromSmiles(s).HasSubstructMatch(core) for s in first[:10])  # the first parent's, one site
    two = list(enumerate_analogues(parents[:1], max_sites=2, limit=400))
    assert max(Chem.MolFromSmiles(s).GetNumHeavyAtoms() for s in two) > max(
        Chem.MolFromSmiles(s).GetNumHeavyAtoms() for s in first)


def test_a_slurm_cluster_gets_single_threaded_workers_and_the_options():
    pytest.importorskip("dask_jobqueue")
    from geomol.screen.engine import JobQueueSpec

    spec = JobQueueSpec("slurm", jobs=3, cores=16, memory="32GB", walltime="04:00:00", queue="cpu", account="lab",
                        directives=("--constraint=amd",), prologue=("source ~/envs/geomol/bin/activate",))
    with spec.cluster() as cluster:
        script = cluster.job_script()
    for text in ("#SBATCH -p cpu", "#SBATCH -A lab", "#SBATCH -t 04:00:00", "#SBATCH --constraint=amd",
                 "--nworkers 16", "--nthreads 1", "export OMP_NUM_THREADS=1", "source ~/envs/geomol/bin/activate"):
        assert text in script, text
    with pytest.raises(ConfigError):
        JobQueueSpec("lsf")
