"""What the speed benchmarks record beside their timings: the edge-scaling summary of ``get_speed.py``, the
kernel and machine figures of ``run_record.run_metadata`` and the product arithmetic of ``run_record.product_gflop``."""
import os
import sys

import pytest
import torch

from geomol.nn import dense
from tests.conftest import REPO, benchmark_module


@pytest.fixture(scope="module")
def benchmarks_on_path():
    sys.path.insert(0, str(REPO / "benchmarks"))
    yield
    sys.path.remove(str(REPO / "benchmarks"))


def test_edge_scaling_measures_each_single_complex_case_per_edge_and_per_pair(benchmarks_on_path):
    get_speed = benchmark_module("get_speed")
    rows = [{"case": "batch16", "ours_cpu_seconds": 9.0, "edges": 100, "pairs": 1000},  # a batch: not a single complex
            {"case": "cutoff_10", "ours_cpu_seconds": 0.16, "edges": 1000, "pairs": 10000},
            {"case": "cutoff_30", "ours_cpu_seconds": 2.0, "edges": 10000, "pairs": 125000},
            {"case": "blocks_800", "ours_cpu_seconds": 5.0, "edges": 20000, "pairs": 250000},
            {"case": "cutoff_whole", "error": "worker failed"}]
    scaling = get_speed.edge_scaling(rows)
    assert scaling["us_per_edge"] == {"cutoff_10": 160.0, "cutoff_30": 200.0, "blocks_800": 250.0}
    assert scaling["median_us_per_edge"] == 200.0
    assert scaling["edge_deviation_from_median_percent"] == {"cutoff_10": -20.0, "cutoff_30": 0.0, "blocks_800": 25.0}
    assert scaling["edge_max_abs_deviation_percent"] == 25.0
    assert scaling["us_per_pair"] == {"cutoff_10": 16.0, "cutoff_30": 16.0, "blocks_800": 20.0}
    assert scaling["pair_max_abs_deviation_percent"] == 25.0
    assert scaling["pairs_per_edge"] == {"cutoff_10": 10.0, "cutoff_30": 12.5, "blocks_800": 12.5}
    line = get_speed.edge_scaling_line(scaling)
    assert "µs/edge" in line and "µs/pair" in line and line.count("±25.0 %") == 2
    assert get_speed.edge_scaling(rows[:2]) is None
    without_pairs = [{k: v for k, v in r.items() if k != "pairs"} for r in rows]
    assert "us_per_pair" not in get_speed.edge_scaling(without_pairs)


def test_run_metadata_pins_the_measured_kernel_for_the_workers(benchmarks_on_path, monkeypatch):
    run_record = benchmark_module("run_record")
    monkeypatch.setenv(dense.KERNEL_ENV, "auto")  # restored after the test
    meta = run_record.run_metadata()
    assert meta["linear_kernel"] == dense.linear_kernel() == os.environ[dense.KERNEL_ENV]
    probe = meta["machine_probe"]
    assert probe["gemm_gflops"] > 0.1 and 0 < probe["silu_cached_ns_per_element"] < 1e3
    assert meta["threads"] == 1


def test_product_gflop_counts_the_matrix_products_of_one_call(benchmarks_on_path):
    run_record = benchmark_module("run_record")
    a, b = torch.ones(100, 200), torch.ones(200, 300)
    bias = torch.zeros(300)
    counted = run_record.product_gflop({
        "products": lambda step: (a @ b, torch.addmm(bias, a, b)),  # 2·100·200·300 FLOP each
        "elementwise": lambda step: (a * 2.0 + 1.0).exp()})  # no product: not counted
    assert counted == {"products_product_gflop": 0.024, "elementwise_product_gflop": 0.0}
