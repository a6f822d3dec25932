"""Result files record what produced them: command, commit and library versions."""
import json
import subprocess

from geomol.provenance import changed_files, git_commit, portable_command, provenance


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


def test_a_dirty_record_names_the_files_that_made_it_dirty(tmp_path):
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), *args], check=True, capture_output=True)

    git("init", "-q")
    for name in ("code.py", "result.json", "untracked.txt"):
        (tmp_path / name).write_text("0\n")
    git("add", "code.py", "result.json")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "first")
    assert changed_files(tmp_path) == [] and git_commit(tmp_path)[1] is False  # untracked files do not count
    (tmp_path / "result.json").write_text("1\n")
    commit, dirty = git_commit(tmp_path)
    assert len(commit) == 40 and dirty is True and changed_files(tmp_path) == ["result.json"]
    git("mv", "code.py", "renamed.py")
    assert changed_files(tmp_path) == ["renamed.py", "result.json"]
    assert changed_files(tmp_path, limit=1) == ["renamed.py", "… and 1 more"]
    assert changed_files(tmp_path / "nowhere") is None and git_commit(tmp_path / "nowhere") == (None, None)
    record = provenance(["x"])
    assert record["changed_files"] == ([] if record["dirty"] is False else record["changed_files"])
    assert (record["changed_files"] is None) == (record["dirty"] is None)
