"""Start-up time: ``geomol predict-affinity`` on the example ligands against ``import torch``, interleaved.

Each round runs every command once as a fresh process, in the same order, so that a change in the
machine's load reaches all commands alike; the table gives the median (and min, max) wall time per
command over the rounds and its ratio to ``import torch``. The commands:

* ``import torch`` (``python -c "import torch"``): the floor every command pays;
* ``import torch_geometric`` as geomol imports it (deferred, :mod:`geomol.deferred_imports`) and whole;
* ``geomol --help``;
* ``geomol predict-affinity`` on the six example ligands (table printed, nothing written), with the deferral (as
  shipped) and with ``GEOMOL_EAGER_IMPORTS=1`` (everything PyG imports, as before); and on the README quick
  start's 27-ligand series.

One extra run per predict-affinity variant records which heavy modules the command imported.

    python benchmarks/startup.py --rounds 15 --output benchmarks/results/startup.json

Every process runs with ``OMP_NUM_THREADS=1`` (and ``--threads 1``).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from geomol.provenance import provenance

REPO = Path(__file__).resolve().parents[1]
HEAVY_MODULES = ("torch._dynamo", "torch_geometric.nn", "torch_geometric.datasets", "sympy", "lightning",
                 "matplotlib", "scipy.spatial", "e3nn")


def _commands(receptor: str, ligands: str, series: str) -> dict[str, tuple[list[str], dict[str, str]]]:
    python = sys.executable

    def predict(path: str) -> list[str]:
        return [python, "-m", "geomol", "predict-affinity", "--receptor", receptor, "--ligands", path, "--threads", "1"]

    eager = {"GEOMOL_EAGER_IMPORTS": "1"}
    return {
        "import torch": ([python, "-c", "import torch"], {}),
        "import torch_geometric (whole)": ([python, "-c", "import torch_geometric.data"], {}),
        "import geomol.data (PyG deferred)": ([python, "-c", "import geomol.data"], {}),
        "geomol --help": ([python, "-m", "geomol", "--help"], {}),
        "predict-affinity (deferred imports)": (predict(ligands), {}),
        "predict-affinity (GEOMOL_EAGER_IMPORTS=1)": (predict(ligands), eager),
        "predict-affinity, 27-ligand series": (predict(series), {}),
    }


def _run(argv: list[str], extra_env: dict[str, str]) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1", **extra_env}
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return elapsed


_PROBE = """
import json, sys
from geomol.cli import main
code = main(sys.argv[2:])
print(json.dumps({"exit": code, "modules": {m: m in sys.modules for m in sys.argv[1].split(",")}}))
"""


def imported_modules(argv: list[str], extra_env: dict[str, str]) -> dict[str, bool]:
    """Which of :data:`HEAVY_MODULES` the geomol command ``argv`` (after ``-m geomol``) imported."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", **extra_env}
    args = argv[argv.index("geomol") + 1:]
    done = subprocess.run([sys.executable, "-c", _PROBE, ",".join(HEAVY_MODULES), *args], cwd=REPO, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])["modules"]


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--receptor", default="data/example/tnks2_protein.pdb")
    parser.add_argument("--ligands", default="data/example/tnks2_ligands.sdf")
    parser.add_argument("--series", default="data/example/tnks2_series.sdf")
    parser.add_argument("--output", default="benchmarks/results/startup.json")
    args = parser.parse_args()
    commands = _commands(args.receptor, args.ligands, args.series)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for name, (argv, env) in commands.items():  # warm the file cache once, untimed
        _run(argv, env)
    for round_ in range(args.rounds):
        for name, (argv, env) in commands.items():
            times[name].append(_run(argv, env))
        print(f"round {round_ + 1}/{args.rounds}", file=sys.stderr)
    floor = statistics.median(times["import torch"])
    rows = [{"command": name, "median_s": round(statistics.median(t), 3), "min_s": round(min(t), 3),
             "max_s": round(max(t), 3), "ratio_to_import_torch": round(statistics.median(t) / floor, 2),
             "argv": " ".join(commands[name][0][1:]), "environment": commands[name][1]} for name, t in times.items()]
    modules = {name: imported_modules(*commands[name]) for name in commands if name.startswith("predict-affinity")}
    n_ligands = {path: Path(REPO / path).read_text(encoding="utf-8", errors="replace").count("$$$$")
                 for path in (args.ligands, args.series)}
    print(f"{'command':45s} {'median s':>9s} {'min':>6s} {'max':>6s} {'× torch':>8s}")
    for row in rows:
        print(f"{row['command']:45.45s} {row['median_s']:9.2f} {row['min_s']:6.2f} {row['max_s']:6.2f} "
              f"{row['ratio_to_import_torch']:8.2f}")
    for name, found in modules.items():
        print(f"{name}: imports " + (", ".join(m for m, on in found.items() if on) or "none of the heavy modules"))
    result = {"rounds": args.rounds, "receptor": args.receptor, "n_ligands": n_ligands,
              "rows": rows, "heavy_modules_imported": modules, "samples_s": times, "provenance": provenance()}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"written to {args.output}")


if __name__ == "__main__":
    main()
