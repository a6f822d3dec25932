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
     "geomol.deferred_imports", "geomol.shipped_configs", "geomol.data.vocab", "geomol.data.blocks",
     "geomol.data.paths"),
    ("geomol.nn",),
    ("geomol.benchmarking",),
    ("geomol.evaluation.metrics", "geomol.evaluation.targets"),
    ("geomol.data", "geomol.simulate"),
    ("geomol.models",),
    ("geomol.inference",),
    ("geomol.training",),
    ("geomol.tasks",),
    ("geomol.evaluation", "geomol.screen"),
    ("geomol.api", "geomol.testing"),
    ("geomol.commands", "geomol.serve", "geomol.cli", "geomol.__main__", "geomol"),
)
"""Lowest first. A module belongs to the layer of the longest prefix that names it (``geomol.evaluation.metrics``
sits low, the rest of ``geomol.evaluation`` high); it may import its own layer and those below."""

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
               if module == prefix or module.startswith(prefix + ".")]
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
                    if layer_of(other) > layer_of(module) and not module.startswith(other + "."))
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
            "import geomol; geomol.load_model; import geomol.inference.affinity, geomol.inference.rollout; "
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'lightning', 'pytorch_lightning'}), "
            "sorted(m for m in sys.modules if m.startswith('geomol.tasks')))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "[]", "[]"]


def test_benchmarks_and_scripts_import_only_the_library():
    """No ``sys.path`` edit in ``benchmarks/`` or ``scripts/`` but the one that puts the user's checkout of the
    official code (the other side of a side-by-side comparison) on the path; benchmarks' sibling helpers
    (``run_record``) come from the script's own folder, which Python puts first."""
    edits = []
    for path in sorted([*(REPO / "benchmarks").rglob("*.py"), *(REPO / "scripts").rglob("*.py")]):
        source = path.read_text(encoding="utf-8")
        for node in ast.walk(ast.parse(source)):
            target = node.func if isinstance(node, ast.Call) else None
            if (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Attribute)
                    and target.value.attr == "path" and isinstance(target.value.value, ast.Name)
                    and target.value.value.id == "sys"):
                argument = ", ".join(ast.get_source_segment(source, a) or "" for a in node.args)
                if "official" not in argument:
                    edits.append(f"{path.relative_to(REPO)}:{node.lineno}: sys.path.{target.attr}({argument})")
    assert edits == []
