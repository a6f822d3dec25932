"""Smaller items of issue 14: messages that point at the right place, a README that says what runs."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib

import pytest

from geomol.cli import main
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"


def test_a_pdb_parse_error_cites_the_line_of_the_file(tmp_path, capsys):
    lines = (EXAMPLE / "tnks2_protein.pdb").read_text().splitlines(keepends=True)
    assert lines[302].startswith("ATOM")
    lines[302] = lines[302][:30] + "  xx.xxx" + lines[302][38:]
    bad = tmp_path / "bad.pdb"
    bad.write_text("".join(lines))
    assert main(["inspect", str(bad)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("geomol inspect: error: ") and err.endswith("coordinate(s) at line 303.")


def test_skipped_molecules_are_one_warning_line_without_python_source(tmp_path):
    records = (EXAMPLE / "tnks2_ligands.sdf").read_text().split("$$$$\n")
    broken = records[1].replace(" C ", " Xx ", 1)
    mixed = tmp_path / "mixed.sdf"
    mixed.write_text(records[0] + "$$$$\n" + broken + "$$$$\n")
    done = subprocess.run([sys.executable, "-m", "geomol", "predict-affinity", "--receptor",
                           str(EXAMPLE / "tnks2_protein.pdb"), "--ligands", str(mixed), "--quiet", "--threads", "1"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    warning = [line for line in done.stderr.splitlines() if "warning" in line]
    assert len(warning) == 1 and warning[0].startswith(f"geomol predict-affinity: warning: {mixed}: skipped 1")
    assert "StructureWarning" not in done.stderr and ".py:" not in done.stderr


def _readme_test_command() -> str:
    block = re.search(r"Run the test suite:\s*```bash\n(.*?)```", (REPO / "README.md").read_text(), re.S)[1]
    return block.strip().split("&&")[-1].strip()


def test_the_readme_test_command_ends_with_a_summary_line(tmp_path):
    """pyproject's addopts and the README's -q together once hid the "N passed" line; CI runs the same.
    The README's options with the project's pytest configuration, on a one-test file."""
    command = _readme_test_command()
    assert command == "python -m pytest -x -q"
    assert command in (REPO / ".ci" / "run").read_text()
    (tmp_path / "test_one.py").write_text("def test_one():\n    assert True\n")
    done = subprocess.run([sys.executable, *command.split()[1:], "-c", str(REPO / "pyproject.toml"), "--rootdir",
                           str(tmp_path), "-p", "no:cacheprovider", str(tmp_path / "test_one.py")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and re.search(r"^1 passed in ", done.stdout, re.M), done.stdout


def test_ci_installs_into_a_new_virtual_environment_as_a_newcomer_would():
    """CI once ran in whatever Python it found, where an older pytest already satisfied the pin, and missed a test
    that the newest pytest broke: it must make a fresh venv (no system site packages) and install the README's
    extras there, so that it resolves the newest releases they allow."""
    ci = (REPO / ".ci" / "run").read_text()
    readme = (REPO / "README.md").read_text()
    install = re.search(r"Run the test suite:\s*```bash\n(.*?)```", readme, re.S)[1].split("&&")[1].strip()
    venv = re.search(r"^python3? -m venv (.+)$", ci, re.M)
    assert venv and "--system-site-packages" not in venv[1]
    lines = ci.splitlines()
    activate = next(i for i, line in enumerate(lines) if "bin/activate" in line)
    assert activate > lines.index(venv[0]) and install in ci and ci.index(install) > ci.index(lines[activate])


def test_readme_lists_every_dependency():
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    section = (REPO / "README.md").read_text().split("## Install", 1)[1].split("## ", 1)[0].lower()
    names = [re.split(r"[<>=\[ ]", spec)[0].lower() for spec in project["dependencies"]]
    names += [re.split(r"[<>=\[ ]", spec)[0].lower() for spec in project["optional-dependencies"]["test"]]
    assert [name for name in names if name not in section] == []


@pytest.mark.skipif(shutil.which("git") is None or not (REPO / ".git").exists(), reason="not a git checkout")
def test_outputs_of_the_readme_examples_are_ignored():
    outputs = re.findall(r"--(?:out|plot) ([\w./-]+)", (REPO / "README.md").read_text())
    outputs += ["rollout.xtc", "rollout.json", "rollout.png", "rollout_topology.pdb", "runs/x/metrics.csv"]
    assert len(outputs) >= 7
    done = subprocess.run(["git", "check-ignore", *outputs], cwd=REPO, capture_output=True, text=True)
    assert sorted(done.stdout.split()) == sorted(outputs)
