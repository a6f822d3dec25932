"""The package's import graph: no loops, no import from a lower layer to a higher one, and a prediction path
without Lightning or the training tasks (``../shared/DESIGN.md``, layers)."""
from __future__ import annotations

import ast
import os
import subprocess
import sys
from functools import lru_cache
from pathlib import Path

from tests.conftest import REPO

LAYERS: tuple[tuple[str, ...], ...] = (
    ("geomol.errors", "geomol.version", "geomol.units", "geomol.timing", "geomol.provenance",
     "geomol.deferred_imports", "geomol.shipped_configs", "geomol.config_files", "geomol.data.vocab", "geomol.data.blocks",
     "geomol.data.paths", "geomol.terminal"),
    ("geomol.nn",),
    ("geomol.benchmarking", "geomol.metrics"),
    ("geomol.data.io",),
    ("geomol.data.chemistry",),
    ("geomol.data.complexes", "geomol.data.posing"),
    ("geomol.data", "geomol.simulate"),
    ("geomol.models",),
    ("geomol.inference",),
    ("geomol.training",),
    ("geomol.tasks",),
    ("geomol.evaluation", "geomol.screen"),
    ("geomol.api", "geomol.testing"),
    ("geomol.commands", "geomol.serve", "geomol.cli", "geomol.__main__", "geomol"),
)
"""Lowest first, one sentence each (``docs/dev/DATAFLOW.md``, layers): types; tensor building blocks; metrics on
arrays (and benchmark machinery); file readers and writers; chemistry features and checks on what was read; complexes
and poses built from them; datasets, the processed store, splits and trajectory protocols; models; prediction;
Lightning-free training; Lightning tasks; evaluation (and screening) over all of them; the Python API; the command
line. A module belongs to the layer of the longest prefix that names it (``geomol.data.io`` sits below the rest of
``geomol.data``); it may import its own layer and those below. The root package ``geomol`` names only itself, so a
new top-level module must be placed here; it is the top layer, and no module below it imports it (``import geomol``
to reach :func:`geomol.load_model` is an import from the top)."""

PREDICTION_ENTRIES = ("geomol.api", "geomol.inference")
"""What prediction imports: ``load_model``, ``predict_affinity``, ``rollout`` and the model classes they build."""


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


@lru_cache(maxsize=1)
def import_graph() -> dict[str, set[str]]:
    """Module → the geomol modules it imports anywhere in its file (function-level imports included: a lazy
    import is still a dependency, and the usual way of hiding a loop)."""
    files = {module_name(path): path for path in (REPO / "geomol").rglob("*.py")}
    graph = {}
    for name, path in files.items():
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                candidates = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                candidates = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            else:
                continue
            for candidate in candidates:
                while candidate and candidate not in files:  # a name imported from a module: the module
                    candidate = candidate.rpartition(".")[0]
                if candidate and candidate != name:
                    imported.add(candidate)
        graph[name] = imported
    return graph


def layer_of(module: str) -> int:
    matches = [(len(prefix), rank) for rank, prefixes in enumerate(LAYERS) for prefix in prefixes
               if module == prefix or (prefix != "geomol" and module.startswith(prefix + "."))]
    if not matches:
        raise AssertionError(f"{module} is in no layer of LAYERS: place it")
    return max(matches)[1]


