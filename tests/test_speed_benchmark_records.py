"""What the speed benchmarks record beside their timings (:mod:`geomol.benchmarking`): the edge-scaling summary of
``get_speed.py``, the kernel and machine figures of ``run_metadata``, the product arithmetic of ``product_gflop``, the
processor description of ``geomol.provenance``, the load record, the stressors and the interleaved runs under them."""
import json
import os
import time

import pytest
import torch

from geomol.benchmarking import interleaved, machine_load, run_record, stressors
from geomol.benchmarking.edge_scaling import edge_scaling, edge_scaling_line
from geomol.nn import dense


def test_edge_scaling_measures_each_single_complex_case_per_edge_and_per_pair():
    rows = [{"case": "batch16", "ours_cpu_seconds": 9.0, "edges": 100, "pairs": 1000},  # a batch: not a single complex
            {"case": "cutoff_10", "ours_cpu_seconds": 0.16, "edges": 1000, "pairs": 10000},
            {"case": "cutoff_30", "ours_cpu_seconds": 2.0, "edges": 10000, "pairs": 125000},
            {"case": "blocks_800", "ours_cpu_seconds": 5.0, "edges": 20000, "pairs": 250000},
            {"case": "cutoff_whole", "error": "worker failed"}]
    scaling = edge_scaling(rows)
    assert scaling["us_per_edge"] == {"cutoff_10": 160.0, "cutoff_30": 200.0, "blocks_800": 250.0}
    assert scaling["median_us_per_edge"] == 200.0
    assert scaling["edge_deviation_from_median_percent"] == {"cutoff_10": -20.0, "cutoff_30": 0.0, "blocks_800": 25.0}
    assert scaling["edge_max_abs_deviation_percent"] == 25.0
    assert scaling["us_per_pair"] == {"cutoff_10": 16.0, "cutoff_30": 16.0, "blocks_800": 20.0}
    assert scaling["pair_max_abs_deviation_percent"] == 25.0
    assert scaling["pairs_per_edge"] == {"cutoff_10": 10.0, "cutoff_30": 12.5, "blocks_800": 12.5}
    line = edge_scaling_line(scaling)
    assert "µs/edge" in line and "µs/pair" in line and line.count("±25.0 %") == 2
    assert edge_scaling(rows[:2]) is None
    without_pairs = [{k: v for k, v in r.items() if k != "pairs"} for r in rows]
    assert "us_per_pair" not in edge_scaling(without_pairs)


def test_run_metadata_pins_the_measured_kernel_for_the_workers(monkeypatch):
    monkeypatch.setenv(dense.KERNEL_ENV, "auto")  # restored after the test
    meta = run_record.run_metadata()
    assert meta["linear_kernel"] == dense.linear_kernel() == os.environ[dense.KERNEL_ENV]
    probe = meta["machine_probe"]
    assert probe["gemm_gflops"] > 0.1 and 0 < probe["silu_cached_ns_per_element"] < 1e3
    assert meta["threads"] == 1


def test_product_gflop_counts_the_matrix_products_of_one_call():
    a, b = torch.ones(100, 200), torch.ones(200, 300)
    bias = torch.zeros(300)
    counted = interleaved.product_gflop({
        "products": lambda step: (a @ b, torch.addmm(bias, a, b)),  # 2·100·200·300 FLOP each
        "elementwise": lambda step: (a * 2.0 + 1.0).exp()})  # no product: not counted
    assert counted == {"products_product_gflop": 0.024, "elementwise_product_gflop": 0.0}


CPUINFO = "".join(f"processor\t: {cpu}\nmodel name\t: Test CPU 9000\nphysical id\t: 0\ncore id\t\t: {cpu // 2}\n"
                  f"flags\t\t: fpu avx avx2 fma avx512f\n\n" for cpu in range(4))


def test_cpu_description_names_model_cores_caches_and_vector_sets(tmp_path):
    from geomol.provenance import cpu_description

    for index, (level, kind, size, shared) in enumerate([(1, "Data", "48K", "0"), (1, "Instruction", "32K", "0"),
                                                         (2, "Unified", "2048K", "0-1"),
                                                         (3, "Unified", "32768K", "0-3,8-11")]):
        folder = tmp_path / "cpu0" / "cache" / f"index{index}"
        folder.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size), ("shared_cpu_list", shared)):
            (folder / name).write_text(f"{value}\n")
    described = cpu_description(CPUINFO, sysfs=tmp_path)
    assert described == {"model": "Test CPU 9000", "logical_cpus": 4, "physical_cores": 2, "hypervisor": False,
                         "vector": ["avx", "avx2", "fma", "avx512f"],
                         "caches": {"L1d": {"size": "48K", "shared_by": 1}, "L2": {"size": "2048K", "shared_by": 2},
                                    "L3": {"size": "32768K", "shared_by": 8}}}
    assert "caches" not in cpu_description(CPUINFO, sysfs=tmp_path / "absent")


def test_provenance_records_the_openmp_environment(monkeypatch):
    from geomol.provenance import provenance

    monkeypatch.setenv("OMP_WAIT_POLICY", "PASSIVE")
    monkeypatch.delenv("GOMP_SPINCOUNT", raising=False)
    record = provenance(["benchmarks/get_speed.py"])
    assert record["threads_environment"]["OMP_WAIT_POLICY"] == "PASSIVE"
    assert "GOMP_SPINCOUNT" not in record["threads_environment"] and record["cpu"]["logical_cpus"] >= 1


