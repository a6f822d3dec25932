"""Result files record what produced them: command, commit and library versions."""
import json

from geomol.provenance import portable_command, provenance


def test_provenance_names_the_command_commit_and_versions():
    record = provenance(["benchmarks/affinity.py", "run", "--targets", "two words"])
    assert record["command"].endswith("benchmarks/affinity.py run --targets 'two words'")
    assert record["commit"] is None or len(record["commit"]) == 40
    assert {"geomol", "python", "torch", "lightning", "rdkit"} <= set(record["versions"])
    assert record["torch_threads"] >= 1 and record["date"].endswith("+00:00")
    assert json.loads(json.dumps(record)) == record  # JSON-ready as it is


def test_recorded_commands_name_no_folder_of_the_machine(tmp_path):
    inside = tmp_path / "results" / "speed.json"
    line = portable_command(["benchmarks/speed.py", "--out", str(inside), f"--cache={tmp_path.parent / 'store'}",
                             "/elsewhere/data/plb", f"base={tmp_path / 'cv' / 'base'}", "a=b", "--steps", "3"],
                            cwd=tmp_path)
    assert line.endswith("benchmarks/speed.py --out results/speed.json --cache=.../store .../plb base=cv/base a=b "
                         "--steps 3")
    assert str(tmp_path) not in line
