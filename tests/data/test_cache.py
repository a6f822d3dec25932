"""Processed-data store: keys, pickle-free encoding, resume, bad-item report, parallel build."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from geomol.data.blocks import Block, BlockGraph
from geomol.data.store.cache import FileHasher, ProcessedStore, Recipe, decode_graphs, encode_graphs, recipe_key
from geomol.data.store.preprocess import preprocess
from geomol.errors import ConfigError, DatasetError, StructureReadError


def toy_builder(files, *, scale: float = 1.0):
    """A tiny complex from a text file of 'x y z' lines: first half receptor, second half ligand."""
    text = Path(files["coords"]).read_text()
    if text.startswith("bad"):
        raise StructureReadError("not a coordinate file", files["coords"], 1)
    if text.startswith("bug"):
        raise ZeroDivisionError("simulated bug")
    if Path(files["coords"] + ".stop").exists():
        raise KeyboardInterrupt  # a user pressing Ctrl-C in the middle of the run
    xyz = np.array([[float(v) for v in line.split()] for line in text.splitlines()]) * scale
    half = len(xyz) // 2
    receptor = [Block("A", ("C",), ("A",), xyz[i:i + 1]) for i in range(half)]
    ligand = [Block("c", ("C",), ("sm",), xyz[i:i + 1]) for i in range(half, len(xyz))]
    return BlockGraph.from_blocks([receptor, ligand], name=Path(files["coords"]).name), {"atoms": len(xyz)}


def write_inputs(directory: Path, n: int, bad=(), bug=()) -> list[Path]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(n):
        path = directory / f"item{i:02d}.xyz"
        if i in bad:
            path.write_text("bad file\n")
        elif i in bug:
            path.write_text("bug\n")
        else:
            path.write_text("\n".join(" ".join(f"{v:.3f}" for v in row) for row in rng.normal(size=(4 + i % 3, 3))))
        paths.append(path)
    return paths


def recipes(paths, **params):
    return [Recipe(f"toy/{p.stem}", toy_builder, {"coords": str(p)}, params, group=str(i % 3))
            for i, p in enumerate(paths)]


def test_key_depends_on_content_and_every_parameter(tmp_path):
    (path,) = write_inputs(tmp_path, 1)
    hasher = FileHasher()
    base = recipe_key(Recipe("a", toy_builder, {"coords": str(path)}, {"scale": 1.0}), hasher)
    assert recipe_key(Recipe("other id", toy_builder, {"coords": str(path)}, {"scale": 1.0}), hasher) == base
    assert recipe_key(Recipe("a", toy_builder, {"coords": str(path)}, {"scale": 2.0}), hasher) != base
    assert recipe_key(Recipe("a", toy_builder, {"coords": str(path)}, {"scale": 1.0, "x": None}), hasher) != base
    assert recipe_key(Recipe("a", write_inputs, {"coords": str(path)}, {"scale": 1.0}), hasher) != base
    copy = tmp_path / "copy.xyz"
    copy.write_bytes(path.read_bytes())  # same content elsewhere: same key
    assert recipe_key(Recipe("a", toy_builder, {"coords": str(copy)}, {"scale": 1.0}), hasher) == base
    path.write_text(path.read_text() + "\n0 0 0")
    os.utime(path, ns=(1, 1))  # even with an old mtime, the size changed
    assert recipe_key(Recipe("a", toy_builder, {"coords": str(path)}, {"scale": 1.0}), hasher) != base
    with pytest.raises(ConfigError, match="files"):
        recipe_key(Recipe("a", toy_builder, {}, {"path": tmp_path}), hasher)
    with pytest.raises(DatasetError, match="missing"):
        recipe_key(Recipe("a", toy_builder, {"coords": str(tmp_path / "nope")}), hasher)


def test_file_hash_memo_persists(tmp_path):
    (path,) = write_inputs(tmp_path, 1)
    memo = tmp_path / "memo.json"
    hasher = FileHasher(memo)
    digest = hasher.digest(path)
    hasher.save()
    assert json.loads(memo.read_text())[os.path.realpath(path)][2] == digest
    assert FileHasher(memo).digest(path) == digest


def test_encoding_round_trip_without_pickle():
    rng = np.random.default_rng(1)
    blocks = [Block("G", ("N", "C"), ("", "A"), rng.normal(size=(2, 3)))]
    graph = BlockGraph.from_blocks([blocks, [Block("cl", ("Cl",), ("sm",), rng.normal(size=(1, 3)))]], 6.5,
                                   name="g", dtype=torch.float64)
    graph.flag = torch.tensor([True, False])
    blob = encode_graphs({"a": graph, "b": graph}, {"note": "x"})
    graphs, meta = decode_graphs(blob)
    assert meta == {"note": "x"} and list(graphs) == ["a", "b"]
    for key in ("X", "A", "atom_pos", "block_id", "B", "block_len", "segment", "y", "flag"):
        assert torch.equal(graphs["a"][key], graph[key]) and graphs["a"][key].dtype == graph[key].dtype
    assert graphs["b"].name == "g" and graphs["b"].num_nodes == graph.num_nodes
    with pytest.raises(DatasetError, match="unknown format"):
        decode_graphs(b"\x80\x04pickle")


def test_build_reuse_and_change(tmp_path):
    (tmp_path / "in").mkdir()
    paths = write_inputs(tmp_path / "in", 6)
    store = ProcessedStore(tmp_path / "store")
    first = preprocess(recipes(paths), store, progress=False)
    assert (first.built, first.reused, first.skipped) == (6, 0, [])
    graphs, meta = store.load(first.keys[0])
    assert meta["builder"] == {"atoms": 4} and graphs["graph"].num_blocks == 4 + 2
    again = preprocess(recipes(paths), store, progress=False)
    assert (again.built, again.reused, again.keys) == (0, 6, first.keys)
    rescaled = preprocess(recipes(paths, scale=2.0), store, progress=False)
    assert rescaled.built == 6 and set(rescaled.keys).isdisjoint(first.keys)
    paths[2].write_text("1 2 3\n4 5 6")
    changed = preprocess(recipes(paths), store, progress=False)
    assert (changed.built, changed.reused) == (1, 5) and changed.keys[2] != first.keys[2]


def test_output_that_is_not_a_terminal_gets_plain_progress_lines(tmp_path, capsys, monkeypatch):
    """Under pytest, output is not a terminal: the rich bar is not drawn, plain lines are written."""
    monkeypatch.setattr("geomol.data.store.preprocess.PROGRESS_LINE_SECONDS", 0.0)
    (tmp_path / "in").mkdir()
    paths = write_inputs(tmp_path / "in", 5, bad=(2,))
    preprocess(recipes(paths), ProcessedStore(tmp_path / "store"), name="toy", chunk_size=2)
    lines = [line for line in capsys.readouterr().err.splitlines() if line.startswith("preprocessing toy:")]
    assert lines and lines[-1].startswith("preprocessing toy: 5/5 (100 %)") and "items/s" in lines[-1]
    preprocess(recipes(paths), ProcessedStore(tmp_path / "quiet"), name="toy", progress=False)
    assert "preprocessing toy" not in capsys.readouterr().err


def test_resume_after_interruption(tmp_path):
    (tmp_path / "in").mkdir()
    paths = write_inputs(tmp_path / "in", 8)
    store = ProcessedStore(tmp_path / "store")
    stop = Path(str(paths[5]) + ".stop")
    stop.touch()
    with pytest.raises(KeyboardInterrupt):
        preprocess(recipes(paths), store, progress=False, chunk_size=1)
    done = set(store.keys())
    assert 0 < len(done) < 8  # committed work survived
    for key in done:  # and nothing is half-written
        assert store.load(key)[0]["graph"].num_blocks > 2
    stop.unlink()
    resumed = preprocess(recipes(paths), store, progress=False)
    assert (resumed.reused, resumed.built) == (len(done), 8 - len(done))
    assert done < set(store.keys())


def test_bad_items_are_reported_not_fatal(tmp_path):
    (tmp_path / "in").mkdir()
    paths = write_inputs(tmp_path / "in", 7, bad=(1, 4), bug=(5,))
    store = ProcessedStore(tmp_path / "store")
    with pytest.warns(RuntimeWarning, match="1 item"):
        report = preprocess(recipes(paths), store, name="toy", progress=False)
    assert report.built == 4
    assert [(s.id, s.error, s.expected) for s in report.skipped] == [
        ("toy/item01", "StructureReadError", True), ("toy/item04", "StructureReadError", True),
        ("toy/item05", "ZeroDivisionError", False)]
    assert report.keys[1] is None and report.keys[0] is not None
    rows = list(csv.DictReader(open(tmp_path / "store" / "reports" / "toy.skipped.csv")))
    assert rows[0]["file"].endswith("item01.xyz") and rows[0]["reason"] == "not a coordinate file"
    summary = json.loads((tmp_path / "store" / "reports" / "toy.json").read_text())
    assert summary["skipped"] == 3 and summary["built"] == 4
    # a GeomolError is deterministic: not retried; a bug is retried on the next run
    paths[5].write_text("0 0 0\n1 1 1")
    with_fix = preprocess(recipes(paths), store, name="toy", progress=False)
    assert with_fix.built == 1 and [s.id for s in with_fix.skipped] == ["toy/item01", "toy/item04"]
    assert preprocess(recipes(paths), store, progress=False, retry_failed=True).skipped[0].id == "toy/item01"


def test_parallel_build_matches_serial(tmp_path):
    (tmp_path / "in").mkdir()
    paths = write_inputs(tmp_path / "in", 10, bad=(3,))
    serial = ProcessedStore(tmp_path / "serial")
    parallel = ProcessedStore(tmp_path / "parallel")
    a = preprocess(recipes(paths), serial, progress=False)
    b = preprocess(recipes(paths), parallel, progress=False, num_workers=2, chunk_size=2)
    assert a.keys == b.keys and b.built == 9 and len(b.skipped) == 1
    for key in a.keys:
        if key is not None:
            assert torch.equal(serial.load(key)[0]["graph"].X, parallel.load(key)[0]["graph"].X)


def test_store_grows_its_map(tmp_path):
    (tmp_path / "in").mkdir()
    paths = write_inputs(tmp_path / "in", 12)
    store = ProcessedStore(tmp_path / "store", map_size=1 << 15)  # 32 KiB: too small for all items
    blob = b"x" * 20000
    store.write([(f"k{i}", blob, {"id": i}) for i in range(4)])
    assert store.has("k3") and not store.has("k4")
    report = preprocess(recipes(paths), store, progress=False, chunk_size=1)
    assert report.built == 12 and all(store.has(k) for k in report.keys)