def loops(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on_stack, found, counter = {}, {}, [], set(), [], 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def closure(graph: dict[str, set[str]], entries: tuple[str, ...]) -> set[str]:
    seen, todo = set(), [m for m in graph if any(m == e or m.startswith(e + ".") for e in entries)]
    while todo:
        module = todo.pop()
        if module not in seen:
            seen.add(module)
            todo.extend(graph[module])
    return seen


def test_no_import_loops():
    assert loops(import_graph()) == []


def test_no_module_imports_a_higher_layer():
    graph = import_graph()
    upward = sorted(f"{module} (layer {layer_of(module)}) imports {other} (layer {layer_of(other)})"
                    for module, imported in graph.items() for other in imported
                    if layer_of(other) > layer_of(module))
    assert upward == []


def third_party_imports(modules: set[str]) -> set[str]:
    """Top-level names of the packages outside geomol that ``modules`` import anywhere in their files."""
    third_party = set()
    for module in modules:
        path = REPO / (module.replace(".", "/") + ".py")
        path = path if path.exists() else REPO / module.replace(".", "/") / "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and node.level == 0 else [])
            third_party.update(name.split(".")[0] for name in names)
    return third_party


def test_the_prediction_path_has_no_lightning_and_no_tasks():
    modules = closure(import_graph(), PREDICTION_ENTRIES)
    assert "geomol.inference.loading" in modules and "geomol.models.egno" in modules  # the closure is followed
    assert sorted(m for m in modules if m.startswith("geomol.tasks")) == []
    assert {"lightning", "pytorch_lightning"} & third_party_imports(modules) == set()


def test_the_training_library_has_no_lightning_and_no_tasks():
    """The contact scorer's and ligand trees' training and the fine-tune loop (``geomol.training``) run without
    Lightning; only GET's ``geomol fit`` path (``geomol.tasks``) uses it."""
    modules = closure(import_graph(), ("geomol.training",))
    assert {"geomol.training.contact_scorer", "geomol.training.ligand_baselines", "geomol.training.finetune",
            "geomol.models.contact_scorer", "geomol.models.ligand_trees"} <= modules
    assert sorted(m for m in modules if m.startswith("geomol.tasks")) == []
    assert {"lightning", "pytorch_lightning"} & third_party_imports(modules) == set()


def test_egno_without_rdkit_and_prediction_without_lightning_at_run_time():
    code = ("import sys, geomol.models.egno; print('rdkit' in sys.modules); "
            "import geomol; geomol.load_model; import geomol.inference.affinity, geomol.inference.dynamics.rollout; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning'}), "
            "sorted(m for m in sys.modules if m.startswith('geomol.tasks')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "[]", "[]"]


FILE_LOADERS = frozenset({"spec_from_file_location", "SourceFileLoader", "load_source", "run_path", "run_module"})
"""Calls that import or run a Python file by its path (importlib, imp, runpy)."""
SCRIPT_FOLDERS = ("benchmarks", "scripts")


def _is_sys_path(node: ast.AST) -> bool:
    """``sys.path`` itself, or a slice or item of it."""
    while isinstance(node, ast.Subscript):
        node = node.value
    return (isinstance(node, ast.Attribute) and node.attr == "path" and isinstance(node.value, ast.Name)
            and node.value.id == "sys")


def _imported_module(node: ast.AST) -> list[str]:
    """The modules an import statement or an ``import_module("...")`` / ``__import__("...")`` call names."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
        return [node.module]
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant) and isinstance(
            node.args[0].value, str):
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
        if name in ("import_module", "__import__"):
            return [node.args[0].value]
    return []


def imports_outside_the_library(path: Path, forbidden: set[str], allow_official: bool = False) -> list[str]:
    """Where ``path`` edits ``sys.path`` (calls on it, assignments to it), imports or runs a file by its path
    (:data:`FILE_LOADERS`) or imports a module whose top-level name is in ``forbidden``; with ``allow_official``
    a ``sys.path`` call whose argument names the official code (the other side of a side-by-side comparison) is
    allowed."""
    source = path.read_text(encoding="utf-8")
    found = []  # (line, column, what)
    for node in ast.walk(ast.parse(source)):
        what = []
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
            if isinstance(node.func, ast.Attribute) and _is_sys_path(node.func.value):
                argument = ", ".join(ast.get_source_segment(source, a) or "" for a in node.args)
                if not (allow_official and "official" in argument):
                    what.append(f"sys.path.{node.func.attr}({argument})")
            elif name in FILE_LOADERS:
                what.append(f"loads a file by path ({ast.get_source_segment(source, node.func)})")
        elif isinstance(node, (ast.Assign, ast.AugAssign)) and any(
                _is_sys_path(t) for t in (node.targets if isinstance(node, ast.Assign) else [node.target])):
            what.append("assigns to sys.path")
        what += [f"imports {name}" for name in _imported_module(node) if name.split(".")[0] in forbidden]
        found += [(node.lineno, node.col_offset, text) for text in what]
    return [f"{path.relative_to(REPO)}:{line}: {text}" for line, _, text in sorted(found)]


def script_modules() -> set[str]:
    """The names a file of ``benchmarks/`` or ``scripts/`` would be imported by, and the folders' own names."""
    return {*SCRIPT_FOLDERS, *(path.stem for folder in SCRIPT_FOLDERS for path in (REPO / folder).rglob("*.py"))}


def test_benchmarks_and_scripts_import_only_the_library():
    """``benchmarks/`` and ``scripts/`` import the library, never each other (shared machinery lives in
    :mod:`geomol.benchmarking` and the library's other modules), and edit ``sys.path`` only to put the user's
    checkout of the official code (the other side of a side-by-side comparison: ``get_speed.py``,
    ``egno_speed.py``) on it, since that code imports itself by its own top-level names."""
    forbidden = script_modules()
    found = [line for folder in SCRIPT_FOLDERS for path in sorted((REPO / folder).rglob("*.py"))
             for line in imports_outside_the_library(path, forbidden, allow_official=True)]
    assert found == []


def test_tests_import_only_the_library():
    """Tests import the library (and ``tests``' own helpers), never a benchmark or a script, by name or by file
    path, and never edit ``sys.path``: what a test needs of a script lives in the library; a test that checks a
    script end to end runs it in a subprocess."""
    forbidden = script_modules()
    found = [line for path in sorted((REPO / "tests").rglob("*.py"))
             for line in imports_outside_the_library(path, forbidden)]
    assert found == []


def test_the_import_checks_find_every_way_around_the_library(tmp_path, monkeypatch):
    assert {"benchmarks", "scripts", "get_speed", "egno_accuracy", "quick_start",
            "train_egno_models"} <= script_modules()
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)
    sample = tmp_path / "sample.py"
    sample.write_text("import sys, importlib, importlib.util, runpy\nimport get_speed\n"
                      "from scripts import quick_start\n"
                      "from benchmarks.run_record import run_metadata\nsys.path.insert(0, 'benchmarks')\n"
                      "sys.path.append(official)\nsys.path[:0] = ['x']\nsys.path += ['y']\n"
                      "importlib.util.spec_from_file_location('a', 'scripts/a.py')\nrunpy.run_path('b.py')\n"
                      "importlib.import_module('stressors')\nimport geomol.benchmarking.stressors\n")
    forbidden = {"benchmarks", "scripts", "get_speed", "stressors"}
    found = imports_outside_the_library(sample, forbidden)
    assert [line.split(": ", 1)[1] for line in found] == [
        "imports get_speed", "imports scripts", "imports benchmarks.run_record", "sys.path.insert(0, 'benchmarks')",
        "sys.path.append(official)", "assigns to sys.path", "assigns to sys.path",
        "loads a file by path (importlib.util.spec_from_file_location)", "loads a file by path (runpy.run_path)",
        "imports stressors"]
    assert len(imports_outside_the_library(sample, forbidden, allow_official=True)) == len(found) - 1
