"""Start-up: geomol's data layer imports PyG without torch._dynamo and PyG's unused parts, which still work later."""
from __future__ import annotations

import json
import os
import subprocess
import sys

from geomol.deferred_imports import deferred_modules

_PROBE = """
import json, sys
import geomol.data
before = {m: m in sys.modules for m in ("torch._dynamo", "torch_geometric.nn", "torch_geometric.datasets", "sympy")}
import torch_geometric
from torch_geometric.data import Batch
layer = torch_geometric.nn.Linear(2, 2)          # a deferred package, reached as an attribute of its parent
print(json.dumps({"before": before, "layer": type(layer).__name__}))
"""


def test_data_layer_defers_dynamo_and_unused_pyg_parts_which_load_on_use():
    env = {**os.environ, "GEOMOL_EAGER_IMPORTS": "0"}
    done = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, check=True, env=env)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert not any(found["before"].values()), found["before"]
    assert found["layer"] == "Linear"


def _drop(monkeypatch, name: str) -> None:
    if name in sys.modules:
        monkeypatch.delitem(sys.modules, name)


def test_stand_in_loads_the_real_module_on_first_attribute(monkeypatch):
    monkeypatch.delenv("GEOMOL_EAGER_IMPORTS", raising=False)
    _drop(monkeypatch, "json.tool")
    with deferred_modules("json.tool"):
        import json.tool as stand_in

        assert type(stand_in).__name__ == "_Deferred"
    assert "json.tool" not in sys.modules  # the next import is the real one
    assert callable(stand_in.main)  # first attribute: imports it
    assert type(sys.modules["json.tool"]).__name__ == "module"


def test_modules_already_imported_are_left_alone():
    with deferred_modules("json"):
        assert type(sys.modules["json"]).__name__ == "module"


def test_eager_switch_places_no_stand_in(monkeypatch):
    monkeypatch.setenv("GEOMOL_EAGER_IMPORTS", "1")
    _drop(monkeypatch, "json.tool")
    with deferred_modules("json.tool"):
        assert "json.tool" not in sys.modules
        import json.tool as real

    assert type(real).__name__ == "module"
