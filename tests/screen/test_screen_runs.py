"""Screens on a local cluster of 2 workers: counts add up, a killed worker, an interrupted and resumed run, failures."""
from __future__ import annotations

import csv
import dataclasses
import json
import os
import re
import signal

import pyarrow as pa
import pytest
from rdkit import Chem

from geomol.data.posing.poses import PoseParameters
from geomol.errors import ConfigError
from geomol.screen.outputs import read_table
from geomol.screen.run import screen_library
from geomol.screen.settings import DockSettings
from tests.screen.conftest import FAST


def _screen(library, jnk1, out, cluster, settings=FAST, plot=False, **options):
    return screen_library(library, jnk1.receptor, jnk1.reference, out, settings, scheduler=cluster.scheduler.address,
                          quiet=True, plot=plot, **options)


def _results(out) -> list[dict]:
    """Every row of every shard table, by library index."""
    tables = [read_table(p) for p in sorted((out / "shards").glob("shard-*.parquet"))]
    return sorted(pa.concat_tables(tables).to_pylist(), key=lambda row: row["index"])


def _ranked(rows: list[dict], n: int) -> list[int]:
    """Library indices of the ``n`` best scored rows by pK (ties: library order)."""
    return [r["index"] for r in sorted((r for r in rows if r["status"] == "scored"), key=lambda r: (-r["pK"], r["index"]))][:n]


