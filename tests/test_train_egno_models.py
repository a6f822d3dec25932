"""The EGNO model cards are generated from recorded learning curves: other trainings of the same recipe (a run
directory or a benchmark result, with the official script's curve when it ran) become columns of the card, and
``--card-only`` rewrites a shipped card from its manifest without touching the weights."""
import importlib.util
import json
import shutil
import sys

import pytest

from tests.conftest import REPO


def _script(name: str, folder: str):
    spec = importlib.util.spec_from_file_location(name, REPO / folder / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def train():
    return _script("train_egno_models", "scripts")


def _curve(epochs, val, test):
    return [{"epoch": e, "val_s2s": v, "val_s2t": v / 2, "test_s2s": t, "test_s2t": t / 2, "seconds": 10.0 * e}
            for e, v, t in zip(epochs, val, test)]


def test_comparison_curves_read_run_directories_and_result_files(train, tmp_path):
    run = tmp_path / "nbody_seed3"
    run.mkdir()
    (run / "curve.json").write_text(json.dumps(_curve([4, 9], [0.2, 0.1], [0.3, 0.15])))
    result = tmp_path / "egno_accuracy_nbody_seed2.json"
    official = [{"epoch": 0, "val_s2s": 0.7, "test_s2s": 0.9}, {"epoch": 5, "val_s2s": 0.4, "test_s2s": 0.5}]
    result.write_text(json.dumps({"seed": 2, "geomol_curve": _curve([4], [0.25], [0.35]), "official_curve": official}))
    changed = tmp_path / "egno_accuracy_mocap_seed1_batch_max.json"
    changed.write_text(json.dumps({"seed": 1, "geomol_curve": _curve([4], [0.2], [0.3]), "official_curve": None,
                                   "model_overrides": {"node_attr_norm": "batch_max"}}))
    columns = train.comparison_curves([str(run), str(result), str(changed)])
    assert list(columns) == ["nbody_seed3 (same recipe)", "geomol seed 2", "official seed 2, run here",
                             "geomol seed 1, node_attr_norm=batch_max"]
    assert columns["official seed 2, run here"] == official
    assert columns["nbody_seed3 (same recipe)"][1]["test_s2s"] == 0.15


def test_card_only_rewrites_the_card_from_the_manifest_with_the_new_columns(train, tmp_path):
    model_dir = tmp_path / "egno-nbody"
    model_dir.mkdir()
    shutil.copy(REPO / "models" / "egno-nbody" / "manifest.json", model_dir)
    shipped = json.loads((model_dir / "manifest.json").read_text())["metrics"]
    epochs = [r["epoch"] for r in shipped["learning_curve"]]
    other = _curve(epochs, [1.0 / (1 + e) for e in epochs], [0.123456] * len(epochs))
    result = tmp_path / "seed2.json"
    result.write_text(json.dumps({"seed": 2, "geomol_curve": other, "official_curve": None}))
    assert train.main(["--models", "nbody", "--card-only", "--out-dir", str(tmp_path),
                       "--compare-runs", str(result)]) == 0
    card = (model_dir / "README.md").read_text()
    header = next(line for line in card.splitlines() if line.startswith("| epoch ≤"))
    assert "geomol seed 2 test S2S" in header
    row_535 = next(line for line in card.splitlines() if line.startswith("| 535 |"))
    assert "0.12346" in row_535 and f"{shipped['test_s2s_mse']:.5g}" in card
    assert sorted(p.name for p in model_dir.iterdir()) == ["README.md", "manifest.json"]  # no weights written


def test_official_log_lines_become_a_curve():
    accuracy = _script("egno_accuracy", "benchmarks")
    log = ("train epoch 0 avg loss: 15.2\n==> val epoch 0 avg loss: 0.74931 avg lploss: 0\n"
           "==> test epoch 0 avg loss: 0.90897 avg lploss: 0\n==> val epoch 5 avg loss: 0.3 avg lploss: 0\n")
    assert accuracy.parse_official_log(log) == [{"epoch": 0, "val_s2s": 0.74931, "test_s2s": 0.90897}]
    curve = [{"epoch": 0, "val_s2s": 0.7, "test_s2s": 0.9}, {"epoch": 5, "val_s2s": 0.4, "test_s2s": 0.5},
             {"epoch": 10, "val_s2s": 0.45, "test_s2s": 0.2}]
    assert accuracy.best_val_test(curve, 10) == (5, 0.5)


def test_model_overrides_are_parsed_as_yaml_values_and_malformed_ones_refused():
    accuracy = _script("egno_accuracy", "benchmarks")
    parser = accuracy.argparse.ArgumentParser()
    assert accuracy._model_overrides(parser, ["node_attr_norm=batch_max", "hidden=32"]) == {
        "node_attr_norm": "batch_max", "hidden": 32}
    with pytest.raises(SystemExit):
        accuracy._model_overrides(parser, ["batch_max"])
