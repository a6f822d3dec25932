"""Result files record what produced them: command, commit and library versions."""
import json

from geomol.provenance import provenance


def test_provenance_names_the_command_commit_and_versions():
    record = provenance(["benchmarks/affinity.py", "run", "--targets", "two words"])
    assert record["command"].endswith("benchmarks/affinity.py run --targets 'two words'")
    assert record["commit"] is None or len(record["commit"]) == 40
    assert {"geomol", "python", "torch", "lightning", "rdkit"} <= set(record["versions"])
    assert record["torch_threads"] >= 1 and record["date"].endswith("+00:00")
    assert json.loads(json.dumps(record)) == record  # JSON-ready as it is