def _csv(path) -> list[dict]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def uninterrupted(jnk1, library_300, cluster, tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    return out, _screen(library_300, jnk1, out, cluster, plot=True)


@pytest.fixture(scope="module")
def library_100(library_300, tmp_path_factory):
    """The first 100 ligands of the 300: its shards (of 25) are the 300's first four, so their results must match."""
    import gzip

    path = tmp_path_factory.mktemp("library_100") / "analogues.smi"
    path.write_text("\n".join(gzip.open(library_300, "rt").read().splitlines()[:100]) + "\n")
    return path


def _without_paths(rows: list[dict]) -> list[dict]:
    """Rows with the library file's path left out of messages (two files, same ligands)."""
    return [{**row, **{k: re.sub(r"\S*analogues\.smi(\.gz)?", "LIBRARY", row[k]) for k in ("warnings", "error")}}
            for row in rows]


def _first_100(out) -> list[dict]:
    return _without_paths(_results(out)[:100])


def test_300_ligands_complete_with_counts_that_add_up(uninterrupted):
    out, summary = uninterrupted
    counts = summary["counts"]
    assert counts["ligands"] == 300 == counts["scored"] + counts["failed"]
    assert counts["scored"] >= 280  # analogues of the reference's series: nearly all pose and score
    rows = _results(out)
    assert [row["index"] for row in rows] == list(range(300))  # every ligand once
    assert sum(row["status"] == "scored" for row in rows) == counts["scored"]
    assert len((out / "shards.jsonl").read_text().splitlines()) == 12 == summary["run"]["shards"]
    assert len(summary["run"]["workers"]) == 2  # both workers took shards
    top = _csv(out / "top.csv")
    assert [int(r["index"]) for r in top] == _ranked(rows, 20)
    assert [int(r["rank"]) for r in top] == list(range(1, 21))
    poses = [m for m in Chem.SDMolSupplier(str(out / "top.sdf"), removeHs=False)]
    assert [m.GetProp("_Name") for m in poses] == [r["name"] for r in top]
    assert all(m.GetNumConformers() == 1 and m.GetConformer().Is3D() for m in poses)
    failures = _csv(out / "failures.csv")
    assert len(failures) == counts["failed"] and all(f["error"] and f["stage"] for f in failures)
    assert json.loads((out / "summary.json").read_text())["counts"] == counts
    assert (out / "screen.png").stat().st_size > 10_000


def test_an_interrupted_run_resumed_gives_the_uninterrupted_result(jnk1, library_100, cluster, uninterrupted, tmp_path):
    finished = []

    def interrupt_after_two(result):
        finished.append(result.number)
        if len(finished) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _screen(library_100, jnk1, tmp_path / "resumed", cluster, on_shard=interrupt_after_two)
    assert len((tmp_path / "resumed" / "shards.jsonl").read_text().splitlines()) == 2
    assert not (tmp_path / "resumed" / "top.csv").exists()
    summary = _screen(library_100, jnk1, tmp_path / "resumed", cluster)
    assert summary["run"]["shards_skipped"] == 2 and summary["run"]["ligands_screened"] == 100 - 50
    assert _without_paths(_results(tmp_path / "resumed")) == _first_100(uninterrupted[0])
    expected = _first_100(uninterrupted[0])
    top = _csv(tmp_path / "resumed" / "top.csv")
    assert [int(r["index"]) for r in top] == _ranked(expected, 20)
    assert [float(r["pK"]) for r in top] == pytest.approx([expected[int(r["index"])]["pK"] for r in top], abs=1e-5)
    failed = [r["index"] for r in expected if r["status"] == "failed"]
    assert [int(r["index"]) for r in _csv(tmp_path / "resumed" / "failures.csv")] == failed


def test_a_rerun_with_other_settings_is_refused(jnk1, library_300, cluster, uninterrupted):
    other = dataclasses.replace(FAST, pose=PoseParameters(conformers=2))
    with pytest.raises(ConfigError, match="other inputs or settings .*settings"):
        _screen(library_300, jnk1, uninterrupted[0], cluster, settings=other)


BAD_LIGANDS = {"unclosed-ring": ("C1CC", "pose", "InvalidSmilesError"),
               "not-smiles": ("not_a_smiles", "pose", "InvalidSmilesError"),
               "butanol": ("CCCCO", "pose", "NoCommonCoreError"),
               "cyclohexanol": ("OC1CCCCC1", "pose", "NoCommonCoreError")}


def test_invalid_smiles_and_coreless_ligands_fail_one_by_one(jnk1, library_300, cluster, tmp_path):
    import gzip

    analogues = gzip.open(library_300, "rt").read().splitlines()[:16]
    lines = analogues[:8] + [f"{smiles} {name}" for name, (smiles, *_) in BAD_LIGANDS.items()] + analogues[8:]
    library = tmp_path / "mixed.smi"
    library.write_text("\n".join(lines) + "\n")
    summary = _screen(library, jnk1, tmp_path / "out", cluster)
    assert summary["counts"]["ligands"] == 20 == summary["counts"]["scored"] + summary["counts"]["failed"]
    failures = {row["name"]: row for row in _csv(tmp_path / "out" / "failures.csv")}
    for name, (_, stage, kind) in BAD_LIGANDS.items():
        assert (failures[name]["stage"], failures[name]["error_kind"]) == (stage, kind)
    assert "common core" in failures["butanol"]["error"]
    assert summary["counts"]["scored"] >= 15  # the analogues around the bad lines are still scored
    assert summary["failure_reasons"]["pose: NoCommonCoreError"] == 2


def test_an_sd_library_is_read_record_by_record(jnk1, library_300, cluster, tmp_path):
    import gzip

    from rdkit.Chem import AllChem

    path = tmp_path / "library.sdf"
    with Chem.SDWriter(str(path)) as writer:
        for k, line in enumerate(gzip.open(library_300, "rt").read().splitlines()[:4]):
            mol = Chem.MolFromSmiles(line.split()[0])
            AllChem.Compute2DCoords(mol)
            mol.SetProp("_Name", f"sd-{k}")
            writer.write(mol)
    with open(path, "a") as handle:
        handle.write("broken\n  RDKit\n\n  2  1  0  0  0  0  0  0  0  0999 V2000\nnot an atom line\n$$$$\n")
    summary = _screen(path, jnk1, tmp_path / "out", cluster)
    rows = _results(tmp_path / "out")
    assert [r["name"] for r in rows] == ["sd-0", "sd-1", "sd-2", "sd-3", "broken"]
    assert rows[-1]["stage"] == "read" and "unreadable SD record" in rows[-1]["error"]
    assert summary["counts"]["scored"] >= 3


def test_coreless_ligands_are_docked_with_vina_when_asked(jnk1, library_300, cluster, tmp_path):
    pytest.importorskip("vina")
    pytest.importorskip("meeko")
    import gzip

    analogue = gzip.open(library_300, "rt").readline().strip()
    library = tmp_path / "dock.smi"
    library.write_text(f"{analogue}\nOC1CCCCC1 cyclohexanol\nCC(=O)OCC ethyl-acetate\n")
    settings = dataclasses.replace(FAST, dock=DockSettings(exhaustiveness=1))
    summary = _screen(library, jnk1, tmp_path / "out", cluster, settings=settings)
    rows = {r["name"]: r for r in _results(tmp_path / "out")}
    assert summary["counts"] == {"ligands": 3, "scored": 3, "failed": 0, "docked": 2}
    assert rows["analogue-1"]["pose_method"] == "core" and rows["analogue-1"]["vina_score"] is None
    for name in ("cyclohexanol", "ethyl-acetate"):
        assert rows[name]["pose_method"] == "vina" and rows[name]["vina_score"] < 0  # kcal/mol: attractive
        assert rows[name]["min_receptor_distance"] is None and rows[name]["pK"] > 0
    reference = Chem.MolFromMolFile(str(jnk1.reference)).GetConformer().GetPositions()
    for pose in Chem.SDMolSupplier(str(tmp_path / "out" / "top.sdf")):
        if pose.GetProp("pose_method") == "vina":  # inside the reference's box (6 Å padding)
            xyz = pose.GetConformer().GetPositions()
            assert (xyz.min(0) > reference.min(0) - 6.5).all() and (xyz.max(0) < reference.max(0) + 6.5).all()


# last in the module: the cluster may run the next module with one worker while the killed one restarts
def test_a_worker_killed_mid_run_still_screens_every_ligand_once(jnk1, library_100, cluster, uninterrupted, tmp_path):
    killed = []

    def kill_a_busy_worker(result):
        if killed:
            return
        busy = [worker for worker, keys in cluster.processing().items() if keys]
        worker = busy[0]
        shards = list(cluster.processing()[worker])
        os.kill(cluster.run(os.getpid, workers=[worker])[worker], signal.SIGKILL)
        killed.append(shards)

    summary = _screen(library_100, jnk1, tmp_path, cluster, on_shard=kill_a_busy_worker)
    assert killed and killed[0], "no worker was busy with a shard when one was killed"
    assert summary["counts"]["ligands"] == 100 and not summary["failed_shards"]
    assert [row["index"] for row in _results(tmp_path)] == list(range(100))
    assert _without_paths(_results(tmp_path)) == _first_100(uninterrupted[0])
