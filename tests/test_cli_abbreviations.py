"""No command takes an option by abbreviation (``--worker`` for ``--workers``, ``--trainer.max_epoch`` for
``--trainer.max_epochs``): a typo is an error, never another option silently."""
from __future__ import annotations

import ast

import pytest

from geomol.cli import main
from tests.conftest import REPO

EXAMPLE = REPO / "data" / "example"


def _parser_calls() -> list[tuple[str, int, bool]]:
    """(file, line, refuses abbreviations) of every ArgumentParser(...) and .add_parser(...) in the project's code."""
    calls = []
    for folder in ("geomol", "benchmarks", "scripts"):
        for path in sorted((REPO / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if not isinstance(node, ast.Call):
                    continue
                name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if name in ("ArgumentParser", "add_parser"):
                    refuses = any(k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant)
                                  and k.value.value is False for k in node.keywords)
                    calls.append((str(path.relative_to(REPO)), node.lineno, refuses))
    return calls


def test_every_parser_refuses_abbreviated_options():
    calls = _parser_calls()
    assert len(calls) > 40
    assert [(file, line) for file, line, refuses in calls if not refuses] == []


@pytest.mark.parametrize("argv, option", [
    (["screen", "--receptor", "r.pdb", "--reference", "l.sdf", "--library", "x.smi", "--out", "o", "--worker", "2"],
     "--worker"),
    (["simulate", "molecule", "ethanol", "--out", "o", "--frames", "10", "--temp", "300"], "--temp"),
    (["simulate", "protein", "p.pdb", "--out", "o", "--ns", "1", "--equil", "5"], "--equil"),
    (["predict-affinity", "--receptor", "r.pdb", "--ligands", "l.sdf", "--meas", "m.csv"], "--meas"),
])
def test_an_abbreviated_option_is_an_error(argv, option, capsys):
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code == 2
    assert f"unrecognized arguments: {option}" in capsys.readouterr().err


def test_lightning_commands_refuse_abbreviated_options_too(capsys):
    pytest.importorskip("lightning")
    argv = ["fit", "--config", "egno_md17", "--trainer.max_epoch", "1"]
    with pytest.raises(SystemExit) as raised:
        main(argv)
    assert raised.value.code != 0
    assert "--trainer.max_epoch" in capsys.readouterr().err