def _write_proc(root, machine_ticks: tuple[int, int], processes: dict[int, tuple[int, int, int, str, str]]):
    """A /proc-like folder: the machine's busy and steal ticks, and {pid: (parent, ticks, nice, name, cmdline)}."""
    busy, steal = machine_ticks
    (root / "stat").write_text(f"cpu  {busy} 0 0 1000 0 0 0 {steal} 0 0\ncpu0 0 0 0 0\n")
    for pid, (parent, ticks, nice, name, cmdline) in processes.items():
        (root / str(pid)).mkdir(exist_ok=True)
        fields = ["S", parent] + [0] * 9 + [ticks, 0, 0, 0, 20, nice] + [0] * 30
        (root / str(pid) / "stat").write_text(f"{pid} ({name}) " + " ".join(map(str, fields)) + "\n")
        (root / str(pid) / "cmdline").write_bytes(cmdline.replace(" ", "\0").encode() + b"\0")


def test_load_record_tells_our_processes_from_the_others(tmp_path):
    me, child, grandchild, stranger, quiet, late = os.getpid(), 10**7 + 1, 10**7 + 2, 10**7 + 3, 10**7 + 4, 10**7 + 5
    table = {me: (1, 100, 0, "python", "python bench.py"), child: (me, 0, 10, "python", "python -c stress"),
             grandchild: (child, 0, 10, "sh", "sh -c x"),
             stranger: (1, 500, 10, "python", "/usr/bin/python3 /home/someone/train.py --data=/home/someone/d"),
             quiet: (1, 7, 0, "sleep", "sleep 100")}
    record = machine_load.LoadRecord(proc=tmp_path)
    # two blocks add up: in each, this process and its child take 30 ticks, the grandchild and the stranger 60,
    # the machine 150 busy and 2 stolen
    for block in range(2):
        _write_proc(tmp_path, (1000 + 150 * block, 5 + 2 * block), {
            pid: (parent, ticks + (0 if pid == quiet else 30 * block if pid in (me, child) else 60 * block), *rest)
            for pid, (parent, ticks, *rest) in table.items()})
        with record:
            _write_proc(tmp_path, (1150 + 150 * block, 7 + 2 * block), {
                **{pid: (parent, ticks + (0 if pid == quiet else 30 * (block + 1) if pid in (me, child) else
                                          60 * (block + 1)), *rest) for pid, (parent, ticks, *rest) in table.items()},
                late: (1, 20, 5, "make", "make -j2")})  # started in the first block (all its ticks), idle after
    summary = record.summary()
    seconds = record.seconds
    cpus = lambda ticks: round(ticks / machine_load.TICKS / seconds, 2)  # noqa: E731
    assert summary["busy_cpus"] == cpus(300) and summary["own_cpus"] == cpus(2 * 2 * 30 + 2 * 60)
    assert summary["others_cpus"] == cpus(2 * 60 + 20)
    assert [o["command"] for o in summary["others"]] == ["python3 .../train.py --data=.../d", "make -j2"]
    assert [o["nice"] for o in summary["others"]] == [10, 5]
    assert summary["others"][0]["cpu_share"] == cpus(120)
    assert summary["steal_percent"] == round(100 * 4 / (machine_load.TICKS * seconds * os.cpu_count()), 1)
    json.dumps(summary)


def test_stressor_runs_only_inside_its_blocks_and_reports_its_rate():
    with pytest.raises(ValueError, match="cpu, memory"):
        stressors.Stressor("disk")
    stressor = stressors.Stressor("cpu")
    for _ in range(2):
        with stressor:
            time.sleep(0.5)
        time.sleep(0.5)  # paused: neither its seconds nor its work grow
    summary = stressor.summary()
    assert summary["kind"] == "cpu" and summary["unit"] == "million iterations/s"
    assert 0.9 <= summary["seconds"] < 1.5 and summary["cpu_seconds"] > 0
    assert summary["rate"] > 0 and 0 < summary["cpu_share"] <= 1.2


def test_interleaved_runs_alternate_the_loads_and_record_every_step():
    calls = []
    fns = {"official": lambda step: calls.append(("official", step)),
           "ours": lambda step: calls.append(("ours", step))}
    allowed = os.sched_getaffinity(0)
    runs = interleaved.interleaved_runs(fns, steps=2, warmup=1, loads=("none", "cpu"))
    assert os.sched_getaffinity(0) == allowed  # pinned for the runs only
    assert calls == [("official", 0), ("ours", 0)] + [(name, step) for step in (1, 2) for _ in ("none", "cpu")
                                                      for name in ("official", "ours")]
    assert set(runs) == {"none", "cpu"} and "stressor" not in runs["none"]
    assert runs["cpu"]["stressor"]["kind"] == "cpu" and runs["cpu"]["load"]["pinned_cpu"] in allowed
    for figures in runs.values():
        assert len(figures["ours_steps"]["wall"]) == 2 and figures["ours_compiled_seconds"] == 0
        assert figures["official_over_ours_paired"] > 0 and figures["ours_over_official_paired"] > 0
        assert {"load", "official_seconds", "official_cpu_seconds", "official_sys_seconds", "official_page_faults",
                "official_preempted"} <= set(figures)
    line = interleaved.load_line({"load_kind": "cpu", **runs["cpu"]})
    assert line.startswith("cpu") and "stressor" in line and "paired wall ratio" in line


def test_labelled_command_line_items():
    from geomol.benchmarking.run_record import labelled

    assert labelled(["flow=runs/a/last.ckpt", "egno-fkbp12"]) == {"flow": "runs/a/last.ckpt", "egno-fkbp12": "egno-fkbp12"}
    assert labelled(["md_data/x/md17_ethanol.npz", "a=b=c"], lambda p: p.rsplit("/", 1)[-1]) == {
        "md17_ethanol.npz": "md_data/x/md17_ethanol.npz", "a": "b=c"}
